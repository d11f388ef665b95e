"""``RunRecorder`` refuses wrong types at the call (QA r8-bad D16/D17, issue 29 item 1):
a truthy non-bool ``succeeded`` was written as ``"succeeded": true`` (a wrong answer
audited as sound); other wrong types were accepted and made the file unauditable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icore.errors import IntegrationError
from icore.integrations import RunRecorder
from icore.integrations._recorder_values import KIND_NAMES as _KIND_NAMES


@pytest.mark.parametrize("value", ["no", "False", "0", "", 0, 1, [0], 1.0])
def test_succeeded_must_be_a_bool(tmp_path: Path, value: Any) -> None:
    with pytest.raises(IntegrationError, match="succeeded") as e:
        RunRecorder("trip", ground_truth="Porto", succeeded=value)
    assert e.value.fields["argument"] == "succeeded"
    rec = RunRecorder("trip", ground_truth="Porto")
    with pytest.raises(IntegrationError, match="succeeded"):
        rec.succeeded = value  # set after the run, as the docstring suggests
    assert rec.succeeded is None


def test_a_false_outcome_is_written_false(tmp_path: Path) -> None:
    rec = RunRecorder("trip", ground_truth="Porto", succeeded=False)
    rec.task("Book a trip")
    rec.finish("planner", "Lisbon")
    assert rec.header()["run"]["succeeded"] is False
    rec.succeeded = True
    assert rec.header()["run"]["succeeded"] is True
    np = pytest.importorskip("numpy")
    rec.succeeded = np.int64(1) == np.int64(2)  # a NumPy bool
    assert rec.header()["run"]["succeeded"] is False


@pytest.mark.parametrize(("kwargs", "argument"), [
    ({"question": [5]}, "question"), ({"ground_truth": {"a": 42}}, "ground_truth"),
    ({"ground_truth": True}, "ground_truth"), ({"orchestrator": 7}, "orchestrator"),
    ({"agents": {"a": 5}}, "agents"),
    ({"agents": {5: "x"}}, "agents"), ({"agents": ["a", "b"]}, "agents"),
    ({"agents": "ab"}, "agents")])
def test_header_arguments_are_typed(kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises(IntegrationError) as e:
        RunRecorder("r", **kwargs)
    assert e.value.fields["argument"] == argument and argument in str(e.value)


def test_a_numeric_question_or_answer_is_written_as_its_text() -> None:
    """A math benchmark's ``ground_truth=42``: written ``"42"``, as the JSONL importer
    reads a number there (recordings made before the type checks audit the same)."""
    rec = RunRecorder("r", question=5, ground_truth=42.5)
    assert rec.header()["run"]["question"] == "5"
    assert rec.header()["run"]["ground_truth"] == "42.5"


@pytest.mark.parametrize(("agent", "kind", "argument"), [
    ("a", "nonsense_kind", "kind"), (5, "output", "agent"), ("", "output", "agent"),
    (None, "output", "agent")])
def test_add_refuses_a_line_the_audit_would_refuse(agent: Any, kind: Any,
                                                   argument: str) -> None:
    rec = RunRecorder("r")
    with pytest.raises(IntegrationError) as e:
        rec.add(agent, kind, "x")
    assert e.value.fields["argument"] == argument and rec.events == []


def test_kind_names_are_the_audit_kinds() -> None:
    from icore.adapters import StepKind

    assert {k.value for k in StepKind} == _KIND_NAMES


def test_nan_content_still_audits(tmp_path: Path) -> None:
    rec = RunRecorder("r", question="q")
    rec.task("q")
    rec.add("a", "output", float("nan"))
    rec.finish("a", "done")
    assert rec.audit().trace.steps


def _entry_points() -> list[tuple[str, Any]]:
    """The recording entry points of the frameworks installed in this venv."""
    from icore.integrations.ag2 import ChatRecorder
    from icore.integrations.langgraph import RecordingHandler, recorded_node
    from icore.integrations.openai_agents import RecordingProcessor, recording

    def enter(rec: Any) -> None:
        with recording(rec, exclusive=True):
            pass

    return [("RecordingHandler", RecordingHandler),
            ("recorded_node", lambda rec: recorded_node(lambda s: s, recorder=rec)),
            ("RecordingProcessor", RecordingProcessor), ("recording()", enter),
            ("ChatRecorder", ChatRecorder)]


@pytest.mark.parametrize("bad", [None, "rec", Path("run.jsonl"), {}, 0])
def test_recording_entry_points_refuse_a_non_recorder(bad: Any) -> None:
    """``RecordingHandler(None)`` / ``RecordingHandler("rec")`` recorded nothing at run
    time (QA qa-fw7 S2: a fenced ``charge`` ran unrecorded); ``recording(None,
    exclusive=True)`` was an AttributeError. All refuse at construction, typed."""
    for where, make in _entry_points():
        with pytest.raises(IntegrationError, match="must be a RunRecorder") as e:
            make(bad)
        assert e.value.fields["got"] == type(bad).__name__, where
        assert "rec.write(" in e.value.fields["fix"], where
