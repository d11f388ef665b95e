"""One recorder for every framework: a run becomes the source-neutral trace ``icore audit`` reads.

Each integration turns its framework's events (LangGraph callbacks and node calls, OpenAI
Agents SDK spans, AG2 message hooks, CrewAI events) into calls on a :class:`RunRecorder`.
The recorder keeps them as lines of the generic JSONL format of
:mod:`icore.adapters` (docs/audit-real-runs.md), so ``recorder.write("run.jsonl")`` gives a
file ``icore audit run.jsonl`` audits, and :meth:`RunRecorder.trace` /
:meth:`RunRecorder.audit` parse exactly those lines (no second code path).

Mapping (icore Sec. 3: every event is attributed to the agent that produced it):

========================  ===============  ============================================
framework event           JSONL ``kind``   extra fields kept in the line
========================  ===============  ============================================
user input / task         ``task``
agent turn (LLM output)   ``output``
handoff / speaker change  ``instruction``  ``to``
plan written or replan    ``plan``         ``roots``, ``plan_id``, ``replan``
gate decision             ``thought``      ``gate`` (outcome, reason, tool, replanned)
tool result / error       ``tool_output``  ``tool``, ``args``, ``exitcode`` 0 / 1
blocked protected call    ``tool_output``  ``exitcode`` 1, ``blocked`` true
final answer              ``termination``  ``final_answer``
========================  ===============  ============================================

Every protected call also writes PlanFence lines (docs/audit-real-runs.md, "Generic
JSONL format"): ``{"planfence": {"record": ...}}`` for the records its roots cite (roots,
their ancestors, the owners' heads and the fresh records of a replan, each once) and
``{"planfence": {"decision": ...}}`` for each gate decision
(:meth:`icore.fence.DecisionEntry.to_dict`: roots, D(a), frontier F(x), heads H(x),
validation point, outcome and reason) with a ``task`` naming the call (``ship-1``,
``ship-2``, ...), so ``icore audit`` draws each call's lineage picture and ``--fail-on
invalid`` fires on an action that ran from a stale plan (planfence Sec. 3-4, Alg. 1).

Attribution: gate events, the replan and the tool call go to the agent that called the
tool (its model turn asked for the tool), not to a fixed "executor"; a replan is recorded
as a replan of the call's original plan (the summary counts it in ``replans``): the
fence's one replan inside a call, or, when a stale call was refused with the fresh values
(the high-level API's hand-over), the next call of that tool on the same facts through
the same workspace agent (the fence's one replan, whichever framework agent makes it: the
replan is the fence's, not the caller's). Plan lines carry a
``plan_id`` per logical call (``ship#1``, ``ship#2``, ...), so one call's replan supersedes
its own original plan, never another call's.

Framework objects (a tool's result model, a dataclass, an enum) are written as data
(:func:`icore.integrations._trace_data.plain_data`), never as their Python repr. The
PlanFence lines of one call are built by :mod:`icore.integrations._call_lines` (pure); this
module keeps the run's events, the replan bookkeeping and the outputs.
"""

from __future__ import annotations

import bisect
import secrets
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icore._line_chain import chain_lines
from icore._line_seal import sealed
from icore._strict_json import strict_dumps
from icore._writer_mark import marked_header
from icore.errors import IntegrationError, brief
from icore.fence import ActionResult, GateDecision
from icore.integrations._call_lines import (
    call_args,
    lineage_lines,
    lineage_records,
)
from icore.integrations._recorder_lines import Scope as _Scope
from icore.integrations._recorder_lines import Waiting as _Waiting
from icore.integrations._recorder_lines import add_once, record_gate
from icore.integrations._recorder_values import (
    FLAGS,
    agents_arg,
    line_args,
    outcome,
    text_arg,
)
from icore.integrations._run_file import write_run
from icore.integrations._trace_data import jsonable, text_of
from icore.records import Lookup

if TYPE_CHECKING:  # imported when used: the adapters package is heavy (MCP gateway start-up)
    from icore.adapters import AuditResult, Trace

