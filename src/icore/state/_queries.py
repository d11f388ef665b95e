"""Queries of X for the audit loop and D's interfaces (icore Sec. 3-4, Alg. 1; design.md 4.4).

:class:`Queries` is the part of :class:`~icore.state.State` answering what the loop and
iCORE-Audit ask between changes: the work index (touched obligations), per-obligation
history and children, open flags, status counts, productive work, the terminal
predicates and D's local view, routing and assignment authority. It only reads X's
:class:`~icore.state._tables.Tables` (and calls D's interfaces with the state).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Sized
from typing import Any

from icore.state._components import DiagnosisLike
from icore.state._entries import LogEntry
from icore.state._errors import StateError
from icore.state._evaluation import Evaluation
from icore.state._interfaces import (
    checked_assignment_authority,
    checked_local_view,
    checked_responsible,
    checked_terminal,
)
from icore.state._tables import Tables
from icore.state._view import StateView
from icore.state._xmodel import JSON, Assertion, AssertionKind, HardFlag, Status

_EMPTY: list[str] = []
_PRODUCTIVE = (Status.OPEN, Status.ASSIGNED, Status.ACTIVE, Status.REPAIR_PENDING)


class _ReadOnlyList(Sequence[str]):
    """A read-only view of a list (no copy)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[str]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: Any) -> Any:
        return self._items[i]


