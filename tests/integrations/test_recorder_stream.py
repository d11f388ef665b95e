"""A recorded run written as it goes survives ``kill -9`` (#25, QA "kill -9 leaves nothing").

``RunRecorder(run_id, path=...)`` appends every line the moment it is made; a process
killed mid-run leaves a file ``icore audit`` reads as a run that did not end, with every
protected call that ran and its decision (written and fsync-ed before the tool body
ran), and a chain that verifies. After a normal end the file is byte for byte what
``write()`` gives. Real parts: a real child process killed with SIGKILL, real files,
the real ``icore audit`` command.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from icore.adapters import load_jsonl, parse_jsonl, trace_lineages
from icore.adapters._trace import run_ended
from icore.cli import app
from icore.errors import IntegrationError
from icore.integrations import FenceGuard, NoEffect, RunRecorder
from icore.workspace import Workspace

ORDER = "order/42"
SRC = str(Path(__file__).resolve().parents[2] / "src")

CHILD = r"""
import sys, time
from pathlib import Path
from icore.integrations import FenceGuard, RunRecorder
from icore.workspace import Workspace

ws = Workspace({"order/42": "sales"})
ws.put("order/42", {"city": "Berlin"})
shipper = ws.agent("shipper")
rec = RunRecorder("killed", path=sys.argv[1], question="ship order 42")
guard = FenceGuard(agent=shipper, depends_on={"order/42"}, recorder=rec)
rec.task("ship order 42")
shipper.read("order/42")
rec.turn("shipper", "I will ship order 42 to Berlin")

def ship(city):
    Path(sys.argv[2]).write_text(city)  # the effect happened; the parent kills us now
    time.sleep(60)
    return "shipped to " + city

