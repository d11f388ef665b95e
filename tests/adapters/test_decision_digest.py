"""Decision lines carry a digest the audit checks; failures say whether they may have run.

Issue 29 follow-ups (audit robustness): a PlanFence decision line edited after
recording (``blocked``/``stale`` made ``authorized``) is caught by its digest and the
action it decides is ``INVALID`` (fail closed), a warning naming its line; a trace
written before digests is audited as recorded with a note. A tool failure records
``may_have_run`` (structured), read before the error's text; ``--json`` runs say
``paused``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from icore.adapters import load_jsonl
from icore.cli import app
from icore.fence import DecisionEntry, DecisionFormatError
from icore.integrations import FenceGuard, NoEffect, RunRecorder
from icore.workspace import Workspace

from .test_line_digest import _unmarked

ORDER = "order/42"


def ship(city: str) -> str:
    """The protected tool."""
    return f"shipped to {city}"


def _recorded(tmp_path: Path, name: str = "r.jsonl") -> Path:
    """One stale call refused (no replan), then a fresh call that ran, as recorded."""
    ws = Workspace({"order/*": "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    agent = ws.agent("shipper")
    agent.read(ORDER)
    ws.put(ORDER, {"city": "Munich"})  # changed before the call: stale
    rec = RunRecorder("r", question="ship order 42")
    rec.task("ship order 42")
    guard = FenceGuard(agent=agent, depends_on={ORDER}, recorder=rec)
    assert not guard.run("ship", ship, {"city": "Berlin"}).executed
    agent.read(ORDER)
    assert guard.run("ship", ship, {"city": "Munich"}).executed
    rec.finish("shipper", "shipped to Munich")
    return rec.write(tmp_path / name)


def _lines(p: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]


def _write(p: Path, lines: list[dict[str, Any]]) -> None:
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def _decisions(lines: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return [(n, x["planfence"]["decision"]) for n, x in enumerate(lines, 1)
            if "decision" in x.get("planfence", {})]


def _audit(*argv: str) -> Any:
    return CliRunner().invoke(app, ["audit", *argv])


def _json_run(tmp_path: Path, trace: Path, *flags: str) -> tuple[int, dict[str, Any], str]:
    js = tmp_path / f"{trace.stem}.json"
    res = _audit(str(trace), "--no-report", "--json", str(js), *flags)
    return res.exit_code, json.loads(js.read_text())["runs"][0], res.output


def _made_authorized(d: dict[str, Any]) -> None:
    """The edit QA makes: a refused stale decision turned into a clean authorization."""
    d.update(outcome="authorized", reason="valid", heads=dict(d["frontier"]), fresh={})


def test_recorded_decisions_carry_digests_that_check_out(tmp_path: Path) -> None:
    """Every decision line a recorder writes has the digest of its fields; the trace
    imports with no warning and the lineage is as the gate decided."""
    p = _recorded(tmp_path)
    ds = _decisions(_lines(p))
    assert len(ds) == 2 and [d["outcome"] for _, d in ds] == ["replan_required", "authorized"]
    for _, d in ds:
        assert d["digest"] == DecisionEntry.from_dict(d).digest() and len(d["digest"]) == 64
    assert load_jsonl(p).warnings == ()
    code, run, _ = _json_run(tmp_path, p, "--fail-on", "invalid")
    assert code == 0 and [lv["status"] for lv in run["lineage"]] == ["blocked", "valid"]


def test_an_edited_decision_is_invalid_naming_its_line(tmp_path: Path) -> None:
    """``stale`` edited into ``authorized`` (digest kept): the action is INVALID, a
    warning names the decision and its line, ``--fail-on invalid`` exits 3."""
    p = _recorded(tmp_path)
    lines = _lines(p)
    (n, stale), _ = _decisions(lines)
    _made_authorized(stale)
    _write(p, lines)
    code, run, out = _json_run(tmp_path, p, "--fail-on", "invalid")
    assert code == 3, out
    assert [lv["status"] for lv in run["lineage"]] == ["INVALID", "valid"]
    assert f"line {n}) does not match its digest" in run["lineage"][0]["reason"]
    (w,) = [w for w in run["warnings"] if "digest" in w]
    assert f"decision authorized/valid of 'ship-1' (line {n})" in w and "INVALID" in w
    assert f"line {n}" in out.replace("\n", " ")
    assert _audit(str(p), "--out", str(tmp_path / "rep")).exit_code == 0
    html = (tmp_path / "rep" / "r.html").read_text(encoding="utf-8")
    assert "a decision does not match its digest" in html


def test_an_edit_that_drops_the_digest_is_caught(tmp_path: Path) -> None:
    """The edited line's digest removed (the others kept): still INVALID."""
    p = _recorded(tmp_path)
    lines = _lines(p)
    (_, stale), _ = _decisions(lines)
    _made_authorized(stale)
    del stale["digest"]
    _write(p, lines)
    code, run, _ = _json_run(tmp_path, p, "--fail-on", "invalid")
    assert code == 3 and run["lineage"][0]["status"] == "INVALID"
    assert "carries no digest while the trace's other decision lines do" in \
        run["lineage"][0]["reason"]
    bad = _lines(_recorded(tmp_path, "b.jsonl"))
    _decisions(bad)[1][1]["digest"] = 7  # not a string
    _write(tmp_path / "b.jsonl", bad)
    code, run, _ = _json_run(tmp_path, tmp_path / "b.jsonl")
    # its digest changed, so did its line's whole-line digest (which its chain link
    # binds, QA qa-new14 S3): every action is INVALID (the line's own is named)
    assert [lv["status"] for lv in run["lineage"]] == ["INVALID", "INVALID"]
    assert "not a string" in run["lineage"][1]["reason"]
    assert any("does not match its digest" in w for w in run.get("warnings", ()))


