"""Applying log entries to X (icore Sec. 3; design.md 4.2, 4.4).

:class:`Applier` is the part of :class:`~icore.state.State` that installs one entry (a
live change or a replayed one) into X's :class:`~icore.state._tables.Tables` through the
journaled writes, and refreshes the evaluations of the obligations it touched: after
each entry, after the last entry touching each obligation (a batch), or once at the end
(a replay). Obligations come from the entry's :class:`ObligationStep`, the one
transition function (:mod:`icore.state._transition`); the apply step calls no
interface when the step's checked values are given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from icore._frozen import positional
from icore.state._entries import (
    KIND_OF,
    AssertionImported,
    Body,
    CertificateImported,
    Committed,
    EventAdded,
    FlagRaised,
    FlagResolved,
    LogEntry,
    Note,
    ProposalRecorded,
    Rejected,
    Revoked,
)
from icore.state._errors import StateError
from icore.state._evaluation import Evaluation
from icore.state._refs import Ref, ref
from icore.state._tables import Tables
from icore.state._transition import (
    TOUCHING,
    ObligationSource,
    ObligationStep,
    final_obligations,
    obligation_steps,
)
from icore.state._xmodel import Assertion, AssertionKind, Certificate, Justification

# enum members as globals: read off the class, each costs a lookup (hot paths)
_K_NODE = AssertionKind.NODE

_entry = positional(LogEntry)  # a LogEntry per body: no per-field setattr (#29)
_TOUCHING_TYPES = frozenset(TOUCHING)
"""The :data:`TOUCHING` body types (final classes: ``KIND_OF`` is keyed by exact type)."""
_NO_PRE: Mapping[str, tuple[float, float]] = {}
"""The checked values of a change that touches no obligation (read-only: none)."""


class Log(Protocol):
    """Where a state's entries go (``MemoryLog``, ``SQLiteLog``)."""

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Append ``entries`` atomically (all or nothing)."""
        ...

    def entries(self) -> Iterable[LogEntry]:
        """Iterate the entries in sequence order."""
        ...


class Applier:
    """Installs log entries into X's tables (a part of :class:`~icore.state.State`).

    Args:
        tables: X's tables.
        evaluation: the state's evaluation part (refreshed after each change).
        source: X as the transition function reads it (the state).
    """

    __slots__ = ("_ev", "_source", "_t")

    def __init__(self, tables: Tables, evaluation: Evaluation, source: ObligationSource) -> None:
        self._t = tables
        self._ev = evaluation
        self._source = source

    def record(self, bodies: Sequence[Body], log: Log | None, now_ms: float, *,
               batch: bool = False) -> list[LogEntry]:
        """Check, append ``bodies`` to ``log`` in one transaction, then apply them.

        Everything that can fail is done before the write: what the change does to each
        obligation it touches is computed once (:func:`obligation_steps`, pure), the
        interface values of those obligations as the change leaves them are computed
        and checked, and the log encodes every entry before its transaction. Applying
        then installs exactly those obligations and uses only those checked values, so
        X and the log cannot disagree. ``now_ms`` stamps the entries.

        With ``batch`` (an :class:`~icore.state._trusted_import.ImportBatch`), each touched
        obligation is re-evaluated once, right after the last entry that touches it,
        instead of after every entry: X ends exactly as after recording the bodies one
        by one (an obligation's evaluation depends only on X up to its last change); each
        touched obligation is then copied once for the change (``fold`` of
        :func:`obligation_steps`), not once per body. A change that touches no obligation
        (events, notes, flags) skips the transition function and the interfaces.

        Raises:
            InterfaceError: an interface misbehaved on a touched obligation (nothing
                written, X unchanged).
            LogError: the log refused the entries (nothing written, X unchanged).
        """
        t = self._t
        seq = t.seq
        entries = [_entry(seq + i, now_ms, KIND_OF[type(b)], b) for i, b in enumerate(bodies, 1)]
        for b in bodies:  # any(...) without a generator (hot: one call per step)
            if type(b) in _TOUCHING_TYPES:
                break
        else:
            # events, notes, flags: no obligation changes, nothing to evaluate
            if log is not None:
                log.append(entries)
            apply = self.apply
            for e in entries:
                apply(e, _NO_PRE, None)
            return entries
        batch = batch and t.defer is None
        # a batch installs each obligation as the change leaves it: one copy each (fold)
        steps = obligation_steps(self._source, bodies, fold=batch)
        values = self._ev.interface_values
        pre = {oid: values(o) for oid, o in final_obligations(steps).items()}
        if log is not None:
            log.append(entries)
        if batch:
            self.apply_batch(entries, steps, pre)
            return entries
        apply = self.apply
        for e, step in zip(entries, steps, strict=True):
            apply(e, pre, step)
        return entries

    def apply_batch(
        self,
        entries: Sequence[LogEntry],
        steps: Sequence[ObligationStep | None],
        pre: Mapping[str, tuple[float, float]],
    ) -> None:
        """Apply a batch's entries; refresh each obligation after its last change only."""
        t = self._t
        due: list[list[str]] = [[] for _ in steps]
        last: dict[str, int] = {}
        for i, step in enumerate(steps):
            if step is not None:
                for oid in step.obligations:
                    last[oid] = i
        for oid, i in last.items():
            due[i].append(oid)
        t.defer = set()  # collects what apply would refresh; refreshed below instead
        try:
            for i, (e, step) in enumerate(zip(entries, steps, strict=True)):
                self.apply(e, pre, step)
                if due[i]:
                    self._ev.refresh(due[i], pre)
        finally:
            t.defer = None

    def apply(
        self,
        entry: LogEntry,
        pre: Mapping[str, tuple[float, float]] | None = None,
        step: ObligationStep | None = None,
    ) -> None:
        """Apply one entry (live or replay) and refresh the touched obligations.

        ``pre``, ``step``: checked interface values and the entry's obligation step from
        :meth:`State._record <icore.state.State>` (live changes); without them (replay)
        the step is computed and the interfaces are called here.

        Raises:
            StateError: the entry is out of sequence.
            InterfaceError: (replay only) an interface misbehaved on a touched obligation.
        """
        t = self._t
        if entry.seq != t.seq + 1:
            raise StateError("log entry out of sequence", expected=t.seq + 1, got=entry.seq)
        body = entry.body
        put = t.put
        if step is None and isinstance(body, TOUCHING):
            step = obligation_steps(self._source, [body])[0]
        # the trace import's bodies first (the branches are disjoint: final classes)
        if isinstance(body, EventAdded):
            if t.undo is None:  # outside a trial: a plain write (no journal)
                t.events[body.event.id] = body.event
            else:
                put(t.events, body.event.id, body.event)
        elif isinstance(body, AssertionImported):
            assert step is not None
            self._index_assertion(body.assertion, body.justification, step)
        elif isinstance(body, CertificateImported):
            self._add_cert(body.certificate)
        elif isinstance(body, Note):
            t.notes += 1  # a trial restores the counter
        elif isinstance(body, Committed):
            assert step is not None
            for ev in body.events:
                put(t.events, ev.id, ev)
            for c in body.certificates:
                self._add_cert(c)
            for a in body.assertions:
                self._index_assertion(a, body.justification, step)
            for fid in body.resolved_flags:
                resolved = FlagResolved(fid, body.proposer, f"commit {body.proposal}")
                put(t.resolved, fid, resolved)
        elif isinstance(body, ProposalRecorded):
            pr = body.proposal
            assert pr.id is not None
            t.sadd(t.proposals, pr.id)
            put(t.proposal_bodies, pr.id, pr)
            named = dict.fromkeys(
                [*(e.obligation for e in pr.effects), *([pr.target] if pr.target else [])]
            )
            for oid in named:
                t.append(t.history, oid, (entry.seq, pr.id))
        elif isinstance(body, Rejected):
            pass
        elif isinstance(body, FlagRaised):
            f = body.flag
            put(t.flags, f.id, f)
            by_aid = t.flags_by_assertion
            for aid in f.assertions:
                had = by_aid.get(aid, ())
                if f.id not in had:  # a tuple: most assertions carry one flag
                    put(by_aid, aid, (*had, f.id))
        elif isinstance(body, FlagResolved):
            put(t.resolved, body.flag, body)
        elif isinstance(body, Revoked):
            t.sound_memo.clear()
            for cid in body.certificates:
                put(t.revoked, cid, entry.seq)
            for aid in body.assertions:
                t.sadd(t.tainted, aid)
        else:  # pragma: no cover - exhaustive
            raise StateError("unknown entry body", kind=str(entry.kind))
        t.seq = entry.seq
        if t.keep_entries or t.undo is not None:
            t.entries.append(entry)
        if step is not None and step.obligations:
            self._install(step)
            if t.touched is not None:
                for oid in step.obligations:
                    t.sadd(t.touched, oid)
            if t.defer is not None:
                t.defer.update(step.obligations)
            else:  # in step order: W(X) reproducible
                self._ev.refresh(list(step.obligations), pre)

    def replay(self, entries: Iterable[LogEntry]) -> None:
        """Apply many entries, refreshing each touched obligation once at the end.

        Raises:
            StateError: an entry is out of sequence.
            InterfaceError: an interface misbehaved on a touched obligation.
        """
        t = self._t
        t.defer = set()
        try:
            for e in entries:
                self.apply(e)
        finally:
            dirty, t.defer = t.defer, None
            self._ev.refresh(sorted(dirty))

    def _add_cert(self, c: Certificate) -> None:
        t = self._t
        if t.undo is None:  # outside a trial: a plain write (no journal)
            t.certs[c.id] = c
        else:
            t.put(t.certs, c.id, c)
        for r in (*c.records, *c.lineage):
            t.dadd(t.certs_by_key, r.key, c.id)

    def _install(self, step: ObligationStep) -> None:
        """Install the obligations of ``step`` (new objects) and their revoked-evidence dependents.

        Keeps the per-status counts.
        """
        t = self._t
        counts = t.status_counts
        obligations, revoked_dep = t.obligations, t.revoked_dep
        journaled = t.undo is not None  # outside a trial: plain writes (no journal)
        for oid, new in step.obligations.items():
            old = obligations.get(oid)
            after = new.effective_status
            if old is None:
                counts[after] = counts.get(after, 0) + 1
            else:
                before = old.effective_status
                if before != after:
                    counts[before] -= 1
                    counts[after] = counts.get(after, 0) + 1
            if journaled:
                t.put(obligations, oid, new)
            else:
                obligations[oid] = new
            dep = step.dependents[oid]
            if dep:
                t.put(revoked_dep, oid, dep)
            elif oid in revoked_dep:
                t.delete(revoked_dep, oid)

    def _index_assertion(
        self, a: Assertion, j: Justification | None, step: ObligationStep
    ) -> None:
        """Index a new assertion (Q's assertions, Π, supersession, citations)."""
        t = self._t
        if a.kind == _K_NODE:
            parent = step.obligations[a.obligation].parent
            if parent is not None:
                t.append(t.children, parent, a.obligation)
        # the tables below hold assertions by ref (icore.state._refs): parsed when needed
        r: Ref | None = None
        old = step.supersedes.get(a.id)
        if old is not None:
            r = ref(a.id)
            t.put(t.superseded, old, r)
            t.sound_memo.pop(old)  # rarely asked again
            oj = t.pi.at(old)
            if oj is not None:
                by_cert = t.active_by_cert
                for cid in oj.certificates:
                    if t.undo is not None:
                        t.journal(by_cert, cid)
                    by_cert.discard(cid, old)
        journaled = t.undo is not None  # outside a trial: plain writes (no journal)
        if journaled:
            t.put(t.assertions, a.id, a)
        else:
            t.assertions[a.id] = a
        if j is not None:
            if journaled:
                t.put(t.pi, a.id, j)
            else:
                t.pi[a.id] = j
            by_cert = t.active_by_cert
            for cid in j.certificates:  # a certificate backs one or two assertions
                if r is None:
                    r = ref(a.id)
                if t.undo is not None:
                    t.journal(by_cert, cid)
                by_cert.add(cid, r)
            for cited in j.cites:
                t.dadd(t.cited_by, cited, a.id)
