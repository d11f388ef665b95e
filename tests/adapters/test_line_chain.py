"""Each writer chains its digested trace lines: a lost, moved or repeated line is seen (#29).

A line's digest shows an edit of that line, not its absence. Each writer (a
RunRecorder, a gateway run) numbers its digested lines and links each to the previous
one (``chain``), and a run's end line carries the writer's totals (``chain_end``). The
audit checks each writer's chain on its own: honest writers appending to one file in any
interleaving audit clean; a deleted, reordered or duplicated digested line breaks its
writer's chain, and every protected action of the run is then ``INVALID`` (which action
the missing line concerned cannot be known), with a warning naming the line.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from icore._line_chain import CHAIN, CHAIN_END, ChainWriter, chain_problems, link
from icore.fence import GateDecision, Outcome, Reason
from icore.integrations import RunRecorder
from icore.mcp import GatewayTrace
from icore.records import Record

from .test_line_digest import _lines, _unmarked, _write
from .test_line_digest import _recorded as recorded
from .test_line_digest import _run as run_audit


# ------------------------------------------------------------------ the pure check
def _writer_lines(w: str, n: int) -> list[dict[str, Any]]:
    """``n`` digested lines of writer ``w`` chained, then its end line with the seal."""
    chain = ChainWriter(w)
    lines = [dict(chain.chained({"agent": w, "kind": "tool_output",
                                 "digest": f"{w}-{i}".ljust(64, "0")})) for i in range(n)]
    return [*lines, {"agent": w, "kind": "termination", CHAIN_END: chain.seal()}]


def _check(lines: list[dict[str, Any]]) -> str | None:
    links = [(i + 1, x.get(CHAIN), x.get("digest")) for i, x in enumerate(lines)
             if CHAIN in x or "digest" in x]
    seals = [(i + 1, x[CHAIN_END]) for i, x in enumerate(lines) if CHAIN_END in x]
    why, warnings = chain_problems(links, seals, file="t", digested=len(links))
    assert (why is None) == (not warnings)
    return why


@st.composite
def _interleaved(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Several writers' lines, each writer's in its own order, interleaved at random."""
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    queues = [_writer_lines(f"w{k}", n) for k, n in enumerate(sizes)]
    out: list[dict[str, Any]] = []
    while any(queues):
        k = draw(st.sampled_from([i for i, q in enumerate(queues) if q]))
        out.append(queues[k].pop(0))
    return out


@settings(max_examples=150, deadline=None)
@given(_interleaved())
def test_any_honest_interleaving_of_writers_is_whole(lines: list[dict[str, Any]]) -> None:
    assert _check(lines) is None


@settings(max_examples=200, deadline=None)
@given(_interleaved(), st.data())
def test_any_single_deletion_reorder_or_duplication_is_seen(
        lines: list[dict[str, Any]], data: st.DataObject) -> None:
    digested = [i for i, x in enumerate(lines) if CHAIN in x]
    i = data.draw(st.sampled_from(digested))
    how = data.draw(st.sampled_from(["delete", "duplicate", "move"]))
    bad = list(lines)
    if how == "delete":
        del bad[i]
    elif how == "duplicate":
        bad.insert(data.draw(st.integers(0, len(bad))), bad[i])
    else:  # past another line of its own writer (moving past others' lines is honest)
        w = lines[i][CHAIN]["writer"]
        mine = [j for j in digested if j != i and lines[j][CHAIN]["writer"] == w]
        if not mine:  # a writer with one digested line: duplicate it instead
            bad.insert(i, bad[i])
        else:
            j = data.draw(st.sampled_from(mine))
            x = bad.pop(i)
            bad.insert(j, x)
    assert _check(bad) is not None


def test_each_kind_of_break_is_named() -> None:
    lines = _writer_lines("w", 4)
    assert "2 line(s) of that writer missing" in str(_check([lines[0], lines[3], lines[4]]))
    assert "repeats or goes back" in str(_check([lines[0], lines[1], lines[1], *lines[2:]]))
    forged = dict(lines[1], digest="f" * 64)  # replaced (its digest recomputed)
    assert "does not link to its writer's previous line" in str(
        _check([lines[0], forged, *lines[2:]]))
    assert "breaks at the run's end (line 4)" in str(_check([*lines[:3], lines[4]]))
    assert "no chain while" in str(_check([*lines[:4], {"agent": "x", "digest": "a" * 64},
                                           lines[4]]))
    bad = dict(lines[0], chain={"writer": "w", "seq": "1", "prev": ""})
    assert "malformed" in str(_check([bad, *lines[1:]]))


