"""Setup and output paths after QA qa-new10b S4 (#28): ``depends_on`` keys that are no
str are refused, never coerced; ``RunRecorder.write`` creates missing folders; a
recorded non-finite argument is its text."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from icore.errors import IntegrationError
from icore.integrations import FenceGuard, RunRecorder
from icore.workspace import Workspace

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("keys", [[1, 2], {"budget/travel", 7}, (b"budget/travel",)])
def test_depends_on_keys_must_be_str(keys: object) -> None:
    """``depends_on=[1, 2]`` was coerced to the keys ``"1"``, ``"2"``: now a typed error
    naming the value and the fix."""
    ws = Workspace({"budget/*": "finance"})
    ws.put("budget/travel", {"limit": 900}, by="finance")
    with pytest.raises(IntegrationError, match="keys must be str") as got:
        FenceGuard(agent=ws.agent("travel"), depends_on=keys)  # type: ignore[arg-type]
    assert "fix" in got.value.fields and "got" in got.value.fields


def test_write_creates_missing_folders(tmp_path: Path) -> None:
    """``rec.write("nodir/x.jsonl")`` failed with "No such file or directory"; as
    ``icore audit --json`` does, the folders are made."""
    rec = RunRecorder("r")
    rec.task("go")
    rec.finish("a", "done")
    p = rec.write(tmp_path / "nodir" / "deeper" / "x.jsonl")
    assert p.is_file() and json.loads(p.read_text(encoding="utf-8").splitlines()[0])


def test_a_recorded_nan_is_its_text(tmp_path: Path) -> None:
    """Any line a recorder writes is strict JSON (QA qa-new10b S3, br_nums.jsonl)."""
    rec = RunRecorder("nums")
    rec.tool_call("a", "pay", {"amount": math.nan, "more": [math.inf]}, "refused", error=True)
    rec.finish("a", {"total": -math.inf})
    lines = rec.write(tmp_path / "n.jsonl").read_text(encoding="utf-8").splitlines()

    def bare(token: str) -> None:
        raise AssertionError(f"bare {token}")

    got = [json.loads(ln, parse_constant=bare) for ln in lines]
    (out,) = [x for x in got if x.get("tool") == "pay"]
    assert out["args"] == {"amount": "nan", "more": ["inf"]}


def test_a_refusal_shows_a_bidi_key_escaped() -> None:
    """QA qa-new10b S4 (br_ids.out): the model read ``no value yet for event/dev<U+202E>
    conf`` with the override raw (the text after it reversed); the refusal escapes it as
    the audit does."""
    ws = Workspace({"event/*": "organizer"})
    ws.put("event/devconf", {"city": "Lisbon"}, by="organizer")
    team = ws.agent("travel")
    ran: list[str] = []
    call = team.execute("book", lambda event_id: ran.append(event_id), {
        "event_id": "dev\u202econf"}, depends_on=lambda a: {f"event/{a['event_id']}"})
    assert not call.executed and not ran
    assert "\u202e" not in call.message and "dev\\u202econf" in call.message