class Queries:
    """The loop's and the interfaces' queries of X (a part of :class:`~icore.state.State`).

    Args:
        tables: X's tables.
        evaluation: the state's evaluation part (soundness of terminal markers).
        x: the state itself, handed to D's interfaces.
    """

    __slots__ = ("_ev", "_t", "_x")

    def __init__(self, tables: Tables, evaluation: Evaluation, x: StateView) -> None:
        self._t = tables
        self._ev = evaluation
        self._x = x

    def track_touched(self) -> None:
        """Start collecting the obligations each applied entry touches."""
        if self._t.touched is None:
            self._t.touched = set()

    def take_touched(self) -> set[str]:
        """Obligations whose status, assignee or evidence changed since the last call.

        Raises:
            StateError: tracking is off, or a trial is open.
        """
        t = self._t
        if t.touched is None:
            raise StateError("take_touched() needs track_touched()")
        if t.undo is not None:
            raise StateError("take_touched() inside a trial")
        out, t.touched = t.touched, set()
        return out

    def flags_on(self, assertion_id: str) -> Iterable[str]:
        """Ids of the hard flags naming ``assertion_id``, in the order raised."""
        return self._t.flags_by_assertion.get(assertion_id, ())

    def history(self, obligations: Iterable[str], limit: int) -> tuple[str, ...]:
        """Ids of the ``limit`` most recent proposals naming any of ``obligations``.

        Oldest first; O(|obligations| · limit), from an index kept per entry.
        """
        hits: dict[str, int] = {}
        index = self._t.history
        for oid in obligations:
            for seq, pid in index.get(oid, ())[-limit:]:
                hits[pid] = seq
        return tuple(sorted(hits, key=hits.__getitem__)[-limit:])

    def children(self, obligation_id: str) -> Sequence[str]:
        """Obligations whose ``parent`` is ``obligation_id``, in creation order (read-only)."""
        return _ReadOnlyList(self._t.children.get(obligation_id, _EMPTY))

    def open_flags(self) -> list[HardFlag]:
        """Hard flags not resolved yet, in the order raised."""
        resolved = self._t.resolved
        return [f for fid, f in self._t.flags.items() if fid not in resolved]

    def status_counts(self) -> dict[Status, int]:
        """Number of obligations per effective status (maintained incrementally)."""
        return {s: n for s, n in self._t.status_counts.items() if n}

    def has_productive_work(self) -> bool:
        """True if some obligation is open, assigned, active or repair_pending (icore Alg. 1)."""
        c = self._t.status_counts
        return any(c.get(s, 0) > 0 for s in _PRODUCTIVE)

    def terminal(self) -> bool:
        """D's terminal predicate (``interfaces.terminal``; icore Alg. 1 stops on it).

        Raises:
            InterfaceError: ``terminal`` raised or returned a non-bool.
        """
        return checked_terminal(self._x.decl.interfaces, self._x)

    def terminal_default(self) -> bool:
        """Built-in terminal: an active sound terminal marker, or all required roots done."""
        roots = [o for o in self._t.obligations.values() if o.required_root]
        for o in roots:
            aid = o.active.get((str(AssertionKind.TERMINAL), ""))
            if aid is not None and self._ev.assertion_sound(aid):
                return True
        return bool(roots) and all(
            o.effective_status in (Status.DISCHARGED, Status.SETTLED) for o in roots
        )

    def local_view(self, agent: str) -> JSON:
        """D's local view of X for ``agent`` (``interfaces.local_view``; design.md 4.1).

        Raises:
            InterfaceError: ``local_view`` raised or returned something that is not JSON.
        """
        return checked_local_view(self._x.decl.interfaces, agent, self._x)

    def responsible(self, diagnosis: DiagnosisLike) -> str | None:
        """D's routing rule ``responsible(X, F)`` (icore Sec. 4; design.md 4.4).

        Raises:
            InterfaceError: ``responsible`` (or ``assignment_authority``) misbehaved or
                named an agent not declared in M_D.
        """
        return checked_responsible(self._x.decl.interfaces, self._x, diagnosis)

    def assignment_authority(self) -> tuple[str, ...]:
        """The agents D authorizes to revise assignments (design.md 4.4), in D's order.

        Raises:
            InterfaceError: ``assignment_authority`` misbehaved or named an agent not in M_D.
        """
        return checked_assignment_authority(self._x.decl.interfaces, self._x)

    def entries_since(self, seq: int) -> Sequence[LogEntry]:
        """Entries with sequence number > ``seq`` (O(returned), not O(|log|))."""
        t = self._t
        return t.entries[max(0, seq - (t.seq - len(t.entries))) :]

    def active_assertions(self, obligation_id: str) -> list[Assertion]:
        """Active assertions about ``obligation_id`` (empty if unknown)."""
        o = self._t.obligations.get(obligation_id)
        if o is None:
            return []
        assertions = self._t.assertions
        return [assertions[a] for a in o.active.values()]

    def active_assertion(
        self, obligation_id: str, kind: AssertionKind, key: str = ""
    ) -> Assertion | None:
        """The active assertion in slot (obligation, kind, key), if any."""
        o = self._t.obligations.get(obligation_id)
        if o is None:
            return None
        aid = o.active.get((str(kind), key))
        return None if aid is None else self._t.assertions[aid]

    def slot_values(self, assertions: Iterable[Assertion]) -> tuple[JSON, ...]:
        """For each assertion, the value of the active assertion in its slot now.

        None when the slot is empty: the ``before`` of a
        :class:`~icore.state.Transition`.
        """
        obligations, known = self._t.obligations, self._t.assertions
        out: list[JSON] = []
        for a in assertions:
            o = obligations.get(a.obligation)
            aid = None if o is None else o.active.get((str(a.kind), a.key))
            out.append(None if aid is None else known[aid].value)
        return tuple(out)

    def next_ids(self, prefix: str, count: int) -> list[str]:
        """The next ``count`` ids the state would assign for ``a``/``c``/``f``.

        Raises:
            KeyError: another prefix.
        """
        t = self._t
        table: Sized
        if prefix == "a":
            table = t.assertions
        elif prefix == "c":
            table = t.certs
        elif prefix == "f":
            table = t.flags
        else:
            raise KeyError(prefix)
        base = len(table)
        if count == 1:  # the usual call
            return [f"{prefix}{base + 1}"]
        return [f"{prefix}{base + i + 1}" for i in range(count)]
