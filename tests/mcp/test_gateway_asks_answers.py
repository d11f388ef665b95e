"""A human's answer to an upstream's question, classified truthfully (QA qa-new11, #29).

Real parts: the SDK's client launching ``icore mcp`` over stdio, answering the
upstream's ``ctx.elicit`` forms (tests/mcp/upstream_asks.py): a two-field form
(``approve: bool``, ``note: str``) answered ``accept {"approve": false}`` is a
rejection, not an approval; an answer that does not fit the form, or a free-input form
(no yes/no field), is recorded as answered, neither approved nor rejected; one that
does not fit a protected call's form is not passed on (fail closed). The audit
says the answer came while the call ran (after its gate) and shows the call's arguments.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from icore.adapters import load_jsonl, trace_lineages
from icore.mcp._gateway_asks import ANSWERED, CONTENT_CAP, human_decision
from icore.report import trace_lineage

from .test_gateway_asks import UPSTREAM, _stdio

BUDGET = "fact://plan/budget"
NOTED = {"type": "object", "required": ["approve"],
         "properties": {"approve": {"type": "boolean"},
                        "note": {"type": "string", "default": ""}}}


def _manifest(folder: Path) -> Path:
    m = {"name": "answers-gateway",
         "upstreams": {"asks": {"command": sys.executable, "args": [str(UPSTREAM)],
                                "timeout_s": 10.0}},
         "facts": {"owners": {"fact://plan/*": "planner"}, "initial": {BUDGET: 100}},
         "tools": {"approve_noted": {"depends_on": [BUDGET]},
                   "ask_name": {"depends_on": [BUDGET]}},
         "trace": str(folder / "trace.jsonl")}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def test_two_field_form_no_is_rejected_and_nonsense_is_not_approved(tmp_path: Path) -> None:
    """``accept {"approve": false, "note": ...}`` (two fields): rejected (trace and audit);
    ``accept {"approve": true, "note": "ok"}``: approved; a nonsense answer and a
    free-input answer: recorded with their content, neither approved nor rejected; the
    audit's reason says "after the gate" and its lineage has each call's arguments."""
    import mcp_types as types
    answers = iter([{"approve": False, "note": "no way"}, {"approve": True, "note": "ok"},
                    {"approve": "nope", "x": "y"}, {"name": "x" * 2000}])

    async def elicit(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content=next(answers))

    async def main() -> None:
        async with _stdio(_manifest(tmp_path), elicitation_callback=elicit) as s:
            await s.call_tool("icore_get_fact", {"key": BUDGET})
            r = await s.call_tool("approve_noted", {"amount": 1})
            assert "approve=False" in str(r.content), r
            await s.call_tool("approve_noted", {"amount": 2})
            r = await s.call_tool("approve_noted", {"amount": 3})
            assert "does not fit the requested form" in str(r.content), r  # not acted on
            await s.call_tool("ask_name", {"amount": 4})

    anyio.run(main)
    trace = tmp_path / "trace.jsonl"
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    said = [x for x in lines if isinstance(x.get("ask"), dict) and "action" in x["ask"]]
    # an answer that does not fit a protected call's form is not passed on (fail closed,
    # QA qa-new13c: the upstream's parser may read "yes" as true and act on it)
    assert [x["ask"]["decision"] for x in said] == ["reject", "approve", "reject", ANSWERED]
    # the unfitting answer the gateway refused reads as a rejection (QA qa-new15b S4)
    assert [x.get("decision") for x in said] == ["reject", "approve", "reject", None]
    assert said[2]["ask"]["content"] == {"approve": "nope", "x": "y"}
    assert said[2]["ask"]["error"].startswith(
        "the human's answer does not fit the requested form (field(s) approve, x not of "
        "the form's type or values); not passed to the upstream of a protected call")
    assert "an unfitting answer from the client" in said[2]["content"]
    assert "neither approved nor rejected" in said[3]["content"]
    cut = said[3]["ask"]["content"]
    assert isinstance(cut, str) and len(cut) <= CONTENT_CAP + 1
    t = load_jsonl(trace)
    lineages = trace_lineages(t.planfence, t.steps)
    assert [a.human for a in lineages] == ["rejected", "approved", "rejected", None]
    # the answer's own step (after the gate's), its arguments from the call's lines
    steps = [i for i, x in enumerate(lines[1:]) if x in said]
    assert [a.human_step for a in lineages[:2]] == steps[:2]
    assert [a.args for a in lineages] == [f'{{"amount":{n}}}' for n in (1, 2, 3, 4)]
    views = trace_lineage(t.planfence, t.steps)
    assert "approved by a human at step" in views[1].reason
    assert "while the call ran, after the gate" in views[1].reason
    assert "before the gate" not in " ".join(v.reason for v in views)


@pytest.mark.parametrize(("action", "content", "schema", "want"), [
    ("decline", None, NOTED, "reject"),
    ("cancel", {"approve": True}, NOTED, "reject"),
    ("accept", {"approve": True}, NOTED, "approve"),
    ("accept", {"approve": False, "note": "no"}, NOTED, "reject"),
    ("accept", {"approve": 1}, NOTED, ANSWERED),
    ("accept", {"note": "hm"}, NOTED, ANSWERED),
    ("accept", {"approve": True, "extra": 1}, NOTED, ANSWERED),
    ("accept", {"approve": True, "note": 5}, NOTED, ANSWERED),
    ("accept", None, NOTED, ANSWERED),
    ("accept", {"approve": True}, None, ANSWERED),
    ("accept", {"name": "bob"}, {"properties": {"name": {"type": "string"}}}, ANSWERED),
    ("accept", {"a": True, "b": True}, {"properties": {"a": {"type": "boolean"},
                                                       "b": {"type": "boolean"}}}, "approve"),
    ("accept", {"a": True}, {"properties": {"a": {"type": "boolean"},
                                            "b": {"type": "boolean"}}}, ANSWERED),
    ("accept", {"c": "red"}, {"properties": {"c": {"type": "string", "enum": ["blue"]},
                                             "ok": {"type": "boolean"}}}, ANSWERED),
])
def test_human_decision_fails_closed(action: str, content: Any, schema: Any,
                                     want: str) -> None:
    """Approve only a form whose every yes/no field is yes and whose content fits."""
    assert human_decision(action, content, schema) == want


def test_unfitting_answer_to_unprotected_call_is_passed_on_and_named(tmp_path: Path) -> None:
    """An unprotected call's upstream gets the human's answer as given (nothing to fence),
    but the trace says it does not fit the form, and why (not a plain "answered")."""
    import mcp_types as types

    async def elicit(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"approve": "nope"})

    m = yaml.safe_load(_manifest(tmp_path).read_text(encoding="utf-8"))
    del m["tools"]["approve_noted"]  # unprotected now
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")

    async def main() -> None:
        async with _stdio(path, elicitation_callback=elicit) as s:
            r = await s.call_tool("approve_noted", {"amount": 1})
            assert "does not fit" not in str(r.content), r  # passed on, not refused

    anyio.run(main)
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    said = [x for x in lines if isinstance(x.get("ask"), dict) and "action" in x["ask"]]
    assert len(said) == 1 and said[0]["ask"]["decision"] == ANSWERED
    assert said[0]["ask"]["misfit"] == "field(s) approve not of the form's type or values"
    assert "it does not fit the requested form: field(s) approve" in said[0]["content"]
    assert "decision" not in said[0]
