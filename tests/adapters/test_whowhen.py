"""Who&When importers: quirks handled, malformed input gives typed errors naming file and field."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import (
    CAPTAIN_AGENT,
    MAGENTIC_ONE,
    AdapterError,
    StepKind,
    as_bool,
    as_step,
    load_who_and_when,
    parse_captain_agent,
    parse_magentic_one,
)
from icore.adapters._whowhen import read_json
from icore.errors import ErrorCode, IcoreError


class TestQuirks:
    """String booleans, name case, string step indices, extra keys."""

    def test_magentic_quirks(self, magentic: dict[str, Any]) -> None:
        """``"False"`` outcome, ``Websurfer`` spelling, ``"7"`` step and extra keys."""
        t = parse_magentic_one(magentic, file="m.json")
        assert t.family == MAGENTIC_ONE
        assert t.succeeded is False
        assert t.annotation is not None
        assert t.annotation.agent == "WebSurfer"
        assert t.annotation.step == 7
        assert t.extras["mistake_type"] == "x"
        assert t.extras["labels"] == ["a"]
        assert t.steps[7].agent == "WebSurfer"  # role "Websurfer" canonicalized
        assert set(t.agents) >= {"Orchestrator", "WebSurfer", "Assistant", "FileSurfer"}
        assert "web browser" in t.agents["WebSurfer"]

    def test_magentic_classification(self, magentic: dict[str, Any]) -> None:
        """Each role/content pattern maps to its step kind."""
        t = parse_magentic_one(magentic)
        kinds = [s.kind for s in t.steps]
        assert kinds[:5] == [StepKind.TASK, StepKind.PLAN, StepKind.LEDGER,
                             StepKind.INSTRUCTION, StepKind.OUTPUT]
        assert kinds[9] == StepKind.STALL and kinds[10] == StepKind.PLAN
        assert t.steps[-1].kind == StepKind.TERMINATION
        assert t.steps[-1].final_answer == "41"
        assert t.steps[3].to == "WebSurfer"
        led = t.steps[8].ledger
        assert led is not None and led.is_in_loop is False  # "false" string

    def test_captain_quirks(self, captain: dict[str, Any]) -> None:
        """``is_correct`` as a string, lower-case annotated agent, int step."""
        t = parse_captain_agent(captain, file="c.json")
        assert t.family == CAPTAIN_AGENT
        assert t.succeeded is False
        assert t.annotation is not None and t.annotation.agent == "Python_Expert"
        assert t.annotation.step == 1
        assert [s.kind for s in t.steps] == [StepKind.PLAN, StepKind.OUTPUT,
                                             StepKind.TOOL_OUTPUT, StepKind.OUTPUT]
        assert t.steps[2].exitcode == 1
        assert t.steps[3].terminates
        assert t.extras["level"] == "1"

    def test_detect_family(self, write_json: Callable[..., Path], magentic: dict[str, Any],
                           captain: dict[str, Any]) -> None:
        """The family is detected from the fields."""
        assert load_who_and_when(write_json(magentic, "a.json")).family == MAGENTIC_ONE
        assert load_who_and_when(write_json(captain, "b.json")).family == CAPTAIN_AGENT

    @pytest.mark.parametrize(("raw", "want"), [
        ("True", True), ("false", False), (" TRUE ", True), (True, True), (0, False),
        ("yes", True), ("0", False)])
    def test_as_bool(self, raw: Any, want: bool) -> None:
        """Boolean spellings seen in the wild."""
        assert as_bool(raw, file="f", field="x") is want

    @pytest.mark.parametrize(("raw", "want"), [("12", 12), (12, 12), (" 3 ", 3), ("4.0", 4),
                                               (5.0, 5), ("", None)])
    def test_as_step(self, raw: Any, want: int | None) -> None:
        """Step indices stored as strings, ints or floats."""
        assert as_step(raw, file="f", field="x") == want

    @pytest.mark.parametrize("raw", ["\u0663", "1\u0662", "\uff13", "\u00b2", "\u0663.0"])
    def test_as_step_reads_only_ascii_digits(self, raw: str) -> None:
        """Other scripts' digits (Arabic-Indic, full-width, superscript) are no step index."""
        with pytest.raises(AdapterError, match="not a step index") as info:
            as_step(raw, file="f.json", field="steps[0].step")
        assert info.value.fields["field"] == "steps[0].step"


def _err(fn: Callable[[], object]) -> AdapterError:
    with pytest.raises(AdapterError) as info:
        fn()
    return info.value


