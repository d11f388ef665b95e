"""An edited gateway trace cannot hide a protected call that ran unauthorized (#29).

QA qa-new8 S3: a "ran" ``tool_output`` of protected ``book`` added with no ``task``, or
a refused call's decision deleted and its output flipped to ran, passed ``icore audit
--fail-on invalid``. Per tool, "ran" outputs beyond the calls the gate authorized are
now INVALID (docs/audit-real-runs.md). A real ``icore mcp`` writes the trace; the real
CLI audits it and its edits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import env, stdio_upstream, write_manifest
from .test_gateway_stop import _Raw

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """One refused ``book`` (memo://city not read), then one authorized."""
    d = tmp_path_factory.mktemp("gw")
    gw = _Raw(write_manifest(d, {"trip": stdio_upstream(d / "up.log")}))
    try:
        gw.start()  # reads memo://price
        refused = gw.send("tools/call", {"name": "book", "arguments": {"city": "Porto",
                                                                       "price": 100}})
        assert refused["result"]["isError"] is True
        gw.send("resources/read", {"uri": "memo://city"})
        ok = gw.send("tools/call", {"name": "book", "arguments": {"city": "Porto",
                                                                  "price": 100}})
        assert ok["result"]["isError"] is False, ok
    finally:
        gw.p.stdin.close()  # type: ignore[union-attr]
        gw.p.wait(timeout=60)
        gw.stop()
    return [json.loads(x) for x in (d / "trace.jsonl").read_text(encoding="utf-8").splitlines()]


def _audit(tmp_path: Path, lines: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    got = subprocess.run([sys.executable, "-m", "icore", "audit", str(path), "--no-report",
                          "--fail-on", "invalid", "--json", str(tmp_path / "a.json")],
                         capture_output=True, text=True, env=env(), timeout=120, check=False)
    assert "Traceback" not in got.stderr, got.stderr
    return got.returncode, json.loads((tmp_path / "a.json").read_text())["runs"][0]


def _ran(line: dict[str, Any]) -> bool:
    return line.get("kind") == "tool_output" and line.get("tool") == "book"


def test_the_honest_trace_passes(tmp_path: Path, trace: list[dict[str, Any]]) -> None:
    code, run = _audit(tmp_path, trace)
    assert code == 0 and run["actions"]["valid"] == 1 and run["actions"]["blocked"] == 1


def test_an_added_ran_output_without_task_is_invalid(tmp_path: Path,
                                                     trace: list[dict[str, Any]]) -> None:
    ok = next(x for x in trace if _ran(x) and x.get("exitcode") == 0)
    added = {k: v for k, v in ok.items() if k != "task"} | {"content": "booked again"}
    at = trace.index(ok) + 1
    code, run = _audit(tmp_path, [*trace[:at], added, *trace[at:]])
    # the copied line also fails its digest (#29) and names no task, so every action of
    # its tool fails closed: nothing of this tool is left counted valid
    assert code == 3 and run["actions"]["INVALID"] >= 1, run["actions"]
    assert run["actions"]["valid"] == 0, run["actions"]
    assert any("digest" in w for w in run.get("warnings", ())), run.get("warnings")


def test_a_deleted_refusal_with_its_output_flipped_is_invalid(
        tmp_path: Path, trace: list[dict[str, Any]]) -> None:
    blocked = next(x for x in trace if _ran(x) and x.get("blocked"))
    task = blocked["task"]
    edited = []
    for x in trace:
        if x.get("task") == task and x.get("kind") == "thought":
            continue  # the gate's thought
        if x.get("planfence", {}).get("decision", {}).get("task") == task:
            continue  # its decision
        if x is blocked:
            x = {k: v for k, v in x.items() if k not in ("blocked", "reason")} | {
                "exitcode": 0, "content": "booked at 100"}
        edited.append(x)
    # the deleted lines break the gateway's chain (#29): every action is INVALID
    code, run = _audit(tmp_path, edited)
    assert code == 3 and run["actions"]["valid"] == 0, run["actions"]
    assert any("breaks at line" in w for w in run.get("warnings", ())), run.get("warnings")
    # without the chain (a trace written before it, so with no writer marker either),
    # the ran-surplus rule alone fires
    old = [{k: v for k, v in x.items() if k not in ("chain", "chain_end")
            and not ("run" in x and k == "digest")} for x in edited]
    for x in old:
        if "run" in x:
            x["run"] = {k: v for k, v in x["run"].items() if k != "icore"}
    code, run = _audit(tmp_path, old)
    assert code == 3 and run["actions"]["INVALID"] == 1, run["actions"]
    (bad,) = [lv for lv in run["lineage"] if lv["status"] == "INVALID"]
    assert "no decision" in bad["action"] and "beyond the calls the gate authorized" in \
        bad["reason"], bad
