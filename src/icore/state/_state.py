"""The iCORE state X = (G, Q, Π), event-sourced (icore Sec. 3; design.md 4.2, 4.3).

Every change is a :class:`~icore.state.LogEntry`; :meth:`State._record` first appends the
entries of one change to the log in one transaction, then applies them to memory with
:meth:`State._apply`, which is also what :func:`~icore.state.rebuild` replays. Applying an
entry returns the obligations it touched, and only those are re-evaluated for the
metrics (design.md 4.4 "recompute incrementally").

Fail closed: the interfaces of I_D are D's code and may misbehave. Everything a change
needs from them (the weight, value and feasibility of each obligation it touches) is
computed and checked *before* the log write, on the obligations as the change will
leave them (:func:`~icore.state._transition.obligation_steps`, the one transition
function, whose result the apply step then installs), and the apply step only uses
those checked values. So a bad interface raises :class:`~icore.state.InterfaceError`
with X and its log unchanged, and nothing after the write can fail on an interface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Protocol

from icore._clock import Clock, ManualClock
from icore.records import RecordId
from icore.state._components import DiagnosisLike, Transition
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
from icore.state._errors import StateError, StateInputError
from icore.state._evaluation import Evaluation
from icore.state._heads import HeadView
from icore.state._import import ImportBatch, assertion_body, certificate_body, event_body
from icore.state._interfaces import (
    checked_assignment_authority,
    checked_local_view,
    checked_responsible,
    checked_terminal,
    checked_weight,
)
from icore.state._json import check_json
from icore.state._legality import Verdict, audit
from icore.state._metrics import (
    MatchedSet,
    Metrics,
    MetricSums,
    ObligationEval,
    fixed,
    make_metrics,
)
from icore.state._model import (
    JSON,
    Assertion,
    AssertionKind,
    Certificate,
    CitedRecord,
    Effect,
    Event,
    EventSpec,
    FlagKind,
    HardFlag,
    Justification,
    Obligation,
    Proposal,
    Status,
)
from icore.state._package import DeclarationPackage
from icore.state._revocation import revocation_bodies
from icore.state._transition import (
    TOUCHING,
    ObligationStep,
    final_obligations,
    obligation_steps,
)

_ZERO = 0
_MISSING: Any = object()
_EMPTY: list[str] = []


class _ReadOnlyList(Sequence[str]):
    """A read-only view of a list (no copy)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[str]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: Any) -> Any:
        return self._items[i]


