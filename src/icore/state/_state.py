"""The iCORE state X = (G, Q, Π), event-sourced (icore Sec. 3; design.md 4.2, 4.3).

Every change is a :class:`~icore.state.LogEntry`; :meth:`State._record` first appends the
entries of one change to the log in one transaction, then applies them to memory
(:class:`~icore.state._apply.Applier`, which is also what :func:`~icore.state.rebuild`
replays). Applying an entry returns the obligations it touched, and only those are
re-evaluated for the metrics (design.md 4.4 "recompute incrementally").

Fail closed: the interfaces of I_D are D's code and may misbehave. Everything a change
needs from them (the weight, value and feasibility of each obligation it touches) is
computed and checked *before* the log write, on the obligations as the change will
leave them (:func:`~icore.state._transition.obligation_steps`, the one transition
function, whose result the apply step then installs), and the apply step only uses
those checked values. So a bad interface raises :class:`~icore.state.InterfaceError`
with X and its log unchanged, and nothing after the write can fail on an interface.

The state is composed of parts by concern, sharing X's
:class:`~icore.state._tables.Tables` (public attributes; no part reads another's
privates): :class:`~icore.state._evaluation.Evaluation` (soundness, stability, metrics),
:class:`~icore.state._apply.Applier` (entries into the tables),
:class:`~icore.state._queries.Queries` (the loop's queries),
:class:`~icore.state._revocation.Revocations`, :class:`~icore.state._commit.Commits`
(Definition 6 and audited repairs) and :class:`~icore.state._trusted.TrustedImport`
(recorded runs, flags, notes). Each public method of :class:`State` is its part's
method, documented there (docs/state.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType

from icore._clock import Clock, ManualClock
from icore.records import RecordId
from icore.state._apply import Applier, Log
from icore.state._commit import Commits
from icore.state._components import DiagnosisLike, Transition
from icore.state._entries import Body, Committed, FlagResolved, LogEntry
from icore.state._errors import StateError
from icore.state._evaluation import Evaluation
from icore.state._heads import HeadView
from icore.state._legality import Verdict
from icore.state._metrics import MatchedSet, Metrics, ObligationEval
from icore.state._package import DeclarationPackage
from icore.state._queries import Queries
from icore.state._refs import aid, ref
from icore.state._revocation import Revocations
from icore.state._tables import Tables
from icore.state._trusted import TrustedImport
from icore.state._trusted_import import ImportBatch
from icore.state._xmodel import (
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


class State:
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
        self._t = t = Tables(keep_entries=keep_entries)
        self._ev = ev = Evaluation(t, decl)
        self._applier = Applier(t, ev, self)
        self._q = Queries(t, ev, self)
        self._rev = Revocations(t, self, self._record)
        self._commits = Commits(self, self._record)
        self._trusted = TrustedImport(self, self._record)

    # ------------------------------------------------------------------ views of X
    @property
    def seq(self) -> int:
        """Number of entries applied (the sequence number of the last one)."""
        return self._t.seq

    @property
    def entries(self) -> Sequence[LogEntry]:
        """Entries applied so far (empty when ``keep_entries`` is False)."""
        return tuple(self._t.entries)

    @property
    def events(self) -> Mapping[str, Event]:
        """G: event id -> event."""
        return MappingProxyType(self._t.events)

    @property
    def obligations(self) -> Mapping[str, Obligation]:
        """Q's obligations: id -> obligation (read-only; a read may build an equal object)."""
        return MappingProxyType(self._t.obligations)

    @property
    def assertions(self) -> Mapping[str, Assertion]:
        """Q's assertions, active and superseded: id -> assertion."""
        return MappingProxyType(self._t.assertions)

    @property
    def justifications(self) -> Mapping[str, Justification]:
        """Π: assertion id -> justification."""
        return MappingProxyType(self._t.pi)

    @property
    def certificates(self) -> Mapping[str, Certificate]:
        """Π's certificates: id -> certificate."""
        return MappingProxyType(self._t.certs)

    @property
    def flags(self) -> Mapping[str, HardFlag]:
        """Every hard flag raised: id -> flag."""
        return MappingProxyType(self._t.flags)

    def proposal(self, proposal_id: str) -> Proposal | None:
        """The recorded proposal ``proposal_id`` (committed or rejected), if any."""
        return self._t.proposal_bodies.get(proposal_id)

    def proposal_count(self) -> int:
        """Number of proposals recorded (committed or rejected)."""
        return len(self._t.proposals)

    def has_proposal(self, proposal_id: str) -> bool:
        """True if a proposal with this id was recorded."""
        return proposal_id in self._t.proposals

    def flag_resolution(self, flag_id: str) -> FlagResolved | None:
        """How ``flag_id`` was resolved, or None while open."""
        return self._t.resolved.get(flag_id)

    def is_active(self, assertion_id: str) -> bool:
        """True if the assertion exists and is not superseded."""
        t = self._t
        return assertion_id in t.assertions and ref(assertion_id) not in t.superseded

    def superseded_by(self, assertion_id: str) -> str | None:
        """The assertion that superseded ``assertion_id``, if any."""
        r = self._t.superseded.get(ref(assertion_id))
        return None if r is None else aid(r)

    def certificate_active(self, certificate_id: str) -> bool:
        """A certificate is active while it passed and was not revoked (design.md 4.2)."""
        c = self._t.certs.get(certificate_id)
        return c is not None and c.verdict and certificate_id not in self._t.revoked

    # ObligationSource (the transition function reads X through these)
    def obligation_now(self, obligation_id: str) -> Obligation:
        """The obligation as X holds it (KeyError if unknown)."""
        return self._t.obligations[obligation_id]

    def revoked_dependents(self, obligation_id: str) -> Iterable[str]:
        """Active assertions of the obligation whose justification cites revoked evidence."""
        return self._t.revoked_dep.get(obligation_id, ())

    def is_revoked(self, certificate_id: str) -> bool:
        """The certificate was revoked."""
        return certificate_id in self._t.revoked

    def assertion_now(self, assertion_id: str) -> Assertion:
        """An assertion of Q (KeyError if unknown)."""
        return self._t.assertions[assertion_id]

    # ------------------------------------------------------------------ recording
    def _record(self, bodies: Sequence[Body], *, batch: bool = False) -> list[LogEntry]:
        """Record ``bodies`` as one change: :meth:`Applier.record` on this state's log."""
        return self._applier.record(bodies, self.log, float(self.clock.now_ms()), batch=batch)

    def _refresh(self, touched: Iterable[str]) -> None:
        """Re-evaluate ``touched`` (the state micro-bench times it; :meth:`Evaluation.refresh`)."""
        self._ev.refresh(touched)

    def _replay(self, entries: Iterable[LogEntry]) -> None:
        """Apply many entries, refreshing each touched obligation once at the end."""
        self._applier.replay(entries)

    @contextmanager
    def trial(self) -> Iterator[State]:
        """Apply changes tentatively, then undo them all (copy-on-write candidate X_f).

        Inside the block this state *is* the candidate: nothing reaches the log and every
        write is journaled; on exit, however the block ends, the journal is undone, so X
        is exactly as before. Cost: O(what the block changes) (docs/state.md "Trials").

        Raises:
            StateError: a trial is already open on this state.
        """
        if self._t.undo is not None:
            raise StateError("a trial is already open on this state")
        saved, log = self._t.open_trial(), self.log
        self.log = None
        try:
            yield self
        finally:
            self._t.close_trial(saved)
            self.log = log

    # ------------------------------------------------------------------ evaluation
    def assertion_sound(self, assertion_id: str) -> bool:
        """Soundness of one assertion (:meth:`Evaluation.assertion_sound`, design.md 4.3)."""
        return self._ev.assertion_sound(assertion_id)

    def is_sound(self, obligation_id: str) -> bool:
        """Whether the obligation is sound (:meth:`Evaluation.is_sound`)."""
        return self._ev.is_sound(obligation_id)

    def removal_supported(self, obligation_id: str) -> bool:
        """A closed obligation carries valid removal evidence (see :class:`Evaluation`)."""
        return self._ev.removal_supported(obligation_id)

    def gain(self, obligation_id: str) -> float:
        """The gain of reassigning one obligation, icore Def. 9 (:meth:`Evaluation.gain`)."""
        return self._ev.gain(obligation_id)

    def is_stable(self, obligation_id: str) -> bool:
        """O is ε-stable iff gain(o) <= ε (icore Def. 9; :meth:`Evaluation.is_stable`)."""
        return self._ev.is_stable(obligation_id)

    def evaluate(self, o: Obligation) -> ObligationEval:
        """Evaluate one obligation (:meth:`Evaluation.evaluate`; raises as it does)."""
        return self._ev.evaluate(o)

    def metrics(self, over: MatchedSet | None = None) -> Metrics:
        """snd, astab, cq over W(X) or W_F (:meth:`Evaluation.metrics`, design.md 4.3)."""
        return self._ev.metrics(over)

    def evaluation(self, obligation_id: str) -> ObligationEval | None:
        """The current evaluation of one obligation (:meth:`Evaluation.evaluation`)."""
        return self._ev.evaluation(obligation_id)

    def recompute_metrics(self) -> Metrics:
        """Full recompute of :meth:`metrics` over W(X) (:meth:`Evaluation.recompute_metrics`)."""
        return self._ev.recompute_metrics()

    def evaluated(self) -> list[str]:
        """W(X): required roots and every obligation not settled/superseded."""
        return self._ev.evaluated()

    def freeze(self, obligation_ids: Iterable[str]) -> MatchedSet:
        """Freeze a matched set W_F (:meth:`Evaluation.freeze`, icore Sec. 4)."""
        return self._ev.freeze(obligation_ids)

    # ------------------------------------------------------------------ queries
    def entries_since(self, seq: int) -> Sequence[LogEntry]:
        """Entries with sequence number > ``seq`` (O(returned), not O(|log|))."""
        return self._q.entries_since(seq)

    def active_assertions(self, obligation_id: str) -> list[Assertion]:
        """Active assertions about ``obligation_id`` (empty if unknown)."""
        return self._q.active_assertions(obligation_id)

    def active_assertion(
        self, obligation_id: str, kind: AssertionKind, key: str = ""
    ) -> Assertion | None:
        """The active assertion in slot (obligation, kind, key), if any."""
        return self._q.active_assertion(obligation_id, kind, key)

    def slot_values(self, assertions: Iterable[Assertion]) -> tuple[JSON, ...]:
        """Each assertion's slot value now (:meth:`Queries.slot_values`)."""
        return self._q.slot_values(assertions)

    def next_ids(self, prefix: str, count: int) -> list[str]:
        """The next ``count`` ids for ``a``/``c``/``f`` (:meth:`Queries.next_ids`)."""
        return self._q.next_ids(prefix, count)

    def track_touched(self) -> None:
        """Start collecting touched obligations (:meth:`Queries.track_touched`)."""
        self._q.track_touched()

    def take_touched(self) -> set[str]:
        """Obligations changed since the last call (:meth:`Queries.take_touched`)."""
        return self._q.take_touched()

    def flags_on(self, assertion_id: str) -> Iterable[str]:
        """Ids of the hard flags naming ``assertion_id``, in the order raised."""
        return self._q.flags_on(assertion_id)

    def history(self, obligations: Iterable[str], limit: int) -> tuple[str, ...]:
        """The ``limit`` most recent proposals naming ``obligations`` (:meth:`Queries.history`)."""
        return self._q.history(obligations, limit)

    def children(self, obligation_id: str) -> Sequence[str]:
        """Obligations whose ``parent`` is ``obligation_id`` (:meth:`Queries.children`)."""
        return self._q.children(obligation_id)

    def open_flags(self) -> list[HardFlag]:
        """Hard flags not resolved yet, in the order raised."""
        return self._q.open_flags()

    def status_counts(self) -> dict[Status, int]:
        """Number of obligations per effective status (maintained incrementally)."""
        return self._q.status_counts()

    def has_productive_work(self) -> bool:
        """Some obligation is open, assigned, active or repair_pending (icore Alg. 1)."""
        return self._q.has_productive_work()

    def terminal(self) -> bool:
        """D's terminal predicate (:meth:`Queries.terminal`, icore Alg. 1)."""
        return self._q.terminal()

    def terminal_default(self) -> bool:
        """The built-in terminal predicate (:meth:`Queries.terminal_default`)."""
        return self._q.terminal_default()

    def local_view(self, agent: str) -> JSON:
        """D's local view of X for ``agent`` (:meth:`Queries.local_view`)."""
        return self._q.local_view(agent)

    def responsible(self, diagnosis: DiagnosisLike) -> str | None:
        """D's routing rule ``responsible(X, F)`` (:meth:`Queries.responsible`)."""
        return self._q.responsible(diagnosis)

    def assignment_authority(self) -> tuple[str, ...]:
        """The agents D authorizes to revise assignments (:meth:`Queries.assignment_authority`)."""
        return self._q.assignment_authority()

    # ------------------------------------------------------------------ proposals
    def submit(self, proposal: Proposal, *, head_view: HeadView | None = None) -> Verdict:
        """Audit ``proposal`` (icore Def. 6) and record the outcome (:meth:`Commits.submit`)."""
        return self._commits.submit(proposal, head_view=head_view)

    def apply_verdict(self, verdict: Verdict) -> list[LogEntry]:
        """Record a verdict taken on this state (:meth:`Commits.apply_verdict`)."""
        return self._commits.apply_verdict(verdict)

    def commit_all(self, proposals: Sequence[Proposal], *, head_view: HeadView | None = None,
                   resolve: Sequence[str] = (), by: str | None = None,
                   note: str = "") -> list[Verdict]:
        """Audit and commit all of ``proposals`` or none (:meth:`Commits.commit_all`)."""
        return self._commits.commit_all(proposals, head_view=head_view, resolve=resolve,
                                        by=by, note=note)

    def commit_verdicts(self, verdicts: Sequence[Verdict], *, resolve: Sequence[str] = (),
                        by: str | None = None, note: str = "") -> list[Verdict]:
        """Commit verdicts already taken in order on X (:meth:`Commits.commit_verdicts`)."""
        return self._commits.commit_verdicts(verdicts, resolve=resolve, by=by, note=note)

    def transition(self, body: Committed) -> Transition:
        """The :class:`Transition` of a commit (for ``progress``)."""
        return self._commits.transition(body)

    # ------------------------------------------------------------------ revocation
    def on_head_change(self, key: str, new_head: RecordId | None) -> list[HardFlag]:
        """An owner revised ``key``: revoke stale evidence (:meth:`Revocations.on_head_change`)."""
        return self._rev.on_head_change(key, new_head)

    def revalidate_certificates(self, head_view: HeadView) -> list[HardFlag]:
        """Revoke certificates stale under ``head_view`` (see :class:`Revocations`)."""
        return self._rev.revalidate_certificates(head_view)

    def cited_keys(self) -> list[str]:
        """Keys cited by some certificate (records or lineage), sorted."""
        return self._rev.cited_keys()

    def certificates_on_key(self, key: str) -> Iterable[str]:
        """Certificates citing a record (or lineage ancestor) of ``key``."""
        return self._rev.certificates_on_key(key)

    def active_citing_certificate(self, certificate_id: str) -> Iterable[str]:
        """Active assertions whose justification cites the certificate."""
        return self._rev.active_citing_certificate(certificate_id)

    def citing_assertion(self, assertion_id: str) -> Iterable[str]:
        """Assertions whose justification cites ``assertion_id``."""
        return self._rev.citing_assertion(assertion_id)

    def is_tainted(self, assertion_id: str) -> bool:
        """A revocation reached the assertion (directly or through what it cites)."""
        return self._rev.is_tainted(assertion_id)

    # ------------------------------------------------------------------ trusted path
    def raise_flag(self, kind: FlagKind, *, obligations: Sequence[str] = (),
                   assertions: Sequence[str] = (), proposal: str | None = None,
                   proposer: str | None = None, certificates: Sequence[str] = (),
                   detail: str = "") -> HardFlag:
        """Raise a hard flag directly (iCORE-Audit, importers; :meth:`TrustedImport.raise_flag`)."""
        return self._trusted.raise_flag(kind, obligations=obligations, assertions=assertions,
                                        proposal=proposal, proposer=proposer,
                                        certificates=certificates, detail=detail)

    def resolve_flag(self, flag_id: str, *, by: str | None = None, note: str = "") -> LogEntry:
        """Mark a hard flag resolved (:meth:`TrustedImport.resolve_flag`)."""
        return self._trusted.resolve_flag(flag_id, by=by, note=note)

    def record_note(self, kind: str, payload: JSON = None, *, ref: str | None = None) -> LogEntry:
        """Record a diagnosis/feedback/recovery/failure note (:meth:`TrustedImport.record_note`)."""
        return self._trusted.record_note(kind, payload, ref=ref)

    def add_event(self, spec: EventSpec) -> Event:
        """Append an observed event to G (:meth:`TrustedImport.add_event`)."""
        return self._trusted.add_event(spec)

    def import_certificate(self, validator: str, *, verdict: bool, version: str | None = None,
                           events: Sequence[str] = (), records: Sequence[CitedRecord] = (),
                           payload: JSON = None) -> Certificate:
        """Add a recorded certificate to Π (:meth:`TrustedImport.import_certificate`)."""
        return self._trusted.import_certificate(validator, verdict=verdict, version=version,
                                                events=events, records=records,
                                                payload=payload)

    def import_assertion(self, effect: Effect, *, events: Sequence[str] = (),
                         operation: str | None = None, certificates: Sequence[str] = (),
                         cites: Sequence[str] = (), proposer: str | None = None,
                         justified: bool = True) -> Assertion:
        """Add an assertion without Definition 6 (:meth:`TrustedImport.import_assertion`)."""
        return self._trusted.import_assertion(effect, events=events, operation=operation,
                                              certificates=certificates, cites=cites,
                                              proposer=proposer, justified=justified)

    def import_batch(self) -> ImportBatch:
        """Many imported items as one change (:meth:`TrustedImport.import_batch`, issue 29)."""
        return self._trusted.import_batch()

    # ------------------------------------------------------------------ copies
    def copy(self) -> State:
        """An independent in-memory copy (replays the kept entries; no log attached).

        Raises:
            StateError: the state does not keep its entries.
            InterfaceError: an interface misbehaved while the copy was evaluated.
        """
        if not self.keep_entries and self._t.seq:
            raise StateError("copy() needs keep_entries=True")
        other = State(self.decl, clock=ManualClock(self.clock.now_ms()))
        other._replay(self._t.entries)
        return other

    def __repr__(self) -> str:
        t = self._t
        return (
            f"State(decl={self.decl.name!r}, events={len(t.events)}, "
            f"obligations={len(t.obligations)}, assertions={len(t.assertions)}, "
            f"seq={t.seq})"
        )
