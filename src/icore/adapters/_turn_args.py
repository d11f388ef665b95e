"""A protected call's arguments held against the model turn that asked for it (QA qa-new14 S3).

An ``output`` line's ``tool_calls`` (``[{"name", "args", "id"}, ...]``) is what the model
asked for; a protected call's gate lines name the tool call they serve (``call_id``, the
framework's tool-call id, written by the recorders that know it: LangGraph's), and its
first decision's action record (``{"planfence.action": {"name", "args"}}``) what the gate
judged (a human's ``edit`` answer for the tool: its arguments instead). A trace where
the two differ (the model asked ``pay(amount=10)``, the action
record says ``amount=1000``, or the model's turn edited to look innocent) has the call
``INVALID``, with the reason.

The action record holds the arguments as the tool saw them: the recorder's normal form
(:mod:`icore.integrations._arg_normal`: the tool's schema applied, defaults filled in,
dates and enums as their JSON text). The model's arguments are compared key by key
with it (:func:`icore._arg_diff.arg_difference`): a key the model gave must be there
with an equal JSON value (key order does not matter; a key only the action record has
is a default the schema filled in). Where the normal form changed a value the model
gave (``"10"`` read as ``10``), the recorder noted it on the tool call as
``args_normal`` (:func:`icore.integrations._recorder_lines.asked_as`), compared instead.
A call id that more than one tool call of the trace names (a model server that numbers
its calls per response) links no call: which turn asked cannot be known. Only
the first decision's record is compared (a replan inside the call binds new arguments
from fresh values, planfence Alg. 1); a call no turn of the trace asked for (no
``call_id``, or no turn with that id) is not checked. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from icore._arg_diff import arg_difference
from icore.fence import DecisionEntry


class TurnArgs:
    """Collects the model turns' tool calls and the calls they link to, as lines are read.

    Memory: one entry per tool call with an id and per linked protected call.
    """

    def __init__(self) -> None:
        self.asked: dict[str, tuple[int, str, Any]] = {}  # call id -> (line, name, args)
        self.twice: set[str] = set()  # call ids more than one tool call names
        self.linked: dict[str, str] = {}  # task -> call id
        self.edits: dict[str, list[Any]] = {}  # tool -> the arguments a human edited in

    def line(self, n: int, obj: Mapping[str, Any]) -> None:
        """One event line as read (an ``output`` with ``tool_calls``, a gate line, an edit)."""
        calls = obj.get("tool_calls")
        if obj.get("kind") == "output" and isinstance(calls, list):
            for c in calls:
                if isinstance(c, Mapping) and isinstance(c.get("id"), str) and c["id"]:
                    if c["id"] in self.asked:
                        self.twice.add(c["id"])
                    self.asked[c["id"]] = (n, str(c.get("name", "")), c.get(
                        "args_normal", c.get("args")))
        cid, task = obj.get("call_id"), obj.get("task")
        if isinstance(cid, str) and cid and isinstance(task, str) and task:
            self.linked.setdefault(task, cid)
        if obj.get("decision") == "edit" and isinstance(tool := obj.get("tool"), str):
            self.edits.setdefault(tool, []).append(obj.get("args"))

    def problems(self, decisions: Sequence[DecisionEntry],
                 records: Sequence[tuple[str, Mapping[str, Any]]], *, file: str
                 ) -> tuple[dict[str, str], tuple[str, ...]]:
        """``(task -> why, warnings)``: the linked calls whose judged call differs.

        Args:
            decisions: the trace's decisions, in file order.
            records: ``(field, record)`` per record line.
            file: the trace file, for the warnings.
        """
        if not self.linked or not self.asked:
            return {}, ()
        acts: dict[str, Mapping[str, Any]] = {}
        for _, r in records:
            c = r.get("content")
            act = c.get("planfence.action") if isinstance(c, Mapping) else None
            if isinstance(act, Mapping) and isinstance(r.get("id"), str):
                acts[r["id"]] = act
        first: dict[str, DecisionEntry] = {}
        for e in decisions:
            if e.task:
                first.setdefault(str(e.task), e)
        out: dict[str, str] = {}
        for task, cid in self.linked.items():
            got, d = self.asked.get(cid), first.get(task)
            if got is None or d is None or cid in self.twice:
                continue  # no such turn, or the id is not one call's (reused)
            act = next((acts[r] for r in d.roots if r in acts), None)
            if act is None:
                continue
            n, name, args = got
            tool = str(act.get("name", d.action))
            if name != tool:
                diff: str | None = f"the tool {name!r} vs {tool!r}"
            elif isinstance(args, Mapping) and isinstance(act.get("args"), Mapping):
                diff = arg_difference(args, act["args"])
                if diff is not None and any(  # a human edited the call's arguments
                        isinstance(e, Mapping) and arg_difference(e, act["args"]) is None
                        for e in self.edits.get(tool, ())):
                    diff = None
            else:
                continue
            if diff is not None:
                out[task] = (f"arguments of {tool} call {cid} differ from the model's tool "
                             f"call at line {n}: {diff} (the action record or the model's "
                             "turn was edited)")
        return out, tuple(f"{file}: {why}; the call is INVALID" for why in out.values())


__all__ = ["TurnArgs"]
