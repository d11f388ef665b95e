"""Review findings on the issue-29 merges (Step memo, folder walk, path checks)."""

from __future__ import annotations

import copy
import gc
import os
import pickle
import typing
from pathlib import Path
from typing import Any

import pytest

from icore._files import path_problem
from icore.adapters import Step, StepKind
from icore.adapters._trace import _RARE_MEMO
from icore.errors import IntegrationError


def test_the_rare_field_memo_keeps_types_and_never_one_off_texts() -> None:
    """``ran=1`` never answers a later ``ran=True`` (types are part of the key), and a
    step's one-off texts (``calls``) are not kept alive by the memo after the step."""
    Step(0, "a", StepKind.TOOL_OUTPUT, "x", ran=1)  # type: ignore[arg-type]
    assert Step(1, "a", StepKind.TOOL_OUTPUT, "x", ran=True).ran is True
    assert Step(2, "a", StepKind.TOOL_OUTPUT, "x", exitcode=0).exitcode == 0
    big = "c" * 100_000
    Step(3, "a", StepKind.OUTPUT, "x", calls=big)
    gc.collect()
    assert not any(big in k for k in _RARE_MEMO)


class _MyStep(Step):
    pass


def test_step_copies_keep_their_class_and_type_hints_are_the_fields() -> None:
    s = _MyStep(0, "a", StepKind.OUTPUT, "x", to="b")
    assert type(pickle.loads(pickle.dumps(s))) is _MyStep
    assert type(copy.copy(s)) is _MyStep and copy.deepcopy(s) == s
    hints = typing.get_type_hints(Step)
    assert "ran" in hints and "index" in hints
    assert s.__replace__(to="c").to == "c"


def test_a_folder_walk_reports_the_last_and_the_top_folder_it_cannot_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.walk``'s errors of the last folder visited (and of an unlistable top) are
    reported as skipped, never dropped (review of h29bad2)."""
    from icore.adapters import scan_paths

    d = tmp_path / "d"
    (d / "only").mkdir(parents=True)
    (d / "t.jsonl").write_text('{"run": {"id": "t"}}\n', encoding="utf-8")
    real = os.scandir

    def scandir(p: Any = ".") -> Any:
        if str(p).endswith("only"):
            raise PermissionError(13, "Permission denied", str(p))
        return real(p)

    monkeypatch.setattr(os, "scandir", scandir)
    scan = scan_paths([d])
    assert any(str(p).endswith("only") for p, _why in scan.skipped), scan
    top = scan_paths([d / "only"])
    assert top.skipped and not top.files, top


class _BadPath:
    def __fspath__(self) -> str:
        raise ValueError("no")


def test_a_pathlike_that_raises_is_a_path_problem_and_blank_names_are_refused(
        tmp_path: Path) -> None:
    assert path_problem(_BadPath()) == "is no path: no"
    from icore.integrations import RunRecorder

    rec = RunRecorder("r")
    with pytest.raises(IntegrationError, match="blank"):
        rec.write("   ")


def test_the_ledger_survives_a_torn_line_and_compacts_non_utf8_names(tmp_path: Path) -> None:
    """A crash mid-append leaves a line without its newline: the next entry starts on a
    line of its own (never joined to the torn one). Compaction writes names of bytes that
    are no UTF-8 back as those bytes (review of h28ag2fix)."""
    from icore._files import WRITTEN, _ledger, _record

    d = tmp_path / "out"
    d.mkdir()
    (d / WRITTEN).write_text("ab" * 32 + "  torn.json", encoding="utf-8")  # no newline
    _record(d, "a.json", "cd" * 32)
    book, _lines = _ledger(d)
    assert book.get("a.json") == "cd" * 32
    odd = os.fsdecode(b"r\xff.json")
    _record(d, odd, "ef" * 32)
    for i in range(80):  # enough superseded lines to compact
        _record(d, "x.json", f"{i:064x}")
    book, lines = _ledger(d)
    assert book[odd] == "ef" * 32 and lines < 80


def test_an_authorized_call_that_never_ran_is_a_known_outcome() -> None:
    """Two authorized calls of one tool, the first recorded not run (``ran: false``), the
    second with its result, no termination: neither is outcome unknown (review of
    h25gw3: the second was marked)."""
    from icore.adapters._unknown_outcome import unknown_outcomes

    class _Entry:
        def __init__(self, action: str) -> None:
            self.action = action

    class _Point:
        def __init__(self, action: str) -> None:
            self.entry = _Entry(action)

    class _L:
        def __init__(self, task: str) -> None:
            self.points = (_Point("book"),)
            self.status = "valid"
            self.ran_anyway = None
            self.error = None
            self.leaves_open = False  # the recorded may_have_run (#29)
            self.outcome_unknown = False

    steps = [Step(0, "a", StepKind.TOOL_OUTPUT, "not run", tool="book", ran=False),
             Step(1, "a", StepKind.TOOL_OUTPUT, "booked", tool="book", ran=True)]
    out = unknown_outcomes([_L("book-1"), _L("book-2")], steps)  # type: ignore[list-item]
    assert not any(getattr(a, "outcome_unknown", False) for a in out)