class Log(Protocol):
    """Where a state's entries go (``MemoryLog``, ``SQLiteLog``)."""

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Append ``entries`` atomically (all or nothing)."""
        ...

    def entries(self) -> Iterable[LogEntry]:
        """Iterate the entries in sequence order."""
        ...


class State(Evaluation):
    """X = (G, Q, Π) over a declaration package D (icore Sec. 3; design.md 4.2).

    Args:
        decl: the declaration package D.
        log: where entries are appended (one transaction per change); None keeps them
            in memory only (:attr:`entries`).
        clock: injected time source for entry and event times (default: a
            :class:`~icore._clock.ManualClock` at 0, so runs are reproducible).
        keep_entries: keep every entry in memory (needed by :meth:`copy`).

    Ids are derived from the state's own counters (``e<n>``, ``a<n>``, ``c<n>``,
    ``p<n>``, ``f<n>``), never from randomness, so a replay assigns the same ids.
    """

    def __init__(
        self,
        decl: DeclarationPackage,
        *,
        log: Log | None = None,
        clock: Clock | None = None,
        keep_entries: bool = True,
    ) -> None:
        self.decl = decl
        self.log = log
        self.clock: Clock = clock if clock is not None else ManualClock()
        self.keep_entries = keep_entries
        self._entries: list[LogEntry] = []
        self._seq = 0
        # G
        self._events: dict[str, Event] = {}
        # Q
        self._obligations: dict[str, Obligation] = {}
        self._assertions: dict[str, Assertion] = {}
        self._superseded: dict[str, str] = {}  # aid -> superseding aid
        # Π
        self._pi: dict[str, Justification] = {}
        self._certs: dict[str, Certificate] = {}
        self._revoked: dict[str, int] = {}  # cid -> seq of the revocation entry
        self._certs_by_key: dict[str, set[str]] = {}
        self._active_by_cert: dict[str, set[str]] = {}  # cid -> active aids citing it
        self._revoked_dep: dict[str, set[str]] = {}  # oid -> active aids with revoked certs
        # proposals and flags
        self._proposals: set[str] = set()
        self._flags: dict[str, HardFlag] = {}
        self._resolved: dict[str, FlagResolved] = {}
        self._flags_by_assertion: dict[str, tuple[str, ...]] = {}  # aid -> flag ids
        self._notes = 0
        # metrics (exact sums, so incremental == full recompute)
        self._eval: dict[str, ObligationEval] = {}
        self._sums = MetricSums()
        self._status_counts: dict[Status, int] = {}
        self._defer: set[str] | None = None
        # indexes for the audit loop (O(1) per entry)
        self._proposal_bodies: dict[str, Proposal] = {}
        self._history: dict[str, list[tuple[int, str]]] = {}  # oid -> (seq, proposal id)
        self._children: dict[str, list[str]] = {}  # parent oid -> child oids
        self._cited_by: dict[str, set[str]] = {}  # aid -> aids whose justification cites it
        self._tainted: set[str] = set()  # aids a revocation reached (directly or by cites)
        # assertion soundness, memoized: its inputs only change by a revocation (which
        # clears it) or inside a trial (cleared when the trial ends)
        self._sound_memo: dict[str, bool] = {}
        # obligations touched since the last take_touched() (None: not tracked)
        self._touched: set[str] | None = None
        # undo journal of a trial (None outside :meth:`trial`)
        self._undo: list[tuple[Any, ...]] | None = None

    # ------------------------------------------------------------------ views
    @property
    def seq(self) -> int:
        """Number of entries applied (the sequence number of the last one)."""
        return self._seq

    @property
    def entries(self) -> Sequence[LogEntry]:
        """Entries applied so far (empty when ``keep_entries`` is False)."""
        return tuple(self._entries)

    def entries_since(self, seq: int) -> Sequence[LogEntry]:
        """Entries with sequence number > ``seq`` (O(returned), not O(|log|))."""
        return self._entries[max(0, seq - (self._seq - len(self._entries))) :]

    def proposal(self, proposal_id: str) -> Proposal | None:
        """The recorded proposal ``proposal_id`` (committed or rejected), if any."""
        return self._proposal_bodies.get(proposal_id)

    def track_touched(self) -> None:
        """Start collecting the obligations each applied entry touches.

        They are read by :meth:`take_touched` (the audit loop's work index).
        """
        if self._touched is None:
            self._touched = set()

    def take_touched(self) -> set[str]:
        """Obligations whose status, assignee or evidence changed since the last call.

        Counted from the previous call (or from :meth:`track_touched`), as the apply step
        computed them; the set is reset.

        Raises:
            StateError: tracking is off, or a :meth:`trial` is open.
        """
        if self._touched is None:
            raise StateError("take_touched() needs track_touched()")
        if self._undo is not None:
            raise StateError("take_touched() inside a trial")
        out, self._touched = self._touched, set()
        return out

    def proposal_count(self) -> int:
        """Number of proposals recorded (committed or rejected)."""
        return len(self._proposals)

    def has_proposal(self, proposal_id: str) -> bool:
        """True if a proposal with this id was recorded."""
        return proposal_id in self._proposals

    def flags_on(self, assertion_id: str) -> Iterable[str]:
        """Ids of the hard flags naming ``assertion_id``, in the order raised."""
        return self._flags_by_assertion.get(assertion_id, ())

    def history(self, obligations: Iterable[str], limit: int) -> tuple[str, ...]:
        """Ids of the ``limit`` most recent proposals naming any of ``obligations``.

        Oldest first; O(|obligations| · limit), from an index kept per entry.
        """
        hits: dict[str, int] = {}
        for oid in obligations:
            for seq, pid in self._history.get(oid, ())[-limit:]:
                hits[pid] = seq
        return tuple(sorted(hits, key=hits.__getitem__)[-limit:])

    def children(self, obligation_id: str) -> Sequence[str]:
        """Obligations whose ``parent`` is ``obligation_id``, in creation order.

        A read-only view; slicing the end is O(slice).
        """
        return _ReadOnlyList(self._children.get(obligation_id, _EMPTY))

    @property
    def events(self) -> Mapping[str, Event]:
        """G: event id -> event."""
        return MappingProxyType(self._events)

    @property
    def obligations(self) -> Mapping[str, Obligation]:
        """Q's obligations: id -> obligation (read-only objects)."""
        return MappingProxyType(self._obligations)

    @property
    def assertions(self) -> Mapping[str, Assertion]:
        """Q's assertions, active and superseded: id -> assertion."""
        return MappingProxyType(self._assertions)

    @property
    def justifications(self) -> Mapping[str, Justification]:
        """Π: assertion id -> justification."""
        return MappingProxyType(self._pi)

    @property
    def certificates(self) -> Mapping[str, Certificate]:
        """Π's certificates: id -> certificate."""
        return MappingProxyType(self._certs)

    @property
    def flags(self) -> Mapping[str, HardFlag]:
        """Every hard flag raised: id -> flag."""
        return MappingProxyType(self._flags)

    def open_flags(self) -> list[HardFlag]:
        """Hard flags not resolved yet, in the order raised."""
        return [f for fid, f in self._flags.items() if fid not in self._resolved]

    def flag_resolution(self, flag_id: str) -> FlagResolved | None:
        """How ``flag_id`` was resolved, or None while open."""
        return self._resolved.get(flag_id)

    def is_active(self, assertion_id: str) -> bool:
        """True if the assertion exists and is not superseded."""
        return assertion_id in self._assertions and assertion_id not in self._superseded

    def superseded_by(self, assertion_id: str) -> str | None:
        """The assertion that superseded ``assertion_id``, if any."""
        return self._superseded.get(assertion_id)

    def certificate_active(self, certificate_id: str) -> bool:
        """A certificate is active while it passed and was not revoked (design.md 4.2)."""
        c = self._certs.get(certificate_id)
        return c is not None and c.verdict and certificate_id not in self._revoked

    def active_assertions(self, obligation_id: str) -> list[Assertion]:
        """Active assertions about ``obligation_id`` (empty if unknown)."""
        o = self._obligations.get(obligation_id)
        if o is None:
            return []
        return [self._assertions[a] for a in o.active.values()]

    def active_assertion(
        self, obligation_id: str, kind: AssertionKind, key: str = ""
    ) -> Assertion | None:
        """The active assertion in slot (obligation, kind, key), if any."""
        o = self._obligations.get(obligation_id)
        if o is None:
            return None
        aid = o.active.get((str(kind), key))
        return None if aid is None else self._assertions[aid]

    def status_counts(self) -> dict[Status, int]:
        """Number of obligations per effective status (maintained incrementally)."""
        return {s: n for s, n in self._status_counts.items() if n}

    def has_productive_work(self) -> bool:
        """True if some obligation is open, assigned, active or repair_pending (icore Alg. 1)."""
        c = self._status_counts
        return any(
            c.get(s, 0) > 0
            for s in (Status.OPEN, Status.ASSIGNED, Status.ACTIVE, Status.REPAIR_PENDING)
        )

    def terminal(self) -> bool:
        """D's terminal predicate (``interfaces.terminal``; icore Alg. 1 stops on it).

        Raises:
            InterfaceError: ``terminal`` raised or returned a non-bool.
        """
        return checked_terminal(self.decl.interfaces, self)

    def terminal_default(self) -> bool:
        """Built-in terminal: an active sound terminal marker, or all required roots done."""
        roots = [o for o in self._obligations.values() if o.required_root]
        for o in roots:
            aid = o.active.get((str(AssertionKind.TERMINAL), ""))
            if aid is not None and self.assertion_sound(aid):
                return True
        return bool(roots) and all(
            o.effective_status in (Status.DISCHARGED, Status.SETTLED) for o in roots
        )

    def local_view(self, agent: str) -> JSON:
        """D's local view of X for ``agent`` (``interfaces.local_view``; design.md 4.1).

        Raises:
            InterfaceError: ``local_view`` raised or returned something that is not JSON.
        """
        return checked_local_view(self.decl.interfaces, agent, self)

    def responsible(self, diagnosis: DiagnosisLike) -> str | None:
        """D's routing rule ``responsible(X, F)`` (icore Sec. 4; design.md 4.4).

        Returns:
            The agent (an id of M_D) the diagnosis F is routed to, or None.

        Raises:
            InterfaceError: ``responsible`` (or the built-in rule's
                ``assignment_authority``) raised, returned a non-string, or named an
                agent not declared in M_D.
        """
        return checked_responsible(self.decl.interfaces, self, diagnosis)

    def assignment_authority(self) -> tuple[str, ...]:
        """The agents D authorizes to revise assignments (design.md 4.4), in D's order.

        Raises:
            InterfaceError: ``assignment_authority`` raised, returned something other than
                a tuple/list of strings, or named an agent not declared in M_D.
        """
        return checked_assignment_authority(self.decl.interfaces, self)

    # ------------------------------------------------------------------ metrics
    def _refresh(
        self, touched: Iterable[str], pre: Mapping[str, tuple[float, float]] | None = None
    ) -> None:
        """Re-evaluate ``touched`` obligations and update the sums.

        ``pre`` holds checked (weight, gain) pairs computed before the log write
        (:meth:`_prepare`); an obligation found there calls no interface here.
        """
        for oid in touched:
            o = self._obligations.get(oid)
            # evaluate first: if it raises, the sums are still consistent
            if o is not None:
                iv = pre.get(oid) if pre is not None else None
                new = self._evaluate(o, *iv) if iv is not None else self.evaluate(o)
            old = self._eval.get(oid)
            if self._undo is not None:
                self._undo.append(("put", self._eval, oid, _MISSING if old is None else old))
            if old is not None:
                self._sums.remove(old)
            if o is None:
                continue
            self._eval[oid] = new
            self._sums.add(new)

    def metrics(self, over: MatchedSet | None = None) -> Metrics:
        """snd, astab, cq, aggregate gain and the Prop. 4 bound (design.md 4.3).

        Args:
            over: None for W(X), maintained incrementally (O(1)); or a frozen matched set
                W_F (cost O(|W_F|), from the incrementally maintained evaluation of each
                member, so no interface is called): its members count with their frozen
                weights,
                a settled/superseded member counts as sound iff its closing assertion is
                sound, and a member no longer in Q counts as unsound and unstable.

        Raises:
            InterfaceError: with ``over``, during a replay (evaluations not yet
                refreshed), an interface misbehaved (see :meth:`evaluate`).
        """
        p = self.decl.parameters
        if over is None:
            return self._sums.metrics(p)
        w = s = st = g = _ZERO
        for oid, wf in zip(over.obligations, over.weights, strict=True):
            fw = fixed(wf)
            w += fw
            ev = self.evaluation(oid)
            if ev is None:
                continue
            if ev.sound:
                s += fw
            if ev.stable:
                st += fw
            if ev.gain > 0:
                g += fw * fixed(ev.gain)
        return make_metrics(w, s, st, g, len(over.obligations), p)

    def evaluation(self, obligation_id: str) -> ObligationEval | None:
        """The current evaluation of one obligation (None if it is not in Q).

        The incrementally maintained one, or (during a replay) a fresh one.

        Raises:
            InterfaceError: during a replay, an interface misbehaved (see :meth:`evaluate`).
        """
        o = self._obligations.get(obligation_id)
        if o is None:
            return None
        ev = self._eval.get(obligation_id) if self._defer is None else None
        return ev if ev is not None else self.evaluate(o)

    def recompute_metrics(self) -> Metrics:
        """Full recompute of :meth:`metrics` over W(X), from scratch (O(|Q|)).

        Raises:
            InterfaceError: an interface misbehaved (see :meth:`evaluate`).
        """
        sums = MetricSums()
        for o in self._obligations.values():
            sums.add(self.evaluate(o))
        return sums.metrics(self.decl.parameters)

    def evaluated(self) -> list[str]:
        """W(X): required roots and every obligation not settled/superseded."""
        return [oid for oid, ev in self._eval.items() if ev.in_w]

    def freeze(self, obligation_ids: Iterable[str]) -> MatchedSet:
        """Freeze a matched set W_F with the current weights (icore Sec. 4; design.md 4.4).

        Raises:
            StateInputError: an id is not an obligation.
            InterfaceError: ``weight`` raised or returned anything but a finite number >= 0.
        """
        ids: list[str] = []
        ws: list[float] = []
        for oid in dict.fromkeys(obligation_ids):
            o = self._obligations.get(oid)
            if o is None:
                raise StateInputError("unknown obligation in matched set", obligation=oid)
            ids.append(oid)
            ws.append(checked_weight(self.decl.interfaces, o))
        return MatchedSet(tuple(ids), tuple(ws))

    # ------------------------------------------------------------------ recording
    def _record(self, bodies: Sequence[Body], *, batch: bool = False) -> list[LogEntry]:
        """Check, append ``bodies`` to the log in one transaction, then apply them.

        Everything that can fail is done before the write: what the change does to each
        obligation it touches is computed once (:func:`obligation_steps`, pure), the
        interface values of those obligations as the change leaves them are computed
        and checked, and the log encodes every entry before its transaction. Applying
        then installs exactly those obligations and uses only those checked values, so
        X and the log cannot disagree.

        Raises:
            InterfaceError: an interface misbehaved on a touched obligation (nothing
                written, X unchanged).
            LogError: the log refused the entries (nothing written, X unchanged).

        With ``batch`` (an :class:`~icore.state._import.ImportBatch`), each touched
        obligation is re-evaluated once, right after the last entry that touches it,
        instead of after every entry: X ends exactly as after recording the bodies one
        by one (an obligation's evaluation depends only on X up to its last change).
        """
        t = float(self.clock.now_ms())
        entries = [
            LogEntry(self._seq + i + 1, t, KIND_OF[type(b)], b) for i, b in enumerate(bodies)
        ]
        steps = obligation_steps(self, bodies)
        pre = self._prepare(steps)
        if self.log is not None:
            self.log.append(entries)
        if batch and self._defer is None:
            self._apply_batch(entries, steps, pre)
            return entries
        for e, step in zip(entries, steps, strict=True):
            self._apply(e, pre, step)
        return entries

    def _apply_batch(
        self,
        entries: Sequence[LogEntry],
        steps: Sequence[ObligationStep | None],
        pre: Mapping[str, tuple[float, float]],
    ) -> None:
        """Apply a batch's entries; refresh each obligation after its last change only."""
        due: list[list[str]] = [[] for _ in steps]
        last: dict[str, int] = {}
        for i, step in enumerate(steps):
            if step is not None:
                for oid in step.obligations:
                    last[oid] = i
        for oid, i in last.items():
            due[i].append(oid)
        for i, (e, step) in enumerate(zip(entries, steps, strict=True)):
            self._defer = set()  # collects what _apply would refresh; refreshed below
            try:
                self._apply(e, pre, step)
            finally:
                self._defer = None
            if due[i]:
                self._refresh(due[i], pre)

    def _prepare(
        self, steps: Sequence[ObligationStep | None]
    ) -> dict[str, tuple[float, float]]:
        """Checked (weight, gain) of every obligation ``steps`` touch, as the change leaves them.

        Pure: X is unchanged (raises InterfaceError).
        """
        return {oid: self._interface_values(o) for oid, o in final_obligations(steps).items()}

    # The rest of X's indexes, per body; Q's obligations come from the ObligationStep.
    def _apply(
        self,
        entry: LogEntry,
        pre: Mapping[str, tuple[float, float]] | None = None,
        step: ObligationStep | None = None,
    ) -> None:
        """Apply one entry (live or replay) and refresh the touched obligations.

        ``pre``, ``step``: checked interface values and the entry's obligation step from
        :meth:`_record` (live changes); without them (replay) the step is computed and
        the interfaces are called here.
        """
        if entry.seq != self._seq + 1:
            raise StateError("log entry out of sequence", expected=self._seq + 1, got=entry.seq)
        body = entry.body
        put = self._put
        if step is None and isinstance(body, TOUCHING):
            step = obligation_steps(self, [body])[0]
        if isinstance(body, Committed):
            assert step is not None
            for ev in body.events:
                put(self._events, ev.id, ev)
            for c in body.certificates:
                self._add_cert(c)
            for a in body.assertions:
                self._index_assertion(a, body.justification, step)
            for fid in body.resolved_flags:
                resolved = FlagResolved(fid, body.proposer, f"commit {body.proposal}")
                put(self._resolved, fid, resolved)
        elif isinstance(body, ProposalRecorded):
            pr = body.proposal
            assert pr.id is not None
            self._sadd(self._proposals, pr.id)
            put(self._proposal_bodies, pr.id, pr)
            named = dict.fromkeys(
                [*(e.obligation for e in pr.effects), *([pr.target] if pr.target else [])]
            )
            for oid in named:
                self._append(self._history, oid, (entry.seq, pr.id))
        elif isinstance(body, Rejected):
            pass
        elif isinstance(body, FlagRaised):
            f = body.flag
            put(self._flags, f.id, f)
            by_aid = self._flags_by_assertion
            for aid in f.assertions:
                had = by_aid.get(aid, ())
                if f.id not in had:  # a tuple: most assertions carry one flag
                    put(by_aid, aid, (*had, f.id))
        elif isinstance(body, FlagResolved):
            put(self._resolved, body.flag, body)
        elif isinstance(body, Revoked):
            self._sound_memo.clear()
            for cid in body.certificates:
                put(self._revoked, cid, entry.seq)
            for aid in body.assertions:
                self._sadd(self._tainted, aid)
        elif isinstance(body, EventAdded):
            put(self._events, body.event.id, body.event)
        elif isinstance(body, AssertionImported):
            assert step is not None
            self._index_assertion(body.assertion, body.justification, step)
        elif isinstance(body, CertificateImported):
            self._add_cert(body.certificate)
        elif isinstance(body, Note):
            self._notes += 1  # a trial restores the counter
        else:  # pragma: no cover - exhaustive
            raise StateError("unknown entry body", kind=str(entry.kind))
        self._seq = entry.seq
        if self.keep_entries or self._undo is not None:
            self._entries.append(entry)
        if step is not None and step.obligations:
            touched = list(dict.fromkeys(step.obligations))  # step order, not hash order
            self._install(step)
            if self._touched is not None:
                for oid in step.obligations:
                    self._sadd(self._touched, oid)
            if self._defer is not None:
                self._defer.update(touched)
            else:
                self._refresh(touched, pre)

    def _replay(self, entries: Iterable[LogEntry]) -> None:
        """Apply many entries, refreshing each touched obligation once at the end."""
        self._defer = set()
        try:
            for e in entries:
                self._apply(e)
        finally:
            dirty, self._defer = self._defer, None
            self._refresh(sorted(dirty))

    # ------------------------------------------------------------------ journaled writes
    # Every write _apply makes goes through these, so a trial (:meth:`trial`) can undo it.
    def _put(self, d: dict[Any, Any], key: Any, value: Any) -> None:
        if self._undo is not None:
            self._undo.append(("put", d, key, d.get(key, _MISSING)))
        d[key] = value

    def _del(self, d: dict[Any, Any], key: Any) -> None:
        if self._undo is not None:
            self._undo.append(("put", d, key, d[key]))
        del d[key]

    def _sadd(self, s: set[Any], x: Any) -> None:
        if x in s:
            return
        if self._undo is not None:
            self._undo.append(("sadd", s, x))
        s.add(x)

    def _sdiscard(self, s: set[Any], x: Any) -> None:
        if x not in s:
            return
        if self._undo is not None:
            self._undo.append(("sdel", s, x))
        s.discard(x)

    def _dadd(self, d: dict[str, set[str]], key: str, x: str) -> None:
        s = d.get(key)
        if s is None:
            self._put(d, key, set())
            s = d[key]
        self._sadd(s, x)

    def _append(self, d: dict[str, list[Any]], key: str, x: Any) -> None:
        lst = d.get(key)
        if lst is None:
            self._put(d, key, [])
            lst = d[key]
        if self._undo is not None:
            self._undo.append(("pop", lst))
        lst.append(x)

    @contextmanager
    def trial(self) -> Iterator[State]:
        """Apply changes tentatively, then undo them all (copy-on-write candidate X_f).

        Inside the block this state *is* the candidate: changes are applied in memory
        only (nothing reaches the log) and every write is journaled; on exit, however
        the block ends, the journal is undone in reverse, so X (its maps, metrics,
        counters and entries) is exactly as before. Cost: O(what the block changes),
        independent of |X| and of the log length (docs/state.md "Trials").

        Raises:
            StateError: a trial is already open on this state.
        """
        if self._undo is not None:
            raise StateError("a trial is already open on this state")
        saved = (
            self._seq, len(self._entries), self._sums.save(), self._notes,
            dict(self._status_counts), self.log,
        )
        self._undo, self.log = [], None
        try:
            yield self
        finally:
            undo, self._undo = self._undo, None
            self._sound_memo.clear()
            for rec in reversed(undo):
                op = rec[0]
                if op == "put":
                    _, d, key, old = rec
                    if old is _MISSING:
                        d.pop(key, None)
                    else:
                        d[key] = old
                elif op == "sadd":
                    rec[1].discard(rec[2])
                elif op == "sdel":
                    rec[1].add(rec[2])
                else:  # "pop"
                    rec[1].pop()
            (self._seq, n, sums, self._notes, counts, self.log) = saved
            self._sums.restore(sums)
            del self._entries[n:]
            self._status_counts = counts

    def _add_cert(self, c: Certificate) -> None:
        self._put(self._certs, c.id, c)
        for r in (*c.records, *c.lineage):
            self._dadd(self._certs_by_key, r.key, c.id)

    def _install(self, step: ObligationStep) -> None:
        """Install the obligations of ``step`` (new objects) and their revoked-evidence dependents.

        Keeps the per-status counts.
        """
        counts = self._status_counts
        for oid, new in step.obligations.items():
            old = self._obligations.get(oid)
            after = new.effective_status
            if old is None:
                counts[after] = counts.get(after, 0) + 1
            else:
                before = old.effective_status
                if before != after:
                    counts[before] -= 1
                    counts[after] = counts.get(after, 0) + 1
            self._put(self._obligations, oid, new)
            dep = step.dependents[oid]
            if dep:
                self._put(self._revoked_dep, oid, dep)
            elif oid in self._revoked_dep:
                self._del(self._revoked_dep, oid)

    def _index_assertion(
        self, a: Assertion, j: Justification | None, step: ObligationStep
    ) -> None:
        """Index a new assertion (Q's assertions, Π, supersession, citations)."""
        if a.kind == AssertionKind.NODE:
            parent = step.obligations[a.obligation].parent
            if parent is not None:
                self._append(self._children, parent, a.obligation)
        old = step.supersedes.get(a.id)
        if old is not None:
            self._put(self._superseded, old, a.id)
            self._sound_memo.pop(old, None)  # rarely asked again: keep the memo small
            oj = self._pi.get(old)
            if oj is not None:
                for cid in oj.certificates:
                    s = self._active_by_cert.get(cid)
                    if s is not None:
                        self._sdiscard(s, old)
                        if not s:
                            self._del(self._active_by_cert, cid)
        self._put(self._assertions, a.id, a)
        if j is not None:
            self._put(self._pi, a.id, j)
            for cid in j.certificates:
                self._dadd(self._active_by_cert, cid, a.id)
            for cited in j.cites:
                self._dadd(self._cited_by, cited, a.id)

    # ------------------------------------------------------------------ ObligationSource
    def obligation_now(self, obligation_id: str) -> Obligation:
        """The obligation as X holds it (KeyError if unknown)."""
        return self._obligations[obligation_id]

    def revoked_dependents(self, obligation_id: str) -> Iterable[str]:
        """Active assertions of the obligation whose justification cites revoked evidence."""
        return self._revoked_dep.get(obligation_id, ())

    def is_revoked(self, certificate_id: str) -> bool:
        """The certificate was revoked."""
        return certificate_id in self._revoked

    def assertion_now(self, assertion_id: str) -> Assertion:
        """An assertion of Q (KeyError if unknown)."""
        return self._assertions[assertion_id]

    # ------------------------------------------------------------------ id helpers
    def _fresh(self, prefix: str, n: int, taken: Callable[[str], bool]) -> str:
        while taken(f"{prefix}{n}"):
            n += 1
        return f"{prefix}{n}"

    def next_ids(self, prefix: str, count: int) -> list[str]:
        """The next ``count`` ids the state would assign for ``a``/``c``/``f``."""
        if prefix == "a":
            base = len(self._assertions)
        elif prefix == "c":
            base = len(self._certs)
        elif prefix == "f":
            base = len(self._flags)
        else:
            raise KeyError(prefix)
        return [f"{prefix}{base + i + 1}" for i in range(count)]

    # ------------------------------------------------------------------ proposals
    def submit(self, proposal: Proposal, *, head_view: HeadView | None = None) -> Verdict:
        """Audit ``proposal`` (icore Def. 6) and record the outcome.

        A legal proposal is committed; otherwise the rejection and its hard flag(s) are
        recorded and none of its effects. Proposal, decision and flags are written in
        one log transaction.

        Raises:
            StateInputError: the proposal's id was already used.
            InterfaceError: an interface of D misbehaved (``progress`` on the transition,
                or ``weight``/``value``/``feasible`` on an obligation the verdict touches);
                nothing is written and X is unchanged.
            LogError: the log refused the entries; nothing is written, X is unchanged.
        """
        verdict = audit(proposal, self, head_view=head_view)
        self.apply_verdict(verdict)
        return verdict

    def apply_verdict(self, verdict: Verdict) -> list[LogEntry]:
        """Record a verdict from :func:`~icore.state.audit` taken on this state.

        Raises:
            StateError: the state changed since the verdict was taken (stale verdict).
            InterfaceError: ``weight``/``value``/``feasible`` misbehaved on an obligation
                the verdict touches; nothing is written and X is unchanged.
            LogError: the log refused the entries; nothing is written, X is unchanged.
        """
        if verdict.base_seq != self._seq:
            raise StateError(
                "stale verdict: the state changed since the audit",
                verdict_seq=verdict.base_seq,
                state_seq=self._seq,
            )
        return self._record(verdict.bodies)

    def commit_all(
        self,
        proposals: Sequence[Proposal],
        *,
        head_view: HeadView | None = None,
        resolve: Sequence[str] = (),
        by: str | None = None,
        note: str = "",
    ) -> list[Verdict]:
        """Audit ``proposals`` in order and commit all of them, or none (fail closed).

        A recovery of iCORE-Audit is one audited repair (icore Sec. 4, Alg. 1;
        design.md 4.4): proposal k is audited (icore Def. 6) on X as proposals 1..k-1
        leave it (a :meth:`trial` of X, undone afterwards, so the cost is independent of
        the log length and X is untouched meanwhile). When every proposal is
        legal, all their entries, followed by a ``flag_resolved`` entry for each flag in
        ``resolve`` still open after the commits, are written in **one** log transaction
        (the same :meth:`_record` as any change). Otherwise nothing at all is written, not
        even the refused proposal's rejection: X, its log, ``seq`` and the metrics are
        exactly as before. The entries equal those of submitting the proposals one by one
        when all commit.

        Args:
            proposals: the batch, in order (empty: nothing happens).
            head_view: owners' current heads for cited records.
            resolve: flag ids to mark resolved together with the commits.
            by: who resolves them.
            note: why they are resolved.

        Returns:
            One verdict per proposal audited. If the last is not ``committed`` it is the
            first refused proposal and nothing was recorded; the remaining proposals were
            not audited.

        Raises:
            StateInputError: a flag in ``resolve`` is unknown, or a proposal id was
                already used (also within the batch); nothing is written.
            StateError: a :meth:`trial` is open on X; nothing is written.
            InterfaceError: an interface of D misbehaved on any proposal of the batch
                (``progress``, or ``weight``/``value``/``feasible`` on a touched
                obligation); nothing is written and X is unchanged.
            LogError: the log refused the entries; nothing is written, X is unchanged.
        """
        self._check_flags(resolve)
        verdicts: list[Verdict] = []
        bodies: list[Body] = []
        with self.trial():
            for i, proposal in enumerate(proposals):
                v = audit(proposal, self, head_view=head_view)
                verdicts.append(v)
                if not v.committed:
                    return verdicts
                bodies.extend(v.bodies)
                if i + 1 < len(proposals):
                    self.apply_verdict(v)
        self._record_resolving(bodies, resolve, by, note)
        return verdicts

    def _check_flags(self, resolve: Sequence[str]) -> None:
        for fid in resolve:
            if fid not in self._flags:
                raise StateInputError("unknown flag", flag=fid)

    def _record_resolving(self, bodies: list[Body], resolve: Sequence[str],
                          by: str | None, note: str) -> None:
        """Record ``bodies`` and resolve the flags of ``resolve`` they leave open.

        One log transaction: ``bodies``, then a ``flag_resolved`` entry for each flag still
        open after them (nothing is written when there is nothing).
        """
        closed = {
            fid for b in bodies if isinstance(b, Committed) for fid in b.resolved_flags
        }
        for fid in dict.fromkeys(resolve):
            if fid not in self._resolved and fid not in closed:
                bodies.append(FlagResolved(fid, by, note))
        if bodies:
            self._record(bodies)

    def commit_verdicts(
        self,
        verdicts: Sequence[Verdict],
        *,
        resolve: Sequence[str] = (),
        by: str | None = None,
        note: str = "",
    ) -> list[Verdict]:
        """Commit verdicts already taken in order on this X (one audited repair), as audited.

        Nothing is audited again (icore Alg. 1; design.md 4.4).

        ``verdicts[0]`` was taken on X as it is now and verdict k on X as verdicts
        1..k-1 leave it (e.g. on a :meth:`trial`); their entries, then a
        ``flag_resolved`` entry for each flag in ``resolve`` still open after them, are
        written in one log transaction: the same entries as :meth:`commit_all` of their
        proposals.

        Raises:
            StateError: a verdict is not a commit, or the chain does not start at X's
                current sequence number (X changed since the audit); nothing is written.
            StateInputError: a flag in ``resolve`` is unknown; nothing is written.
            InterfaceError: an interface misbehaved on a touched obligation; nothing is
                written and X is unchanged.
            LogError: the log refused the entries; nothing is written, X is unchanged.
        """
        self._check_flags(resolve)
        seq = self._seq
        bodies: list[Body] = []
        for v in verdicts:
            if not v.committed:
                raise StateError("cannot commit a rejected verdict", proposal=v.proposal.id)
            if v.base_seq != seq:
                raise StateError("stale verdict: the state changed since the audit",
                                 verdict_seq=v.base_seq, state_seq=seq)
            seq += len(v.bodies)
            bodies.extend(v.bodies)
        self._record_resolving(bodies, resolve, by, note)
        return list(verdicts)

    def transition(self, body: Committed) -> Transition:
        """The :class:`Transition` of a commit (for ``progress``)."""
        return Transition(
            self.decl.operations[body.operation],
            Proposal(proposer=body.proposer, operation=body.operation, id=body.proposal),
            body.assertions,
            fields=self.decl.parameters.progress_fields,
        )

    def slot_values(self, assertions: Iterable[Assertion]) -> tuple[JSON, ...]:
        """For each assertion, the value of the active assertion in its slot now.

        None when the slot is empty: the ``before`` of a :class:`Transition`.
        """
        out: list[JSON] = []
        for a in assertions:
            o = self._obligations.get(a.obligation)
            aid = None if o is None else o.active.get((str(a.kind), a.key))
            out.append(None if aid is None else self._assertions[aid].value)
        return tuple(out)

    # ------------------------------------------------------------------ revocation
    def on_head_change(self, key: str, new_head: RecordId | None) -> list[HardFlag]:
        """An owner revised ``key``: revoke every active certificate citing another version.

        Dependent obligations become ``repair_pending``; one ``revocation`` hard flag lists
        exactly the active assertions whose justification cites a revoked certificate
        (icore Sec. 4; design.md 4.2). Revocation and flag are one log transaction.

        Returns:
            The flags raised (empty when nothing depended on the old version).

        Raises:
            StateInputError: ``new_head`` is neither a record id (str) nor None.
            InterfaceError: an interface misbehaved on a dependent obligation (it would
                become ``repair_pending``); nothing is written and X is unchanged.
        """
        if new_head is not None and not isinstance(new_head, str):
            raise StateInputError(
                f"new head must be a record id or None, not {type(new_head).__name__}",
                key=key,
                new_head=new_head,
            )
        bodies, flags = revocation_bodies(self, key, new_head, set(), 0)
        if bodies:
            self._record(bodies)
        return flags

    def revalidate_certificates(self, head_view: HeadView) -> list[HardFlag]:
        """Check every cited key against ``head_view`` and revoke stale certificates.

        A key whose head is None (no head or owner unavailable) revokes its certificates
        (fail closed). Every head is read and checked first; the revocations of all keys
        (each a ``revocation`` entry, plus its flag) are then one log transaction.
        Cost: O(cited keys).

        Raises:
            StateInputError: ``head_view`` returned something that is neither a record id
                (str) nor None; nothing is written.
            InterfaceError: an interface misbehaved on a dependent obligation; nothing is
                written and X is unchanged.
        """
        heads = {key: head_view(key) for key in self.cited_keys()}
        for key, head in heads.items():
            if head is not None and not isinstance(head, str):
                raise StateInputError(
                    f"head_view returned {type(head).__name__}, not a record id or None",
                    key=key,
                )
        bodies: list[Body] = []
        flags: list[HardFlag] = []
        revoked: set[str] = set()
        for key, head in heads.items():
            b, f = revocation_bodies(self, key, head, revoked, len(flags))
            bodies += b
            flags += f
        if bodies:
            self._record(bodies)
        return flags

    # ------------------------------------------------------------------ RevocationSource
    def cited_keys(self) -> list[str]:
        """Keys cited by some certificate (records or lineage), sorted."""
        return sorted(self._certs_by_key)

    def certificates_on_key(self, key: str) -> Iterable[str]:
        """Certificates citing a record (or lineage ancestor) of ``key``."""
        return self._certs_by_key.get(key, ())

    def active_citing_certificate(self, certificate_id: str) -> Iterable[str]:
        """Active assertions whose justification cites the certificate."""
        return self._active_by_cert.get(certificate_id, ())

    def citing_assertion(self, assertion_id: str) -> Iterable[str]:
        """Assertions whose justification cites ``assertion_id``."""
        return self._cited_by.get(assertion_id, ())

    def is_tainted(self, assertion_id: str) -> bool:
        """A revocation reached the assertion (directly or through what it cites)."""
        return assertion_id in self._tainted

    # ------------------------------------------------------------------ flags and notes
    def raise_flag(
        self,
        kind: FlagKind,
        *,
        obligations: Sequence[str] = (),
        assertions: Sequence[str] = (),
        proposal: str | None = None,
        proposer: str | None = None,
        certificates: Sequence[str] = (),
        detail: str = "",
    ) -> HardFlag:
        """Raise a hard flag directly (iCORE-Audit, importers)."""
        flag = HardFlag(
            id=self.next_ids("f", 1)[0],
            kind=FlagKind(kind),
            obligations=tuple(obligations),
            assertions=tuple(assertions),
            proposal=proposal,
            proposer=proposer,
            certificates=tuple(certificates),
            detail=detail,
        )
        self._record([FlagRaised(flag)])
        return flag

    def resolve_flag(self, flag_id: str, *, by: str | None = None, note: str = "") -> LogEntry:
        """Mark a hard flag resolved (e.g. by an accepted recovery).

        Raises:
            StateInputError: unknown or already resolved flag.
        """
        if flag_id not in self._flags:
            raise StateInputError("unknown flag", flag=flag_id)
        if flag_id in self._resolved:
            raise StateInputError("flag already resolved", flag=flag_id)
        return self._record([FlagResolved(flag_id, by, note)])[0]

    def record_note(self, kind: str, payload: JSON = None, *, ref: str | None = None) -> LogEntry:
        """Record a diagnosis / feedback / recovery / failure entry (icore Sec. 4).

        Raises:
            StateInputError: empty ``kind`` or a payload that is not JSON.
        """
        if not kind:
            raise StateInputError("note kind must be non-empty")
        check_json(payload, "payload")
        return self._record([Note(kind, payload, ref)])[0]

    # ------------------------------------------------------------------ import API
    def add_event(self, spec: EventSpec) -> Event:
        """Append an observed event to G (trace import).

        Raises:
            StateInputError: undeclared type, unknown agent, missing declared field, a
                cause not in G, a reused id or non-JSON fields.
        """
        eid = spec.id or self._fresh("e", len(self._events) + 1, self._events.__contains__)
        body = event_body(self, spec, eid)
        self._record([body])
        return body.event

    def import_certificate(
        self,
        validator: str,
        *,
        verdict: bool,
        version: str | None = None,
        events: Sequence[str] = (),
        records: Sequence[CitedRecord] = (),
        payload: JSON = None,
    ) -> Certificate:
        """Add a recorded certificate to Π with its recorded verdict (trace import).

        Raises:
            StateInputError: undeclared validator or an event not in G.
        """
        body = certificate_body(self, validator, verdict=verdict, version=version,
                                events=events, records=records, payload=payload)
        self._record([body])
        return body.certificate

    def import_assertion(
        self,
        effect: Effect,
        *,
        events: Sequence[str] = (),
        operation: str | None = None,
        certificates: Sequence[str] = (),
        cites: Sequence[str] = (),
        proposer: str | None = None,
        justified: bool = True,
    ) -> Assertion:
        """Add an assertion to Q and its justification to Π **without** Definition 6.

        For importers that rebuild X from a recorded run: soundness is then computed
        honestly (an assertion with no events, an undeclared-for-kind operation, failed
        or revoked certificates, or unsound citations is unsound).

        Args:
            effect: the assertion (a ``node`` effect creates the obligation).
            events: justifying event ids (must be in G).
            operation: the operation it instantiates (must be in Ω), or None.
            certificates: certificate ids in Π.
            cites: assertion ids cited as preconditions.
            proposer: the agent who asserted it, if known (must be in M_D).
            justified: False records no justification in Π at all.

        Raises:
            StateInputError: anything named that does not exist, or a malformed effect.
            InterfaceError: ``weight``/``value``/``feasible`` misbehaved on the obligation
                as the assertion would leave it; nothing is written and X is unchanged.
        """
        body = assertion_body(self, effect, events=events, operation=operation,
                              certificates=certificates, cites=cites, proposer=proposer,
                              justified=justified)
        self._record([body])
        return body.assertion

    @contextmanager
    def import_batch(self) -> Iterator[ImportBatch]:
        """Import many certificates and assertions as one change (trusted-import path).

        Items added in the block are checked as :meth:`import_certificate` /
        :meth:`import_assertion` check them, against X as the earlier items leave it, and
        are recorded in one log write when the block ends without an exception (an
        exception discards the uncommitted items: nothing of them is written). X ends
        exactly as after the same calls one by one; each touched obligation's interfaces
        are called and its evaluation refreshed once per batch instead of once per item
        (the audit of a recorded run imports an obligation's node, assignee and status,
        or a certificate and the assertions it justifies, as one batch; issue 29).

        Yields:
            The :class:`~icore.state._import.ImportBatch` to add items to.

        Raises:
            StateInputError: an item names something that does not exist (raised by the
                item's call, nothing of the batch written).
            InterfaceError: an interface misbehaved on a touched obligation (at the end
                of the block; nothing of the batch written, X unchanged).
            LogError: the log refused the entries (nothing written, X unchanged).
        """
        b = ImportBatch(self)
        yield b
        b.commit()

    # ------------------------------------------------------------------ copies
    def copy(self) -> State:
        """An independent in-memory copy (replays the kept entries; no log attached).

        Raises:
            StateError: the state does not keep its entries.
            InterfaceError: an interface misbehaved while the copy was evaluated.
        """
        if not self.keep_entries and self._seq:
            raise StateError("copy() needs keep_entries=True")
        other = State(self.decl, clock=ManualClock(self.clock.now_ms()))
        other._replay(self._entries)
        return other

    def __repr__(self) -> str:
        return (
            f"State(decl={self.decl.name!r}, events={len(self._events)}, "
            f"obligations={len(self._obligations)}, assertions={len(self._assertions)}, "
            f"seq={self._seq})"
        )
