"""Issue 29, second sweep round: manifests' scalars, hand-edited recordings, the span
file under Ctrl-C, two audits into one ``--out``, a run tool's D(a) no agent writes.

Each test names the cause it guards (tools/badinput/surfaces.py generates the inputs)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore._yaml import scalar_problem
from icore.adapters import AdapterError, load_trace
from icore.errors import IcoreError
from icore.live import LiveManifestError, default_manifest, manifest_from_dict
from icore.net import TeamManifest

ENV = {**os.environ, "COLUMNS": "200", "ICORE_LLM_BASE_URL": "", "ICORE_LLM_MODEL": "",
       "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}


def _icore(*args: str, cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "icore", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=120, **kw)


# --- manifests: pydantic's lax mode read true as 1 and "no" as false -------------------
@pytest.mark.parametrize(("field", "value"), [
    ("repeat", True), ("repeat", "3"), ("concurrency", False), ("seeds", [1, True]),
    ("revision", "no"), ("revision", 1)])
def test_run_manifest_takes_numbers_and_bools_only_as_such(field: str, value: Any) -> None:
    data = default_manifest().model_dump(mode="json")
    data[field] = value
    with pytest.raises(LiveManifestError, match=field) as info:
        manifest_from_dict(data, file="m.yaml")
    assert "expected a valid" in str(info.value)


def test_team_manifest_port_true_is_refused() -> None:
    with pytest.raises(Exception, match="expected a valid number, not true"):
        TeamManifest.model_validate({"agents": [{"id": "a", "port": True}]})


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.booleans(), st.text(max_size=8)))
def test_no_bool_or_string_is_a_number(v: Any) -> None:
    assert scalar_problem(v, float) is not None
    assert scalar_problem(v, int | None) is not None
    assert scalar_problem([1, v], tuple[int, ...]) is not None


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.integers(), st.floats(allow_nan=False), st.none()))
def test_numbers_pass_on(v: Any) -> None:
    assert scalar_problem(v, float | None) is None
    assert scalar_problem(v, str) is None


def test_run_tool_scope_must_be_a_key_the_workflow_writes() -> None:
    data = default_manifest().model_dump(mode="json")
    data["tools"][0]["depends_on"] = ["NaN"]
    with pytest.raises(LiveManifestError, match="no key the workflow's agents write"):
        manifest_from_dict(data, file="m.yaml")
    data["tools"][0]["depends_on"] = ["req/{task}", "cat/{task}"]
    manifest_from_dict(data, file="m.yaml")


# --- hand-edited recordings: markers are JSON booleans ---------------------------------
@pytest.mark.parametrize(("field", "kind"), [("pause", "thought"), ("replan", "plan"),
                                             ("terminates", "output")])
@pytest.mark.parametrize("value", ["yes", "no", 1, 0, "true", [True]])
def test_jsonl_markers_must_be_json_booleans(tmp_path: Path, field: str, kind: str,
                                             value: Any) -> None:
    p = tmp_path / "run.jsonl"
    p.write_text(json.dumps({"agent": "user", "kind": "task", "content": "x"}) + "\n" +
                 json.dumps({"agent": "a", "kind": kind, "content": "y", field: value}) + "\n")
    with pytest.raises(AdapterError, match=f"line 2.{field}") as info:
        load_trace(p)
    assert "run.jsonl" in str(info.value)


def test_jsonl_markers_as_booleans_still_read(tmp_path: Path) -> None:
    p = tmp_path / "run.jsonl"
    p.write_text(json.dumps({"agent": "user", "kind": "task", "content": "x"}) + "\n" +
                 json.dumps({"agent": "a", "kind": "thought", "content": "y", "pause": False})
                 + "\n")
    assert not load_trace(p).steps[1].pause


@pytest.mark.parametrize(("kind", "field", "value"), [
    ("thought", "pause", "no"), ("plan", "replan", 1), ("output", "terminates", "yes")])
def test_recorder_refuses_non_bool_markers_at_the_call(kind: str, field: str,
                                                      value: Any) -> None:
    from icore.integrations import RunRecorder
    rec = RunRecorder()
    with pytest.raises(IcoreError, match=field):
        rec.add("a", kind, "x", **{field: value})
    assert rec.events == []


# --- the OTLP span file under Ctrl-C ----------------------------------------------------
def _runs(folder: Path, n: int) -> None:
    folder.mkdir()
    for i in range(n):
        lines = [{"run": {"id": f"r{i}"}}, {"agent": "user", "kind": "task", "content": "q"},
                 {"agent": "a", "kind": "output", "content": "answer " * 50},
                 {"agent": "a", "kind": "termination", "content": "done",
                  "final_answer": "4"}]
        (folder / f"t{i:03d}.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")


def test_span_file_append_is_one_write_of_whole_lines(tmp_path: Path) -> None:
    from icore.adapters._otlp_file import _append_whole
    p = tmp_path / "s.jsonl"
    p.write_text('{"a":1}\n')
    _append_whole(p, b'{"b":"' + b"x" * 1_000_000 + b'"}\n')
    lines = p.read_bytes().splitlines()
    assert len(lines) == 2 and all(json.loads(x) for x in lines)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("delay", [0.8, 1.6])
def test_ctrl_c_during_export_leaves_an_importable_span_file(tmp_path: Path,
                                                             delay: float) -> None:
    _runs(tmp_path / "runs", 300)
    spans = tmp_path / "spans.otlp.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "icore", "audit", str(tmp_path / "runs"),
                          "--no-report", "--otlp-endpoint", f"file:{spans}"], env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert "Traceback" not in out
    data = spans.read_bytes() if spans.exists() else b""
    assert data == b"" or data.endswith(b"\n")
    for line in data.splitlines():
        json.loads(line)  # every line whole
    if data:
        r = _icore("audit", str(spans), "--no-report", cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr


# --- two audits into one --out ------------------------------------------------------------
@pytest.mark.timeout(300)
def test_second_audit_into_a_busy_out_waits_its_turn(tmp_path: Path) -> None:
    _runs(tmp_path / "runs", 3)
    out = tmp_path / "o"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as another audit writing there holds it
        p = subprocess.Popen([sys.executable, "-m", "icore", "audit", str(tmp_path / "runs"),
                              "-o", str(out)], env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        line = p.stderr.readline() if p.stderr else ""
        assert "waiting: another icore audit is writing to" in line
        assert not (out / "index.html").exists()
    finally:
        os.close(fd)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert all(f"r{i}" in (out / "index.html").read_text() for i in range(3))


@pytest.mark.timeout(300)
def test_two_concurrent_audits_into_one_out_both_end_well(tmp_path: Path) -> None:
    _runs(tmp_path / "runs", 20)
    procs = [subprocess.Popen([sys.executable, "-m", "icore", "audit", str(tmp_path / "runs"),
                               "-o", str(tmp_path / "o")], env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=200)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert not any("Traceback" in o for o in outs)
    again = _icore("audit", str(tmp_path / "runs"), "-o", str(tmp_path / "o"), cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.timeout(300)
def test_an_audit_into_a_new_out_is_waited_for_and_other_folders_never_wait(
        tmp_path: Path) -> None:
    """The first audit into a new ``--out`` holds that folder's lock (it used to lock the
    parent, so a second audit into the same folder, started once it existed, never
    waited); an audit into another folder of the same parent does not wait (review)."""
    from icore.cli._audit import _out_lock
    _runs(tmp_path / "runs", 2)
    new = tmp_path / "new"

    def audit(out: Path) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "icore", "audit",
                                 str(tmp_path / "runs"), "-o", str(out)], env=ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    with _out_lock(new):  # as an audit that has just made `new`
        assert new.is_dir()
        other = audit(tmp_path / "other")
        _, err = other.communicate(timeout=120)
        assert other.returncode == 0 and "waiting" not in err, err
        same = audit(new)
        line = same.stderr.readline() if same.stderr else ""
        assert "waiting: another icore audit is writing to" in line
        assert not (new / "index.html").exists()
    _, err = same.communicate(timeout=120)
    assert same.returncode == 0, err
    assert (new / "index.html").exists()


def test_the_lock_removes_a_folder_it_made_only_when_left_empty(tmp_path: Path) -> None:
    from icore.cli._audit import _out_lock
    with _out_lock(tmp_path / "a" / "b"):
        pass
    assert not (tmp_path / "a").exists()
    with _out_lock(tmp_path / "c"):
        (tmp_path / "c" / "index.html").write_text("x")
    assert (tmp_path / "c" / "index.html").exists()


# --- Workspace keys and fenced tools -----------------------------------------------------
@pytest.mark.parametrize("key", ["k\x00", "k/\udcff"])
def test_workspace_refuses_a_fact_key_no_store_can_hold(key: str) -> None:
    from icore.workspace import Workspace
    with pytest.raises(IcoreError, match="no NUL"):
        Workspace({key: "o"})


def test_generator_functions_are_no_fenced_tools() -> None:
    pytest.importorskip("langchain_core")
    from icore.integrations.langgraph import fenced_tool
    from icore.workspace import Workspace
    ws = Workspace({"k/*": "o"})
    ws.put("k/1", 1)

    def gen(x: int):  # type: ignore[no-untyped-def]
        """Yield."""
        yield x

    async def agen(x: int):  # type: ignore[no-untyped-def]
        """Yield."""
        yield x

    for fn in (gen, agen):
        with pytest.raises(IcoreError, match="generator function"):
            fenced_tool(fn, depends_on={"k/1"}, agent=ws.agent("a"))


@pytest.mark.parametrize(("kw", "named"), [
    ({"timeout_s": -1}, "timeout_s"), ({"timeout_s": float("nan")}, "timeout_s"),
    ({"timeout_s": True}, "timeout_s"), ({"timeout_s": "3"}, "timeout_s"),
    ({"stores": {"o": 5}}, "stores"), ({"stores": [1]}, "stores"),
    ({"remote": "x"}, "remote"), ({"closing": 5}, "closing")])
def test_workspace_constructor_refuses_wrong_types_at_the_call(kw: dict[str, Any],
                                                                named: str) -> None:
    from icore.workspace import Workspace
    with pytest.raises(IcoreError, match=named):
        Workspace({"k": "o"}, **kw)