guard.run("ship", ship, {"city": "Berlin"})
rec.finish("shipper", "shipped")  # never reached
"""


def _audit(*argv: str) -> Any:
    return CliRunner().invoke(app, ["audit", "--no-report", *argv])


def _world() -> tuple[Workspace, Any]:
    ws = Workspace({ORDER: "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    return ws, ws.agent("shipper")


def test_a_run_killed_mid_tool_keeps_the_call_and_its_decision(tmp_path: Path) -> None:
    """A child SIGKILLed while its first protected call's body runs: the file it leaves
    audits as not ended (``--fail-on not-ended`` exits 3), the call is there with its
    authorizing decision (outcome unknown: it may have run), nothing is ``INVALID``
    (``--fail-on invalid`` passes) and the chain of the prefix verifies."""
    trace, effect = tmp_path / "run.jsonl", tmp_path / "effect"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(trace), str(effect)],
                             env={**os.environ, "PYTHONPATH": SRC})
    try:
        for _ in range(600):  # the body started (the effect is written): kill -9
            if effect.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert effect.read_text() == "Berlin", "the tool body never ran"
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    t = load_jsonl(trace)
    assert not run_ended(t.steps)
    assert t.planfence is not None and t.planfence.chain_broken is None
    (ship,) = trace_lineages(t.planfence, t.steps)
    assert ship.action == "ship-1" and ship.status == "valid" and ship.outcome_unknown
    assert [d.outcome for d in t.planfence.decisions] == ["authorized"]
    js = tmp_path / "a.json"
    res = _audit(str(trace), "--json", str(js), "--fail-on", "invalid")
    assert res.exit_code == 0, res.output
    res = _audit(str(trace), "--fail-on", "not-ended")
    assert res.exit_code == 3 and "--fail-on not-ended: 1 run(s): killed" in res.output
    run = json.loads(js.read_text())["runs"][0]
    assert [(a["action"], a["outcome"]) for a in run["lineage"]] == [("ship-1", "unknown")]
    assert not any("chain" in w for w in run.get("warnings", ()))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_decision_is_on_disk_before_the_body_runs(tmp_path: Path, mode: str) -> None:
    """Inside the body (sync ``run``, async ``arun``) the file already holds the call's
    authorizing decision under the task its later lines name."""
    _ws, shipper = _world()
    p = tmp_path / "run.jsonl"
    rec = RunRecorder("ahead", path=p, fsync="off")
    rec.task("ship")
    shipper.read(ORDER)
    seen: list[list[Any]] = []

    def look() -> None:
        seen.append([x["planfence"]["decision"]["task"] for x in map(
            json.loads, p.read_text().splitlines()) if "decision" in x.get("planfence", {})])

    def ship(city: str) -> str:
        look()
        return city

    async def aship(city: str) -> str:
        look()
        return city

    guard = FenceGuard(agent=shipper, depends_on={ORDER}, recorder=rec)
    if mode == "sync":
        assert guard.run("ship", ship, {"city": "Berlin"}).executed
    else:
        assert asyncio.run(guard.arun("ship", aship, {"city": "Berlin"})).executed
    assert seen == [["ship-1"]]
    rec.close()
    assert [e.get("task") for e in rec.events if e["kind"] == "thought"] == ["ship-1"]
    assert p.read_text().count('"decision"') == 1


def test_a_body_stopped_on_purpose_is_no_call_in_write(tmp_path: Path) -> None:
    """A control-flow exception from the body (a pause, a stop on purpose: here the
    approvals' ``ApprovalChanged``) records no call, as without a file: its decision
    written ahead leaves ``write()``; the file, which cannot take a line back, gets it
    again ``may_have_run: false`` (a kill then reads it failed, never unknown)."""
    from icore.integrations._approvals import ApprovalChanged

    _ws, shipper = _world()
    p = tmp_path / "run.jsonl"
    rec = RunRecorder("paused", path=p)
    rec.task("ship")
    shipper.read(ORDER)

    def ship(city: str) -> str:
        raise ApprovalChanged({"city": city}, {"city": "Munich"})

    with pytest.raises(ApprovalChanged):
        FenceGuard(agent=shipper, depends_on={ORDER}, recorder=rec).run(
            "ship", ship, {"city": "Berlin"})
    assert '"decision"' not in rec.jsonl()
    t = load_jsonl(p)
    assert t.planfence is not None and t.planfence.chain_broken is None
    (a,) = trace_lineages(t.planfence, t.steps)
    assert not a.outcome_unknown and "stopped on purpose" in str(a.points[-1].entry.error)
    rec.close()
    assert p.read_text() == rec.jsonl()


def test_a_torn_last_line_is_a_torn_tail_not_an_edit(tmp_path: Path) -> None:
    """A line cut by the kill (no newline): a warning names the torn tail, the run is
    read up to it and not ended; ``--fail-on invalid`` passes (the prefix's chain is
    whole: a torn tail is no edit), ``--fail-on not-ended`` fails."""
    _ws, shipper = _world()
    p = tmp_path / "run.jsonl"
    rec = RunRecorder("torn", path=p)
    rec.task("ship order 42")
    shipper.read(ORDER)
    assert FenceGuard(agent=shipper, depends_on={ORDER}, recorder=rec).run(
        "ship", lambda city: city, {"city": "Berlin"}).executed
    whole = p.read_bytes()
    last = whole[:-1].rfind(b"\n") + 1
    p.write_bytes(whole[:last + (len(whole) - last) // 2])  # killed mid-line
    t = load_jsonl(p)
    assert any("is cut off" in w and "did not end" in w for w in t.warnings)
    assert t.planfence is not None and t.planfence.chain_broken is None
    assert _audit(str(p), "--fail-on", "invalid").exit_code == 0
    res = _audit(str(p), "--fail-on", "not-ended")
    assert res.exit_code == 3 and "cut off" in res.output


def test_after_a_normal_end_the_file_is_what_write_gives(tmp_path: Path) -> None:
    """The ``with`` block's end closes the file: byte for byte ``write()``'s text (the
    header with every agent and the outcome set after the run); ``write()`` to the
    run's own path is its close; another path is an ordinary write."""
    ws, shipper = _world()
    p = tmp_path / "run.jsonl"
    with RunRecorder("ok", path=p) as rec:
        rec.task("ship order 42")
        shipper.read(ORDER)
        ws.update(ORDER, lambda o: {"city": "Munich"})
        guard = FenceGuard(agent=shipper, depends_on={ORDER}, recorder=rec)
        assert not guard.run("ship", lambda city: city, {"city": "Berlin"}).executed
        assert guard.run("ship", lambda city: city, {"city": "Munich"}).executed
        rec.finish("shipper", "shipped to Munich")
        rec.succeeded = True
        assert not run_ended(parse_jsonl(p.read_text()).steps)  # the end waits for close
    assert p.read_text() == rec.jsonl()
    assert rec.write(p) == p and p.read_text() == rec.jsonl()
    assert _audit(str(p), "--fail-on", "invalid,not-ended,unknown").exit_code == 0
    other = rec.write(tmp_path / "copy.jsonl")
    assert other.read_text() == p.read_text()


def test_a_failed_body_writes_its_decision_again_with_the_failure(tmp_path: Path) -> None:
    """The decision is on disk before the body; the body raises: the file gets the same
    decision again with its error (append-only), read as one decision that failed after
    authorization; ``write()`` carries it once, with the error."""
    _ws, shipper = _world()
    p = tmp_path / "run.jsonl"
    rec = RunRecorder("failed", path=p)
    rec.task("ship")
    shipper.read(ORDER)
    guard = FenceGuard(agent=shipper, depends_on={ORDER}, recorder=rec)

    def ship(city: str) -> str:
        raise RuntimeError("carrier down")

    with pytest.raises(RuntimeError):
        guard.run("ship", ship, {"city": "Berlin"})
    streamed = [json.loads(x) for x in p.read_text().splitlines()]
    decisions = [x["planfence"]["decision"] for x in streamed if "decision" in x.get(
        "planfence", {})]
    assert [d.get("error") for d in decisions] == [None, "RuntimeError: carrier down"]
    (a,) = trace_lineages(*(lambda t: (t.planfence, t.steps))(load_jsonl(p)))
    assert a.outcome_unknown and len(a.points) == 1
    final = [json.loads(x) for x in rec.jsonl().splitlines()]
    assert [x["planfence"]["decision"].get("may_have_run") for x in final
            if "decision" in x.get("planfence", {})] == [True]


def test_a_decision_that_cannot_be_written_keeps_the_body_from_running(
        tmp_path: Path) -> None:
    """Fail closed: the file stopped being written (closed here); the authorized call's
    body does not run, the model gets a NoEffect, recorded ``ran: false``."""
    _ws, shipper = _world()
    rec = RunRecorder("closed", path=tmp_path / "run.jsonl")
    rec.task("ship")
    rec.close()
    shipper.read(ORDER)
    ran: list[str] = []
    with pytest.raises(NoEffect, match="could not be written"):
        FenceGuard(agent=shipper, depends_on={ORDER}, recorder=rec).run(
            "ship", ran.append, {"city": "Berlin"})
    assert ran == []
    assert any(e.get("ran") is False for e in rec.events if e["kind"] == "tool_output")


def test_an_earlier_file_is_never_written_over(tmp_path: Path) -> None:
    """A closed run's file is moved aside (kept); a killed run's file, a user's file and
    a folder are refused with a typed error naming the path; nothing there changes."""
    p = tmp_path / "run.jsonl"
    with RunRecorder("first", path=p) as rec:
        rec.task("one")
    first = p.read_bytes()
    with RunRecorder("second", path=p) as rec2:
        rec2.task("two")
    assert (tmp_path / "run-1.jsonl").read_bytes() == first
    killed = tmp_path / "killed.jsonl"
    RunRecorder("killed", path=killed).task("x")  # never closed: as a killed run's
    before = killed.read_bytes()
    with pytest.raises(IntegrationError, match="not closed") as ei:
        RunRecorder("again", path=killed)
    assert "icore audit" in ei.value.fields["fix"] and killed.read_bytes() == before
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes\n")
    with pytest.raises(IntegrationError, match="not written by icore"):
        RunRecorder("x", path=mine)
    assert mine.read_text() == "my notes\n"
    for bad, match in ((tmp_path, "directory"), ("", "empty"), ("  ", "blank"),
                       (3, "str or os.PathLike")):
        with pytest.raises(IntegrationError, match=match):
            RunRecorder("x", path=bad)  # type: ignore[arg-type]
    with pytest.raises(IntegrationError, match="fsync must be one of"):
        RunRecorder("x", path=tmp_path / "y.jsonl", fsync="always")  # type: ignore[arg-type]
    assert not (tmp_path / "y.jsonl").exists()


# ---------------------------------------------------------------- property
_OPS = st.lists(st.sampled_from(["turn", "handoff", "tool", "plan", "valid", "stale",
                                 "fails", "noeffect", "change", "thought"]),
                max_size=7)


def _run_ops(rec: RunRecorder, ws: Workspace, shipper: Any, ops: list[str]) -> None:
    guard = FenceGuard(agent=shipper, depends_on={ORDER}, recorder=rec)
    rec.task("ship order 42")
    for i, op in enumerate(ops):
        if op == "turn":
            rec.turn("planner", f"turn {i}")
        elif op == "handoff":
            rec.handoff("planner", "shipper")
        elif op == "tool":
            rec.tool_call("shipper", "lookup", {"n": i}, f"result {i}")
        elif op == "plan":
            rec.plan("planner", f"plan {i}")
        elif op == "thought":
            rec.add("shipper", "thought", f"note {i}")
        elif op == "change":
            ws.update(ORDER, lambda o, i=i: {"city": f"c{i}"})
        else:
            city = shipper.read(ORDER)["city"] if op != "stale" else "nowhere"

            def body(city: str, op: str = op) -> str:
                if op == "fails":
                    raise RuntimeError("down")
                if op == "noeffect":
                    raise NoEffect("declined")
                return city

            try:
                guard.run("ship", body, {"city": city})
            except (RuntimeError, NoEffect):
                pass


def _verdicts(text: str) -> tuple[bool, list[tuple[str, str, bool]]]:
    t = parse_jsonl(text)
    assert t.planfence is None or t.planfence.chain_broken is None, t.planfence.chain_broken
    return run_ended(t.steps), [(a.action, str(a.status), a.outcome_unknown)
                                for a in trace_lineages(t.planfence, t.steps)]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, end=st.booleans(), fsync=st.sampled_from(["decisions", "lines", "off"]))
