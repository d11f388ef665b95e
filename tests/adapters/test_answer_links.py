"""A human's answer written twice (a thought and the refused call's output) links once.

#28, QA qa-new10 S3: a refused call's own ``tool_output`` with ``answered_by: "human"``
and its ``task`` answers that action exactly (its ``human_step`` given); a recorder that
also writes the answer as a thought (the OpenAI Agents SDK recorder) must not have that
thought link to the tool's next call, which a later "yes" answered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from icore.adapters import load_jsonl, trace_lineages


def _decision(task: str, outcome: str, reason: str) -> dict[str, Any]:
    return {"planfence": {"decision": {
        "action": "book", "at_ms": 0.0, "deps": [], "detail": "", "fresh": {},
        "frontier": {}, "heads": {}, "heads_checked": 0, "outcome": outcome,
        "owners_contacted": 0, "point": 0, "policy": "approval", "reason": reason,
        "replanned": False, "roots": [], "task": task}}}


def test_a_rejection_written_twice_never_answers_the_next_call(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"run": {"id": "twice", "agents": {"a": "", "user": ""}}},
        _decision("book-1", "blocked", "approval_rejected"),
        _decision("book-2", "authorized", "valid"),
        {"agent": "user", "kind": "task", "content": "book"},
        {"agent": "a", "kind": "thought", "content": "no",
         "approval": {"tool": "book", "approved": False}},
        {"agent": "a", "kind": "tool_output", "tool": "book", "content": "BLOCKED",
         "exitcode": 1, "blocked": True, "reason": "approval_rejected", "task": "book-1",
         "ran": False, "answered_by": "human", "decision": "reject", "args": {"r": 1}},
        {"agent": "a", "kind": "thought", "content": "yes",
         "approval": {"tool": "book", "approved": True}},
        {"agent": "a", "kind": "thought", "content": "gate", "task": "book-2",
         "gate": {"outcome": "authorized", "reason": "valid", "tool": "book"}},
        {"agent": "a", "kind": "tool_output", "tool": "book", "content": "ok",
         "exitcode": 0},
        {"agent": "a", "kind": "termination", "content": "done", "final_answer": "done"},
    ]
    path = tmp_path / "twice.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    trace = load_jsonl(path)
    got = {a.action: a for a in trace_lineages(trace.planfence, trace.steps)}
    no, yes = got["book-1"], got["book-2"]
    assert (no.human, yes.human) == ("rejected", "approved")
    assert no.human_step is not None and yes.human_step is not None
    assert no.human_step < yes.human_step  # the thought's step, the first of the two
    assert (no.agent, no.args, no.record) == ("a", '{"r":1}', None)
    assert yes.agent == "a"