class TestTypedErrors:
    """Malformed or truncated files: a typed error naming the file and the field."""

    def test_truncated_file(self, write_json: Callable[..., Path],
                            magentic: dict[str, Any]) -> None:
        """A file cut in the middle: the field it stops in is named (issue 29)."""
        text = json.dumps(magentic)
        p = write_json(text[: len(text) // 2], "cut.json")
        e = _err(lambda: load_who_and_when(p))
        assert e.file == str(p) and e.field.startswith("history[")
        assert "truncated" in e.problem
        assert isinstance(e, IcoreError) and isinstance(e, ValueError)
        assert e.code == ErrorCode.ADAPTER
        assert str(p) in str(e)

    def test_empty_and_missing_file(self, write_json: Callable[..., Path],
                                    tmp_path: Path) -> None:
        """Empty files and missing files."""
        assert _err(lambda: load_who_and_when(write_json("", "e.json"))).field == "<root>"
        missing = tmp_path / "nope.json"
        assert _err(lambda: load_who_and_when(missing)).file == str(missing)

    @pytest.mark.parametrize(("mutate", "field"), [
        (lambda d: d.pop("history"), "history"),
        (lambda d: d.__setitem__("history", "x"), "history"),
        (lambda d: d.__setitem__("history", []), "history"),
        (lambda d: d["history"][1].pop("content"), "history[1].content"),
        (lambda d: d["history"][2].__setitem__("role", 5), "history[2].role"),
        (lambda d: d["history"].__setitem__(3, "text"), "history[3]"),
        (lambda d: d.__setitem__("mistake_step", "abc"), "mistake_step"),
        (lambda d: d.__setitem__("mistake_step", "-2"), "mistake_step"),
        (lambda d: d.__setitem__("is_corrected", "maybe"), "is_corrected"),
        (lambda d: d.__setitem__("question", ["q"]), "question"),
    ])
    def test_magentic_fields(self, make_magentic: Callable[..., dict[str, Any]],
                             write_json: Callable[..., Path], mutate: Callable[[Any], Any],
                             field: str) -> None:
        """Each malformed field is named."""
        d = make_magentic()
        mutate(d)
        p = write_json(d, "bad.json")
        e = _err(lambda: load_who_and_when(p, family=MAGENTIC_ONE))
        assert (e.file, e.field) == (str(p), field)

    @pytest.mark.parametrize(("mutate", "field"), [
        (lambda d: d["history"][0].pop("name"), "history[0].name"),
        (lambda d: d.__setitem__("system_prompt", ["x"]), "system_prompt"),
        (lambda d: d["system_prompt"].__setitem__("Math_Expert", ["x"]),
         "system_prompt.Math_Expert"),
        (lambda d: d.__setitem__("is_correct", "nope"), "is_correct"),
    ])
    def test_captain_fields(self, make_captain: Callable[..., dict[str, Any]],
                            write_json: Callable[..., Path], mutate: Callable[[Any], Any],
                            field: str) -> None:
        """Each malformed field is named."""
        d = make_captain()
        mutate(d)
        p = write_json(d, "bad.json")
        e = _err(lambda: load_who_and_when(p, family=CAPTAIN_AGENT))
        assert (e.file, e.field) == (str(p), field)

    @pytest.mark.parametrize(("content", "why"), [
        ('Updated Ledger:\n{"a": ', "malformed ledger JSON"),
        ('Updated Ledger:\n{"is_in_loop": {"answer": "perhaps"}}', "is_in_loop"),
        ("Updated Ledger: none", "without a JSON object"),
        ('Updated Ledger:\n{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ])
    def test_malformed_ledger_is_a_warning(self, make_magentic: Callable[..., dict[str, Any]],
                                           content: str, why: str) -> None:
        """A broken ledger inside a message is the run's output, not the file's structure:
        the message is kept as a thought and the problem recorded (file and field)."""
        d = make_magentic()
        d["history"][2]["content"] = content
        t = parse_magentic_one(d, file="m.json")
        assert t.steps[2].kind == StepKind.THOUGHT
        (w,) = t.extras["warnings"]
        assert "m.json: history[2].content" in w and why in w

    def test_deeply_nested_file(self, write_json: Callable[..., Path]) -> None:
        """JSON nested past the recursion limit is a typed error, not a RecursionError."""
        e = _err(lambda: load_who_and_when(write_json("[" * 100_000 + "]" * 100_000,
                                                      "deep.json")))
        assert e.field == "<root>" and "nested too deeply" in e.problem

    def test_top_level_not_object(self, write_json: Callable[..., Path]) -> None:
        """A JSON list is not a run."""
        assert _err(lambda: load_who_and_when(write_json([1, 2], "l.json"))).field == "<root>"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("loader", [load_who_and_when, read_json])
def test_fifo_is_refused_without_opening_it(tmp_path: Path,
                                            loader: Callable[[Path], object]) -> None:
    """A named pipe would block the read forever: a typed error naming it and its kind."""
    fifo = tmp_path / "1.json"
    os.mkfifo(fifo)
    with pytest.raises(AdapterError, match=r"is a FIFO \(named pipe\), not a regular file") \
            as ei:
        loader(fifo)
    assert ei.value.file == str(fifo) and ei.value.field == "<root>"
    assert str(fifo) in str(ei.value)


def test_directory_is_refused_by_kind(tmp_path: Path) -> None:
    """A folder is named as a directory, not reported as an OS error string."""
    with pytest.raises(AdapterError, match="is a directory, not a regular file"):
        load_who_and_when(tmp_path)