def test_a_trace_without_digests_is_audited_as_before_with_a_note(tmp_path: Path) -> None:
    """Written before #29 (no line carries a digest; with the event lines' digests kept it
    would be a trace whose decision digests were stripped, round 8): the verdicts read as
    recorded (an edit there cannot be seen) and one note says so; nothing fails."""
    p = _recorded(tmp_path)
    lines = _unmarked(_lines(p))  # no writer marker before it either
    for _, d in _decisions(lines):
        del d["digest"]
    for x in lines:  # as before #29: no digest on any line, and so no chain
        x.pop("digest", None)
        x.pop("chain", None)
        x.pop("chain_end", None)
    _write(p, lines)
    code, run, _ = _json_run(tmp_path, p, "--fail-on", "invalid")
    assert code == 0 and [lv["status"] for lv in run["lineage"]] == ["blocked", "valid"]
    (note,) = [w for w in run["warnings"] if "decision line" in w]
    assert "note: its 2 PlanFence decision lines carry no digest" in note
    assert "audited as recorded" in note


_FIELDS: dict[str, Any] = {
    "outcome": st.sampled_from(["authorized", "replan_required", "blocked"]),
    "reason": st.sampled_from(["valid", "stale", "second_change", "no_owner"]),
    "action": st.text(max_size=5), "task": st.one_of(st.none(), st.text(max_size=5)),
    "roots": st.lists(st.sampled_from(["a" * 64, "b" * 64]), max_size=2),
    "deps": st.lists(st.sampled_from(["x", "y"]), max_size=2),
    "frontier": st.dictionaries(st.sampled_from(["x", "y"]), st.sampled_from(["a" * 64,
                                                                             "b" * 64])),
    "heads": st.dictionaries(st.sampled_from(["x", "y"]), st.sampled_from(["a" * 64,
                                                                          "b" * 64])),
    "replanned": st.booleans(), "point": st.integers(0, 3),
    "at_ms": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6)),
    "detail": st.text(max_size=5), "error": st.one_of(st.none(), st.text(max_size=5)),
    "may_have_run": st.one_of(st.none(), st.booleans()),
}


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries(_FIELDS), st.fixed_dictionaries(_FIELDS))
def test_digest_round_trips_and_tells_decisions_apart(a: dict[str, Any],
                                                      b: dict[str, Any]) -> None:
    """Equal decisions (through a JSON round trip, an integer time read as a float) have
    equal digests; decisions that differ in any field have different ones."""
    ea, eb = DecisionEntry.from_dict(a), DecisionEntry.from_dict(b)
    line = json.loads(json.dumps(ea.to_dict(digest=True)))
    assert DecisionEntry.from_dict(line).digest() == line["digest"] == ea.digest()
    same = ea.to_dict() == eb.to_dict() or (
        {**ea.to_dict(), "at_ms": float(ea.at_ms)} == {**eb.to_dict(), "at_ms": float(eb.at_ms)})
    assert (ea.digest() == eb.digest()) is same


