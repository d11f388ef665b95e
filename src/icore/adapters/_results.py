"""What an audit of a recorded run returns (design.md 2, data flow 3).

The run's X, its cq timeline, its findings and summary. Plain data, shared by the importers
(:mod:`icore.adapters._trace_audit`, :mod:`icore.adapters._otel_live`) and the reports.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from icore.adapters._action_lineage import ActionLineage, trace_lineages
from icore.adapters._trace import Trace
from icore.audit import Diagnosis, Trigger, TriggerHit, diagnose_hit
from icore.state import LogEntry, Metrics, State

T = TypeVar("T")

FlagPlace = tuple[int, str | None, int | None]
"""(proposals recorded before the flag, last event added to G before it, source ``step``
of the flagged proposal's first event or None)."""


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """X's quality after one recorded message (the cq timeline)."""

    step: int
    snd: float
    astab: float
    cq: float
    flags: int
    stalls: int


class BuiltOnRead(Sequence[T]):
    """A read-only sequence whose items are built when read (:meth:`_at`)."""

    __slots__ = ()

    def _at(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...
    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        n = len(self)
        if isinstance(i, slice):
            return tuple(self._at(j) for j in range(*i.indices(n)))
        if not -n <= i < n:
            raise IndexError(i)
        return self._at(i % n)


class Timeline(BuiltOnRead[MetricPoint]):
    """The cq timeline of a run, one :class:`MetricPoint` per recorded message.

    Stored by column, one row per *run* of points: points at consecutive steps with the
    same numbers (a thought or a tool output leaves X's metrics as they were) are one
    row of 56 bytes (first point, first step, the numbers), about 28 bytes a point on a
    long OpenTelemetry run instead of 48 (issue 29), ≈ 230 as objects. Read-only once
    the run is imported; points are built on access (a row found by bisection).
    """

    __slots__ = ("_astab", "_cq", "_first", "_flags", "_n", "_snd", "_stalls", "_step")

    def __init__(self, points: Iterable[MetricPoint] = ()) -> None:
        self._n = 0
        self._first = array("q")  # the row's first point
        self._step = array("q")  # the row's first point's step
        self._snd = array("d")
        self._astab = array("d")
        self._cq = array("d")
        self._flags = array("q")
        self._stalls = array("q")
        for p in points:
            self.append(p.step, p.snd, p.astab, p.cq, p.flags, p.stalls)

    def append(self, step: int, snd: float, astab: float, cq: float, flags: int,
               stalls: int) -> None:
        """Add the point after one message."""
        n = self._n
        if n and self._flags[-1] == flags and self._stalls[-1] == stalls and _same(
                self._snd[-1], snd) and _same(self._astab[-1], astab) and _same(
                self._cq[-1], cq) and self._step[-1] + (n - self._first[-1]) == step:
            self._n = n + 1  # the last row goes on
            return
        self._first.append(n)
        self._step.append(step)
        self._snd.append(snd)
        self._astab.append(astab)
        self._cq.append(cq)
        self._flags.append(flags)
        self._stalls.append(stalls)
        self._n = n + 1

    def __len__(self) -> int:
        return self._n

    def _at(self, i: int) -> MetricPoint:
        r = bisect_right(self._first, i) - 1
        return MetricPoint(self._step[r] + i - self._first[r], self._snd[r], self._astab[r],
                           self._cq[r], self._flags[r], self._stalls[r])

    def __iter__(self) -> Iterator[MetricPoint]:
        first, n = self._first, self._n
        for r in range(len(first)):
            end = first[r + 1] if r + 1 < len(first) else n
            step, snd, astab, cq = self._step[r], self._snd[r], self._astab[r], self._cq[r]
            flags, stalls = self._flags[r], self._stalls[r]
            for k in range(end - first[r]):
                yield MetricPoint(step + k, snd, astab, cq, flags, stalls)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other,
                                                                         strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Timeline({len(self)} points)"

    def cqs(self) -> list[float]:
        """Cq after each message."""
        return [p.cq for p in self]


def _same(a: float, b: float) -> bool:
    """``a`` and ``b`` are the same number (``0.0`` and ``-0.0`` are not; NaN never is)."""
    return a == b and (a != 0.0 or math.copysign(1.0, a) == math.copysign(1.0, b))



class StepEvents(Mapping[int, str]):
    """Source step index -> the id of its first event in G (:attr:`AuditResult.step_events`).

    Kept small (issue 29: one entry a step): a step whose first event is ``m<index>``,
    added in increasing order (every importer's steps), is 8 bytes of an ``array('q')``
    and its id is built when read; any other entry is a dict item. Reads as the dict it
    replaces (``in``, ``[]``, ``get``, ``len``, equality), iterating in step order.
    """

    __slots__ = ("_other", "_steps")

    def __init__(self, items: Iterable[tuple[int, str]] = ()) -> None:
        self._steps: array[int] = array("q")
        self._other: dict[int, str] = {}
        for k, v in items:
            self.add(k, v)

    def add(self, step: int, event_id: str) -> None:
        """Map ``step`` to ``event_id`` (a step already mapped keeps its first event)."""
        s, other = self._steps, self._other
        if type(step) is int and (not s or step > s[-1]):  # a new step (every importer's)
            if other and step in other:
                return
            if event_id == f"m{step}":
                s.append(step)
            else:
                other[step] = event_id
        elif step not in self:
            other[step] = event_id

    def _has(self, step: int) -> bool:
        s = self._steps
        if s and s[-1] == step:  # the latest step (a parent read at once)
            return True
        i = bisect_left(s, step)
        return i < len(s) and s[i] == step

    def __contains__(self, step: object) -> bool:
        if self._other and step in self._other:
            return True
        return type(step) is int and self._has(step)

    def get(self, step: int, default: Any = None) -> Any:
        """The event id of ``step``, or ``default``."""
        if self._other:
            got = self._other.get(step)
            if got is not None:
                return got
        if type(step) is int and self._has(step):
            return f"m{step}"
        return default

    def __getitem__(self, step: int) -> str:
        got: str | None = self.get(step)
        if got is None:
            raise KeyError(step)
        return got

    def __len__(self) -> int:
        return len(self._steps) + len(self._other)

    def __iter__(self) -> Iterator[int]:
        if not self._other:
            return iter(self._steps)
        return iter(sorted((*self._steps, *self._other)))

    def __repr__(self) -> str:
        return f"StepEvents({len(self)} steps)"

@dataclass(frozen=True, slots=True)
class Finding:
    """A finding of an imported run: a defect, where in the run it is, who must repair it.

    The one diagnosis type is iCORE-Audit's :class:`icore.audit.Diagnosis` (F with its
    frozen W_F): work, evidence and assignment defects are diagnosed and routed by it
    (``source="icore.audit"``; ``audit`` keeps the part of F the log note records). A
    finding adds what a recorded run needs: the source step and the events of G it
    rests on; stalls, replans and terminal failures, which no trigger of the loop
    diagnoses on a passive record, are found by the importer (``source="adapter"``).

    Attributes:
        id: ``d<n>``.
        defect: ``work`` (an output not supported by G), ``evidence`` (an orchestrator
            claim not supported by G), ``assignment`` (an ε-unstable assignment),
            ``progress`` (a stall, loop or replan) or ``terminal`` (the final answer fails
            its check, or the run ends without one).
        step: the source step of the defect (index into the history), None if synthetic.
        obligations: affected obligations.
        assertions: the unsupported / unstable assertions.
        events: the events in G it cites (evidence, or the missing evidence's context).
        proposer: the agent whose assertion is defective.
        responsible: the repair authority (``interfaces.responsible`` of D).
        detail: a human-readable explanation.
        source: ``icore.audit`` or ``adapter`` (derived here).
        audit: the part of iCORE-Audit's F the log note keeps (``_compact``), or None
            when the adapter routed it alone; not part of :meth:`to_json`.
    """

    id: str
    defect: str
    step: int | None
    obligations: tuple[str, ...]
    assertions: tuple[str, ...]
    events: tuple[str, ...]
    proposer: str | None
    responsible: str | None
    detail: str
    source: str = "adapter"
    audit: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """JSON form (for reports)."""
        return {
            "id": self.id, "defect": self.defect, "step": self.step,
            "obligations": list(self.obligations), "assertions": list(self.assertions),
            "events": list(self.events), "proposer": self.proposer,
            "responsible": self.responsible, "detail": self.detail, "source": self.source,
        }

    def note_payload(self) -> dict[str, Any]:
        """The payload of this diagnosis's ``diagnosis`` note in the log."""
        j = self.to_json()
        return {**j, "audit": dict(self.audit)} if self.audit else j


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The per-run numbers ``icore audit`` prints."""

    run: str
    family: str
    steps: int
    snd: float
    astab: float
    cq: float
    cq_mean: float
    cq_min: float
    hard_flags: int
    stalls: int
    replans: int
    unsupported: int
    diagnoses: int
    terminal: bool
    terminated: bool
    succeeded: bool | None
    answer_checked: bool | None = None
    """Whether the final answer was checked against a ground truth or a recorded outcome;
    False: the run has a final answer but nothing to check it against (reported as *not
    checked*, not as wrong); None: no terminal marker."""
    paused: bool = False
    """The run is paused, waiting for a human: no terminal marker and its last recorded
    event is a pause (an ``interrupt()``); it has not ended, so no ``terminal``
    diagnosis is made for the missing end."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``icore audit --json``).

        Every field; ``answer_checked`` only when the answer was *not* checked
        (``false``) and ``paused`` only when the run is paused (``true``), so other runs
        read exactly as before the fields existed.
        """
        out = dataclasses.asdict(self)
        if self.answer_checked is not False:
            del out["answer_checked"]
        if not self.paused:
            del out["paused"]
        return out


@dataclass(frozen=True)
class AuditResult:
    """An imported and audited run.

    Attributes:
        trace: the source trace.
        state: X after the whole run.
        step_events: source step index -> event id in G.
        timeline: X's metrics after each message.
        diagnoses: diagnoses, in step order.
        unsupported: ids of unsound assertions the run made (in step order).
        stalls: stall progress events.
        replans: replans.
        final: metrics of the final X.
        elapsed_ms: import + audit wall time.
        terminated: the run recorded a termination (a terminal marker exists, sound or not).
        answer_checked: whether its final answer was checked (a ground truth or a recorded
            outcome); False: not checked (the certificate says only that an answer
            exists); None: no terminal marker.
        paused: the run is waiting for a human (no terminal marker, its last step a
            pause): not diagnosed as a run that ended without one.
        notes: the audit's ``note`` log entries (diagnoses), in order. X keeps no other
            entries (:class:`NoteLog`; its cost stays linear in the trace).
    """

    trace: Trace
    state: State
    step_events: Mapping[int, str]
    timeline: Sequence[MetricPoint]
    diagnoses: tuple[Finding, ...]
    unsupported: tuple[str, ...]
    stalls: int
    replans: int
    final: Metrics
    elapsed_ms: float
    terminated: bool = False
    answer_checked: bool | None = None
    paused: bool = False
    notes: Sequence[LogEntry] = ()
    flag_places: Mapping[str, FlagPlace] = field(default_factory=dict)
    """Where each hard flag was raised (:class:`FlagPlaces`), kept while X keeps no log."""

    def summary(self) -> RunSummary:
        """The run's summary row."""
        cqs = [p.cq for p in self.timeline] or [self.final.cq]
        return RunSummary(
            run=self.trace.id, family=self.trace.family, steps=self.trace.length,
            snd=self.final.snd, astab=self.final.astab, cq=self.final.cq,
            cq_mean=sum(cqs) / len(cqs), cq_min=min(cqs),
            hard_flags=len(self.state.flags), stalls=self.stalls, replans=self.replans,
            unsupported=len(self.unsupported), diagnoses=len(self.diagnoses),
            terminal=self.state.terminal(), terminated=self.terminated,
            succeeded=self.trace.succeeded, answer_checked=self.answer_checked,
            paused=self.paused,
        )

    @functools.cached_property
    def lineage(self) -> tuple[ActionLineage, ...]:
        """Every protected action the run's PlanFence lines carry, with its status.

        Computed once (the console line, ``--json``, the report and
        :attr:`invalid_actions` read the same tuple; the trace is frozen).

        One :class:`~icore.adapters.ActionLineage` per action (decisions grouped by
        task), judged by :func:`icore.fence.judge_action` / :func:`icore.fence.action_status`
        (planfence eq. 1); empty for a trace without PlanFence lines.

        Raises:
            icore.fence.DecisionFormatError: a decision line is malformed (the
                importers reject those first).
        """
        return trace_lineages(self.trace.planfence, self.trace.steps)

    @property
    def invalid_actions(self) -> int:
        """How many actions were authorized from a stale plan (status ``INVALID``)."""
        return sum(1 for a in self.lineage if a.invalid)

    def event_step(self, event_id: str) -> int | None:
        """The source step of an event (None for synthetic events)."""
        ev = self.state.events.get(event_id)
        if ev is None:
            return None
        s = ev.fields.get("step")
        return s if isinstance(s, int) and s >= 0 else None


_NOTE_FIELDS = ("id", "primary", "defect", "obligations", "proposer", "flags", "evidence",
                "matched", "cq_before")


def compact_diagnosis(f: Diagnosis) -> dict[str, Any]:
    """The part of F a recorded run's finding keeps (:attr:`Finding.audit`).

    What was diagnosed, its evidence gaps and the frozen W_F. Assignees, alternatives and
    history are left out (X holds them), which keeps a long run's audit within its memory
    budget (docs/audit.md).
    """
    j = f.to_json()
    return {k: j[k] for k in _NOTE_FIELDS}


def audit_diagnosis(x: State, did: str, step: int | None, defect: str,
                    obligations: tuple[str, ...], flag: str | None,
                    detail: str) -> tuple[str | None, dict[str, Any]] | None:
    """F from iCORE-Audit for a hard flag (work/evidence) or an unstable assignment.

    Returns (responsible agent, F as JSON), or None when the audit layer cannot diagnose
    it (then the adapter's own routing is used).
    """
    if flag is not None:
        hit = TriggerHit(Trigger.HARD_FLAG, obligations, (flag,), detail)
    else:
        hit = TriggerHit(Trigger.REASSIGNMENT, obligations, (), detail)
    f = diagnose_hit(x, hit, diagnosis_id=did, step=step if step is not None else -1)
    if f is None:
        return None
    if defect == "evidence":
        # an unsupported claim is repaired by its claimant (routing priority: proposer)
        return f.proposer, compact_diagnosis(f)
    return f.responsible, compact_diagnosis(f)


def why_output(fields: Mapping[str, Any], repeat: bool, tools: tuple[str, ...],
               x: State) -> str:
    """Why an output is not supported by G (the detail of its hard flag)."""
    if fields.get("error"):
        return "it reports an error or failure"
    if repeat:
        return "it repeats an observation the agent already reported (no observable effect)"
    if fields.get("code"):
        if not tools:
            return "its code was never run"
        return "its code failed or printed nothing"
    if fields.get("claims"):
        # failed tool outputs are no evidence either (QA qa-new10b S4: "no tool output"
        # was said of a run whose calls had failed)
        return ("it states a conclusion with no observed evidence before it (no tool "
                "output that succeeded)")
    return "unsupported"