def test_without_an_end_line_a_cut_tail_is_not_seen_but_the_run_did_not_end() -> None:
    """Documented limit: no end line, no seal; the audit says the run did not end."""
    lines = _writer_lines("w", 3)
    assert _check(lines[:2]) is None


def test_a_trace_with_no_chain_is_read_as_before_with_one_note() -> None:
    why, notes = chain_problems([(1, None, "a" * 64), (2, None, "b" * 64)], [],
                                file="t", digested=2)
    assert why is None and len(notes) == 1 and "carry no chain" in notes[0]
    assert chain_problems([], [], file="t", digested=0) == (None, ())


def test_the_link_binds_every_part() -> None:
    base = link("w", 1, "", "d" * 64)
    assert len(base) == 64 and len({base, link("v", 1, "", "d" * 64),
                                    link("w", 2, "", "d" * 64), link("w", 1, "x", "d" * 64),
                                    link("w", 1, "", "e" * 64)}) == 5


# ------------------------------------------------------------------ real files
def _recorded(tmp_path: Path, name: str = "r.jsonl") -> Path:
    """test_line_digest's run (a stale call a human said no to, then one that ran)."""
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    sub = tmp_path / f"{Path(name).stem}.d"
    sub.mkdir(exist_ok=True)
    return recorded(sub).rename(tmp_path / name)


def _audit(tmp_path: Path, trace: Path) -> tuple[int, dict[str, Any]]:
    code, run, _ = run_audit(tmp_path, trace, "--fail-on", "invalid")
    return code, run


def _chain_warnings(run: dict[str, Any]) -> list[str]:
    return [w for w in run.get("warnings", ()) if "chain" in w]


def test_the_recorder_chains_its_lines_and_the_honest_run_audits_clean(
        tmp_path: Path) -> None:
    lines = _lines(_recorded(tmp_path))
    chained = [x for x in lines if CHAIN in x]
    assert [x[CHAIN]["seq"] for x in chained] == list(range(1, len(chained) + 1))
    assert len({x[CHAIN]["writer"] for x in chained}) == 1 and len(chained) >= 6
    (end,) = [x for x in lines if CHAIN_END in x]
    assert end["kind"] == "termination" and end[CHAIN_END]["lines"] == len(chained)
    code, run = _audit(tmp_path, tmp_path / "r.jsonl")
    assert code == 0 and _chain_warnings(run) == []
    assert sorted(lv["status"] for lv in run["lineage"]) == ["blocked", "valid"]


def _broken(tmp_path: Path, edit: str) -> tuple[int, dict[str, Any]]:
    lines = _lines(_recorded(tmp_path, f"{edit}.jsonl"))
    # not the header, nor the end line (every line is chained now: QA qa-new14 S3)
    chained = [i for i, x in enumerate(lines) if CHAIN in x and "run" not in x
               and CHAIN_END not in x]
    # the human's rejection of the stale call: the line an editor would drop
    ans = next(i for i, x in enumerate(lines) if x.get("answered_by") == "human")
    if edit == "delete":
        del lines[ans]
    elif edit == "duplicate":
        lines.insert(ans, lines[ans])
    elif edit == "reorder":
        lines.insert(chained[0], lines.pop(ans))
    elif edit == "cut":  # the writer's last digested line, before the end line
        del lines[chained[-1]]
    return _audit(tmp_path, _write(tmp_path / f"{edit}.jsonl", lines))


def test_a_deleted_line_makes_every_action_invalid_naming_the_line(tmp_path: Path) -> None:
    code, run = _broken(tmp_path, "delete")
    assert code == 3 and {lv["status"] for lv in run["lineage"]} == {"INVALID"}
    (w,) = _chain_warnings(run)
    assert "breaks at line" in w and "missing before it" in w
    assert "breaks at line" in run["lineage"][0]["reason"]


def test_a_duplicated_or_moved_line_is_seen(tmp_path: Path) -> None:
    for edit, said in (("duplicate", "repeats or goes back"),
                       ("reorder", "breaks at line")):
        code, run = _broken(tmp_path, edit)
        assert code == 3, edit
        assert {lv["status"] for lv in run["lineage"]} == {"INVALID"}, edit
        assert any(said in w for w in _chain_warnings(run)), edit


def test_lines_cut_before_the_end_line_are_seen_by_its_seal(tmp_path: Path) -> None:
    """The end line is chained too now (QA qa-new14 S3): the cut shows at its link."""
    code, run = _broken(tmp_path, "cut")
    assert code == 3 and {lv["status"] for lv in run["lineage"]} == {"INVALID"}
    assert any("breaks at line" in w and "missing before it" in w
               for w in _chain_warnings(run))


