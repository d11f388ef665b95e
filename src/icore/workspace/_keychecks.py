"""The key checks of a :class:`~icore.workspace.Workspace` (issue 28; planfence Sec. 3.1).

A mixin: o(key) with a typed refusal, the checks of ``depends_on`` keys when a tool is
wrapped, and the error for a read of a fact nobody wrote (with ``did you mean ...?``
against the written keys).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from icore.memory import OwnershipMap, OwnerUnavailable, Store
from icore.records import Record
from icore.workspace._errors import FactNotWritten, WorkspaceError
from icore.workspace._folder_map import FolderOwnership
from icore.workspace._keys import (
    arg_fault,
    declare_fix,
    fact_key,
    is_pattern,
    suggest_key,
    suggest_written,
)


class KeyChecks:
    """Key checks over ``ownership``, ``stores`` and ``head`` (a Workspace has them)."""

    ownership: OwnershipMap
    stores: dict[str, Store]
    folder_record: FolderOwnership | None = None
    """The maps a :meth:`Workspace.sqlite` folder was opened with (#28); None elsewhere."""

    def head(self, key: str) -> Record | None:
        """The owner's current version of ``key`` (see :meth:`Workspace.head`)."""
        raise NotImplementedError

    def owner_of(self, key: str) -> str:
        """o(key).

        Raises:
            WorkspaceError: ``key`` is not a str, is empty or a pattern (:func:`fact_key`),
                or no owner is declared for it (the fix names the closest declared key
                when there is one), or another process opened this workspace's SQLite
                folder with a map routing ``key`` to another owner (#28).
        """
        key = fact_key(key)
        owner = self.ownership.owner_of(key)
        if owner is None:
            near = suggest_key(key, self.ownership)
            raise WorkspaceError("no owner is declared for this fact", key=key,
                                 fix=f"did you mean {near!r}?" if near else declare_fix(key))
        if self.folder_record is not None:
            self.folder_record.check(key, owner)
        return owner

    def written_keys(self) -> list[str]:
        """The keys with a version in the stores hosted here (remote owners' excluded)."""
        out: set[str] = set()
        for st in self.stores.values():
            out.update(st.head_keys())
        return sorted(out)

    def not_written(self, key: str, *, updating: bool = False) -> FactNotWritten:
        """The error for a read (or an update) of ``key``, which has no version yet.

        The fix names a written key close to ``key`` (a likely typo) when there is one;
        an update's fix always names :meth:`put` (its first value is written, not
        updated).
        """
        near = suggest_written(key, self.written_keys())
        put = f"write its first value with ws.put({key!r}, value), or pass default="
        if updating:
            fix = f"{put}{f'; or did you mean {near!r}?' if near else ''}"
        else:
            fix = (f"did you mean {near!r}? ({key!r} has never been written)" if near
                   else put)
        return FactNotWritten("no value yet: this fact has never been written", key=key,
                              fix=fix)

    def check_keys(self, keys: Iterable[str], *, where: str,
                   args: Mapping[str, Any] | None = None) -> frozenset[str]:
        """The keys, each checked against the ownership map.

        ``args``: the call's arguments, for keys a ``depends_on`` function built from
        them; a key that names no fact because of an argument's text (``sku="*"``) is
        not checked here: it is the model's, refused to it at the call
        (:func:`~icore.workspace._keys.arg_fault`), never a setup error.

        Raises:
            WorkspaceError: ``keys`` is a str (one key must be in a set), not an iterable
                of non-empty strings (the fix is the key as text), a key is a glob
                pattern (``day/*``: a call depends on facts, not patterns), or a key has
                no declared owner (the fix names the closest declared key when there is
                one) or, in a SQLite folder, another owner in a map recorded there (#28).
        """
        if isinstance(keys, str | bytes):
            raise WorkspaceError(f"{where} must be a collection of keys, not a str",
                                 got=str(keys), fix=f"{where}={{{str(keys)!r}}}")
        try:
            out = frozenset(keys)
        except TypeError:
            raise WorkspaceError(f"{where} must be a collection of keys",
                                 got=type(keys).__name__) from None
        if args is not None:
            kept = frozenset(k for k in out if not isinstance(k, str)
                             or arg_fault(k, args) is None)
            if out and not kept:  # every key is the model's fault: refused at the call
                return kept
            out = kept
        patterns = sorted(k for k in out if isinstance(k, str) and is_pattern(k))
        if patterns:
            raise WorkspaceError(
                f"{where} names a pattern, not a fact: a call depends on the facts it "
                "acts on", keys=patterns,
                fix=f"name the fact from the call's arguments: depends_on=lambda a: "
                f"{{f'{_prefix(patterns[0])}{{a[...]}}'}}")
        bad = sorted((k for k in out if not isinstance(k, str) or not k), key=repr)
        if bad:
            raise WorkspaceError(f"{where} keys are non-empty str", keys=[repr(k) for k in bad],
                                 fix=f"{where}={{{str(bad[0])!r}}}" if isinstance(
                                     bad[0], int | float) else f"{where}={{'order/42'}}")
        unowned = sorted(k for k in out if self.ownership.owner_of(k) is None)
        if unowned:
            first = unowned[0]
            near = suggest_key(first, self.ownership)
            fix = f"did you mean {near!r}?" if near else declare_fix(first)
            raise WorkspaceError(f"{where} names facts no owner is declared for",
                                 keys=list(unowned), fix=fix)
        if self.folder_record is not None:
            for k in sorted(out):
                self.folder_record.check(k, self.ownership.require_owner(k))
        if not out:
            raise WorkspaceError(f"{where} is empty", fix=f"{where}={{'<key>'}}")
        return out

    def check_written(self, keys: Iterable[str], *, where: str) -> None:
        """Refuse a key that was never written when a written key is close to it.

        For static keys checked when a tool is wrapped: a key that matches an owner's
        pattern but has no version, while a written key differs by a typo
        (``room/R10l`` next to ``room/R101``), is most likely misspelled; a call could
        never be authorized on it. Keys declared exactly, keys far from every written
        one (a fact its owner writes later) and owners that do not answer pass.

        Raises:
            WorkspaceError: the first such key, with ``did you mean ...?``.
        """
        exact = set(self.ownership.keys())
        for key in sorted(keys):
            if key in exact:
                continue
            try:
                if self.head(key) is not None:
                    continue
            except OwnerUnavailable:
                continue
            near = suggest_written(key, self.written_keys())
            if near is not None:
                raise WorkspaceError(
                    f"{where} names a fact that has never been written", key=key,
                    fix=f"did you mean {near!r}? (or write {key!r} before wrapping the "
                    "tool)")


def _prefix(pattern: str) -> str:
    """``pattern`` up to its first glob character (``stock/lyon/*`` -> ``stock/lyon/``)."""
    return pattern[:min(i for i, c in enumerate(pattern + "*") if c in "*?[")]
