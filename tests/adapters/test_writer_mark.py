"""The header's writer marker says what an icore writer digests and chains (#29).

Before it, a human's rejection edited into an approval with the event lines' digests
(and their links, and the end line's seal) dropped read as recorded: a writer that
digests its decisions alone could not be told from that edit. Every icore JSONL writer
(``RunRecorder``, the MCP gateway through it) now writes ``run.icore`` in its header
(the first line of its chain), and a trace that breaks one of its promises has every
protected action ``INVALID``, with a warning naming the line. A trace without the
marker keeps the earlier reading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from icore._line_chain import CHAIN, CHAIN_END, header_link
from icore._writer_mark import MARK, MarkCheck, mark_digest, writer_mark

from .test_line_chain import _audit, _gateway_run
from .test_line_digest import _lines, _recorded, _unmarked, _write


def _header(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return next(x for x in lines if "run" in x)


def _statuses(run: dict[str, Any]) -> set[str]:
    return {lv["status"] for lv in run["lineage"]}


def _marked(run: dict[str, Any]) -> list[str]:
    return [w for w in run.get("warnings", ()) if "writer marker" in w]


def test_the_recorder_writes_the_marker_as_its_chain_s_first_line(tmp_path: Path) -> None:
    lines = _lines(_recorded(tmp_path))
    head = _header(lines)
    mark = head["run"][MARK]
    assert mark == writer_mark(head[CHAIN]["writer"])
    assert head["digest"] == mark_digest(mark) and head[CHAIN]["seq"] == 1
    code, run = _audit(tmp_path, _recorded(tmp_path))
    assert code == 0 and _marked(run) == [] and "INVALID" not in _statuses(run)


def test_a_stripped_seal_on_the_end_line_is_seen(tmp_path: Path) -> None:
    lines = _lines(_recorded(tmp_path))
    (n, end), = [(n, x) for n, x in enumerate(lines, 1) if CHAIN_END in x]
    del end[CHAIN_END]
    code, run = _audit(tmp_path, _write(tmp_path / "noseal.jsonl", lines))
    assert code == 3 and _statuses(run) == {"INVALID"}
    assert any(f"line {n} carries no chain_end seal" in w for w in _marked(run))


def test_the_marker_dropped_while_the_chain_stays_is_still_read(tmp_path: Path) -> None:
    """The header's link (or its successor's ``prev``) shows the marker: stripping the
    marker and the event digests does not bring back the earlier reading."""
    for how in ("marker", "header-line"):
        lines = _lines(_recorded(tmp_path))
        head = _header(lines)
        if how == "marker":
            del head["run"][MARK]  # its digest and link kept
        else:  # the header's digest and link gone too: the next line's prev shows it
            del head["run"][MARK], head["digest"], head[CHAIN]
        for x in lines:
            if "agent" in x:
                x.pop("digest", None)
                x.pop(CHAIN, None)
                x.pop(CHAIN_END, None)
        code, run = _audit(tmp_path, _write(tmp_path / f"{how}.jsonl", lines))
        assert code == 3 and _statuses(run) == {"INVALID"}, how
        assert any("carries no digest" in w for w in _marked(run)), how


def test_an_edited_marker_is_seen(tmp_path: Path) -> None:
    lines = _lines(_recorded(tmp_path))
    _header(lines)["run"][MARK]["digests"] = ["decisions"]  # promises less
    code, run = _audit(tmp_path, _write(tmp_path / "less.jsonl", lines))
    assert code == 3 and _statuses(run) == {"INVALID"}
    assert any("line 1: the header's writer marker does not match its digest" in w
               for w in _marked(run))


def test_a_trace_without_the_marker_reads_as_before(tmp_path: Path) -> None:
    lines = _unmarked(_lines(_recorded(tmp_path)))
    for x in lines:  # as written before the chain: digests only
        x.pop(CHAIN, None)
        x.pop(CHAIN_END, None)
    code, run = _audit(tmp_path, _write(tmp_path / "old.jsonl", lines))
    assert code == 0 and "INVALID" not in _statuses(run) and _marked(run) == []


def test_the_gateway_s_live_and_final_traces_carry_the_marker(tmp_path: Path) -> None:
    path = tmp_path / "gw.jsonl"
    trace = _gateway_run(path)
    for stage in ("live", "final"):
        lines = _lines(path)
        head = _header(lines)
        assert head["run"][MARK] == writer_mark(head[CHAIN]["writer"]), stage
        code, run = _audit(tmp_path, _write(tmp_path / f"{stage}.jsonl", lines))
        assert _marked(run) == [] and "INVALID" not in _statuses(run), stage
        stripped = [{k: v for k, v in x.items() if k not in ("digest", CHAIN, CHAIN_END)}
                    if "agent" in x else x for x in lines]
        code, run = _audit(tmp_path, _write(tmp_path / f"{stage}-bad.jsonl", stripped))
        assert code == 3 and _statuses(run) == {"INVALID"}, stage
        trace.close()


def test_the_check_reads_an_appended_writer_s_chain_and_a_later_version() -> None:
    check = MarkCheck("t")
    mark = {**writer_mark("w"), "v": 2}
    check.header(1, {"run": {MARK: mark}, "digest": mark_digest(mark), CHAIN: {}})
    why, notes = check.lines([("line 2.planfence.decision", None)], [])
    assert why is not None and "line 2 carries no digest" in why
    assert any("version 2" in n for n in notes)
    assert header_link("w") != header_link("v")
