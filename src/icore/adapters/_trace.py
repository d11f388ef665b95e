"""A source-neutral recorded run: the intermediate form every importer produces.

An importer parses a file into a :class:`Trace` (and raises
:class:`~icore.adapters.AdapterError` on anything malformed); :func:`icore.adapters.build_state`
then turns any trace into the iCORE state X. Keeping the two apart means the Who&When
importers, the generic JSONL importer and a live run all feed the same builder.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import FrozenInstanceError, dataclass, field
from typing import TYPE_CHECKING, Any

from icore.fence import DecisionEntry


class StepKind(enum.StrEnum):
    """What one recorded message is, once classified (docs/audit-real-runs.md)."""

    TASK = "task"
    """The task statement (the human / user request)."""
    PLAN = "plan"
    """A plan or a replan (Magentic-One "Initial plan"/"New plan"; CaptainAgent's manager plan)."""
    LEDGER = "ledger"
    """An orchestrator ledger: progress claims, next speaker, instruction."""
    INSTRUCTION = "instruction"
    """An instruction routed to one agent (``to``)."""
    THOUGHT = "thought"
    """Other orchestrator bookkeeping (e.g. "Next speaker X")."""
    OUTPUT = "output"
    """An agent's actual output (an artifact in G)."""
    TOOL_OUTPUT = "tool_output"
    """A tool's output (code execution result, with an exit code when known)."""
    STALL = "stall"
    """A declared stall / replan trigger (a progress event)."""
    TERMINATION = "termination"
    """The run's termination message (with the final answer when given)."""


def run_ended(steps: Iterable[Step]) -> bool:
    """True when the run's last request ended.

    A terminating step after its last ``task`` step that follows an end: of two
    kickoffs in one recording (a Flow's crews) the first crew's ``termination`` does not
    end the run (QA qa-new10b S2).
    """
    ended = False
    for s in steps:
        if s.terminates or s.kind == StepKind.TERMINATION:
            ended = True
        elif s.kind == StepKind.TASK:
            ended = False
    return ended


@dataclass(frozen=True, slots=True)
class Ledger:
    """A Magentic-One ledger (each field is the ``answer`` of ``{reason, answer}``).

    Booleans are None when the ledger did not state them.
    """

    is_request_satisfied: bool | None = None
    is_in_loop: bool | None = None
    is_progress_being_made: bool | None = None
    next_speaker: str | None = None
    instruction: str | None = None
    reasons: Mapping[str, str] = field(default_factory=dict)


_RARE_MEMO: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_RARE_MEMO_MAX = 4096
_set = object.__setattr__

@dataclass(frozen=True)
class _StepFields:
    """The fields of a :class:`Step`, as :mod:`dataclasses` and type checkers see them."""

    index: int
    agent: str
    kind: StepKind
    content: str
    role: str = ""
    to: str | None = None
    ledger: Ledger | None = None
    final_answer: str | None = None
    terminates: bool = False
    exitcode: int | None = None
    parent: int | None = None
    calls: str | None = None
    plan_id: str | None = None
    pause: bool = False
    gate_replan: bool = False
    tool: str | None = None
    ran: bool | None = None
    task: str | None = None
    invalid_args: bool = False


_STEP_FIELDS = tuple(f.name for f in dataclasses.fields(_StepFields))
"""A :class:`Step`'s fields in order (equality, hash, repr, pickle, ``__match_args__``)."""


def _rare_field(i: int, default: Any, doc: str) -> property:
    """The property reading field ``i`` of a :class:`Step`'s shared tuple."""
    def get(self: Any) -> Any:
        r = self._rare
        return default if r is None else r[i]
    return property(get, doc=doc)


if TYPE_CHECKING:  # to a type checker a Step is this frozen dataclass
    _StepBase = _StepFields
else:
    _StepBase = object


class Step(_StepBase):
    """One recorded message, classified (a frozen value, as a frozen dataclass).

    Kept small (issue 29: a long run holds one per message): the fields most messages
    leave at their default (``to`` to ``task``, except ``parent``) are one shared
    tuple, or nothing when all are at their default; reading one is an attribute as
    any other. Equality, hashing, ``repr`` and pickling are the dataclass's, over the
    fields below in this order, and it is a dataclass to :mod:`dataclasses` (``fields``,
    ``replace``, ``asdict`` see these fields).

    Attributes:
        index: 0-based index into the source history (the annotation's step numbering).
        agent: canonical agent id of the speaker.
        kind: what the message is.
        content: the message text.
        role: the raw role/name string of the source.
        to: instruction target (canonical agent id) for ``instruction``/``thought`` routing.
        ledger: the parsed ledger for ``ledger`` steps.
        final_answer: the final answer stated by a ``termination`` step (or a terminating output).
        terminates: the message ends the run (``TERMINATE`` or a termination condition).
        exitcode: the exit code of a ``tool_output`` when stated.
        parent: index of the step that caused this one, when the source records it (an
            OpenTelemetry parent span); None: the previous step.
        calls: the tool calls an ``output`` asked for, as canonical JSON (names and
            arguments, call ids dropped), when recorded; part of what the output says, so
            two turns asking for other arguments are not one repeated observation.
        plan_id: the plan a ``plan`` step writes or rewrites, when recorded: a replan
            supersedes the plan of the same id; a new id is a new plan (None: every plan
            after the first supersedes the previous one).
        pause: the step records a pause, the run waiting for a human (a LangGraph
            ``interrupt()``): a run whose last step is a pause is paused, not ended.
        gate_replan: a ``plan`` step that is the PlanFence gate's one replan of a
            protected call (``replan: true`` with a ``plan_id``, as the framework
            recorders write it): the protocol working as designed (planfence Sec. 4,
            Alg. 1, App. A.3), counted in ``replans`` with no ``progress`` diagnosis.
        tool: the tool a ``tool_output`` names (its ``tool`` field), when recorded.
        ran: what a ``tool_output`` says of its call: True it ran (``ran: true``,
            ``failed: true``, or ``exitcode`` 0 and not ``blocked``), False it did not
            (``blocked`` or ``ran: false``), None not said. The audit holds it against
            the gate's decisions (a recorded effect after a refusal is INVALID).
        task: the protected call a ``tool_output`` is the output of (its ``task`` field,
            the ``task`` of that call's PlanFence decisions), when recorded; the audit
            matches outputs to decisions by it alone (#28).
        invalid_args: a ``tool_output`` of a call whose arguments the framework's own
            schema refused before any gate saw it (``reason: invalid_arguments``): never
            the result of an authorized call (#28, QA qa-new10b S2).
    """

    __slots__ = ("_rare", "agent", "content", "index", "kind", "parent", "role")
    __match_args__ = _STEP_FIELDS

    def __init__(self, index: int, agent: str, kind: StepKind, content: str, role: str = "",
                 to: str | None = None, ledger: Ledger | None = None,
                 final_answer: str | None = None, terminates: bool = False,
                 exitcode: int | None = None, parent: int | None = None,
                 calls: str | None = None, plan_id: str | None = None, pause: bool = False,
                 gate_replan: bool = False, tool: str | None = None,
                 ran: bool | None = None, task: str | None = None,
                 invalid_args: bool = False) -> None:
        _set(self, "index", index)
        _set(self, "agent", agent)
        _set(self, "kind", kind)
        _set(self, "content", content)
        _set(self, "role", role)
        _set(self, "parent", parent)
        rare: tuple[Any, ...] | None = None
        if not (to is None and ledger is None and final_answer is None and terminates is False
                and exitcode is None and calls is None and plan_id is None and pause is False
                and gate_replan is False and tool is None and ran is None and task is None
                and invalid_args is False):
            rare = (to, ledger, final_answer, terminates, exitcode, calls, plan_id, pause,
                    gate_replan, tool, ran, task, invalid_args)
            if ledger is None and final_answer is None and calls is None and task is None:
                # equal small tuples are one object (an instruction's target, an exit
                # code); keyed with their types, so ``ran=1`` never answers ``ran=True``;
                # never the one-off texts (calls, answers) nor a ledger's reasons
                key = (*rare, *map(type, rare))
                try:
                    shared = _RARE_MEMO.get(key)
                    if shared is None:
                        if len(_RARE_MEMO) >= _RARE_MEMO_MAX:
                            _RARE_MEMO.clear()
                        shared = _RARE_MEMO[key] = rare
                    rare = shared
                except TypeError:  # an unhashable part: its own tuple
                    pass
        _set(self, "_rare", rare)

    if not TYPE_CHECKING:  # the rare fields, read from the shared tuple
        to = _rare_field(0, None, "Instruction target (see the class docstring).")
        ledger = _rare_field(1, None, "The parsed ledger of a ``ledger`` step.")
        final_answer = _rare_field(2, None, "The final answer stated by the step.")
        terminates = _rare_field(3, False, "The message ends the run.")
        exitcode = _rare_field(4, None, "The exit code of a ``tool_output``.")
        calls = _rare_field(5, None, "The tool calls an ``output`` asked for (JSON).")
        plan_id = _rare_field(6, None, "The plan a ``plan`` step writes or rewrites.")
        pause = _rare_field(7, False, "The step records a pause (waiting for a human).")
        gate_replan = _rare_field(8, False, "The gate's one replan of a protected call.")
        tool = _rare_field(9, None, "The tool a ``tool_output`` names.")
        ran = _rare_field(10, None, "What a ``tool_output`` says of its call (ran or not).")
        task = _rare_field(11, None, "The protected call a ``tool_output`` is the output of.")
        invalid_args = _rare_field(12, False, "The schema refused the call's arguments.")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in _STEP_FIELDS)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined,no-any-return]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "Step(" + ", ".join(f"{f}={v!r}" for f, v in zip(
            _STEP_FIELDS, self._values(), strict=True)) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self._values())

    def __replace__(self, **changes: Any) -> Step:  # copy.replace (Python 3.13)
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


