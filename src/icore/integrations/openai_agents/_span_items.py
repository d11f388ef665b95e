"""What the Agents SDK's spans hold, read for the recording (icore Sec. 3).

Model spans' input and output in the Responses format (:func:`items`), and the note a
trace gets when its model filled no span (:func:`unseen_note`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from icore.integrations._json_args import read_json

if TYPE_CHECKING:
    from icore.integrations import RunRecorder


def items(output: Any) -> list[Mapping[str, Any]]:
    """A span's input or output as Responses-format items.

    The SDK's Chat Completions models (``OpenAIChatCompletionsModel``, ``LitellmModel``)
    trace chat messages (an assistant message with ``tool_calls``, a ``role: "tool"``
    answer) or, when streaming, a whole ``Response`` dump: each is turned into the items
    the Responses models trace (``message``, ``function_call``, ``function_call_output``).
    """
    out: list[Mapping[str, Any]] = []
    for it in output or ():
        if hasattr(it, "model_dump") and not isinstance(it, Mapping):
            it = it.model_dump()
        if isinstance(it, Mapping):
            out.extend(responses_items(it))
    return out


def responses_items(it: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """One traced item in the Responses format (see :func:`items`)."""
    if it.get("object") == "response" and isinstance(it.get("output"), list):
        return items(it["output"])  # a streamed Chat Completions run: the whole Response
    if it.get("role") == "tool" and "tool_call_id" in it:
        return [{"type": "function_call_output", "call_id": it["tool_call_id"],
                 "output": it.get("content")}]
    calls = it.get("tool_calls") if it.get("role") == "assistant" else None
    if not isinstance(calls, list):
        return [it]
    out: list[Mapping[str, Any]] = []
    if text(it):
        out.append({"type": "message", "role": "assistant", "content": text(it)})
    for c in calls:
        fn = c.get("function") if isinstance(c, Mapping) else None
        if isinstance(fn, Mapping):
            out.append({"type": "function_call", "call_id": c.get("id"),
                        "name": fn.get("name"), "arguments": fn.get("arguments")})
    return out


def text(item: Mapping[str, Any]) -> str:
    """An item's text (its ``content``: a string, or the ``text`` of its parts)."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") for p in content or () if isinstance(p, Mapping)]
    return " ".join(str(p) for p in parts if p)


_UNSEEN = ("the model put no input or output in the run's trace spans (e.g. "
           "agents.testing.ScriptedModel): its turns are not recorded")


def unseen_note(events: list[dict[str, Any]]) -> str:
    """The ``unseen_model`` line's text for a trace holding ``events``.

    What a model that fills no span leaves out: its turns always; the task when no
    ``task`` line was recorded (``rec.task(question)``, before or after the run); the
    final answer when the trace neither ends (``rec.finish(result.last_agent.name,
    result.final_output)`` after the run) nor waits at a pause.
    """
    missing = []
    if not any(e.get("kind") == "task" for e in events):
        missing.append("the task: rec.task(question)")
    last = events[-1] if events else {}
    if not any(e.get("kind") == "termination" for e in events) and not last.get("pause"):
        missing.append("the final answer: after the run, rec.finish(result.last_agent.name, "
                       "result.final_output)")
    return _UNSEEN + ("; not recorded either, record " + "; ".join(missing) if missing
                      else "")


def renote(recorder: RunRecorder, line: dict[str, Any]) -> None:
    """Bring the ``unseen_model`` line ``line`` up to date with what was recorded since."""
    line["content"] = unseen_note([e for e in list(recorder.events) if e is not line])


def turn_output(output: list[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """A model span's output items: its tool calls and its text.

    Returns:
        ``([{"name", "args", "id"?}, ...], text)``: each ``function_call`` item's name, its
        arguments read as JSON (kept as sent when they do not read; ``""`` stays ``""``:
        the model sent no JSON) and its call id (a str) when it has one; the assistant
        messages' texts joined by a space.
    """
    calls: list[dict[str, Any]] = []
    texts: list[str] = []
    for it in output:
        if it.get("type") == "function_call":
            args = it.get("arguments")
            if isinstance(args, str) and args:
                read, why = read_json(args)
                args = read if why is None else args
            calls.append({"name": it.get("name"), "args": args,
                          **({"id": str(it["call_id"])} if it.get("call_id") else {})})
        elif it.get("type") == "message" or it.get("role") == "assistant":
            texts.append(text(it))
    return calls, " ".join(t for t in texts if t)


__all__ = ["items", "renote", "responses_items", "text", "turn_output", "unseen_note"]
