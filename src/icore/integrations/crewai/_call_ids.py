"""Which call of its model message a CrewAI tool call is: its ids for the audit and a restart.

Two names per fenced call (icore Sec. 3; the workspace's attempts file, #30):

* **The link** (``call_id`` on the call's gate lines, ``id`` of the model turn's
  ``tool_calls`` entry): what the audit's turn-args check joins the call's action record
  to the model's tool call by (:class:`~icore.adapters._turn_args.TurnArgs`). Native
  function calling: the model's own tool-call id (``tool_calls[i].id`` of the model
  message, as CrewAI keeps it in the executor's messages). ReAct text (no id exists):
  ``crewai-<digest>-<index>``, the digest of the model call's input (the agent's role
  and the messages sent, :func:`~._turns.call_said`) and the call's index in its message
  (CrewAI runs one action per ReAct message: 0). A call whose tool the model named
  otherwise than the fenced tool is named (CrewAI's sanitized or fuzzy-matched name)
  gets no link: it is not compared.
* **The durable identity** (the workspace's ``call_id``; its row key also holds the tool
  and the canonical arguments, :func:`~icore.workspace._durable_calls.call_key`): that
  digest and the call's index in its message (``<digest>:<index>``), in both modes. Two
  calls of one message are two identities, even with the same tool and arguments; the
  same call retried (CrewAI runs a failed call again in the same message), or replayed
  after a restart (a crew re-run asks the model again from the same messages), gets the
  same one. The model's own id is not part of it: a provider makes a new one for each
  response, so a re-asked model's same call would never match its first attempt.

A native call is placed in its message by its tool name and arguments (as CrewAI parsed
them); calls alike in both take the message's places in turn; a call whose arguments a
``before_tool_call`` hook changed is placed by its name alone. Pure but for the executor
state it reads.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crewai.agents.parser import AgentAction, parse
from crewai.utilities.string_utils import sanitize_tool_name

_MAX_MESSAGES = 1024
_TAKEN: OrderedDict[int, tuple[dict[str, Any], set[int]]] = OrderedDict()
"""id(message) -> (the message, its places taken): the message held, so its id is not
reused while its entry stands (at most :data:`_MAX_MESSAGES`, the oldest dropped)."""
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Place:
    """Where a tool call stands in its model message.

    Attributes:
        index: its index among the message's tool calls (0 for a ReAct action).
        name: the tool as the model named it (CrewAI's sanitized name); None: unknown.
        model_id: the model's own tool-call id (native calls); None otherwise.
        react: the call is a ReAct action (its link is derived, see the module).
    """

    index: int = 0
    name: str | None = None
    model_id: str | None = None
    react: bool = False


def react_link(said: str, index: int) -> str:
    """The derived link of a ReAct call: ``crewai-<20 hex of the digest>-<index>``."""
    return f"crewai-{said[:20]}-{index}"


def _own_id(tc: Any) -> str | None:
    """A tool call's own id, as CrewAI reads it (None: the provider gave none)."""
    if isinstance(tc, Mapping):
        got = tc.get("call_id") or tc.get("id") or tc.get("toolUseId")
    elif not hasattr(tc, "function") and getattr(tc, "function_call", None):
        got = None  # Gemini's: CrewAI makes one up per object
    else:
        got = getattr(tc, "id", None)
    return str(got) if got else None


def _name_args(tc: Any) -> tuple[str, Any]:
    if isinstance(tc, Mapping):
        got = tc.get("function")
        fn: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
        name = fn.get("name") or tc.get("name") or ""
        args = fn.get("arguments") or tc.get("arguments") or tc.get("input") or {}
    else:
        obj = getattr(tc, "function", None)
        name = getattr(obj, "name", None) or getattr(tc, "name", "") or ""
        args = getattr(obj, "arguments", None) or getattr(tc, "input", None) or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return sanitize_tool_name(str(name)), None
    return sanitize_tool_name(str(name)), args


def model_calls(response: Any, said: str | None) -> list[dict[str, Any]]:
    """The ``tool_calls`` of a recorded model turn (``[{"name", "args"?, "id"?}]``).

    ``response``: the model call's response as CrewAI's ``LLMCallCompletedEvent`` holds
    it (a list of native tool calls, or ReAct text); ``said``: the digest of the call's
    input (:func:`~._turns.model_said`), for a ReAct action's derived id. Arguments that
    are no JSON object are left out (the audit then compares nothing); a call without
    its own id gets none.
    """
    out: list[dict[str, Any]] = []
    if isinstance(response, list):
        for tc in response:
            name, args = _name_args(tc)
            if not name:
                continue
            entry: dict[str, Any] = {"name": name}
            if isinstance(args, dict):
                entry["args"] = args
            if (cid := _own_id(tc)) is not None:
                entry["id"] = cid
            out.append(entry)
        return out
    if not isinstance(response, str) or "Action" not in response:
        return out
    try:
        act = parse(response)
    except Exception:  # CrewAI's own parse error: the model's text is no action
        return out
    name = sanitize_tool_name(act.tool) if isinstance(act, AgentAction) and act.tool else ""
    if not name:  # a final answer, or no tool name at all
        return out
    entry = {"name": name}
    try:
        args = json.loads(act.tool_input)
    except (TypeError, ValueError):
        args = None
    if isinstance(args, dict):
        entry["args"] = args
    if said:
        entry["id"] = react_link(said, 0)
    return [entry]


def _latest_calls(messages: Any) -> tuple[dict[str, Any], list[Any]] | None:
    """The newest assistant message with tool calls, when only tool results follow it."""
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if not isinstance(m, dict):
            return None
        if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            return m, m["tool_calls"]
        if m.get("role") != "tool":
            return None
    return None


def call_place(executor: Any, tool: str, given: Any) -> Place:
    """Where the call of ``tool`` with ``given`` arguments stands in its model message.

    ``executor``: the CrewAI executor whose run makes the call (None: unknown, index 0).
    """
    if executor is None:
        return Place()
    current = getattr(getattr(executor, "state", None), "current_answer", None)
    if isinstance(current, AgentAction):  # ReAct: the message's one action
        return Place(0, sanitize_tool_name(current.tool), react=True)
    try:
        got = _latest_calls(getattr(executor, "messages", None))
    except Exception:  # an executor without CrewAI's state: unknown
        got = None
    if got is None:
        return Place()
    msg, calls = got
    named = [(i, a) for i, (n, a) in enumerate(_name_args(c) for c in calls) if n == tool]
    same = [i for i, a in named if a == given] or [i for i, _ in named]
    if not same:
        return Place()
    with _LOCK:
        held = _TAKEN.get(id(msg))
        if held is None or held[0] is not msg:
            held = _TAKEN[id(msg)] = (msg, set())
        _TAKEN.move_to_end(id(msg))
        taken = held[1]
        index = next((i for i in same if i not in taken), same[0])  # else: a retry
        taken.add(index)
        while len(_TAKEN) > _MAX_MESSAGES:
            _TAKEN.popitem(last=False)
    return Place(index, tool, _own_id(calls[index]))


__all__ = ["Place", "call_place", "model_calls", "react_link"]