Step.__dataclass_fields__ = _StepFields.__dataclass_fields__  # type: ignore[attr-defined]
Step.__dataclass_params__ = _StepFields.__dataclass_params__  # type: ignore[attr-defined]
Step.__annotations__ = dict(_StepFields.__annotations__)  # typing.get_type_hints(Step)


@dataclass(frozen=True, slots=True)
class Annotation:
    """The ground-truth failure annotation of a run (Who&When): agent, step, reason."""

    agent: str | None
    step: int | None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class HumanAnswer:
    """A human's answer to a protected call put to them, as the run's thought records it.

    Read from a ``thought`` with ``approval: {tool, approved, request}`` (the OpenAI
    Agents SDK recorder) or with ``answered_by: "human"``, ``decision`` (``approve``,
    ``edit`` or ``reject``), ``tool`` and ``args`` (the LangGraph and AG2 recorders); the
    audit links it to the action it answered (:func:`icore.adapters.trace_lineages`).

    Attributes:
        step: the thought's step index.
        tool: the tool of the call.
        approved: True for an approval (``approve``, ``edit``), False for a rejection.
        request: the :class:`~icore.workspace.ApprovalRequest` id the answer names (its
            action, arguments and the versions they derive from), else None.
        args: the call's arguments as canonical JSON text, when recorded (not for an
            ``edit``: the human changed them), else None.
        task: the protected action (its ``task``) the answer names, when the line names
            it (a refused call's ``tool_output`` with ``answered_by: "human"``, a "yes"
            to a call then refused before its gate), else None: linked to it exactly.
        during: True for an answer to a question the call's tool asked while it ran
            (the MCP gateway's forwarded elicitation: its line carries ``ask``), so
            after the gate authorized the call; False: asked before its gate.
    """

    step: int
    tool: str
    approved: bool
    request: str | None = None
    args: str | None = None
    task: str | None = None
    during: bool = False


