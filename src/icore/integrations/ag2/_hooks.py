"""Recorded AG2 1.x runs through agent middleware (icore Sec. 3).

:func:`record_agents` adds one middleware (``ag2.Middleware``, AG2's own per-turn hook
object) to each agent: every top-level request (the first ``ask``, a follow-up
``reply.ask``, another agent's ``ask`` into the same recorder) is a ``task`` line, every
model response with tool calls is a turn naming them, every tool result or tool error is a tool
call with its arguments (fenced tools record their own calls, gate decisions included),
and the text of the last top-level ``ask``'s answer is the run's final answer: one end
per run. An ``ask`` inside another (a sub-agent behind ``Agent.as_tool``) is a step of
the outer one, its answer an ordinary output; a later top-level ``ask`` (a second agent's
turn, a follow-up question) turns the earlier end back into an output. The middleware
also tells fenced tools which agent is calling (gate events name it); a fenced call a
human refused before its gate (a "no" to ``approval_required()``) is recorded by the fenced
tool as a refused call (exit code 1, ``decision: "reject"``), not as a tool output. A
run stopped at a human question nobody answered (AG2's ``HumanInputError`` leaving
``ask``: no ``hitl_hook``, a timeout, a failed channel) is recorded as a pause (a
``thought`` with ``pause: true`` naming the calls waiting, as the other integrations
record a run waiting for a human), so ``icore audit`` reports it paused.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import contextvars
import json
import re
import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from ag2 import Middleware
from ag2.events import ToolApprovalRequest, ToolErrorEvent, ToolNotFoundEvent
from ag2.exceptions import HumanInputError
from ag2.middleware import BaseMiddleware

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations._json_args import given_args
from icore.integrations._recorder_arg import check_recorder
from icore.integrations._refusals import read_refusal, record_tool_result
from icore.integrations._run_end import RunEnd
from icore.integrations._tool_failed import describe
from icore.integrations._trace_data import plain_data
from icore.integrations.ag2._conversation import enter, leave
from icore.integrations.ag2._human import WATCHED
from icore.integrations.ag2._tool_results import given_args as run_given_args
from icore.integrations.ag2._tools import CALLING_AGENT, CHAT_RECORDER

_IN_ASK: contextvars.ContextVar[ChatRecorder | None] = contextvars.ContextVar(
    "icore_ag2_in_ask", default=None)
"""The recorded run whose ``ask`` this code runs inside (a nested ``ask`` is a step)."""


def _text(obj: Any) -> str:
    """The text of a request, response or tool result (its parts' contents joined).

    Data, never a Python repr: a ``DataInput`` part is its data as JSON, a model response
    with no text (tool calls only) is ``""``.
    """
    content = getattr(obj, "content", None)
    if isinstance(content, str):
        return content
    parts = getattr(obj, "parts", None)
    if parts is None and hasattr(obj, "result"):
        parts = getattr(obj.result, "parts", None)
    if parts is not None:
        return "\n".join(_part(p) for p in parts)
    message = getattr(obj, "message", None)
    if message is not None and message is not obj:
        return _text(message)
    if obj is None or hasattr(obj, "tool_calls"):  # a response without text
        return ""
    return _part(obj)


def _part(p: Any) -> str:
    content = getattr(p, "content", None)
    if isinstance(content, str):
        return content
    data = getattr(p, "data", p)
    return data if isinstance(data, str) else json.dumps(plain_data(data), sort_keys=True,
                                                         default=str)


class ChatRecorder:
    """What every recorded agent of one run shares: the recorder, the task, the run's end.

    Args:
        recorder: where the run goes.
    """

    def __init__(self, recorder: RunRecorder) -> None:
        check_recorder(recorder, where="ChatRecorder")
        self.recorder = recorder
        self.run_end = RunEnd(recorder)
        """The run's one end: the latest top-level ``ask``'s answer."""
        self._started = False
        self._waiting: list[tuple[str, str, Any]] = []
        """Tool calls stopped at a human question no one answered: (agent, tool, args)."""
        self._calls: dict[str, str] = {}
        self._answered: dict[str, None] = {}
        """The model's arguments of its latest tool calls, by call id (bounded)."""
        self._approval = False
        """Whether a question of :attr:`_waiting` was an approval of its call."""
        self._lock = threading.Lock()

    def first(self) -> bool:
        """True exactly once: for the run's first request (its task)."""
        with self._lock:
            first, self._started = not self._started, True
        return first

    def waiting(self, agent: str, tool: str, args: Any, approval: bool = False) -> None:
        """``agent``'s call of ``tool`` stopped at a human question no one answered.

        ``approval``: the question was an approval of the call (AG2's
        ``ToolApprovalRequest``).
        """
        with self._lock:
            self._waiting.append((agent, tool, args))
            self._approval = self._approval or approval

    def pause(self, agent: str, error: BaseException) -> None:
        """The run stopped waiting for a human (AG2's ``HumanInputError`` left ``ask``).

        Recorded as a ``thought`` with ``pause: true`` naming the calls put to the
        human (as the other integrations record a run waiting for a human), so
        ``icore audit`` reports the run paused, not ended without a final answer.
        """
        with self._lock:
            waiting, self._waiting = self._waiting, []
        asked = "; ".join(f"{t} {json.dumps(a, sort_keys=True, default=str)}"
                          for _, t, a in waiting)
        what = f"'s answer about {asked}" if asked else "'s answer"
        self.recorder.add(waiting[0][0] if waiting else agent, "thought",
                          f"paused: waiting for a human{what} ({type(error).__name__}: "
                          f"{error})", pause=True,
                          approvals=[{"tool": t, "args": a} for _, t, a in waiting] or None,
                          human_input=type(error).__name__)

    def stopped(self, agent: str, error: BaseException) -> None:
        """The run left its top-level ``ask`` with ``error`` (not a human wait).

        A call stopped at a human question nobody answered is a pause naming it
        (:meth:`pause`); one cancelled while a human decided (Ctrl-C at an approval) is
        a cancelled run (:meth:`cancelled`); else a ``thought`` "the run stopped: <Type>: <message>"
        with ``error`` (a setup mistake such as a ``depends_on`` naming an undeclared
        fact), so the trace says why it has no end.
        """
        with self._lock:
            waiting, approval = bool(self._waiting), self._approval
        if waiting and not isinstance(error, _CANCELLED):
            self.pause(agent, error)
            return
        text = describe(error)
        if waiting:  # Ctrl-C while a human decided: the user stopped the run
            self.cancelled(agent, error, approval)
            return
        self.recorder.add(agent, "thought", f"the run stopped: {text}", error=text)

    def cancelled(self, agent: str, error: BaseException, approval: bool) -> None:
        """The run was cancelled (Ctrl-C) while calls waited for a human's answer.

        Not a pause (nobody can answer it: the user stopped the run, QA qa-new13a S3): a
        ``thought`` "the run was cancelled while waiting for a human's approval of ...;
        the call did not run" with ``error`` and ``cancelled: true``, and no end, so
        ``icore audit`` counts the run not ended.
        """
        with self._lock:
            waiting, self._waiting = self._waiting, []
        asked = "; ".join(f"{t} {json.dumps(a, sort_keys=True, default=str)}"
                          for _, t, a in waiting)
        what = "approval" if approval else "answer"
        text = (f"{type(error).__name__}: the run was cancelled (Ctrl-C / task cancelled) "
                f"while waiting for a human's {what} of {asked}; the call did not run")
        self.recorder.add(waiting[0][0] if waiting else agent, "thought",
                          f"the run stopped: {text}", error=text, cancelled=True,
                          approvals=[{"tool": t, "args": a} for _, t, a in waiting])

    def called(self, calls: Any) -> None:
        """Note the arguments of a model response's tool calls (for :meth:`not_found`)."""
        with self._lock:
            for c in calls:
                self._calls[str(c.id)] = c.arguments
            while len(self._calls) > _MAX_CALLS:
                self._calls.pop(next(iter(self._calls)))

    def not_found(self, agent: str, event: Any) -> None:
        """A call of a tool name the agent does not have (AG2's ``ToolNotFoundEvent``).

        AG2 answers it without running any tool middleware; recorded as a failed call
        that did not run (``ran: false``, ``reason: "unknown_tool"``, the text the model
        read), so the trace does not end at the model's call (QA qa-new13a S4).
        """
        with self._lock:
            raw = self._calls.pop(str(event.parent_id), None)
        if raw is None and str(event.parent_id) in self._answered:
            return  # recorded already (the same stream seen from two agents)
        self._answered[str(event.parent_id)] = None
        while len(self._answered) > _MAX_CALLS:
            self._answered.pop(next(iter(self._answered)))
        text = describe(event.error)
        self.recorder.tool_call(agent, event.name, _args(raw or "{}"), f"ERROR: {text}",
                                error=True, ran=False, reason="unknown_tool",
                                error_text=text)

    def middleware(self, agent: str) -> Middleware:
        """The ``ag2.Middleware`` recording one agent's turns."""
        return Middleware(_AgentRecording, chat=self, agent=agent)


class _AgentRecording(BaseMiddleware):
    def __init__(self, event: Any, context: Any, *, chat: ChatRecorder, agent: str) -> None:
        super().__init__(event, context)
        self.chat = chat
        self.agent = agent

    async def on_turn(self, call_next: Any, event: Any, context: Any) -> Any:
        """One ``ask`` of the agent: the task (a top-level request), the answer.

        The answer of a top-level ``ask`` is the run's end; inside another ``ask`` (a
        delegated sub-agent, an agent asked from a ``hitl_hook`` or a tool) its request
        is an ``instruction`` from the agent whose turn asks (``to`` this agent) and its
        answer an output of this agent (QA qa-new10 S3). A top-level ``ask`` left by
        a ``HumanInputError`` records the run's pause (the error goes on).
        """
        rec = self.chat.recorder
        nested = _IN_ASK.get() is self.chat
        if not nested:  # the end recorded so far was a step after all
            self.chat.run_end.another_run()
        if self.chat.first() or not nested:  # a follow-up or another agent's request too
            rec.task(_text(event), agent="user")
        else:  # an ask inside another's turn (a tool, a hitl_hook): its request, routed
            rec.add(CALLING_AGENT.get() or "user", "instruction", _text(event),
                    to=self.agent)
        token = CALLING_AGENT.set(self.agent)
        in_ask = _IN_ASK.set(self.chat)
        _conv, conv_token = enter(context)  # its tools' reads: of this conversation
        chat, me = self.chat, self.agent

        async def not_found(event: ToolNotFoundEvent) -> None:
            chat.not_found(me, event)

        try:
            with context.stream.where(ToolNotFoundEvent).sub_scope(not_found):
                response = await call_next(event, context)
        except HumanInputError as exc:  # no one answered a human question: a pause
            if not nested:
                self.chat.pause(self.agent, exc)
            raise
        except BaseException as exc:  # a setup mistake, Ctrl-C: the trace says why
            if not nested:
                self.chat.stopped(self.agent, exc)
            raise
        finally:
            leave(conv_token)
            _IN_ASK.reset(in_ask)
            CALLING_AGENT.reset(token)
        text = _text(response)
        if text and nested:
            rec.turn(self.agent, text)
        elif text:
            self.chat.run_end.end(self.agent, text)
        return response

    async def on_llm_call(self, call_next: Any, events: Any, context: Any) -> Any:
        """One model response: a turn naming its tool calls."""
        response = await call_next(events, context)
        calls = getattr(getattr(response, "tool_calls", None), "calls", None) or []
        if calls:
            self.chat.called(calls)
            named = [{"name": c.name, "args": _args(c.arguments),  # the audit links by id
                      **({"id": str(c.id)} if getattr(c, "id", None) else {})} for c in calls]
            text = _text(response) or f"calls {[c['name'] for c in named]}"
            self.chat.recorder.turn(self.agent, text, tool_calls=named)
        return response

    async def on_human_input(self, call_next: Any, event: Any, context: Any) -> Any:
        """A question put to a human: open until answered (:class:`OpenQuestions`)."""
        asks = _ASKS.get()
        if asks is None:
            return await call_next(event, context)
        key = str(getattr(event, "id", "") or id(event))
        asks.asked[key] = event
        answer = await call_next(event, context)
        asks.asked.pop(key, None)
        return answer

    async def on_tool_execution(self, call_next: Any, event: Any, context: Any) -> Any:
        """One tool call: the calling agent set for fenced tools; plain calls recorded."""
        token = CALLING_AGENT.set(self.agent)
        rec_token = CHAT_RECORDER.set(self.chat.recorder)
        watched = WATCHED.get()
        asks = OpenQuestions()
        try:
            with asks.current():
                result = await call_next(event, context)
            # a fenced call a human refused before its gate: recorded by the fenced tool
            refused = watched is not None and watched.name == event.name and \
                watched.settle(event, result)
        except HumanInputError:  # the call waits for a human: the run's pause names it
            self.chat.waiting(self.agent, event.name, _args(event.arguments))
            raise
        except _CANCELLED:
            if asks.open or (watched is not None and watched.name == event.name
                             and not watched.reached):
                # stopped before its body, a human question open (Ctrl-C at the approval)
                self.chat.waiting(self.agent, event.name, _args(event.arguments),
                                  approval=asks.approval(event.id))
            raise
        finally:
            CHAT_RECORDER.reset(rec_token)
            CALLING_AGENT.reset(token)
        rec = self.chat.recorder
        if not refused and event.name not in rec.fenced_tools:
            error = isinstance(result, ToolErrorEvent)
            # an ``icore mcp`` gateway's refusal (AG2's MCPToolkit): a blocked call
            record_tool_result(rec, self.agent, event.name, run_given_args(event),
                               gateway_text(result, event.name) if error else _text(result),
                               error=error)
        return result


_MAX_CALLS = 1024
"""Tool calls whose arguments are kept for a ``ToolNotFoundEvent`` (the latest)."""
_CANCELLED = (asyncio.CancelledError, KeyboardInterrupt)
"""A run stopped by its user (Ctrl-C, a cancelled task)."""


class OpenQuestions:
    """The human questions put during one tool call and not answered yet.

    AG2 puts each question (a ``HumanInputRequest``; ``approval_required()``'s
    ``ToolApprovalRequest`` names the call) through the agents' middleware
    (``on_human_input``); a call cancelled with a question open was waiting for a human,
    its body never reached (QA qa-new13a: with ``record_agents`` alone the trace said
    the call was cancelled while the tool ran).
    """

    def __init__(self) -> None:
        self.asked: dict[str, Any] = {}

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """The questions of the code run inside are noted here (:data:`_ASKS`)."""
        token = _ASKS.set(self)
        try:
            yield
        finally:
            _ASKS.reset(token)

    @property
    def open(self) -> bool:
        """Whether a question is still waiting for its answer."""
        return bool(self.asked)

    def approval(self, call_id: str) -> bool:
        """Whether an open question is the approval of the call ``call_id``."""
        return any(isinstance(q, ToolApprovalRequest) and str(q.tool_call_id) == call_id
                   for q in self.asked.values())


_ASKS: contextvars.ContextVar[OpenQuestions | None] = contextvars.ContextVar(
    "icore_ag2_open_questions", default=None)
"""The open questions of the tool call running here (:class:`OpenQuestions`)."""


def _args(raw: str) -> dict[str, Any]:
    """The model's arguments as given: its JSON object, else ``{"raw": <its text>}``.

    Text that does not read (not JSON, an integer over the interpreter's digit limit,
    nesting deeper than its stack), or JSON that is not an object (an array, a string, a
    number: QA r8-ag2mcp D8), is kept as the model sent it; AG2 answers such a call
    itself, and recording never changes the conversation.
    """
    return given_args(raw)


def gateway_text(result: Any, tool: str) -> str:
    """The text of a tool error; the gateway's refusal text when it is one.

    AG2's ``MCPToolkit`` turns an MCP ``isError`` result into ``RuntimeError(str(result))``:
    the text the model reads is the result's repr. Its text items (``TextContent(...,
    text='...')``) are read back; when they are a PlanFence refusal naming ``tool``
    (:func:`~icore.integrations._refusals.read_refusal`), that text is the call's result,
    else the error's own text.
    """
    shown = _text(result)
    error = getattr(result, "error", None)
    if not isinstance(error, RuntimeError):
        return shown
    items = mcp_text_items(str(error))
    return items if items and read_refusal(items, tool) is not None else shown


_TEXT_ITEM = re.compile(r"TextContent\((?:[^()]*?, )?text=(?=['\"])")


def mcp_text_items(repr_text: str) -> str:
    """The text items of an MCP result's repr (``TextContent(..., text='...')``), joined.

    Each item's text is a Python string literal, read with :func:`ast.literal_eval`
    (never evaluated as code); an item that does not read is skipped. ``""``: none.
    """
    out: list[str] = []
    for m in _TEXT_ITEM.finditer(repr_text):
        start = i = m.end()
        quote = repr_text[start]
        i += 1
        while i < len(repr_text) and repr_text[i] != quote:
            i += 2 if repr_text[i] == "\\" else 1
        try:
            item = ast.literal_eval(repr_text[start:i + 1])
        except (ValueError, SyntaxError):
            continue
        if isinstance(item, str):
            out.append(item)
    return "\n".join(out)


def record_agents(recorder: RunRecorder, *agents: Any) -> ChatRecorder:
    """Record every turn, tool call and answer of the given ``ag2.Agent`` s.

    Args:
        recorder: where the run goes.
        agents: ``ag2.Agent`` objects; each gets one recording middleware.

    Idempotent: an agent this ``recorder`` records already keeps its one middleware (a
    set-up cell run twice, a helper that records the agents it builds and the app
    recording them again), so no event is recorded twice; every agent of one
    ``recorder`` shares its one :class:`ChatRecorder` (one run, one end), whichever call
    added it (sub-agents recorded first, their manager in a later call: the manager's
    requests are its instructions, a sub-agent's answer a step, not an end).

    Returns:
        The shared :class:`ChatRecorder`.

    Raises:
        IntegrationError: ``recorder`` is not a :class:`~icore.integrations.RunRecorder`;
            no agent is given (nothing would be recorded); an argument is not an
            ``ag2.Agent`` (no ``add_middleware``); an agent is recorded already into
            another recorder (its events would go to both, the fenced tools' gate
            decisions to one). Each names the fix; nothing is added then.
    """
    if not isinstance(recorder, RunRecorder):
        raise IntegrationError("record_agents needs a RunRecorder first", framework="ag2",
                               got=type(recorder).__name__,
                               fix="record_agents(RunRecorder('run-1'), agent, ...)")
    if not agents:
        raise IntegrationError("record_agents was given no agent: nothing would be "
                               "recorded", framework="ag2",
                               fix="record_agents(rec, agent) with every ag2.Agent of the "
                               "run (record_agents(rec, alice, bob))")
    for a in agents:
        if not callable(getattr(a, "add_middleware", None)):
            raise IntegrationError("record_agents needs ag2.Agent objects", framework="ag2",
                                   got=type(a).__name__,
                                   fix="pass the agent objects, not their names: "
                                   "record_agents(rec, alice, bob)")
    known = {id(a): _recorded_by(a) for a in agents}
    for a in agents:
        other = known[id(a)]
        if other is not None and other.recorder is not recorder:
            raise IntegrationError(
                f"agent {a.name!r} is recorded already, into another RunRecorder "
                f"({other.recorder.run_id!r}): one run, one recorder per agent",
                framework="ag2", agent=str(a.name),
                fix="record each agent once: keep the first record_agents(...) or build "
                "the agent again for a new recorder")
    with _CHATS_LOCK:  # a second call on the same recorder joins its chat (QA qa-new18c #1)
        chat = next((c for c in known.values() if c is not None), None) or \
            _CHATS.get(recorder) or ChatRecorder(recorder)
        _CHATS.setdefault(recorder, chat)
    for a in agents:
        if known[id(a)] is None:  # recorded already by this recorder: nothing to add
            a.add_middleware(chat.middleware(str(a.name)))
            known[id(a)] = chat
    return chat


_CHATS: weakref.WeakKeyDictionary[RunRecorder, ChatRecorder] = weakref.WeakKeyDictionary()
"""The chat recorder of each :class:`RunRecorder` ``record_agents`` was given."""
_CHATS_LOCK = threading.Lock()


def _recorded_by(agent: Any) -> ChatRecorder | None:
    """The :class:`ChatRecorder` whose middleware records ``agent`` already, if any."""
    for entry in getattr(agent, "middleware", None) or ():
        m = getattr(entry, "middleware", entry)
        options = getattr(m, "options", None)
        if getattr(m, "cls", None) is _AgentRecording and isinstance(options, Mapping):
            chat = options.get("chat")
            if isinstance(chat, ChatRecorder):
                return chat
    return None
