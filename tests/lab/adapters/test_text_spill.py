"""A long OpenTelemetry run's step texts kept in a temporary file (issue 29).

:class:`TextSpill` reads back every ``str`` it was given (lone surrogates, astral
characters, empty, bigger than a block, across the unwritten buffer); a run whose texts
went to the file has the same steps, audit and report excerpts as one that kept them;
without a usable temporary folder the texts stay in memory; the file has no name.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import AdapterError, audit_trace, load_otlp_runs
from icore.adapters import _text_spill as spill_mod
from icore.adapters._line_steps import ColumnSteps
from icore.adapters._text_spill import TextSpill
from icore.adapters._trace import Step, StepKind
from icore.adapters._valid_text import step_text_valid
from icore.report import view_from_audit
from icore_lab.bench.micro._import_inputs import write_otlp

_TEXT = st.text(st.characters(codec=None, categories=None), max_size=40) | st.sampled_from(
    ["", "\ud800", "a\udfffb", "😀\ud83d", "é" * 300, "x" * 5000])


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(_TEXT, max_size=60), block=st.sampled_from([1, 7, 64, 1 << 20]),
       reads=st.lists(st.integers(0, 10**6), max_size=20))
def test_every_text_reads_back_equal(texts: list[str], block: int, reads: list[int]) -> None:
    old = spill_mod._BLOCK
    spill_mod._BLOCK = block  # small blocks: flushes and reads across every boundary
    try:
        s = TextSpill(where="t")
        for i, t in enumerate(texts):
            s.append(t)
            assert s[i] == t  # just written: from the buffer or the file
        assert len(s) == len(texts)
        assert list(s) == texts
        for r in reads:
            if texts:
                assert s[r % len(texts)] == texts[r % len(texts)]
        s.close()
    finally:
        spill_mod._BLOCK = old


def _steps(spill_chars: int, rows: list[tuple[Any, ...]]) -> ColumnSteps:
    cs = ColumnSteps(Step, StepKind, step_text_valid, where="t", spill_chars=spill_chars)
    for agent, kind, content, role, parent, rare in rows:
        cs.append(agent, kind, content, role, parent, rare)
    return cs


_ROW = st.tuples(st.sampled_from(["a", "b", "é"]), st.sampled_from(list(StepKind)), _TEXT,
                 _TEXT, st.none() | st.integers(0, 5),
                 st.sampled_from([{}, {"exitcode": 1}, {"to": "b"}, {"pause": True}]))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_ROW, max_size=30), at=st.integers(0, 200))
def test_spilled_steps_equal_the_kept_ones(rows: list[tuple[Any, ...]], at: int) -> None:
    kept, spilled = _steps(10**9, rows), _steps(at, rows)
    assert kept._spill is None
    assert (spilled._spill is not None) == (sum(len(r[2]) + len(r[3]) for r in rows) > at)
    assert tuple(spilled) == tuple(kept)
    assert spilled == kept and spilled.text_valid == kept.text_valid
    for i in range(-len(rows), len(rows)):
        assert spilled[i] == kept[i]
    assert spilled[1:5] == kept[1:5] and spilled[::-2] == kept[::-2]
    with pytest.raises(IndexError):
        spilled[len(rows)]


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("spill") / "run.otlp.json"
    write_otlp(p, 0.4, seed=3)
    return p


def test_a_spilled_run_audits_and_reports_as_a_kept_one(
        doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = load_otlp_runs(doc)[0]
    monkeypatch.setattr(spill_mod, "SPILL_CHARS", 1000)
    spilled = load_otlp_runs(doc)[0]
    assert kept.steps._spill is None  # type: ignore[attr-defined]
    assert spilled.steps._spill is not None  # type: ignore[attr-defined]
    assert spilled == kept
    a, b = audit_trace(kept), audit_trace(spilled)
    assert a.summary() == b.summary() and list(a.timeline) == list(b.timeline)
    assert a.diagnoses == b.diagnoses
    va, vb = view_from_audit(a), view_from_audit(b)
    assert [e.excerpt for e in va.events] == [e.excerpt for e in vb.events]
    assert any(e.excerpt for e in vb.events)  # the report shows each step's text
    assert va.events == vb.events


def test_the_file_has_no_name_and_no_folder_keeps_the_texts(
        doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill_mod, "SPILL_CHARS", 1000)
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    run = load_otlp_runs(doc)[0]
    assert run.steps._spill is not None  # type: ignore[attr-defined]
    assert list(folder.iterdir()) == []  # unnamed: deleted by the system when closed
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    kept = load_otlp_runs(doc)[0]
    assert kept.steps._spill is None  # type: ignore[attr-defined]
    assert kept == run


def test_a_failed_write_is_an_adapter_error(monkeypatch: pytest.MonkeyPatch) -> None:
    s = TextSpill(where="big.json")
    s._file.close()
    s._file = Path("/dev/full").open("wb", buffering=0)  # every write: ENOSPC
    monkeypatch.setattr(spill_mod, "_BLOCK", 4)
    with pytest.raises(AdapterError, match="temporary file") as exc:
        s.append("more than four bytes")
    assert exc.value.file == "big.json"
