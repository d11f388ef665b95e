"""Dependency declaration: the tool wrapper that states D(a) (planfence Sec. 3.2, 4.1).

The declaration is application code, not model output. It is part of the trusted base:
a wrapper must name every public key whose value can affect the action, or declare a
broader set (over-declaration is safe and only costs checks, planfence Fig. 6).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from icore.errors import DeclarationError, FenceError
from icore.records import RecordId

ScopeFn = Callable[[Mapping[str, Any]], Iterable[str]]


@dataclass(frozen=True, slots=True)
class RecordRef:
    """A public record an action argument reads (key and exact id).

    Arguments holding a ``RecordRef`` must have its key in D(a); otherwise the
    declaration is incomplete and the action is blocked.
    """

    key: str
    id: RecordId


def _refs(value: Any, out: set[str], depth: int = 0) -> None:
    if depth > 32:
        return
    if isinstance(value, RecordRef):
        out.add(value.key)
    elif isinstance(value, Mapping):
        for v in value.values():
            _refs(v, out, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            _refs(v, out, depth + 1)


class ProtectedTool:
    """A tool whose calls go through the PlanFence gate.

    Args:
        fn: the plain Python callable; called as ``fn(**args)`` once authorized.
        depends_on: D(a): a collection of semantic keys, or a function of the call's
            arguments returning them (for dynamic scopes, e.g. ``req/{trip}``).
        name: action name used in logs (default: the function's name).

    Raises:
        DeclarationError: ``depends_on`` is neither a collection of strings nor callable.
    """

    def __init__(self, fn: Callable[..., Any], *, depends_on: Iterable[str] | ScopeFn,
                 name: str | None = None) -> None:
        if callable(depends_on):
            self._static: frozenset[str] | None = None
            self._dynamic: ScopeFn | None = depends_on
        else:
            if isinstance(depends_on, str):
                raise DeclarationError("depends_on must be a collection of keys, not a str",
                                       tool=name or getattr(fn, "__name__", "?"))
            try:
                keys = frozenset(depends_on)
            except TypeError:
                raise DeclarationError(
                    "depends_on must be a collection of keys or a callable, not "
                    f"{type(depends_on).__name__}",
                    tool=name or getattr(fn, "__name__", "?")) from None
            if not all(isinstance(k, str) and k for k in keys):
                raise DeclarationError("depends_on keys must be non-empty strings",
                                       tool=name or getattr(fn, "__name__", "?"))
            self._static, self._dynamic = keys, None
        self.fn = fn
        self.name: str = str(name or getattr(fn, "__name__", "action"))
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def scope(self, args: Mapping[str, Any]) -> frozenset[str]:
        """Return D(a) for a call with ``args``.

        Raises:
            DeclarationError: the scope is empty or not a set of non-empty strings, the
                scope function raised, or an argument reads a :class:`RecordRef` whose key
                is outside the scope (incomplete declaration).
        """
        if self._static is not None:
            keys = self._static
        else:
            assert self._dynamic is not None
            try:
                raw = self._dynamic(args)
                keys = frozenset(raw)
            except Exception as exc:
                raise DeclarationError(f"dependency scope function failed: {exc}",
                                       tool=self.name) from exc
            if not all(isinstance(k, str) and k for k in keys):
                raise DeclarationError("dependency scope holds a non-string key",
                                       tool=self.name)
        if not keys:
            raise DeclarationError("the dependency scope D(a) is empty", tool=self.name)
        read: set[str] = set()
        _refs(args, read)
        undeclared = read - keys
        if undeclared:
            raise DeclarationError("arguments read keys outside D(a)", tool=self.name,
                                   undeclared=sorted(undeclared))
        return keys

    def run(self, args: Mapping[str, Any]) -> Any:
        """Call the wrapped function. Only the fence calls this after authorization."""
        return self.fn(**args)

    def __call__(self, *a: Any, **kw: Any) -> Any:
        raise FenceError("a protected tool runs only through Fence.execute()", tool=self.name)

    def __repr__(self) -> str:
        scope = sorted(self._static) if self._static is not None else "<dynamic>"
        return f"ProtectedTool({self.name!r}, depends_on={scope})"


def protected(depends_on: Iterable[str] | ScopeFn, *, name: str | None = None
              ) -> Callable[[Callable[..., Any]], ProtectedTool]:
    """Decorator form of :class:`ProtectedTool`.

    Example::

        @protected(depends_on={"req/trip-17"})
        def book(destination: str) -> str: ...
    """

    def wrap(fn: Callable[..., Any]) -> ProtectedTool:
        return ProtectedTool(fn, depends_on=depends_on, name=name)

    return wrap