def test_may_have_run_must_be_a_boolean() -> None:
    with pytest.raises(DecisionFormatError) as ei:
        DecisionEntry.from_dict({"outcome": "authorized", "reason": "valid",
                                 "may_have_run": "yes"})
    assert ei.value.fields["field"] == "decision.may_have_run"


def _failed_run(tmp_path: Path, exc: BaseException, name: str) -> Path:
    """One authorized call whose tool raises ``exc``, recorded (the run then ends)."""
    ws = Workspace({"order/*": "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    agent = ws.agent("shipper")
    agent.read(ORDER)
    rec = RunRecorder(name, question="ship")
    rec.task("ship")

    def broken(city: str) -> str:
        raise exc

    with pytest.raises(type(exc)):
        FenceGuard(agent=agent, depends_on={ORDER}, recorder=rec).run(
            "ship", broken, {"city": "Berlin"})
    rec.finish("shipper", "gave up")
    return rec.write(tmp_path / f"{name}.jsonl")


@pytest.mark.parametrize(("exc", "open_", "counted"), [
    (TimeoutError("carrier slow"), True, "outcome unknown"),
    (KeyboardInterrupt(), True, "outcome unknown"),
    # any exception from a started body may follow its effect (QA qa-new12b S2)
    (RuntimeError("carrier down"), True, "outcome unknown"),
    (NoEffect("card declined"), False, "failed after authorization"),
])
def test_a_failure_records_whether_it_may_have_run(tmp_path: Path, exc: BaseException,
                                                    open_: bool, counted: str) -> None:
    """The recorder writes ``may_have_run`` with the error (from the exception's type);
    the audit counts by it. A Ctrl-C in a sync tool is open too (its text was not); only
    the tool's own ``NoEffect`` says it did nothing."""
    p = _failed_run(tmp_path, exc, type(exc).__name__)
    (_, d), = _decisions(_lines(p))
    assert d["may_have_run"] is open_ and d["error"]
    _, run, _ = _json_run(tmp_path, p)
    assert run["actions"][counted] == 1 and run["actions"]["total"] == 1


def test_the_structured_field_is_read_before_the_text(tmp_path: Path) -> None:
    """``may_have_run`` decides over the error's text; without it (an old trace) the
    text rule stays: ``TimeoutError`` is open, ``RuntimeError`` is not."""
    def counted(text: str, flag: bool | None) -> str:
        p = _failed_run(tmp_path, RuntimeError("x"), f"f{len(list(tmp_path.iterdir()))}")
        lines = _lines(p)
        (_, d), = _decisions(lines)
        d["error"] = text
        d.pop("may_have_run")
        if flag is not None:
            d["may_have_run"] = flag
        d["digest"] = DecisionEntry.from_dict(d).digest()
        for x in _unmarked(lines):  # a writer of its own (no marker, no chain: the
            x.pop("chain", None)  # recomputed digest is its)
            x.pop("chain_end", None)
        _write(p, lines)
        _, run, _ = _json_run(tmp_path, p)
        assert not [w for w in run.get("warnings", ()) if "digest" in w and
                    "carry no chain" not in w]
        return next(k for k, n in run["actions"].items() if n and k != "total")

    assert counted("TimeoutError: slow", False) == "failed after authorization"
    assert counted("RuntimeError: x", True) == "outcome unknown"
    assert counted("TimeoutError: slow", None) == "outcome unknown"
    assert counted("RuntimeError: x", None) == "failed after authorization"


def test_json_runs_say_paused(tmp_path: Path) -> None:
    """Every ``--json`` run has ``paused``: true for a run waiting for a human."""
    head = {"run": {"id": "p"}}
    task = {"agent": "user", "kind": "task", "content": "book R1"}
    pause = {"agent": "booker", "kind": "thought", "pause": True,
             "content": "paused at interrupt(), waiting for a human: book R1?"}
    end = {"agent": "booker", "kind": "termination", "content": "done", "final_answer": "R1"}
    _write(tmp_path / "p.jsonl", [head, task, pause])
    _write(tmp_path / "e.jsonl", [{"run": {"id": "e"}}, task, end])
    _, run, out = _json_run(tmp_path, tmp_path / "p.jsonl")
    assert run["paused"] is True and "waiting for a human" in out
    _, run, _ = _json_run(tmp_path, tmp_path / "e.jsonl")
    assert run["paused"] is False
