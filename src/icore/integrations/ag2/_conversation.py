"""The AG2 conversation a read or a fenced call belongs to (#28, QA qa-new10 S1).

AG2 1.x has one conversation per stream: ``Agent.ask`` / ``Agent.run`` open a fresh
``MemoryStream`` (a uuid4 ``stream.id``) unless given ``stream=``; ``reply.ask`` /
``reply.run`` continue on the reply's stream; a sub-agent (``Agent.as_tool``, a
subtask) runs on its own. The context of each turn names the AG2 agent driving it
(``context.dependencies[AGENT_CONTEXT_DEPENDENCY_KEY]``).

:class:`Conversation` is one turn's view of that: its workspace scope ``("ag2", stream
id, agent name, id(agent))`` (two AG2 agents never share a scope by default, even on
one stream) and the model response its tool calls came in. It lives in a context
variable set while the turn runs (by every fenced tool registered for the turn and by
:func:`~icore.integrations.ag2.record_agents`' middleware), so the tools AG2 runs for
the turn (``asyncio`` tasks, worker threads for sync tools) see it, and two
conversations running at once never see each other's. A workspace agent a fenced tool
is built for asks :func:`conversation_scope` (after ``with agent.scope(...)`` and
``scope=``) and stamps its reads with :func:`conversation_turn`, the same two functions
for every tool: no tool's state is the agent's.
"""

from __future__ import annotations

import contextvars
from collections.abc import Hashable
from contextlib import ExitStack
from typing import Any

from ag2.events import ModelResponse
from ag2.utils import AGENT_CONTEXT_DEPENDENCY_KEY as _AGENT_KEY

from icore.integrations._turn_source import install_turn_source
from icore.workspace import Agent as TeamAgent


class Conversation:
    """One AG2 turn's conversation: its workspace scope, its model turns.

    Args:
        scope: the workspace run scope (``("ag2", stream id, agent name, id(agent))``).

    Attributes:
        scope: as given.
        current: the first tool call id of the latest model response with tool calls
            (None before one, or after a response without).
        of: tool call id -> the first call id of the response it came in (at most
            :attr:`MAX` kept, the oldest dropped).
    """

    MAX = 4096

    def __init__(self, scope: Hashable) -> None:
        self.scope = scope
        self.current: str | None = None
        self.of: dict[str, str] = {}

    def note(self, response: ModelResponse) -> None:
        """Name the response's tool calls as one turn (its first call's id)."""
        calls = getattr(response.tool_calls, "calls", None) or []
        self.current = str(calls[0].id) if calls else None
        for c in calls:
            self.of[str(c.id)] = str(calls[0].id)
        while len(self.of) > self.MAX:
            self.of.pop(next(iter(self.of)))

    def turn_of(self, call_id: str) -> str:
        """The turn (first call id of its response) of tool call ``call_id``."""
        return self.of.get(str(call_id), str(call_id))


CONVERSATION: contextvars.ContextVar[Conversation | None] = contextvars.ContextVar(
    "icore_ag2_conversation", default=None)
"""The AG2 conversation whose turn runs here (None outside one)."""


def scope_of(context: Any) -> Hashable | None:
    """The workspace scope of AG2 ``context``'s conversation (None: no stream id)."""
    stream_id = getattr(getattr(context, "stream", None), "id", None)
    if stream_id is None:
        return None
    deps = getattr(context, "dependencies", None)
    agent = deps.get(_AGENT_KEY) if isinstance(deps, dict) else None
    return ("ag2", str(stream_id), str(getattr(agent, "name", "")), id(agent))


def enter(context: Any) -> tuple[Conversation | None, contextvars.Token[Any] | None]:
    """The conversation of ``context``'s turn, made current.

    The one already current when it is the same conversation (several fenced tools and
    the recording middleware of one turn share it). Returns ``(conversation, token)``;
    the token (None: nothing set) goes to :func:`leave`.
    """
    scope = scope_of(context)
    if scope is None:
        return None, None
    got = CONVERSATION.get()
    if got is not None and got.scope == scope:
        return got, None
    conv = Conversation(scope)
    return conv, CONVERSATION.set(conv)


def leave(token: contextvars.Token[Any] | None) -> None:
    """Undo :func:`enter` (a token of another context: nothing leaked into this one)."""
    if token is None:
        return
    try:
        CONVERSATION.reset(token)
    except ValueError:  # set in another context, which is gone with its turn
        pass


def enter_for_turn(stack: ExitStack, context: Any) -> Conversation | None:
    """:func:`enter` for the turn ``stack`` belongs to (left when the turn closes)."""
    conv, token = enter(context)
    if token is not None:
        stack.callback(leave, token)
    return conv


def conversation_scope() -> Hashable | None:
    """The workspace scope of the AG2 conversation running here (a scope detector)."""
    conv = CONVERSATION.get()
    return None if conv is None else conv.scope


def conversation_turn() -> Hashable | None:
    """The model turn a read made here belongs to (a workspace agent's turn source)."""
    conv = CONVERSATION.get()
    return None if conv is None else conv.current


def stamp_reads(team: TeamAgent) -> None:
    """Reads and calls of ``team`` made in an AG2 conversation belong to it.

    Adds :func:`conversation_scope` as a scope detector and makes
    :func:`conversation_turn` the turn source (a turn source the application set stays,
    asked when no AG2 turn is known). Idempotent: every fenced tool of ``team`` installs
    the same two functions, so the last tool wrapped changes nothing (QA qa-new10 S1-2).
    """
    team.detect_scope(conversation_scope)
    install_turn_source(team, conversation_turn, "icore_ag2")
