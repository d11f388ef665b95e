"""Recorded LangGraph runs: a node wrapper and a callback handler (icore Sec. 3).

Both write a :class:`~icore.integrations.RunRecorder`, the trace ``icore audit`` reads.

* :func:`~icore.integrations.langgraph.recorded_node` (``_recorded_node``) wraps a
  node function.
* :class:`RecordingHandler` is a LangChain callback handler: pass it in
  ``config={"callbacks": [handler]}`` and every node step, model turn (with its tool
  calls and their arguments), tool result and handoff is recorded under the agent that
  produced it (a ``create_agent``'s or ``create_react_agent``'s ``name=``, not its
  inner ``model`` / ``agent`` / ``tools`` or middleware nodes), a pause at
  ``interrupt()`` as a pause, a call answered without its tool running (a human's
  rejection through ``HumanInTheLoopMiddleware``) as the calling agent's refused call,
  and the end of the run once (its last message as the final answer, so a clean run has
  its terminal marker); prebuilt graphs need no wrapping. A fenced tool built without
  ``recorder=`` records into the handler's recorder, so it never vanishes from the
  trace.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from asyncio import CancelledError
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage
from langchain_core.outputs import LLMResult
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.graph import END
from langgraph.types import Command
from pydantic import ValidationError

from icore.integrations import RunRecorder, read_refusal
from icore.integrations._arg_problems import invalid_args_message, refused_args
from icore.integrations._recorder import line_fields
from icore.integrations._recorder_arg import check_recorder
from icore.integrations._refusals import record_tool_result, refused_call, replan_refused
from icore.integrations._tool_failed import describe
from icore.integrations._trace_data import plain_data
from icore.integrations.langgraph._answers import HeardAnswers, answer_text, approval_id
from icore.integrations.langgraph._branches import BranchRuns
from icore.integrations.langgraph._reviewed import human_decisions, paired
from icore.workspace import REJECTED

_FENCED_NAMES: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
"""The names of the live :func:`~icore.integrations.langgraph.fenced_tool` tools: a human's
"no" to one (``HumanInTheLoopMiddleware``) is a blocked protected action even when the
recorder has seen none of its calls yet (issue 28)."""


def mark_fenced(name: str, tool: Any) -> None:
    """Remember that ``tool`` (alive) is the fenced tool named ``name``."""
    _FENCED_NAMES[name] = tool

def _writes(out: Any) -> tuple[list[str], list[str]]:
    """(keys written, handoff targets: ``goto`` but ``END``) of a node's return value."""
    items = out if isinstance(out, list | tuple) else [out]
    wrote: set[str] = set()
    goto: list[str] = []
    for o in items:
        if isinstance(o, Command):
            up = o.update
            if isinstance(up, Mapping):
                wrote.update(str(k) for k in up)
            elif isinstance(up, list | tuple):
                wrote.update(str(k) for k, _ in up)
            goto += _handoffs(o)
        elif isinstance(o, Mapping):
            wrote.update(str(k) for k in o)
    return sorted(wrote), goto


def _text_args(args: Any) -> str:
    """A call's arguments as JSON text (data, not Python reprs)."""
    return json.dumps(plain_data(args), sort_keys=True, default=str)


def _final(outputs: Any) -> Any:
    """The run's final answer: the last message's text, else the output itself."""
    msgs = outputs.get("messages") if isinstance(outputs, Mapping) else None
    if isinstance(msgs, list) and msgs:
        return _content(msgs[-1])
    return outputs


def _content(m: Any) -> str:
    c = getattr(m, "content", m)
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in c)
    return json.dumps(plain_data(c), sort_keys=True, default=str)


def _tool_messages(out: Any) -> Iterator[ToolMessage]:
    """The ``ToolMessage`` objects a node's output writes to ``messages``."""
    for o in out if isinstance(out, list | tuple) else [out]:
        up = o.update if isinstance(o, Command) else o
        msgs = up.get("messages") if isinstance(up, Mapping) else None
        for m in msgs if isinstance(msgs, list | tuple) else [msgs]:
            if isinstance(m, ToolMessage):
                yield m


def _goto(cmd: Command[Any]) -> list[str]:
    targets = cmd.goto if isinstance(cmd.goto, list | tuple) else [cmd.goto]
    return [str(getattr(t, "node", t)) for t in targets if t]


