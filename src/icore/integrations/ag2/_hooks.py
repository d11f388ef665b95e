"""Recorded AG2 chats through ConversableAgent message hooks (icore Sec. 3).

:func:`record_agents` registers a ``process_message_before_send`` hook on each agent:
every message an agent sends is recorded (the first one as the task), tool calls with
their arguments, tool responses with their result (``Error: ...`` replies as errors), and
a message containing ``TERMINATE`` as the final answer. The hook returns the message
unchanged.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from icore.integrations import RunRecorder


class ChatRecorder:
    """The hook (one instance shared by every recorded agent of a chat).

    Args:
        recorder: where the chat goes.
        terminate: the text that marks the final answer.
    """

    def __init__(self, recorder: RunRecorder, *, terminate: str = "TERMINATE") -> None:
        self.recorder = recorder
        self.terminate = terminate
        self._calls: dict[str, tuple[str, Any]] = {}
        self._started = False
        self._lock = threading.Lock()

    def __call__(self, sender: Any, message: dict[str, Any] | str, recipient: Any,
                 silent: bool) -> dict[str, Any] | str:
        """Record one sent message; return it unchanged."""
        who = str(getattr(sender, "name", sender))
        msg: Mapping[str, Any] = {"content": message} if isinstance(message, str) else message
        with self._lock:
            first = not self._started
            self._started = True
        content = msg.get("content")
        text = content if isinstance(content, str) else ("" if content is None else
                                                           json.dumps(content, default=str))
        if first:
            self.recorder.task(text, agent=who)
            return message
        for tc in msg.get("tool_calls") or ():
            fn = tc.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {"raw": fn.get("arguments")}
            with self._lock:
                self._calls[str(tc.get("id"))] = (str(fn.get("name")), args)
        if msg.get("tool_calls"):
            calls = [{"name": n, "args": a} for n, a in
                     (self._calls[str(tc.get("id"))] for tc in msg["tool_calls"])]
            self.recorder.turn(who, text or f"calls {[c['name'] for c in calls]}",
                               tool_calls=calls)
        for tr in msg.get("tool_responses") or ():
            with self._lock:
                name, args = self._calls.get(str(tr.get("tool_call_id")), ("tool", None))
            if name in self.recorder.fenced_tools:
                continue
            out = str(tr.get("content", ""))
            self.recorder.tool_call(who, name, args, out, error=out.startswith("Error:"))
        if not msg.get("tool_calls") and not msg.get("tool_responses") and text:
            if self.terminate and self.terminate in text:
                self.recorder.finish(who, text.replace(self.terminate, "").strip())
            else:
                self.recorder.turn(who, text)
        return message


def record_agents(recorder: RunRecorder, *agents: Any, terminate: str = "TERMINATE"
                  ) -> ChatRecorder:
    """Record every message the given ConversableAgents send into ``recorder``.

    Returns:
        The registered hook.
    """
    hook = ChatRecorder(recorder, terminate=terminate)
    for a in agents:
        a.register_hook("process_message_before_send", hook)
    return hook
