"""Human-answer and tool-outcome lines carry a digest the audit checks (#29).

A recorder writes ``digest`` on each event line the verdict reads besides decisions: a
human's answer to a protected call, and a ``tool_output`` saying whether a protected
call ran. A line edited after recording (``reject`` made ``approve``, ``ran`` false made
true) makes the action it concerns ``INVALID`` with a warning naming the line; a trace
whose such lines carry no digest is audited as before, with one note.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from icore._line_digest import FIELDS, guarded, line_digest, with_digest
from icore._line_seal import whole_digest
from icore.cli import app
from icore.integrations import FenceGuard, RunRecorder
from icore.workspace import Workspace

ORDER = "order/42"


def ship(city: str) -> str:
    """The protected tool."""
    return f"shipped to {city}"


def fenced() -> tuple[RunRecorder, Workspace, Any, FenceGuard]:
    """A recorded run's start: the task, the order written and read by the shipper."""
    rec = RunRecorder("r", question="ship order 42")
    ws = Workspace({"order/*": "sales"})
    agent = ws.agent("shipper")
    guard = FenceGuard(agent=agent, depends_on={ORDER}, recorder=rec)
    rec.task("ship order 42")
    ws.put(ORDER, {"city": "Berlin"})
    agent.read(ORDER)
    return rec, ws, agent, guard


def _recorded(tmp_path: Path) -> Path:
    """A stale call refused (a human had said no to it), then a fresh call that ran."""
    rec, ws, agent, guard = fenced()
    ws.put(ORDER, {"city": "Munich"})  # changed after the read: the call is stale
    assert not guard.run("ship", ship, {"city": "Berlin"}).executed
    (task, *_) = [x["planfence"]["decision"]["task"] for x in rec.planfence
                  if "decision" in x.get("planfence", {})]
    rec.add("reviewer", "thought", "no", answered_by="human", decision="reject",
            tool="ship", task=task, args={"city": "Berlin"})
    agent.read(ORDER)
    assert guard.run("ship", ship, {"city": "Munich"}).executed
    rec.finish("shipper", "shipped to Munich")
    return rec.write(tmp_path / "r.jsonl")


def _lines(p: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]