def _handoffs(cmd: Command[Any]) -> list[str]:
    """The agents a ``Command`` hands off to: its ``goto`` targets but ``END``.

    ``Command(goto=END)`` ends the run (its end is recorded by the graph run's end); it is
    no instruction to an agent ``__end__`` (QA qa-new15c S3: that phantom agent held open
    work that lowered astab and cq).
    """
    return [g for g in _goto(cmd) if g != END]


def _command_text(cmd: Command[Any]) -> str:
    """A ``Command`` a tool returned, as data: where it goes and what it updates."""
    up = cmd.update
    keys = sorted(str(k) for k in up) if isinstance(up, Mapping) else \
        sorted({str(k) for k, _ in up}) if isinstance(up, list | tuple) else []
    return json.dumps({"command": {"goto": _goto(cmd), "graph": cmd.graph, "update": keys}},
                      sort_keys=True)


_AGENT_STEPS = frozenset({"agent", "tools", "model", "pre_model_hook", "post_model_hook",
                          "generate_structured_response"})
"""Node names of LangGraph's prebuilt agent graphs (``create_react_agent``): steps of the
agent, not agents; their graph (its ``name=``) is the agent."""

_HOOK_NODE = re.compile(r".+\.(?:before|after)_[a-z][a-z_]*")
"""A middleware hook's node in LangChain's ``create_agent`` graph
(``<middleware name>.before_agent``, ``.before_model``, ``.after_model``,
``.after_agent``, any middleware's): a step of the agent, like its ``model`` node."""

_CREATE_AGENT = "langchain_create_agent"
"""The ``ls_integration`` metadata ``create_agent`` gives every run of its graph."""

_UNNAMED_AGENT = "agent"
"""The agent a ``create_agent`` graph built without ``name=`` and run alone is."""

_DEFAULT_GRAPH = "LangGraph"
"""The name LangGraph gives a compiled graph built without ``name=``."""


def _is_step(node: str) -> bool:
    """Whether graph node ``node`` is a step of an agent graph rather than an agent."""
    return node in _AGENT_STEPS or _HOOK_NODE.fullmatch(node) is not None


@dataclass(slots=True)
class _Chain:
    parent: UUID | None
    name: str
    node: str | None
    agent: str | None = None
    """The agent LangChain names in the run's metadata (``lc_agent_name``)."""
    create_agent: bool = False
    """The run is part of a ``create_agent`` graph (its ``ls_integration`` metadata)."""


def stopped(recorder: RunRecorder, agent: str, error: BaseException) -> None:
    """Record why a graph run has no end: it stopped on ``error`` (QA qa-new16 #6).

    The graph's own failure (Ctrl-C, an exception out of a node, a cancelled task) is a
    ``thought`` "the run stopped: <Type>: <message>" with ``error`` (and ``cancelled:
    true`` for Ctrl-C or a cancel), as the other integrations write; ``icore audit``
    counts the run not ended.
    """
    text = describe(error)
    recorder.add(agent, "thought", f"the run stopped: {text}", error=text,
                 cancelled=isinstance(error, KeyboardInterrupt | CancelledError) or None)


