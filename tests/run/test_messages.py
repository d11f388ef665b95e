"""Typed control-plane messages: the wire objects are exactly the JSON written before (#26)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.live._messages import (
    Command,
    PeerCall,
    PeerReply,
    Ready,
    Reply,
    dumps,
    parse_line,
)
from icore.live._replies import ExecuteReply

_ARGS = st.dictionaries(st.sampled_from(["task", "family", "plan", "act", "fresh"]),
                        st.one_of(st.text(max_size=8), st.integers(), st.none()), max_size=4)


def test_wire_objects_are_the_old_ones() -> None:
    assert dumps(Command(3, "plan", {"task": "t1"}).to_dict()) == \
        json.dumps({"id": 3, "cmd": "plan", "task": "t1"}, sort_keys=True)
    assert Reply(3, True, {"a": 1}).to_dict() == {"id": 3, "ok": True, "result": {"a": 1}}
    assert Reply(3, False, error="E: x").to_dict() == {"id": 3, "ok": False, "error": "E: x"}
    assert Ready(0, 42, "alice").to_dict() == {"ready": 0, "pid": 42, "agent": "alice"}
    assert PeerCall(1, "planner", "replan", {"task": "t"}).to_dict() == \
        {"call": 1, "to": "planner", "cmd": "replan", "task": "t"}
    assert PeerReply(1, False, error="x").to_dict() == {"reply": 1, "ok": False, "error": "x"}


@given(st.integers(0, 10**6), st.sampled_from(["plan", "execute", "audit"]), _ARGS)
def test_commands_and_calls_round_trip(n: int, cmd: str, args: dict[str, object]) -> None:
    c = Command(n, cmd, args)
    assert parse_line(dumps(c.to_dict()), to_agent=True) == c
    p = PeerCall(n, "planner", cmd, args)
    assert parse_line(dumps(p.to_dict()), to_agent=False) == p
    r = PeerReply(n, True, dict(args))
    assert parse_line(dumps(r.to_dict()), to_agent=True) == r


def test_replies_and_ready_round_trip() -> None:
    for msg in (Reply(7, True, {"x": [1]}), Reply(7, False, error="boom"), Ready(5, 9, "a")):
        assert parse_line(dumps(msg.to_dict()), to_agent=False) == msg


def test_lines_that_are_no_message() -> None:
    assert parse_line("[1, 2]", to_agent=True) is None
    assert parse_line('{"ready": "x"}', to_agent=False) is None
    assert parse_line('{"x": 1}', to_agent=False) is None
    # a command line without "cmd" still reaches the agent (it answers "unknown command")
    assert parse_line('{"id": 1}', to_agent=True) == Command(1, "None", {})


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_live_run_carries_one_diagnosis_per_flag(tmp_path: Path) -> None:
    """The ledger diagnoses each hard flag once, through ``icore.audit.diagnose_flags``;
    both report pages render exactly those diagnoses, and the flag the stale action's
    proposal raised is diagnosed at that proposal's step, as the flag table says (#26)."""
    from icore.live import default_manifest, run_live
    from icore.report import icore_run_view, live_run_view
    from icore.state import ProposalRecorded

    res = run_live(default_manifest("reservation"), tmp_path / "run",
                   policy="owner_head_freshness")
    x = res.state
    flags = x.flags  # id -> HardFlag
    assert [d.id for d in res.diagnoses] == [f"d{i}" for i in range(1, len(res.diagnoses) + 1)]
    assert len(res.diagnoses) == 2 and all(len(d.flags) == 1 and d.flags[0] in flags
                                          for d in res.diagnoses)
    want = [(d.id, d.defect, d.step or None, d.responsible, d.detail, tuple(d.obligations),
             flags[d.flags[0]].assertions) for d in res.diagnoses]
    page, icore_page = live_run_view(res), icore_run_view(res)
    for view in (page, icore_page):
        assert [(d.id, d.defect, d.step, d.responsible, d.detail, tuple(d.obligations),
                 d.assertions) for d in view.diagnoses] == want
    # the step rule: the stale action's proposal (the k-th) raised f2, diagnosed at k
    ids = [e.body.proposal.id for e in x.entries if isinstance(e.body, ProposalRecorded)]
    by_flag = {d.flags[0]: d for d in res.diagnoses}
    steps = {f.id: f.step for f in page.flags}
    for f in flags.values():
        if f.proposal is not None:
            assert by_flag[f.id].step == ids.index(f.proposal) + 1 == steps[f.id]
    assert [d.step for d in res.diagnoses] == [5, 6]
    assert [steps[d.flags[0]] for d in res.diagnoses] == [5, 6]


def test_execute_reply_round_trips_the_agent_dict() -> None:
    """``ExecuteReply`` reads what the executor writes and writes it back unchanged."""
    dec = {"outcome": "authorized", "reason": "fresh", "action": "reserve",
           "roots": ["a" * 64], "deps": ["req/t"], "frontier": {"req/t": "b" * 64},
           "heads": {"req/t": "b" * 64}, "fresh": {}, "replanned": False, "point": 1,
           "at_ms": 2.5, "policy": "planfence", "detail": "", "owners_contacted": 1,
           "heads_checked": 1}
    full = {"decision": {"ok": True, "responses": 1}, "executed": True, "replanned": False,
            "roots": ["a" * 64], "args": {"task": "t", "option": "o1"}, "detail": "",
            "outcome": "authorized", "decisions": [dec], "replan_replies": [None],
            "root_parents": {"a" * 64: ["b" * 64]},
            "record": {"id": "c" * 64, "key": "act/t", "owner": "executor-1", "seq": 3,
                       "parents": ["a" * 64], "type": "action",
                       "content": {"action": "reserve"}, "replication_failed": []}}
    failed = {"decision": {"ok": False, "error": "schema"}, "executed": False}
    for obj in (full, failed, {**full, "executed": False, "outcome": "blocked"}):
        obj = {k: v for k, v in obj.items() if k != "record" or obj.get("executed")}
        assert dumps(ExecuteReply.from_dict(obj).to_dict()) == dumps(obj)
    assert ExecuteReply.from_dict(full).decisions[0].authorized
