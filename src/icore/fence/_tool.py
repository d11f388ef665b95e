"""Dependency declaration: the tool wrapper that states D(a) (planfence Sec. 3.2, 4.1).

The declaration is application code, not model output. It is part of the trusted base:
a wrapper must name every public key whose value can affect the action, or declare a
broader set (over-declaration is safe and only costs checks, planfence Fig. 6).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from icore.errors import DeclarationError, FenceError, brief
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


MAX_ARG_NESTING = 32
"""Deepest nesting of containers in a protected call's arguments; deeper blocks."""


def _refs(value: Any, out: set[str], depth: int = 0) -> None:
    if depth > MAX_ARG_NESTING:
        # a reference below the limit would escape the D(a) check: refuse, never skip
        raise DeclarationError(f"arguments nest deeper than {MAX_ARG_NESTING} levels",
                               field="args")
    if isinstance(value, RecordRef):
        out.add(value.key)
    elif isinstance(value, Mapping):
        for v in value.values():
            _refs(v, out, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            _refs(v, out, depth + 1)


def is_coroutine_callable(fn: Any) -> bool:
    """True for an ``async def`` function (or an object whose ``__call__`` is one)."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's method
    return call is not None and inspect.iscoroutinefunction(call)


class ProtectedTool:
    """A tool whose calls go through the PlanFence gate.

    There is no public way to call the wrapped function around the fence: calling the
    tool raises, the function is held privately, and ``__wrapped__`` is not set (its
    signature is exposed as ``__signature__`` for schema generators). Sync tools run
    through :meth:`Fence.execute` or :meth:`Fence.aexecute`, ``async def`` tools only
    through :meth:`Fence.aexecute`.

    Args:
        fn: the plain Python callable or ``async def`` function; called as ``fn(**args)``
            once authorized.
        depends_on: D(a): a collection of semantic keys, or a function of the call's
            arguments returning them (for dynamic scopes, e.g. ``req/{trip}``).
        name: action name used in logs (default: the function's name).

    Raises:
        DeclarationError: ``fn`` is not a function (None, a class, a value),
            ``depends_on`` is neither a collection of strings nor callable, or it is an
            empty collection (every call would block; a scope function returning no
            key still blocks its call, ``incomplete_declaration``).
    """

    def __init__(self, fn: Callable[..., Any], *, depends_on: Iterable[str] | ScopeFn,
                 name: str | None = None) -> None:
        if inspect.isclass(fn) or not callable(fn):
            raise DeclarationError(
                f"a protected tool must be a function (or async def), not "
                f"{'the class ' + fn.__name__ if inspect.isclass(fn) else type(fn).__name__}",
                tool=name or getattr(fn, "__name__", "?"))
        if callable(depends_on):
            self._static: frozenset[str] | None = None
            self._dynamic: ScopeFn | None = depends_on
        else:
            if isinstance(depends_on, str | bytes | Mapping):  # its letters, its keys
                raise DeclarationError("depends_on must be a collection of keys (a set), not "
                                       f"a {type(depends_on).__name__}",
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
            if not keys:  # every call would block: refused where it is declared
                raise DeclarationError("depends_on is empty: name the keys whose value can "
                                       "affect the action (D(a))",
                                       tool=name or getattr(fn, "__name__", "?"))
            self._static, self._dynamic = keys, None
        self._fn = fn
        self.name: str = str(name or getattr(fn, "__name__", "action"))
        self.is_async: bool = is_coroutine_callable(fn)
        """True when the tool is an ``async def`` function (run it with ``aexecute``)."""
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]
        self.__dict__.pop("__wrapped__", None)  # no unprotected path through unwrap()
        try:
            self.__signature__ = inspect.signature(fn)
        except (TypeError, ValueError):
            pass

    def scope(self, args: Mapping[str, Any]) -> frozenset[str]:
        """Return D(a) for a call with ``args``.

        Raises:
            DeclarationError: the scope is empty or not a set of non-empty strings, the
                scope function raised, an argument reads a :class:`RecordRef` whose key
                is outside the scope (incomplete declaration), or the arguments nest
                deeper than :data:`MAX_ARG_NESTING` (a reference could hide there).
        """
        if self._static is not None:
            keys = self._static
        else:
            assert self._dynamic is not None
            try:
                raw = self._dynamic(args)
                if isinstance(raw, str | bytes | Mapping):  # its letters, its keys
                    raise TypeError(f"it returned a {type(raw).__name__}, not a collection "
                                    f"of keys (write {{{brief(raw, 60)}}})")
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

    def _invoke(self, args: Mapping[str, Any]) -> Any:
        # UNPROTECTED raw call: only the fence calls it, after an authorized decision
        return self._fn(**args)

    def __call__(self, *a: Any, **kw: Any) -> Any:
        raise FenceError("a protected tool runs only through Fence.execute() or "
                         "Fence.aexecute()", tool=self.name)

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