class RecordingHandler(BaseCallbackHandler):
    """A LangChain callback handler recording a LangGraph run into ``recorder``.

    Node steps (``langgraph_node`` runs), model turns with their tool calls (each call
    noted with the agent that asked for it, so a fenced tool's gate events go to that
    agent), tool results (``status="error"`` ones as errors), handoffs (a ``Command``'s
    ``goto``, from a node or a tool, ``graph=Command.PARENT`` included) and the end of
    the run: the graph run's last message is recorded as the final answer (a
    ``termination`` line, attributed to the last agent that spoke), once per run.

    A run paused at ``interrupt()`` is not an end: the pause is recorded as a
    ``thought`` with ``pause: true`` and the interrupts' values, and the resumed run
    (``Command(resume=...)``, no new task) records the real end when it finishes. A run
    failing records no end.

    The agent of an event (icore Sec. 3: every event is attributed to the agent that
    produced it): the ``lc_agent_name`` LangChain's ``create_agent(..., name=)`` puts on
    every run of its graph (its ``model`` and ``tools`` nodes and its middleware nodes,
    ``<middleware>.before_agent`` / ``.before_model`` / ``.after_model`` /
    ``.after_agent``, are its steps); else the graph node the event runs in; when that
    node is a step of an agent graph (``create_react_agent``'s ``agent`` / ``tools``
    nodes, a node named ``<middleware>.before_*`` / ``.after_*``, any node of a
    ``create_agent`` graph), the agent graph itself: its ``name=`` (a subgraph's name,
    or the invoked graph's), else the node that hosts it (an unnamed ``create_agent``
    invoked alone: ``agent``). A tool call goes to the agent whose model turn asked for
    it (by the call's id). Fenced tools record their own gate decisions and calls (with
    or without :func:`fenced_tool` ``recorder=``: without it they use this handler's
    recorder), so their tool events are skipped here. A call a node answered without
    running its tool (``HumanInTheLoopMiddleware``'s rejection) is recorded from the
    node's ``ToolMessage`` (:meth:`_answered`).

    Args:
        recorder: where the run goes.
        nodes: record node steps (default True).

    Raises:
        IntegrationError: ``recorder`` is not a RunRecorder (it would record nothing).
    """

    raise_error = False
    run_inline = True

    def __init__(self, recorder: RunRecorder, *, nodes: bool = True) -> None:
        check_recorder(recorder, where="RecordingHandler")
        self.recorder = recorder
        self.nodes = nodes
        self._runs: dict[UUID, tuple[str, Any]] = {}
        self._chains: dict[UUID, _Chain] = {}
        self._fenced: set[UUID] = set()
        self._asked: dict[str, tuple[str, Any]] = {}
        """Tool calls model turns asked for that no tool run started yet: id -> (name,
        arguments)."""
        self._root: UUID | None = None
        self._paused: list[tuple[str, Any]] = []
        self._questions: list[tuple[str, Any, Any]] = []
        self._ended: dict[str, Any] | None = None
        self._last_agent = "graph"
        self._branches = BranchRuns()  # the parallel branch of each run (lines name it)
        self._lock = threading.Lock()
        self.heard_answers = HeardAnswers()
        """The ``approval=True`` answers recorded in the resume being seen."""

    def _agent(self, start: UUID | None, metadata: Mapping[str, Any] | None) -> str:
        """The agent an event under chain run ``start`` belongs to (see the class doc)."""
        md = metadata or {}
        if md.get("lc_agent_name"):
            return str(md["lc_agent_name"])
        with self._lock:
            first = self._chains.get(start) if start is not None else None
            if first is not None and first.agent:  # a chain's end has no metadata
                return first.agent
            r, node = start, None
            while r is not None and (c := self._chains.get(r)) is not None:
                if c.node is not None and c.name == c.node:
                    node = c
                    break
                r = c.parent
            host = self._chains.get(node.parent) if node and node.parent else None
        if node is None or node.node is None:
            return str(md.get("langgraph_node") or "graph")
        if not (node.create_agent or _is_step(node.node)) or host is None:
            return node.node
        if host.name and host.name != _DEFAULT_GRAPH:
            return host.name
        return host.node or (_UNNAMED_AGENT if node.create_agent else node.node)

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *,
                       run_id: UUID, parent_run_id: UUID | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A chain starts: remembered, as agents are found by the run tree.

        A node's own run is a node step; the graph run's input is the task (a resume's
        is not).
        """
        md = metadata or {}
        node = md.get("langgraph_node")
        name = str(kwargs.get("name") or "")
        self._branches.started(run_id, md)
        with self._lock:
            parent = self._chains.get(parent_run_id) if parent_run_id else None
            self._chains[run_id] = _Chain(
                parent_run_id, name, str(node) if node is not None else None,
                str(md["lc_agent_name"]) if md.get("lc_agent_name") else None,
                md.get("ls_integration") == _CREATE_AGENT)
        if parent_run_id is None:  # the graph run itself: its input is the task
            with self._lock:
                self._root = run_id
                self._paused = []
            msgs = inputs.get("messages") if isinstance(inputs, Mapping) else None
            first = (msgs[0] if isinstance(msgs, list) else msgs) if msgs else None
            if isinstance(inputs, Command) or (first is None and not inputs):
                # a resume continues the run: no new task; an end recorded before it was
                # a pause (a static breakpoint, ``interrupt_before``, raises nothing)
                with self._lock:
                    ended, self._ended = self._ended, None
                if ended is not None:
                    self.recorder.reopen(ended)
                if isinstance(inputs, Command):
                    self._decided(inputs.resume)
                return
            with self._lock:  # a new run: no resume's answer stands
                self._ended, self.heard_answers.resume = None, None
            self.recorder.task(_content(first) if first is not None else inputs)
        # a node's own run (not its inner runnables, not the subgraph run it hosts)
        if node is not None and name == node and not (
                parent is not None and parent.name == name and parent.node == name):
            with self._lock:
                self._runs[run_id] = ("node", str(node))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A node ends: record what it wrote; the graph run ends: record its end.

        The end is the final answer, or the pause when it stopped at ``interrupt()``.
        A node of a parallel branch records its lines with ``branch``.
        """
        with line_fields(branch=self._branches.ended(run_id)):
            self._chain_end(outputs, run_id, kwargs)

    def _chain_end(self, outputs: Any, run_id: UUID, kwargs: Mapping[str, Any]) -> None:
        agent = self._agent(run_id, kwargs.get("metadata"))
        with self._lock:
            entry = self._runs.pop(run_id, None)
            self._chains.pop(run_id, None)
            root = run_id == self._root
            if root:
                self._root = None
                paused, self._paused = self._paused, []
            last = self._last_agent
        if root:
            if paused:
                self._pause(paused)
            else:
                line = self.recorder.finish(last, _final(outputs))
                with self._lock:
                    self._ended = line
            return
        if entry is None:
            return
        node = str(entry[1])
        self._answered(agent, node, outputs)
        if not self.nodes:
            return
        with self._lock:
            self._last_agent = agent
        wrote, goto = _writes(outputs)
        self.recorder.add(agent, "thought",
                          f"node {node} wrote {', '.join(wrote) or 'nothing'}",
                          node=node, wrote=wrote)
        for g in goto:
            self.recorder.handoff(agent, g, f"{agent} -> {g}")

    def _answered(self, agent: str, node: str, outputs: Any) -> None:
        """Record the tool calls node ``node`` answered without running their tool.

        A ``ToolMessage`` in the node's output for a call no tool run answered (a call
        ``HumanInTheLoopMiddleware`` was told to reject, or answered for the tool; a
        call ``ToolNode`` refused, e.g. an unknown tool): the call's tool output, under
        the agent whose model turn asked for it, with ``ran: false``; ``status="error"``
        is a refusal (exit code 1). A call answered in the tool's place (the human's
        ``respond`` decision: ``status="success"``, the human's text) has no exit code
        (nothing ran) and is preceded by a ``thought`` saying "<tool> did not run: a
        human answered in its place", so the audit and the report name it. A harness
        message's ``lc_source`` / ``lc_data["decision"]`` (the human's decision) are
        kept as ``source`` / ``decision``; ``answered_by`` names the node. Calls whose
        tool ran are recorded by their run (once).
        """
        with self._lock:
            found = [(m, self._asked.pop(str(m.tool_call_id)))
                     for m in _tool_messages(outputs) if str(m.tool_call_id) in self._asked]
        for m, (name, args) in found:
            extra = m.additional_kwargs or {}
            data = extra.get("lc_data")
            decision = data.get("decision") if isinstance(data, Mapping) else None
            who = self.recorder.caller(name, m.tool_call_id) or agent
            tool = m.name or name
            source = str(extra["lc_source"]) if extra.get("lc_source") else None
            said = str(decision) if decision is not None else None
            if m.status == "error" and said == "reject" and (
                    tool in self.recorder.fenced_tools or tool in _FENCED_NAMES):
                # a human's "no" to a fenced call: a protected action, blocked before its
                # gate (the replan of a stale call when one waits: counted as one)
                replan_refused(self.recorder, who, tool, args if isinstance(
                    args, Mapping) else None)
                refused_call(self.recorder, who, tool, args, _content(m), reason=REJECTED,
                             policy="approval", answered_by=node, ran=False, source=source,
                             decision=said)
                continue
            if m.status == "error":  # refused: exit code 1, as a fenced tool's block
                self.recorder.tool_call(who, tool, args, _content(m), error=True,
                                        answered_by=node, ran=False, source=source,
                                        decision=said)
                continue
            # answered in the tool's place (``respond``: the human's answer is what the
            # model reads): the tool did not run, so the line has no exit code, and a
            # note says so where the audit and the report show it
            self.recorder.add(who, "thought", f"{tool} did not run: "
                              f"{'a human' if said == 'respond' else node} answered in its "
                              f"place ({node}{f', decision {said}' if said else ''})",
                              tool=tool, ran=False, answered_by=node, decision=said)
            self.recorder.add(who, "tool_output", _content(m), tool=tool,
                              args=dict(args) if isinstance(args, Mapping) else args,
                              ran=False, answered_by=node, source=source, decision=said)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A chain failed: an ``interrupt()`` is the run's pause, else :func:`stopped`."""
        self._branches.ended(run_id)
        agent = self._agent(run_id, kwargs.get("metadata"))
        if isinstance(error, GraphInterrupt):  # seen by every chain it passes: once each
            items = error.args[0] if error.args and isinstance(error.args[0],
                                                               list | tuple) else ()
            with self._lock:
                seen = {getattr(i, "id", None) for _, i in self._paused}
                for i in items:
                    if getattr(i, "id", None) not in seen:
                        seen.add(getattr(i, "id", None))
                        self._paused.append((agent, i))
        with self._lock:
            self._runs.pop(run_id, None)
            self._chains.pop(run_id, None)
            root = run_id == self._root
            if root:
                self._root = None
                paused, self._paused = self._paused, []
        if root and paused:
            self._pause(paused)
        elif root and not isinstance(error, GraphBubbleUp):  # Ctrl-C, a raise, a cancel
            stopped(self.recorder, agent, error)

    def _decided(self, resume: Any) -> None:
        """Record the human's answer that resumes the run, a decision per call asked.

        ``HumanInTheLoopMiddleware``'s ``approve`` / ``edit`` / ``reject`` / ``respond``
        per tool call (:func:`human_decisions`), under the agent that paused, as a
        ``thought`` with ``answered_by: "human"``, ``decision``, ``tool`` and ``args``;
        an answer naming another approval request's id is ``decision: "unmatched"``
        (neither: the audit links it to no call). The answers to icore's
        ``approval=True`` questions are noted in :attr:`heard_answers`: the fenced call
        reading one writes it only when no handler that saw the pause did (a new handler
        per request, QA qa-new17c #1).
        """
        with self._lock:
            asked, self._questions = self._questions, []
        got = paired([(i, v) for _, i, v in asked], resume)
        self.heard_answers.heard([r for _, v, _ in got if (r := approval_id(v)) is not None],
                                 resume)
        if not asked:
            return
        for tool, args, said in human_decisions([(i, v) for _, i, v in asked], resume):
            text = answer_text(tool, _text_args(args) if tool else None, said)
            self.recorder.add(asked[0][0], "thought", text,
                              answered_by="human", decision=said, tool=tool, args=args)

    def _pause(self, paused: list[tuple[str, Any]]) -> None:
        """Record a pause at ``interrupt()``: who paused and the question(s) asked."""
        values = [{"id": getattr(i, "id", None), "value": plain_data(getattr(i, "value", i))}
                  for _, i in paused]
        with self._lock:  # the resume's answers are paired with these
            self._questions = [(paused[0][0], v["id"], v["value"]) for v in values]
        asked = "; ".join(_content(v["value"]) for v in values)
        self.recorder.add(paused[0][0], "thought",
                          f"paused at interrupt(), waiting for a human: {asked}",
                          pause=True, interrupts=values)

    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: Any, *,
                            run_id: UUID, metadata: dict[str, Any] | None = None,
                            **kwargs: Any) -> None:
        """A model call starts: remember which agent makes it."""
        agent = self._agent(kwargs.get("parent_run_id"), metadata)
        self._branches.started(run_id, metadata)
        with self._lock:
            self._runs[run_id] = ("model", agent)

    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *,
                     run_id: UUID, metadata: dict[str, Any] | None = None,
                     **kwargs: Any) -> None:
        """A completion-model call starts."""
        agent = self._agent(kwargs.get("parent_run_id"), metadata)
        self._branches.started(run_id, metadata)
        with self._lock:
            self._runs[run_id] = ("model", agent)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """A model turn: its text and tool calls (names and arguments)."""
        with line_fields(branch=self._branches.ended(run_id)):
            self._llm_end(response, run_id)

    def _llm_end(self, response: LLMResult, run_id: UUID) -> None:
        with self._lock:
            entry = self._runs.pop(run_id, None)
        agent = entry[1] if entry else "model"
        with self._lock:
            self._last_agent = str(agent)
        for gens in response.generations:
            for g in gens:
                msg = getattr(g, "message", None)
                calls = [{"name": c["name"], "args": c["args"], "id": c.get("id")}
                         for c in (getattr(msg, "tool_calls", None) or [])]
                with self._lock:  # until a tool run (or a node) answers each call
                    self._asked.update((str(c["id"]), (str(c["name"]), c["args"]))
                                       for c in calls if c["id"])
                text = _content(msg) if msg is not None else g.text
                asked = ", ".join(f"{c['name']}({_text_args(c['args'])})" for c in calls)
                self.recorder.turn(agent, text or f"calls {asked}", tool_calls=calls or None)

    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *,
                      run_id: UUID, metadata: dict[str, Any] | None = None,
                      inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A tool starts: record it, under the agent whose model turn asked for it.

        Fenced tools, and the tool a fenced one wraps, are recorded by their guard instead.
        """
        with self._lock:  # the call's tool runs: its run is its record
            self._asked.pop(str(kwargs.get("tool_call_id")), None)
        self._branches.started(run_id, metadata)
        fenced = bool((metadata or {}).get("planfence"))
        if not fenced and kwargs.get("parent_run_id") in self._fenced:
            with self._lock:
                self._fenced.add(run_id)
            return
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        agent = self.recorder.caller(name, kwargs.get("tool_call_id")) or self._agent(
            kwargs.get("parent_run_id"), metadata)
        with self._lock:  # a fenced call is its guard's to record, unless never reached
            if fenced:
                self._fenced.add(run_id)
            self._runs[run_id] = ("fenced" if fenced else "tool", (agent, name, inputs))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool result.

        A ``ToolMessage`` with ``status="error"`` is an error; a ``Command`` with a
        ``goto`` is a handoff.
        """
        with line_fields(branch=self._branches.ended(run_id)):
            self._tool_end(output, run_id)

    def _tool_end(self, output: Any, run_id: UUID) -> None:
        with self._lock:
            entry = self._runs.pop(run_id, None)
            self._fenced.discard(run_id)
        if entry is None or entry[0] == "fenced":
            return
        agent, name, inputs = entry[1]
        if isinstance(output, Command):
            self.recorder.tool_call(agent, name, inputs, _command_text(output))
            for g in _handoffs(output):
                self.recorder.handoff(agent, g, f"{agent} -> {g} ({name})")
            return
        error = isinstance(output, ToolMessage) and output.status == "error"
        # an error that is the icore mcp gateway's refusal (langchain-mcp-adapters drops
        # the result's _meta; its text names the refusal): the agent's blocked call
        record_tool_result(self.recorder, agent, name, inputs, _content(output), error=error,
                           may_refuse=error)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool raised (an ``interrupt()`` inside it is a pause, noted by its node)."""
        with line_fields(branch=self._branches.ended(run_id)):
            self._tool_error(error, run_id)

    def _tool_error(self, error: BaseException, run_id: UUID) -> None:
        with self._lock:
            entry = self._runs.pop(run_id, None)
            self._fenced.discard(run_id)
        if entry is None or isinstance(error, GraphBubbleUp):
            return  # an interrupt or a Command bubbling up is control flow, not a failure
        agent, name, inputs = entry[1]
        if entry[0] == "fenced":  # LangChain refused the arguments before the guard ran
            # (its error is titled by the tool's argument schema, named after the tool; a
            # model validated inside the tool body after authorization is titled by that
            # model: the fenced runner records that call itself, never a refusal here)
            if isinstance(error, ValidationError) and error.title == name:
                refused_args(self.recorder, agent, name, inputs,
                             invalid_args_message(name, None, inputs or {}, str(error)))
            return
        if read_refusal(str(error), name) is not None:  # the gateway's refusal, raised
            record_tool_result(self.recorder, agent, name, inputs, str(error), error=True)
            return
        record_tool_result(self.recorder, agent, name, inputs,
                           f"{type(error).__name__}: {error}", error=True, may_refuse=False)
