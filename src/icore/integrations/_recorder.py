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
plan written or replan    ``plan``         ``roots``
gate decision             ``thought``      ``gate`` (outcome, reason, tool, replanned)
tool result / error       ``tool_output``  ``tool``, ``args``, ``exitcode`` 0 / 1
blocked protected call    ``tool_output``  ``exitcode`` 1, ``blocked`` true
final answer              ``termination``  ``final_answer``
========================  ===============  ============================================
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icore.fence import ActionResult

if TYPE_CHECKING:  # imported when used: the adapters package is heavy (MCP gateway start-up)
    from icore.adapters import AuditResult, Trace

MAX_CONTENT_CHARS = 20_000
"""Longer contents (a tool's raw output) are cut to this many characters in the trace."""


def _text(value: Any) -> str:
    inner = getattr(value, "content", None)  # a framework message object: its text
    if isinstance(inner, str):
        value = inner
    if isinstance(value, str):
        s = value
    else:
        try:
            s = json.dumps(value, default=str, sort_keys=True)
        except (TypeError, ValueError):
            s = str(value)
    return s if len(s) <= MAX_CONTENT_CHARS else s[:MAX_CONTENT_CHARS] + "...[cut]"


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


class RunRecorder:
    """Collects one run's events as generic-JSONL lines (thread-safe).

    Args:
        run_id: the run's id (the report's name).
        question: the task statement (default: the first ``task`` event's content).
        agents: agent id -> description (agents that speak are added anyway).
        orchestrator: the agent that routes work, if any.
        ground_truth: the expected answer, if known.

    Example::

        rec = RunRecorder("trip-17")
        ... run the app with the integration's hook given ``rec`` ...
        rec.write("trip-17.jsonl")       # icore audit trip-17.jsonl
        rec.audit().summary()
    """

    def __init__(self, run_id: str = "run", *, question: str = "",
                 agents: Mapping[str, str] | None = None, orchestrator: str | None = None,
                 ground_truth: str | None = None) -> None:
        self.run_id = run_id
        self.question = question
        self.agents: dict[str, str] = dict(agents or {})
        self.orchestrator = orchestrator
        self.ground_truth = ground_truth
        self.events: list[dict[str, Any]] = []
        self._at: list[float] = []
        self.fenced_tools: set[str] = set()
        """Tools whose calls a :class:`~icore.integrations.FenceGuard` records itself
        (framework hooks skip them, so no call is recorded twice)."""
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ events
    def add(self, agent: str, kind: str, content: Any = "", *, at: float | None = None,
            **fields: Any) -> dict[str, Any]:
        """Add one event line (``kind`` as in the generic JSONL format); return it.

        Args:
            agent: who acted (added to the run's agents when it first speaks).
            kind: one of the JSONL format's kinds (task, plan, ledger, instruction,
                thought, output, tool_output, stall, termination).
            content: the message: a string, a framework message (its ``.content``) or
                any value (as JSON); cut to :data:`MAX_CONTENT_CHARS` characters.
            at: when it happened (``time.time()`` seconds; default: now). Events are kept
                in ``at`` order, so a hook that delivers late (CrewAI's threaded event
                bus) still lands where it happened.
            fields: extra keys kept in the line.
        """
        line: dict[str, Any] = {"agent": str(agent), "kind": kind, "content": _text(content)}
        line.update({k: _jsonable(v) for k, v in fields.items() if v is not None})
        when = time.time() if at is None else at
        with self._lock:
            self.agents.setdefault(str(agent), "")
            i = bisect.bisect_right(self._at, when)
            self._at.insert(i, when)
            self.events.insert(i, line)
        return line

    def task(self, content: Any, *, agent: str = "user", at: float | None = None) -> None:
        """The user's request that starts the run."""
        self.add(agent, "task", content, at=at)

    def turn(self, agent: str, content: Any, *, at: float | None = None, **fields: Any
             ) -> None:
        """One agent turn (an LLM output, a node's result)."""
        self.add(agent, "output", content, at=at, **fields)

    def handoff(self, agent: str, to: str, content: Any = "", *, at: float | None = None
                ) -> None:
        """Control passes from ``agent`` to ``to`` (a handoff, the next speaker)."""
        self.add(agent, "instruction", content or f"handoff to {to}", at=at, to=str(to))

    def plan(self, agent: str, content: Any, **fields: Any) -> None:
        """A plan was written (or rewritten by a replan)."""
        self.add(agent, "plan", content, **fields)

    def tool_call(self, agent: str, tool: str, args: Mapping[str, Any] | None, result: Any,
                  *, error: bool = False, at: float | None = None, **fields: Any) -> None:
        """A tool ran (``error``: it failed or was refused) with its arguments and result."""
        self.add(agent, "tool_output", result, at=at, tool=tool,
                 args=dict(args) if args is not None else None, exitcode=1 if error else 0,
                 **fields)

    def gate(self, agent: str, tool: str, result: ActionResult) -> None:
        """Every gate decision of one protected call, its replan, and a block if any."""
        for d in result.decisions:
            self.add(agent, "thought", f"gate {d.outcome.value}/{d.reason.value} for {tool}",
                     gate={"outcome": d.outcome.value, "reason": d.reason.value,
                           "tool": tool, "replanned": d.replanned})
        if result.replanned and len(result.decisions) > 1:
            self.plan(agent, f"replan for {tool}: {_text(dict(result.args))}",
                      roots=list(result.roots))
        if not result.executed:
            self.tool_call(agent, tool, result.args, f"BLOCKED: {result.final.reason.value}: "
                           f"{result.detail}", error=True, blocked=True)

    def finish(self, agent: str, answer: Any, *, at: float | None = None) -> None:
        """The run's final answer."""
        self.add(agent, "termination", answer, at=at, final_answer=_text(answer))

    # ------------------------------------------------------------------ outputs
    def header(self) -> dict[str, Any]:
        """The ``{"run": {...}}`` header line."""
        with self._lock:
            agents = dict(self.agents)
        run: dict[str, Any] = {"id": self.run_id, "agents": agents}
        if self.question:
            run["question"] = self.question
        if self.orchestrator:
            run["orchestrator"] = self.orchestrator
        if self.ground_truth is not None:
            run["ground_truth"] = self.ground_truth
        return {"run": run}

    def jsonl(self) -> str:
        """The run in the generic JSONL format (header first, one event per line)."""
        with self._lock:
            events = list(self.events)
        lines = [self.header(), *events]
        return "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines)

    def write(self, path: str | Path) -> Path:
        """Write :meth:`jsonl` to ``path`` (``icore audit PATH`` reads it); return the path.

        Raises:
            OSError: the file cannot be written.
        """
        p = Path(path)
        p.write_text(self.jsonl(), encoding="utf-8")
        return p

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