@dataclass(frozen=True, slots=True)
class PlanfenceLog:
    """The PlanFence lines a recorded run carries (planfence Sec. 3; issue 26 typed part).

    Attributes:
        records: record lines (``{id, key, owner, seq, type, parents, content?, role?}``),
            as recorded.
        decisions: the gate decisions, typed (:class:`icore.fence.DecisionEntry`).
        replans: the replans the run's plan lines record, ``(stale roots, replan
            roots)`` per replan: a ``plan`` line with ``replan: true`` and a ``plan_id``
            rewrites the plan of that id (the roots of the id's previous plan line)
            into its own roots (#28, QA qa-crew S2: the recorder's and the gateway's
            word on which call replanned which, never guessed from tool names).
        answers: the humans' answers to protected calls the run records, in step order
            (QA qa-new9 S3: an approval is part of the action's lineage).
        edited: record id -> why, for each record line whose id is not the digest of
            the fields it carries (the trace was edited or damaged; QA qa-new9 S3): the
            actions whose lineage shows one are ``INVALID``.
        edited_decisions: index in :attr:`decisions` -> why, for each decision line that
            does not match its recorded ``digest`` (:meth:`icore.fence.DecisionEntry.
            digest`; #29): the action it decides is ``INVALID``.
        resent: ``(replan roots, keys)`` per replan line with ``resent_unchanged``: the
            replan's arguments are the stale call's although the values of ``keys``
            handed over differ from those it was planned from (QA qa-new10c S2).
        callers: task -> ``(agent, args)`` of the event lines naming a protected
            action's ``task`` (its gate thought, a refused call's tool output): the agent
            that made the call and its arguments as canonical JSON text (None: not
            recorded); the first line of each task (#28, QA qa-new10 S3).
        edited_lines: action (task or tool) -> why, for each human-answer or
            tool-outcome event line that does not match its recorded ``digest``
            (:func:`icore._line_digest.line_digest`; #29): that action is ``INVALID``.
        edited_answers: ``(tool, canonical arguments or None, step, why)`` per
            human-answer line naming no ``task`` that does not match its digest (``step``:
            the answer's :attr:`HumanAnswer.step`): the actions it could have answered
            are ``INVALID`` (that tool's with those arguments and the one it is linked
            to; every one of the tool when it records no arguments or none has them; #29).
        chain_broken: why, naming the line, when a writer's chain of digested lines
            breaks (a line deleted, moved, repeated or cut off: :mod:`icore._line_chain`;
            #29): every protected action of the run is ``INVALID``. None: whole, or
            no chain recorded.
        branches: task -> the parallel branch its call was made in (the ``branch`` of the
            first event line naming the task that has one: LangGraph ``Send`` branches,
            ``"worker[1]/tools"``); a task of no branch is absent (#28).
        gated: task -> tool of each gate thought that authorized a call (an MCP
            gateway's): a task no decision line names is a call authorized and
            forwarded whose decision line was cut (QA qa-new15b S2: outcome unknown).
        task_lines: task -> the line of the trace file its first decision is on (JSONL
            traces; the report links a refusal to the next call, QA qa-new13a S4).
    """

    records: tuple[Mapping[str, Any], ...] = ()
    decisions: tuple[DecisionEntry, ...] = ()
    replans: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    answers: tuple[HumanAnswer, ...] = ()
    edited: Mapping[str, str] = field(default_factory=dict)
    edited_decisions: Mapping[int, str] = field(default_factory=dict)
    resent: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    callers: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    edited_lines: Mapping[str, str] = field(default_factory=dict)
    edited_answers: tuple[tuple[str, str | None, int, str], ...] = ()
    chain_broken: str | None = None
    branches: Mapping[str, str] = field(default_factory=dict)
    gated: Mapping[str, str] = field(default_factory=dict)
    task_lines: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"records": [...], "decisions": [...]}`` (decisions as their dicts).

        Plus ``"replans": [{"stale": [...], "replan": [...]}, ...]`` when there are any,
        and ``"resent_unchanged": [{"replan": [...], "keys": [...]}, ...]``.
        """
        out: dict[str, Any] = {"records": list(self.records),
                               "decisions": [d.to_dict() for d in self.decisions]}
        if self.replans:
            out["replans"] = [{"stale": list(old), "replan": list(new)}
                              for old, new in self.replans]
        if self.resent:
            out["resent_unchanged"] = [{"replan": list(r), "keys": list(k)}
                                       for r, k in self.resent]
        return out


@dataclass(frozen=True, slots=True)
class LiveRunPart:
    """What an icore live run's spans carry beyond the steps (OTel ``icore.call``).

    Attributes:
        calls: the recorded live-run calls, in order.
        manifest: the run manifest (JSON text), if recorded.
    """

    calls: tuple[Mapping[str, Any], ...] = ()
    manifest: str | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    """A recorded multi-agent run in source-neutral form.

    Attributes:
        id: run id (file stem by default).
        file: source file (used in errors and reports).
        family: ``magentic_one``, ``captain_agent`` or ``jsonl``.
        question: the task statement.
        ground_truth: the expected answer, if known.
        succeeded: the recorded outcome (Who&When ``is_correct``/``is_corrected``), if known.
        agents: canonical agent id -> declared description (system prompt / team entry).
        steps: the classified messages, in order: a tuple, or (a file's run read by
            :func:`icore.adapters.load_jsonl`) a :class:`FileSteps` that reads them again
            from the file when iterated, or (an OpenTelemetry run) columns building each
            step when read (bounded memory, issue 29).
        annotation: the failure annotation, if any.
        source_fields: keys of the source the importer does not interpret (kept, not
            lost: Who&When's ``mistake_type``, ``question_ID``, ``level``, ...).
        span_counts: ``(spans, traces)`` of an OpenTelemetry source.
        orchestrator: the run's orchestrator agent, when the source names one.
        planfence: the run's PlanFence lines (records and typed gate decisions).
        unknown_spans: span kinds kept as events without a mapping -> count.
        warnings: problems the importer worked around (file and field named).
        live: an icore live run's recorded calls and manifest (OTel ``icore.call``).
        unclosed: its writer promised to seal the file when the run is closed (an icore
            recorder's header) and no line carries the seal: never closed (the process
            stopped, or still runs). A run whose last line is a pause then did not end
            (it stopped while it waited for a human, QA qa-new16 S3), not "paused".

    ``extras`` (read-only) rebuilds the free dict earlier versions carried.
    """

    id: str
    file: str
    family: str
    question: str
    ground_truth: str | None
    succeeded: bool | None
    agents: Mapping[str, str]
    steps: Sequence[Step]
    annotation: Annotation | None = None
    source_fields: Mapping[str, Any] = field(default_factory=dict)
    span_counts: tuple[int, int] | None = None
    orchestrator: str | None = None
    planfence: PlanfenceLog | None = None
    unknown_spans: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    live: LiveRunPart | None = None
    unclosed: bool = False

    @property
    def extras(self) -> dict[str, Any]:
        """The trace's parts as one dict (read-only view, keys as importers wrote them).

        ``source_fields`` first, then ``spans``/``traces``, ``orchestrator``,
        ``planfence`` (``{"records": [...], "decisions": [DecisionEntry.to_dict(), ...]}``),
        ``unknown_spans``, ``warnings``, ``icore_calls``, ``icore_manifest`` when set.
        """
        out = dict(self.source_fields)
        if self.span_counts is not None:
            out["spans"], out["traces"] = self.span_counts
        if self.orchestrator is not None:
            out["orchestrator"] = self.orchestrator
        if self.planfence is not None:
            out["planfence"] = self.planfence.to_dict()
        if self.unknown_spans:
            out["unknown_spans"] = dict(self.unknown_spans)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.live is not None:
            out["icore_calls"] = list(self.live.calls)
            if self.live.manifest is not None:
                out["icore_manifest"] = self.live.manifest
        return out

    @property
    def question_id(self) -> str | None:
        """The source's question id (Who&When ``question_ID``), if any."""
        q = self.source_fields.get("question_ID")
        return None if q is None else str(q)

    @property
    def length(self) -> int:
        """Number of source messages (the range of valid step indices)."""
        last = getattr(self.steps, "last_index", None)  # a StepSource: no read of the steps
        if isinstance(last, int):
            return 1 + last
        return 1 + max((s.index for s in self.steps), default=-1)


STOPPED_PAUSED = ("the run paused at an interrupt, waiting for a human, and then stopped: "
                  "its trace was never closed (the process stopped or was killed while it "
                  "waited; a resume in another process is in that process's trace)")
"""The ``terminal`` diagnosis of a run whose unclosed trace ends at a pause."""


def end_detail(trace: Trace, last: Step | None) -> str:
    """Why a run that did not end is diagnosed ``terminal`` (the diagnosis's detail)."""
    if trace.unclosed and last is not None and last.pause:
        return STOPPED_PAUSED
    return "the run ended without a terminal marker (no final answer)"