def _unmarked(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``lines`` as written before the writer marker: the header's marker and digest gone."""
    for x in lines:
        if "run" in x:
            x["run"].pop("icore", None)
            x.pop("digest", None)
    return lines


def _write(p: Path, lines: list[dict[str, Any]]) -> Path:
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p


def _run(tmp_path: Path, trace: Path, *flags: str) -> tuple[int, dict[str, Any], str]:
    js = tmp_path / f"{trace.stem}.json"
    res = CliRunner().invoke(app, ["audit", str(trace), "--no-report", "--json", str(js),
                                   *flags])
    return res.exit_code, json.loads(js.read_text())["runs"][0], res.output


def _statuses(run: dict[str, Any]) -> list[str]:
    return [lv["status"] for lv in run["lineage"]]


def test_the_recorder_writes_digests_and_the_honest_run_audits_clean(tmp_path: Path
                                                                      ) -> None:
    path = _recorded(tmp_path)
    lines = [x for x in _lines(path) if "agent" in x and guarded(x)]
    # the whole-line digest every line carries now (QA qa-new14 S3) covers FIELDS
    assert len(lines) >= 3 and all(x["digest"] == whole_digest(x) for x in lines)
    code, run, _ = _run(tmp_path, path, "--fail-on", "invalid")
    assert code == 0 and sorted(_statuses(run)) == ["blocked", "valid"]
    assert not [w for w in run.get("warnings", ()) if "digest" in w]


def test_reject_edited_into_approve_is_invalid(tmp_path: Path) -> None:
    lines = _lines(_recorded(tmp_path))
    (n, ans), = [(n, x) for n, x in enumerate(lines, 1) if x.get("answered_by") == "human"]
    ans["decision"] = "approve"  # what the audit would report a human did
    code, run, _ = _run(tmp_path, _write(tmp_path / "approve.jsonl", lines),
                        "--fail-on", "invalid")
    assert code == 3 and sorted(_statuses(run)) == ["INVALID", "valid"]
    (bad,) = [lv for lv in run["lineage"] if lv["status"] == "INVALID"]
    assert bad["action"] == ans["task"]
    assert any(f"line {n} of {ans['task']!r} does not match its digest" in w
               for w in run.get("warnings", ()))


def test_ran_flipped_on_a_refused_call_is_invalid(tmp_path: Path) -> None:
    lines = _lines(_recorded(tmp_path))
    (n, out), = [(n, x) for n, x in enumerate(lines, 1)
                 if x.get("kind") == "tool_output" and x.get("blocked") is True]
    out["ran"] = True
    code, run, _ = _run(tmp_path, _write(tmp_path / "ran.jsonl", lines),
                        "--fail-on", "invalid")
    assert code == 3 and sorted(_statuses(run)) == ["INVALID", "valid"]
    assert any(f"line {n} of {out['task']!r} does not match its digest: its fields hash"
               in w for w in run.get("warnings", ()))


def test_a_dropped_digest_among_digested_lines_is_invalid(tmp_path: Path) -> None:
    lines = _lines(_recorded(tmp_path))
    (ans,) = [x for x in lines if x.get("answered_by") == "human"]
    del ans["digest"]
    code, run, _ = _run(tmp_path, _write(tmp_path / "dropped.jsonl", lines),
                        "--fail-on", "invalid")
    assert code == 3 and "INVALID" in _statuses(run)
    assert any("carries no digest while" in w for w in run.get("warnings", ()))


def test_lines_without_digests_audit_as_before_with_one_note(tmp_path: Path) -> None:
    honest = _recorded(tmp_path)
    lines = _unmarked(_lines(honest))
    for x in lines:  # written before #29: no line carries a digest (with the decisions'
        x.pop("digest", None)  # kept, the events' were stripped: INVALID, sweep round 8)
        x.get("planfence", {}).get("decision", {}).pop("digest", None)
        x.pop("chain", None)  # and so no chain
        x.pop("chain_end", None)
    code, run, _ = _run(tmp_path, _write(tmp_path / "old.jsonl", lines),
                        "--fail-on", "invalid")
    _, want, _ = _run(tmp_path, honest)
    assert code == 0 and _statuses(run) == _statuses(want)
    notes = [w for w in run.get("warnings", ()) if "human-answer / tool-outcome" in w]
    assert len(notes) == 1 and "carry no digest" in notes[0]


_value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6),
                                st.floats(allow_nan=False, allow_infinity=False)),
                      lambda c: st.one_of(st.lists(c, max_size=3),
                                          st.dictionaries(st.text(max_size=3), c,
                                                          max_size=3)), max_leaves=8)
_line = st.dictionaries(st.sampled_from((*FIELDS, "content_extra", "at", "digest")),
                        _value, max_size=8)


@settings(max_examples=80, deadline=None)
@given(_line, st.randoms(use_true_random=False))
def test_equal_lines_hash_equal(line: dict[str, Any], rnd: Any) -> None:
    """Equal covered fields hash equal (key order, uncovered fields, a JSON round trip
    do not matter); changing a covered field changes the digest."""
    keys = list(line)
    rnd.shuffle(keys)
    shuffled = {k: line[k] for k in keys}
    shuffled["at"] = "other"
    back = json.loads(json.dumps(line))
    assert line_digest(line) == line_digest(shuffled) == line_digest(back)
    changed = {**line, "decision": ["not", line.get("decision")]}
    assert line_digest(changed) != line_digest(line)
    out = with_digest({**line, "kind": "tool_output", "ran": False})
    assert out["digest"] == line_digest(out)