def test_the_streamed_file_is_write_and_every_prefix_audits(ops: list[str], end: bool,
                                                            fsync: str) -> None:
    """For any run: every prefix of the appended file cut at a line boundary (what a
    kill leaves) audits as not ended, its chain whole, no action ``INVALID``; the whole
    appended file gives the same actions and verdicts as ``write()``; after the close
    the file is byte for byte ``write()``'s."""
    with tempfile.TemporaryDirectory() as d:
        ws, shipper = _world()
        p = Path(d) / "run.jsonl"
        rec = RunRecorder("prop", path=p, fsync=fsync)  # type: ignore[arg-type]
        _run_ops(rec, ws, shipper, ops)
        if end:
            rec.finish("shipper", "done")
        streamed = p.read_text(encoding="utf-8")
        lines = streamed.splitlines(keepends=True)
        for n in range(2, len(lines) + 1):  # line 1 is the header: no step yet
            ended, verdicts = _verdicts("".join(lines[:n]))
            assert not ended
            assert all(status != "invalid" for _, status, _ in verdicts), verdicts
        rec.close()
        final = p.read_text(encoding="utf-8")
        assert final == rec.jsonl()
        assert _verdicts(streamed)[1] == _verdicts(final)[1]
        assert _verdicts(final)[0] == end
