"""The pending approvals kept on disk, and a pause closed vs stopped (QA qa-new16 S3).

``pending_approvals`` (:mod:`icore.integrations.langgraph._pending`): what is kept reads
back as the same requests (same ids), and a row whose request does not match its id,
or that is no JSON, is refused (never restored blind). A recorded run closed at a pause
carries its writer's seal and is audited paused; the same file as a process that stopped
while it waited leaves it (no seal) is not ended. Real SQLite files, real trace files.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.adapters import audit_trace, load_jsonl
from icore.integrations import RunRecorder
from icore.integrations._pending_file import PendingFile, PendingUnreadable
from icore.workspace import ApprovalRequest

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6)
                     | st.text(max_size=8), lambda c: st.lists(c, max_size=3)
                     | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=8)
_RID = st.text("0123456789abcdef", min_size=64, max_size=64)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture],
          deadline=None)
@given(args=st.dictionaries(st.text(min_size=1, max_size=6), _JSON, max_size=4),
       basis=st.dictionaries(st.from_regex(r"order/[a-z0-9]{1,6}", fullmatch=True), _RID,
                             min_size=1, max_size=3))
def test_kept_requests_read_back_the_same(tmp_path: Path, args: dict[str, object],
                                           basis: dict[str, str]) -> None:
    f = PendingFile(tmp_path / "icore-attempts.sqlite")
    reqs = [ApprovalRequest.of("refund", args, basis),
            ApprovalRequest.of("refund", {**args, "again": True}, basis)]
    f.keep("k", "refund", "t1", "c2", "run-1", reqs)
    got = PendingFile(tmp_path / "icore-attempts.sqlite").get("k")  # another process
    assert got is not None and got.run == "run-1" and got.call_id == "c2"
    assert [r.id for r in got.asked] == [r.id for r in reqs]
    assert [dict(r.basis) for r in got.asked] == [basis, basis]
    f.drop("k")
    assert f.get("k") is None


@pytest.mark.parametrize("asked", [
    "not json", "[]", "{}", '[{"id": "x", "action": "refund", "args": {}, "basis": []}]',
    '[{"id": "x", "action": "refund", "args": {}, "basis": [["order/1"]]}]'])
def test_a_damaged_row_is_refused(tmp_path: Path, asked: str) -> None:
    f = PendingFile(tmp_path / "icore-attempts.sqlite")
    f.keep("k", "refund", "t1", "c2", "run-1", [ApprovalRequest.of(
        "refund", {"amount": 9.5}, {"order/42": "ab" * 32})])
    with closing(sqlite3.connect(tmp_path / "icore-attempts.sqlite")) as con:
        con.execute("UPDATE pending_approvals SET asked = ?", (asked,))
        con.commit()
    with pytest.raises(PendingUnreadable):
        f.get("k")


def test_a_pause_closed_is_paused_one_stopped_is_not_ended(tmp_path: Path) -> None:
    path, cut = tmp_path / "t.jsonl", tmp_path / "cut.jsonl"
    with RunRecorder("r", path=path) as rec:
        rec.task("refund 9.5")
        rec.add("tools", "thought", "paused at interrupt(), waiting for a human",
                pause=True)
        shutil.copy(path, cut)  # the file as a process killed while it waited leaves it
    closed = audit_trace(load_jsonl(path))
    stopped = audit_trace(load_jsonl(cut))
    assert closed.paused and not closed.trace.unclosed
    assert not closed.trace.warnings, closed.trace.warnings
    assert stopped.trace.unclosed and not stopped.paused
    assert stopped.summary().terminated is False
    [terminal] = [d for d in stopped.diagnoses if d.defect == "terminal"]
    assert "paused at an interrupt" in terminal.detail and "never closed" in terminal.detail
