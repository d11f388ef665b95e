"""``icore audit --json``'s Q / agents / timeline and ``icore compare`` (QA qa-new15c S3).

Small generated JSONL traces, and the shared Who&When data when present.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._cli import invoke

from icore.adapters import MetricPoint, audit_path, classify
from icore.cli._audit_q import (
    MAX_TIMELINE,
    bounded_obligations,
    timeline_points,
)

AGENTS = {"supervisor": "plans and assigns work", "researcher": "searches the web",
          "writer": "writes drafts", "user": ""}


def _trace(path: Path, *, verified: bool = True, plan: bool = False) -> Path:
    """A supervisor run with no plan line (as a LangGraph recording writes it)."""
    lines: list[dict[str, Any]] = [
        {"run": {"id": "sup-1", "question": "Survey audit methods.", "agents": AGENTS,
                 "orchestrator": "supervisor", "succeeded": True}},
        {"agent": "user", "kind": "task", "content": "Survey audit methods."}]
    if plan:
        lines.append({"agent": "supervisor", "kind": "plan", "content": "1. research 2. write"})
    lines += [
        {"agent": "supervisor", "kind": "instruction", "to": "researcher",
         "content": "researcher, please take the next step"},
        {"agent": "researcher", "kind": "output", "content": "calls search(audit)"},
        {"agent": "researcher", "kind": "tool_output", "exitcode": 0,
         "content": "Found 2 papers on multi-agent audit."},
        {"agent": "researcher", "kind": "output", "content": "Found 2 papers."},
        {"agent": "supervisor", "kind": "instruction", "to": "writer",
         "content": "writer, please take the next step"},
        {"agent": "writer", "kind": "output", "content": "Draft: two papers audit agents."}]
    if not verified:
        lines += [{"agent": "writer", "kind": "output",
                   "content": "```python\nprint(open('draft.md').read())\n```"},
                  {"agent": "writer", "kind": "tool_output", "exitcode": 1,
                   "content": "FileNotFoundError: draft.md"}]
    lines.append({"agent": "supervisor", "kind": "termination", "final_answer": "done",
                  "content": "done"})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _audit_json(tmp_path: Path, *paths: Path, name: str = "out.json") -> dict[str, Any]:
    out = tmp_path / name
    code, text = invoke("audit", *map(str, paths), "--no-report", "--json", str(out))
    assert code == 0, text
    doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return doc


def test_json_carries_q_agents_and_timeline(tmp_path: Path) -> None:
    """Q with assignees and stability, per-agent counts, the change points of the timeline;
    the keys that were there before keep their place."""
    run = _audit_json(tmp_path, _trace(tmp_path / "a.jsonl"))["runs"][0]
    assert list(run)[:10] == ["id", "file", "report", "summary", "flags", "diagnoses",
                              "attribution", "paused", "actions", "lineage"]
    q = {o["id"]: o for o in run["obligations"]}
    assert q["task"]["assignee"] == "supervisor" and q["task"]["stable"]  # finding 5
    assert q["o1"] == {"id": "o1", "kind": "analysis", "assignee": "researcher",
                       "status": "submitted", "parent": "task", "weight": 1.0,
                       "stable": True, "sound": True, "in_w": True}  # finding 6c: not web
    ag = run["agents"]
    assert ag["supervisor"]["instructions_given"] == 2
    assert ag["researcher"] == {"obligations": 2, "unstable": 0, "unsound": 0,
                                "outputs": 2, "tool_outputs": 1, "instructions_given": 0,
                                "instructions_received": 1}
    assert ag["writer"]["instructions_received"] == 1 and ag["writer"]["obligations"] == 1
    tl = run["timeline"]
    assert tl[0]["step"] == 0 and tl[-1]["step"] == 7
    assert tl[-1]["cq"] == run["summary"]["cq"] == 1.0
    keys = [(p["snd"], p["astab"], p["cq"], p["flags"], p["stalls"]) for p in tl[:-1]]
    assert all(a != b for a, b in itertools.pairwise(keys))  # change points only
    assert "timeline_sampled" not in run and "obligations_left_off" not in run


def test_orchestrator_holds_the_root_without_a_plan(tmp_path: Path) -> None:
    """The declared orchestrator's first instruction takes the task (as a plan would):
    a clean supervisor run is stable, with or without a plan line."""
    for plan in (False, True):
        r = audit_path(_trace(tmp_path / f"p{plan}.jsonl", plan=plan))
        assert r.state.obligations["task"].assignee == "supervisor"
        assert r.final.astab == 1.0 and not r.diagnoses


def test_without_an_orchestrator_the_first_worker_takes_the_root(tmp_path: Path) -> None:
    """No declared orchestrator: the first agent working self-assigns the root, as before."""
    p = _trace(tmp_path / "a.jsonl")
    lines = p.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    del head["run"]["orchestrator"]
    p.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n", encoding="utf-8")
    assert audit_path(p).state.obligations["task"].assignee == "researcher"


def test_classify_ignores_agent_names() -> None:
    """An agent id matched as a word decides no work kind; other words still do."""
    names = ("researcher", "supervisor", "coder_1", "WebSurfer")
    assert classify("researcher, please take the next step") == "web"  # no names: old rule
    assert classify("researcher, please take the next step", names) == "analysis"
    assert classify("Researcher: search the web for it", names) == "web"
    assert classify("coder_1, review the draft", names) == "verification"
    assert classify("WebSurfer, summarise", names) == "analysis"
    assert classify("please search", ("search",)) == "analysis"
    assert classify("searching", ("search",)) == "web"  # a name counts as a word only
    assert classify("researcher search", ("researcher",)) == "web"


def test_compare_two_traces(tmp_path: Path) -> None:
    """Metric deltas, the flags/diagnoses of one side, the per-agent differences."""
    a = _trace(tmp_path / "a.jsonl")
    b = _trace(tmp_path / "b.jsonl", verified=False)
    out = tmp_path / "cmp.json"
    code, text = invoke("compare", str(a), str(b), "--json", str(out))
    assert code == 0, text
    assert "Δ (B − A)" in text and "1 run(s) compared, 1 differ" in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    (pair,) = doc["pairs"]
    assert pair["changed"] and doc["only_a"] == doc["only_b"] == []
    m = pair["metrics"]
    assert m["snd"]["a"] == 1.0 and m["snd"]["delta"] < 0
    assert m["hard_flags"]["delta"] == 1 and m["steps"]["delta"] == 2
    assert pair["flags"]["only_a"] == [] and len(pair["flags"]["only_b"]) == 1
    assert pair["flags"]["only_b"][0].startswith("unsupported_assertion · writer · ")
    assert pair["diagnoses"]["only_b"][0].startswith("work · writer · ")
    assert pair["agents"]["writer"]["unsound"] == {"a": 0, "b": 1, "delta": 1}


def test_compare_the_same_run_twice_differs_in_nothing(tmp_path: Path) -> None:
    """A trace against its own --json: nothing differs (one run each: paired by count)."""
    a = _trace(tmp_path / "a.jsonl")
    j = tmp_path / "a.json"
    assert invoke("audit", str(a), "--no-report", "--json", str(j))[0] == 0
    code, text = invoke("compare", str(a), str(j))
    assert code == 0, text
    assert "1 run(s) compared, 0 differ" in text
    assert "flags: the same on both sides" in text


def test_compare_refuses_its_input_as_output(tmp_path: Path) -> None:
    """``--json`` naming an input is refused (exit 2), the input left as it was."""
    a = _trace(tmp_path / "a.jsonl")
    before = a.read_bytes()
    code, text = invoke("compare", str(a), str(a), "--json", str(a))
    assert code == 2 and "--json" in text
    assert a.read_bytes() == before


def test_compare_a_json_file_with_no_runs_is_an_error(tmp_path: Path) -> None:
    """An icore --json file with no runs: a clear error, exit 2."""
    j = tmp_path / "empty.json"
    j.write_text(json.dumps({"icore": "0", "runs": []}), encoding="utf-8")
    code, text = invoke("compare", str(j), str(_trace(tmp_path / "a.jsonl")))
    assert code == 2 and "no runs" in text


@pytest.mark.timeout(120)
def test_compare_who_and_when_json_files_pair_runs_by_id(tmp_path: Path,
                                                         shared_data: Path) -> None:
    """Two --json files of Who&When (one with a run fewer): paired by id, the missing
    one named, the same runs equal; real traces carry Q and the timeline."""
    src = shared_data / "who_and_when" / "Hand-Crafted"
    if not src.is_dir():
        pytest.skip(f"{src} not found")
    files = sorted(src.glob("*.json"))[:4]
    if len(files) < 2:
        pytest.skip("too few Who&When runs")
    a = _audit_json(tmp_path, *files, name="a.json")
    b = _audit_json(tmp_path, *files[1:], name="b.json")
    assert len(b["runs"]) == len(files) - 1
    for run in a["runs"]:
        assert run["obligations"][0]["id"] == "task"
        assert run["timeline"][-1]["cq"] == pytest.approx(run["summary"]["cq"], abs=1e-6)
        held = sum(c["obligations"] for c in run["agents"].values())
        assert held == sum(o["assignee"] is not None for o in run["obligations"])
    out = tmp_path / "cmp.json"
    code, text = invoke("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                        "--json", str(out))
    assert code == 0, text
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["only_a"] == [a["runs"][0]["id"]] and doc["only_b"] == []
    assert len(doc["pairs"]) == len(files) - 1
    assert not any(p["changed"] for p in doc["pairs"])


def _points(values: list[int]) -> list[MetricPoint]:
    return [MetricPoint(i, 1.0, v / 7, (1.0 + v / 7) / 2, 0, 0) for i, v in enumerate(values)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=1, max_size=300), st.integers(2, 40))
def test_timeline_points_are_bounded_change_points(values: list[int], limit: int) -> None:
    """At most ``limit`` points, in step order, the first and the last step kept; unsampled,
    exactly the steps where a value changes (plus the last)."""
    pts, sampled = timeline_points(_points(values), limit)
    steps = [p["step"] for p in pts]
    assert len(pts) <= limit and steps == sorted(set(steps))
    assert steps[0] == 0 and steps[-1] == len(values) - 1
    if not sampled:
        want = [i for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
        assert steps == sorted({*want, len(values) - 1})


def test_a_long_run_is_bounded() -> None:
    """A run of 5000 changing steps keeps :data:`MAX_TIMELINE` points; Q over its limit
    keeps every unstable or unsound obligation and counts the rest."""
    pts, sampled = timeline_points(_points([i % 7 for i in range(5000)]))
    assert sampled and len(pts) == MAX_TIMELINE
    rows = [{"id": f"o{i}", "stable": i % 10 != 0, "sound": True} for i in range(50)]
    kept, left = bounded_obligations(rows, 10)
    assert len(kept) == 10 and left == 40
    assert [o["id"] for o in kept] == [f"o{i}" for i in (0, 1, 2, 3, 4, 5, 10, 20, 30, 40)]