_ACTIVE: ContextVar[RunRecorder | None] = ContextVar("icore_active_recorder", default=None)
_LINE_FIELDS: ContextVar[Mapping[str, Any] | None] = ContextVar("icore_line_fields",
                                                                default=None)


@contextmanager
def line_fields(**fields: Any) -> Iterator[None]:
    """Give every line :meth:`RunRecorder.add` writes in the block these fields.

    Fields a line names itself win; None values are left out (no block: nothing
    added). A framework integration tags the lines of one place of its run this way
    (LangGraph: the parallel ``branch`` a line was made in, #28).
    """
    given = {k: v for k, v in fields.items() if v is not None}
    token = _LINE_FIELDS.set({**(_LINE_FIELDS.get() or {}), **given} if given else
                             _LINE_FIELDS.get())
    try:
        yield
    finally:
        _LINE_FIELDS.reset(token)


def active_recorder() -> RunRecorder | None:
    """The recorder of the recording block this code runs in (:meth:`RunRecorder.active`).

    A :class:`~icore.integrations.FenceGuard` built without ``recorder=`` records into it,
    so a fenced tool never vanishes from a recorded run.
    """
    return _ACTIVE.get()


class RunRecorder:
    """Collects one run's events as generic-JSONL lines (thread-safe).

    Args:
        run_id: the run's id (the report's name).
        question: the task statement (default: the first ``task`` event's content).
        agents: agent id -> description (agents that speak are added anyway).
        orchestrator: the agent that routes work, if any.
        ground_truth: the expected answer, if known: ``icore audit`` then checks the final
            answer against it (``answer_check``). Without it (and without
            ``succeeded``) the answer is reported as *not checked*, never as wrong.
        succeeded: the run's outcome as the app judged it (True / False), if known; it
            decides ``answer_check`` when set. Settable after the run
            (``rec.succeeded = booked == expected``) before :meth:`write`.

    Raises:
        IntegrationError: a ``run_id`` that is not a non-empty string, a ``question``,
            ``orchestrator`` or ``ground_truth`` that is not a string, ``agents`` that is
            not a mapping of strings, or ``succeeded`` (here or set later) that is not a
            bool or None (``"no"`` would be recorded as a success); ``argument`` names it.

    Example::

        rec = RunRecorder("trip-17")
        ... run the app with the integration's hook given ``rec`` ...
        rec.write("trip-17.jsonl")       # icore audit trip-17.jsonl
        rec.audit().summary()
    """

    def __init__(self, run_id: str = "run", *, question: str = "",
                 agents: Mapping[str, str] | None = None, orchestrator: str | None = None,
                 ground_truth: str | None = None, succeeded: bool | None = None) -> None:
        if not isinstance(run_id, str) or not run_id.strip():
            raise IntegrationError(f"run_id must be a non-empty string, not {brief(run_id)}"[:120],
                                   argument="run_id")
        self.run_id = run_id
        self.question = text_arg(question, "question", numbers=True) or ""
        self.agents: dict[str, str] = agents_arg(agents)
        self.orchestrator = text_arg(orchestrator, "orchestrator", optional=True)
        self.ground_truth = text_arg(ground_truth, "ground_truth", optional=True,
                                      numbers=True)
        self.succeeded = succeeded  # checked by the property: a bool or None
        self.events: list[dict[str, Any]] = []
        self._at: list[float] = []
        self.fenced_tools: set[str] = set()
        """Tools whose calls a :class:`~icore.integrations.FenceGuard` records itself
        (framework hooks skip them, so no call is recorded twice)."""
        self.planfence: list[dict[str, Any]] = []
        """The PlanFence lines (records and decisions), in the order they were made."""
        self._records: set[str] = set()
        self._calls: dict[str, int] = {}
        self._callers: dict[str, str] = {}
        self._plan_ids: dict[str, int] = {}
        self._stale: dict[_Scope, list[_Waiting]] = {}
        """Refused stale calls waiting for their replan, oldest first: scope -> (their
        roots, caller, plan id, model turn, handed heads, first gate line). The plan id
        is set when the refused call was itself a replan refused as stale again (its
        logical call's plan is written: the next call continues it). Sibling calls of one
        model turn in one scope each wait for their own replan."""
        self._spent: dict[_Scope, _Waiting] = {}
        """Logical calls whose one replan was blocked ``second_change``: scope -> the
        refused call's (roots, caller, plan id, turn). A call the gate takes as that
        replan again (the agent's reads are still the handed versions) continues it."""
        self.gateway_stale: dict[tuple[str, str], str] = {}
        """Calls the ``icore mcp`` gateway refused ``stale``, waiting for their replan:
        (agent, tool) -> plan id (:mod:`icore.integrations._refusals`)."""
        self._replans: set[tuple[str, str]] = set()
        """(agent, tool) of a replanning call whose run is recorded next."""
        self._before: list[Callable[[], None]] = []
        self._traced: list[dict[str, Any]] = []
        """``task`` and ``termination`` lines a framework's trace gave (``traced=True``)."""
        self.writer = secrets.token_hex(8)
        """This recorder's writer id in the lines' ``chain`` (16 hex digits, random: each
        writer of a file keeps its own chain; :mod:`icore._line_chain`)."""
        self._lock = threading.Lock()

    @property
    def succeeded(self) -> bool | None:
        """The run's outcome as the app judged it (True / False), or None if unknown."""
        return self._succeeded

    @succeeded.setter
    def succeeded(self, value: bool | None) -> None:
        """Set the outcome (before :meth:`write`).

        Raises:
            IntegrationError: not a bool or None (``"no"`` would read as a success).
        """
        self._succeeded = outcome(value)

    @contextmanager
    def active(self) -> Iterator[RunRecorder]:
        """Make this the recorder of fenced tools built without ``recorder=`` in the block.

        The framework recording contexts enter it (the OpenAI Agents SDK's ``recording``);
        it follows the block's context (threads and tasks started inside inherit it as
        Python's ``contextvars`` do).
        """
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    # ------------------------------------------------------------------ events
    def add(self, agent: str, kind: str, content: Any = "", *, at: float | None = None,
            **fields: Any) -> dict[str, Any]:
        """Add one event line (``kind`` as in the generic JSONL format); return it.

        Args:
            agent: who acted (added to the run's agents when it first speaks).
            kind: one of the JSONL format's kinds (task, plan, ledger, instruction,
                thought, output, tool_output, stall, termination).
            content: the message: a string, a framework message (its ``.content``) or
                any value (as JSON); cut to ``MAX_CONTENT_CHARS`` (20,000) characters.
            at: when it happened (``time.time()`` seconds; default: now). Events are kept
                in ``at`` order, so a hook that delivers late (CrewAI's threaded event
                bus) still lands where it happened.
            fields: extra keys kept in the line.

        Raises:
            IntegrationError: ``agent`` not a non-empty string, ``kind`` not one of the
                kinds, ``at`` not a finite number, or a ``terminates``/``pause``/``replan``
                field that is not a bool (a line the audit would refuse), named by
                ``argument``.
        """
        line_args(agent, kind, at)
        for flag in FLAGS:
            v = fields.get(flag)
            if v is not None and not isinstance(v, bool):
                raise IntegrationError(f"{flag} must be True or False, not "
                                       f"{type(v).__name__} {brief(v)}"[:160], argument=flag)
        line: dict[str, Any] = {"agent": agent, "kind": kind, "content": text_of(content)}
        extra = _LINE_FIELDS.get()
        if extra:  # the block's fields (line_fields), unless the line names them
            fields = {**extra, **{k: v for k, v in fields.items() if v is not None}}
        line.update({k: jsonable(v) for k, v in fields.items() if v is not None})
        when = time.time() if at is None else at
        with self._lock:
            self.agents.setdefault(str(agent), "")
            i = bisect.bisect_right(self._at, when)
            self._at.insert(i, when)
            self.events.insert(i, line)
        return line

    def task(self, content: Any, *, agent: str = "user", at: float | None = None,
             traced: bool = False) -> None:
        """The user's request that starts the run.

        ``traced``: a framework's trace gave it (a tracing processor); the same request
        as the newest ``task`` line is then not added again, nor the app's own ``task()``
        of a traced one (:func:`~icore.integrations._recorder_lines.add_once`).
        """
        add_once(self, "task", agent, content, traced=traced, at=at)

    def turn(self, agent: str, content: Any, *, at: float | None = None, **fields: Any
             ) -> None:
        """One agent turn (an LLM output, a node's result).

        A ``tool_calls`` field (``[{"name", "args", "id"?}, ...]``) also notes ``agent``
        as the caller of those tools (:meth:`caller`).
        """
        for c in fields.get("tool_calls") or ():
            if isinstance(c, Mapping):
                self.note_call(agent, str(c.get("name", "")), c.get("id"))
        self.add(agent, "output", content, at=at, **fields)

    def note_call(self, agent: str, tool: str, call_id: Any = None) -> None:
        """Note that ``agent`` asked for ``tool`` (call id ``call_id``, if known)."""
        with self._lock:
            if call_id:
                self._callers[f"id:{call_id}"] = str(agent)
            if tool:
                self._callers[f"tool:{tool}"] = str(agent)

    def caller(self, tool: str, call_id: Any = None) -> str | None:
        """The agent whose model turn asked for this call; None when no hook saw it.

        By the call's id, else the last agent that asked for ``tool``.
        """
        with self._lock:
            return (self._callers.get(f"id:{call_id}") if call_id else None) or \
                self._callers.get(f"tool:{tool}")

    def handoff(self, agent: str, to: str, content: Any = "", *, at: float | None = None
                ) -> None:
        """Control passes from ``agent`` to ``to`` (a handoff, the next speaker)."""
        self.add(agent, "instruction", content or f"handoff to {to}", at=at, to=str(to))

    def plan(self, agent: str, content: Any, **fields: Any) -> None:
        """A plan was written (or rewritten by a replan)."""
        self.add(agent, "plan", content, **fields)

    def tool_call(self, agent: str, tool: str, args: Mapping[str, Any] | None, result: Any,
                  *, error: bool = False, at: float | None = None, **fields: Any) -> None:
        """A tool ran (``error``: it failed or was refused) with its arguments and result.

        The run of a call that replanned a refused stale one (:meth:`gate`) is marked
        ``replanned: true``, as its plan and gate lines are.
        ``agent``/``tool`` no non-empty str or ``args`` no mapping: IntegrationError.
        """
        call_args(agent, tool, args)
        with self._lock:
            if (agent, tool) in self._replans:
                self._replans.discard((agent, tool))
                fields["replanned"] = True
        self.add(agent, "tool_output", result, at=at, tool=tool,
                 args=dict(args) if args is not None else None, exitcode=1 if error else 0,
                 **fields)

    def gate(self, agent: str | None, tool: str, result: ActionResult, *,
             lookup: Lookup | None = None, call_id: Any = None,
             args: Mapping[str, Any] | None = None, owner: str | None = None,
             turn: Hashable | None = None, refused: str | None = None) -> str:
        """Every gate decision of one protected call, its replan, and a block if any.

        Writes the call's PlanFence lines too (:meth:`lineage`): its decisions, each with
        its frontier, heads and validation point, and the records they cite.

        Args:
            agent: who called the tool; None: :meth:`caller` (the agent whose model turn
                asked for it), else ``"executor"``.
            tool: the tool's name.
            result: the fence's result.
            lookup: reads the records the roots cite (the executor's replica, e.g.
                ``Fence.install.get``); without it only the decisions' own fresh
                records are written.
            call_id: the framework's tool-call id, to find the calling agent.
            args: the model's arguments (default: the ones the call ran or was refused
                with).
            owner: whose replan the call is (the workspace agent that holds the fence's
                one-replan ticket); default: the calling agent. A refused call and the
                next call of the same tool on the same facts by the same owner are one
                logical call, its replan, whichever framework agent makes each of them
                (a handoff between two SDK agents sharing one fenced tool); every event
                still names the agent that made it.
            turn: the model turn the call came from (the workspace's
                :attr:`~icore.workspace.Call.turn`). A refused stale call waits for its
                replan: the first later call in its scope from another turn (or with
                no turn known) derived from the versions it was handed (a call made from
                facts read again after another change is a fresh plan). A sibling call of
                the same turn is never its replan.
            refused: why an authorized call did not run (e.g. ``approval_changed``: the
                human approved another request); its blocked tool output names it.

        Returns:
            The agent the call was attributed to.
        """
        return record_gate(self, agent, tool, result, lookup=lookup, call_id=call_id,
                           args=args, owner=owner, turn=turn, refused=refused)

    def _new_plan_id(self, tool: str) -> str:
        """A fresh plan id for one logical call of ``tool`` (``<tool>#<n>``)."""
        with self._lock:
            n = self._plan_ids[tool] = self._plan_ids.get(tool, 0) + 1
        return f"{tool}#{n}"

    def next_task(self, tool: str) -> str:
        """The ``task`` name of the next protected call of ``tool``: ``<tool>-<n>``."""
        with self._lock:
            n = self._calls[tool] = self._calls.get(tool, 0) + 1
        return f"{tool}-{n}"

    def add_lines(self, lines: Sequence[dict[str, Any]]) -> None:
        """Append PlanFence lines (plan, decision, gate) as one step, under the lock."""
        with self._lock:
            self.planfence.extend(lines)

    def lineage(self, tool: str, decisions: Sequence[GateDecision], *,
                lookup: Lookup | None = None, refused: str | None = None,
                failed: str | None = None, may_have_run: bool | None = None) -> str:
        """Write one protected call's PlanFence lines; return its ``task`` name.

        The records first (each record once per run: roots and their ancestors as far as
        ``lookup`` holds them, the heads and fresh records of every decision), then one
        decision line per gate decision, grouped by ``task`` = ``<tool>-<n>`` (and a
        refusal line when ``refused``; :func:`icore.integrations._call_lines.lineage_lines`;
        ``failed``: the error of an authorized tool that then failed, on its last decision,
        with ``may_have_run``: whether that failure leaves the call's effect open; every
        decision line carries its digest, #29).
        """
        task = self.next_task(tool)
        recs = lineage_records(decisions, lookup)
        with self._lock:
            self.planfence.extend(lineage_lines(recs, decisions, task, refused,
                                                self._records, failed, may_have_run))
        return task

    def finish(self, agent: str, answer: Any, *, at: float | None = None,
               traced: bool = False) -> dict[str, Any]:
        """The run's final answer; returns its line (for :meth:`reopen`).

        ``traced``: a framework hook recorded the end; one run, one end: the app's
        ``finish()`` of the same answer returns that line and adds nothing
        (:func:`~icore.integrations._recorder_lines.add_once`).
        """
        return add_once(self, "termination", agent, answer, traced=traced, at=at,
                        final_answer=text_of(answer))

    def before_output(self, refresh: Callable[[], None]) -> None:
        """Call ``refresh()`` before the lines are produced (:meth:`jsonl`, :meth:`write`).

        For a line whose text depends on what is recorded after it (the Agents SDK
        processor's note names what the trace still lacks when it is written).
        """
        with self._lock:
            self._before.append(refresh)

    def remove(self, line: Mapping[str, Any]) -> bool:
        """Remove the event line ``line`` (as returned by :meth:`add`); False if unknown."""
        with self._lock:
            i = next((i for i, ev in enumerate(self.events) if ev is line), None)
            if i is not None:
                del self.events[i], self._at[i]
        return i is not None

    def reopen(self, line: Mapping[str, Any]) -> None:
        """A recorded end was a pause: turn the :meth:`finish` line ``line`` into one.

        The run resumed after it, so it becomes a ``thought`` with ``pause: true`` (its
        answer kept in the content); the resumed run records its own end. Unknown lines
        are ignored.
        """
        with self._lock:
            for ev in self.events:
                if ev is line and ev.get("kind") == "termination":
                    ev["kind"] = "thought"
                    ev["pause"] = True
                    ev.pop("final_answer", None)
                    ev["content"] = f"paused (the run was resumed later): {ev['content']}"
                    return

    # ------------------------------------------------------------------ outputs
    def header(self) -> dict[str, Any]:
        """The ``{"run": {...}}`` header line, with the writer marker (#29)."""
        with self._lock:
            agents = dict(self.agents)
        given = {"question": self.question or None, "orchestrator": self.orchestrator or None,
                 "ground_truth": self.ground_truth, "succeeded": self.succeeded}
        return marked_header({"id": self.run_id, "agents": agents, **{
            k: v for k, v in given.items() if v is not None}}, self.writer)

    def jsonl(self, *, after: Sequence[Mapping[str, Any]] = ()) -> str:
        """The run in the generic JSONL format.

        The header first, then the PlanFence lines, then one event per line, then
        ``after`` (the MCP gateway's PlanFence lines). Every line carries its whole-line
        digest (:func:`icore._line_seal.sealed`: model turns and their ``tool_calls``
        too, QA qa-new14 S3) and its link in this recorder's chain (:attr:`writer`),
        every end line the chain's seal (:func:`icore._line_chain.chain_lines`, #29).
        """
        with self._lock:
            before = list(self._before)
        for refresh in before:
            refresh()
        with self._lock:
            events = list(self.events)
            planfence = list(self.planfence)
        lines = chain_lines(self.writer, [sealed(x) for x in (self.header(), *planfence,
                                                              *events, *after)])
        return "".join(strict_dumps(x, sort_keys=True) + "\n" for x in lines)

    def write(self, path: str | Path, *, overwrite: bool = False) -> Path:
        r"""Write :meth:`jsonl` to ``path`` (``icore audit PATH`` reads it); return the path.

        Nothing is overwritten unless ``overwrite=True``: a trace icore wrote there before
        (the folder's ``.icore-files`` ledger: a rerun, a concurrent run) is moved aside
        to the first free ``<stem>-1<suffix>``, ``-2`` ... (as the MCP gateway keeps an
        earlier run's trace); a user's file (a source file, another trace) is refused,
        never lost to a mistyped path. The written file is listed in the ledger. Missing
        parent folders are created (as ``icore audit --json`` does).

        Raises:
            IntegrationError: ``path`` is empty or not a path, holds a surrogate (a name
                of bytes that are not UTF-8, ``'run\udc80.jsonl'``: refused as the MCP
                gateway's ``trace`` is, before anything is written), names a folder, a
                device or a FIFO, holds a file icore did not write (or one changed
                since; without ``overwrite``), or cannot be written (the message names the path and
                the reason; ``fix`` says what to do).
        """
        return write_run(path, self.jsonl, overwrite=overwrite)

    def trace(self) -> Trace:
        """Parse the recorded lines with the JSONL importer (what ``icore audit`` sees).

        Raises:
            AdapterError: nothing was recorded.
        """
        from icore.adapters import parse_jsonl
        return parse_jsonl(self.jsonl(), file=f"<{self.run_id}>", run_id=self.run_id)

    def audit(self) -> AuditResult:
        """Audit the recorded run (iCORE-Audit over X built from :meth:`trace`)."""
        from icore.adapters import audit_trace
        return audit_trace(self.trace())

    def kinds(self) -> list[str]:
        """The ``kind`` of every event so far, in order (handy in tests and examples)."""
        with self._lock:
            return [str(e["kind"]) for e in self.events]
