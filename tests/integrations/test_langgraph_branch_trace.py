"""Each parallel branch's lines name it in the trace, and the audit lists it (#28).

``Send`` fans out one worker per order (the map-reduce graph of
``test_langgraph_branches.py``): both workers are the agent ``worker``, so before this
their calls could not be told apart in the trace or the audit. Each line a branch makes
(node steps, model turns, tool results, a fenced tool's gate and tool lines) now has
``branch``, the task path with each ``Send`` index (``"worker[1]/tools"``): stable across
runs (LangGraph's task ids are not). ``icore audit --json`` lists each protected action
with its ``branch`` and the report says "in branch ..."; a trace without the field
audits exactly as before. Real LangGraph, a scripted chat model, ``InMemorySaver``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from icore._line_chain import chain_lines
from icore._line_seal import sealed
from icore.cli import app as cli
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler

from .test_langgraph_branches import _CONF, _Shop

pytestmark = pytest.mark.timeout(60)


def _run(run_id: str) -> tuple[_Shop, RunRecorder]:
    shop = _Shop()
    rec = RunRecorder(run_id)
    app = shop.graph({"A": shop.a_reads_42, "B": shop.b_ships_42_unread},
                     checkpointer=InMemorySaver())
    app.invoke({"branches": ["A", "B"]}, {**_CONF, "callbacks": [RecordingHandler(rec)]})
    return shop, rec


def _lines(rec: RunRecorder) -> list[dict[str, Any]]:
    return [x for x in map(json.loads, rec.jsonl().splitlines()) if "agent" in x]


def _audit_json(path: Path, tmp: Path) -> dict[str, Any]:
    js = tmp / f"{path.stem}.json"
    res = CliRunner().invoke(cli, ["audit", str(path), "--no-report", "--json", str(js)],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return json.loads(js.read_text(encoding="utf-8"))["runs"][0]  # type: ignore[no-any-return]


def test_each_branchs_lines_name_their_branch_stably() -> None:
    seen = []
    for n in range(2):  # two runs: other task ids, the same branch names
        _, rec = _run(f"fan-{n}")
        lines = _lines(rec)
        by_branch: dict[str | None, set[str]] = {}
        for x in lines:
            by_branch.setdefault(x.get("branch"), set()).add(str(x["content"]))
        # the parent's lines (the task, the plan node, the end) are in no branch
        assert {"task", "termination"} <= {x["kind"] for x in lines if "branch" not in x}
        assert all(x["agent"] == "worker" for x in lines if "branch" in x)
        a = {b for b in by_branch if b and b.startswith("worker[0]")}
        b = {b for b in by_branch if b and b.startswith("worker[1]")}
        assert a == {"worker[0]", "worker[0]/agent", "worker[0]/tools"}, by_branch.keys()
        assert b == {"worker[1]", "worker[1]/agent", "worker[1]/tools"}, by_branch.keys()
        assert any("get_order" in c for c in by_branch["worker[0]/agent"])  # A read 42
        ships = [(x.get("branch"), bool(x.get("blocked"))) for x in lines
                 if x["kind"] == "tool_output" and x.get("tool") == "ship"]
        assert ships == [("worker[1]/tools", True), ("worker[1]/tools", False)]
        gates = [x.get("branch") for x in lines if x.get("gate")]  # the fenced tool's own
        assert gates and set(gates) == {"worker[1]/tools"}
        seen.append(sorted(b for b in by_branch if b))
    assert seen[0] == seen[1]


def test_audit_lists_each_action_with_its_branch_and_old_traces_as_before(
        tmp_path: Path) -> None:
    _, rec = _run("fan")
    path = rec.write(tmp_path / "fan.jsonl")
    got = _audit_json(path, tmp_path)
    assert [(a["tool"], a["status"], a.get("branch")) for a in got["lineage"]] == [
        ("ship", "blocked", "worker[1]/tools"), ("ship", "valid", "worker[1]/tools")]
    # the same trace without the field (an older icore): the same audit, no branch key
    old = tmp_path / "old" / "fan.jsonl"
    old.parent.mkdir()
    lines = [{k: v for k, v in x.items() if k not in ("branch", "chain", "chain_end",
                                                       "run_digest")
              and (k != "digest" or "run" in x)}
             for x in map(json.loads, path.read_text().splitlines())]
    # sealed and chained again as its writer would have written it (every line is
    # digested: QA qa-new14 S3; a field dropped by hand is an edit)
    old.write_text("".join(json.dumps(x) + "\n" for x in chain_lines(
        lines[0]["run"]["icore"]["writer"], [sealed(x) for x in lines])))
    was = _audit_json(old, tmp_path / "old")
    assert all("branch" not in a for a in was["lineage"])
    assert [{k: v for k, v in a.items() if k != "branch"} for a in got["lineage"]] == \
        was["lineage"]
    assert {k: v for k, v in got.items() if k not in ("file", "report")} == \
        {k: v for k, v in was.items() if k not in ("file", "report", "lineage")} | \
        {"lineage": got["lineage"]}


def test_the_report_names_the_branch_of_each_call(tmp_path: Path) -> None:
    _, rec = _run("fan")
    path = rec.write(tmp_path / "fan.jsonl")
    res = CliRunner().invoke(cli, ["audit", str(path), "--out", str(tmp_path / "r")],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    page = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "r").glob("*.html"))
    assert page.count("in branch <b>worker[1]/tools</b>") == 2