def test_two_writers_appending_to_one_file_audit_clean_in_any_interleaving(
        tmp_path: Path) -> None:
    """Another recorder's lines (another process) interleaved with the first's events."""
    a = _lines(_recorded(tmp_path, "a.jsonl"))
    other = RunRecorder("b")
    other.add("approver", "thought", "yes", answered_by="human", decision="approve",
              tool="audit-log", args={"n": 1})
    other.tool_call("approver", "audit-log", {"n": 1}, "logged")
    other.finish("approver", "logged")
    b = _lines(Path(other.write(tmp_path / "b.jsonl")))[1:]  # its header dropped
    first = next(i for i, x in enumerate(a) if "agent" in x)  # after a's header
    for seed in range(6):
        rnd, xs, ys, mixed = random.Random(seed), a[first:], list(b), a[:first]
        while xs or ys:  # each writer's lines in its own order, interleaved at random
            mixed.append((xs if xs and (not ys or rnd.random() < 0.5) else ys).pop(0))
        code, run = _audit(tmp_path, _write(tmp_path / f"m{seed}.jsonl", mixed))
        assert code == 0 and _chain_warnings(run) == [], seed
    bad = [*a, *b[1:]]  # b's first line (its human answer) lost
    code, run = _audit(tmp_path, _write(tmp_path / "mbad.jsonl", bad))
    assert code == 3 and any("breaks" in w for w in _chain_warnings(run))


def test_a_trace_written_before_the_chain_audits_as_before_with_a_note(
        tmp_path: Path) -> None:
    lines = _unmarked(_lines(_recorded(tmp_path)))  # before the chain: no writer marker
    for x in lines:
        x.pop(CHAIN, None)
        x.pop(CHAIN_END, None)
    del lines[next(i for i, x in enumerate(lines) if x.get("answered_by") == "human")]
    code, run = _audit(tmp_path, _write(tmp_path / "old.jsonl", lines))
    assert code == 0  # unseen without the chain (as before #29's chain), but noted
    (note,) = _chain_warnings(run)
    assert "carry no chain" in note and "cannot be detected" in note


# ------------------------------------------------------------------ the gateway
def _gateway_run(path: Path) -> GatewayTrace:
    bal = Record.create(key="acct://main/balance", owner="ledger", seq=1, content=500)
    ok = GateDecision(Outcome.AUTHORIZED, Reason.VALID, action="pay", roots=(bal.id,),
                      deps=(bal.key,), frontier={bal.key: bal.id}, heads={bal.key: bal.id},
                      point=1, policy="planfence", owners_contacted=1, heads_checked=1)
    trace = GatewayTrace("gw", path)
    trace.session("c#1", "client")
    for n in (1, 2):
        trace.decisions("c#1", "pay", [ok], task=f"c#1/{n}")
        trace.call("c#1", "pay", {"amount": n}, "paid", error=False, task=f"c#1/{n}",
                   ran=True)
    trace.call("c#1", "pay", {"amount": 3}, "bank says: frozen", error=True, task="c#1/2")
    return trace


def test_the_gateway_chains_its_live_and_final_trace(tmp_path: Path) -> None:
    """The live file (appended while the gateway runs: a killed gateway's trace) and
    the final rewrite both carry digests and one chain; a line lost from either is seen."""
    path = tmp_path / "gw.jsonl"
    trace = _gateway_run(path)
    live = _lines(path)
    outs = [x for x in live if x.get("kind") == "tool_output"]
    assert outs and all("digest" in x and CHAIN in x for x in outs)
    code, run = _audit(tmp_path, _write(tmp_path / "live.jsonl", live))
    assert _chain_warnings(run) == [] and "INVALID" not in {
        lv["status"] for lv in run["lineage"]}
    code, run = _audit(tmp_path, _write(tmp_path / "livebad.jsonl", [
        x for i, x in enumerate(live) if i != live.index(outs[0])]))
    assert code == 3 and any("breaks" in w for w in _chain_warnings(run))
    trace.close()
    final = _lines(path)
    (end,) = [x for x in final if CHAIN_END in x]
    assert end["kind"] == "termination"
    assert final.index(end) < max(i for i, x in enumerate(final) if CHAIN in x)
    code, run = _audit(tmp_path, path)
    assert code == 0 and _chain_warnings(run) == []
    cut = final[:-1]  # the last PlanFence line (after the end line) cut off
    assert CHAIN in final[-1]
    code, run = _audit(tmp_path, _write(tmp_path / "cut.jsonl", cut))
    assert code == 3 and any("breaks at the run's end" in w for w in _chain_warnings(run))
