"""The tables of X = (G, Q, Π) and their undo journal (icore Sec. 3; design.md 4.2).

:class:`Tables` holds every map, set and counter of a :class:`~icore.state.State` as a
public attribute, so each part of the state (evaluation, application of entries,
revocation, queries) reads the same objects without reading another part's privates.
Every write the apply step makes goes through the journaled mutators (:meth:`put`,
:meth:`sadd`, ...), so a trial (:meth:`State.trial <icore.state.State.trial>`) can undo
it: O(what the trial changed), independent of |X| (docs/state.md "Trials").
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any, Protocol

from icore.state._entries import Body, FlagResolved, LogEntry
from icore.state._eventtable import EventTable
from icore.state._metrics import MetricSums, ObligationEval
from icore.state._obltable import ObligationTable
from icore.state._pitable import JustificationTable
from icore.state._refs import CertRefs, RefLinks, SoundMemo
from icore.state._seqtable import AssertionTable, CertificateTable, SeqTable
from icore.state._share import DictPacker
from icore.state._xmodel import (
    Certificate,
    HardFlag,
    Proposal,
    Status,
)

MISSING: Any = object()
"""Journal marker: the key had no value before the write."""


class Recorder(Protocol):
    """Records bodies as one change (:meth:`State._record <icore.state.State>`)."""

    def __call__(self, bodies: Sequence[Body], *, batch: bool = False) -> list[LogEntry]:
        """Check, append to the log in one transaction, apply; returns the entries."""
        ...


class Tables:
    """X's maps, indexes and counters (public: the parts of the state share them).

    The maps are mutated in place only (never rebound), so a part may keep a reference
    to one. ``undo`` is the journal of an open trial (None outside one); ``defer``
    collects the obligations an apply step would refresh while a batch or a replay
    postpones it (None otherwise); ``touched`` is the work index's set (None: off).
    """

    __slots__ = (
        "active_by_cert", "assertions", "certs", "certs_by_key", "children", "cited_by",
        "defer", "entries", "eval", "events", "flags", "flags_by_assertion", "history",
        "keep_entries", "notes", "obligations", "pi", "proposal_bodies", "proposals",
        "resolved", "revoked", "revoked_dep", "seq", "sound_memo", "status_counts", "sums",
        "superseded", "tainted", "touched", "undo",
    )

    def __init__(self, *, keep_entries: bool = True) -> None:
        self.keep_entries = keep_entries
        self.entries: list[LogEntry] = []
        self.seq = 0
        # G
        self.events: EventTable = EventTable()  # ids m<step> in step order: columns
        # Q
        packer = DictPacker()  # a result dict kept once, as a tuple, by both tables
        self.obligations = ObligationTable(packer)  # columns: _obltable
        self.assertions: AssertionTable = AssertionTable(packer=packer)  # a1, a2, ...: columns
        self.superseded: RefLinks = RefLinks()  # ref -> superseding ref (numbers: _refs)
        # Π
        self.pi = JustificationTable()  # packed numbers: _pitable
        self.certs: SeqTable[Certificate] = CertificateTable()  # c1, c2, ...: columns
        self.revoked: dict[str, int] = {}  # cid -> seq of the revocation entry
        self.certs_by_key: dict[str, set[str]] = {}
        self.active_by_cert = CertRefs()  # cid -> refs of the active citers (numbers: _refs)
        self.revoked_dep: dict[str, set[str]] = {}  # oid -> active aids with revoked certs
        # proposals and flags
        self.proposals: set[str] = set()
        self.flags: dict[str, HardFlag] = {}
        self.resolved: dict[str, FlagResolved] = {}
        self.flags_by_assertion: dict[str, tuple[str, ...]] = {}  # aid -> flag ids
        self.notes = 0
        # metrics (exact sums, so incremental == full recompute)
        self.eval: dict[str, ObligationEval] = {}
        self.sums = MetricSums()
        self.status_counts: dict[Status, int] = {}
        self.defer: set[str] | None = None
        # indexes for the audit loop (O(1) per entry)
        self.proposal_bodies: dict[str, Proposal] = {}
        self.history: dict[str, list[tuple[int, str]]] = {}  # oid -> (seq, proposal id)
        self.children: dict[str, list[str]] = {}  # parent oid -> child oids
        self.cited_by: dict[str, set[str]] = {}  # aid -> aids whose justification cites it
        self.tainted: set[str] = set()  # aids a revocation reached (directly or by cites)
        # assertion soundness, memoized: its inputs only change by a revocation (which
        # clears it) or inside a trial (cleared when the trial ends)
        self.sound_memo = SoundMemo()  # a byte per assertion number (icore.state._refs)
        self.touched: set[str] | None = None
        self.undo: list[tuple[Any, ...]] | None = None

    # ------------------------------------------------------------------ journaled writes
    def put(self, d: MutableMapping[Any, Any], key: Any, value: Any) -> None:
        """``d[key] = value``, journaled."""
        if self.undo is not None:
            self.undo.append(("put", d, key, d.get(key, MISSING)))
        d[key] = value

    def journal(self, d: MutableMapping[Any, Any], key: Any) -> None:
        """Journal ``d[key]`` as it is before a write made by ``d``'s own methods."""
        if self.undo is not None:
            self.undo.append(("put", d, key, d.get(key, MISSING)))

    def delete(self, d: MutableMapping[Any, Any], key: Any) -> None:
        """``del d[key]``, journaled."""
        if self.undo is not None:
            self.undo.append(("put", d, key, d[key]))
        del d[key]

    def sadd(self, s: set[Any], x: Any) -> None:
        """``s.add(x)``, journaled."""
        if x in s:
            return
        if self.undo is not None:
            self.undo.append(("sadd", s, x))
        s.add(x)

    def sdiscard(self, s: set[Any], x: Any) -> None:
        """``s.discard(x)``, journaled."""
        if x not in s:
            return
        if self.undo is not None:
            self.undo.append(("sdel", s, x))
        s.discard(x)

    def dadd(self, d: dict[str, set[str]], key: str, x: str) -> None:
        """Add ``x`` to the set ``d[key]`` (created when missing), journaled."""
        s = d.get(key)
        if s is None:
            self.put(d, key, set())
            s = d[key]
        self.sadd(s, x)

    def append(self, d: dict[str, list[Any]], key: str, x: Any) -> None:
        """Append ``x`` to the list ``d[key]`` (created when missing), journaled."""
        lst = d.get(key)
        if lst is None:
            self.put(d, key, [])
            lst = d[key]
        if self.undo is not None:
            self.undo.append(("pop", lst))
        lst.append(x)

    # ------------------------------------------------------------------ trials
    def open_trial(self) -> tuple[Any, ...]:
        """Start journaling; returns what :meth:`close_trial` restores besides the journal."""
        self.undo = []
        return (self.seq, len(self.entries), self.sums.save(), self.notes,
                dict(self.status_counts))

    def close_trial(self, saved: tuple[Any, ...]) -> None:
        """Undo the journal in reverse and restore the counters ``saved`` by :meth:`open_trial`."""
        undo, self.undo = self.undo or [], None
        self.sound_memo.clear()
        for rec in reversed(undo):
            op = rec[0]
            if op == "put":
                _, d, key, old = rec
                if old is MISSING:
                    d.pop(key, None)
                else:
                    d[key] = old
            elif op == "sadd":
                rec[1].discard(rec[2])
            elif op == "sdel":
                rec[1].add(rec[2])
            else:  # "pop"
                rec[1].pop()
        (self.seq, n, sums, self.notes, counts) = saved
        self.sums.restore(sums)
        del self.entries[n:]
        self.status_counts.clear()
        self.status_counts.update(counts)
