"""The same protected call twice in one model message, both authorized (QA qa-new17b #7).

A model may put two identical tool calls in one message (same tool, same arguments, two
tool-call ids): a payment sent twice. Each is gated on its own; when the tool's body
does not commit the fact it declares in ``writes=`` (a bank API call), the second finds
the head unchanged and is authorized too: the effect happens twice, and every decision
is valid. :class:`TwiceInMessage` finds such pairs in a JSONL trace: the gate thoughts
(``gate.outcome == "authorized"``, with the call's ``task``) that follow one ``output``
line of an agent, and the action records (tool name and canonical arguments) of those
calls' first authorized decisions. Each pair is a warning naming the message's line, the
tool, the arguments and the two tasks. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from icore.adapters._trace import StepKind


class TwiceInMessage:
    """Collects, line by line, which model message each authorized call followed."""

    def __init__(self) -> None:
        self._message: dict[str | None, int] = {}  # agent -> line of its latest output
        self._calls: dict[str, tuple[str | None, int]] = {}  # task -> (agent, message line)

    def step(self, n: int, obj: Mapping[str, Any], kind: StepKind, agent: str | None) -> None:
        """Note line ``n`` (one event line, its kind and canonical agent)."""
        if kind == StepKind.OUTPUT:
            self._message[agent] = n
            return
        gate = obj.get("gate")
        task = obj.get("task")
        if kind == StepKind.THOUGHT and isinstance(gate, dict) and isinstance(task, str) \
                and gate.get("outcome") == "authorized" and agent in self._message:
            self._calls.setdefault(task, (agent, self._message[agent]))

    def warnings(self, file: str, decisions: Sequence[Any],
                 records: Sequence[tuple[str, Any]]) -> tuple[str, ...]:
        """One warning per protected call asked twice in one message, both authorized."""
        if len(self._calls) < 2:
            return ()
        acts = {r.get("id"): r.get("content") for _, r in records if isinstance(r, dict)}
        seen: dict[tuple[str | None, int, str], str] = {}
        out: list[str] = []
        for d in decisions:
            task = getattr(d, "task", None)
            if getattr(d, "outcome", None) != "authorized" or task not in self._calls:
                continue
            roots = tuple(getattr(d, "roots", ()) or ())
            body = acts.get(roots[0]) if roots else None
            act = body.get("planfence.action") if isinstance(body, dict) else None
            if not isinstance(act, dict):
                continue
            agent, line = self._calls.pop(task)
            what = f"{act.get('name')} {json.dumps(act.get('args'), sort_keys=True)}"
            first = seen.setdefault((agent, line, what), task)
            if first != task:
                out.append(f"{file}: line {line}: the same call twice in one model message "
                           f"({what[:200]}): both were authorized ({first}, {task}); a tool "
                           "whose body does not commit its writes= fact runs it twice")
        return tuple(out)


__all__ = ["TwiceInMessage"]
