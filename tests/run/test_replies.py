"""Typed step replies: each reads what its agent writes and writes it back byte for byte (#26).

The "before" objects are spelled as the agent process built them before the replies were
typed (``rec_info`` plus ``replication_failed``, the plan/shortlist/audit dicts, the
``peers``/``ping``/``stats`` answers), so a change of the wire shows up here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.live._errors import LiveRunError, ReplyFormatError
from icore.live._messages import Reply, dumps, parse_line
from icore.live._replies import (
    AuditReply,
    CommittedRecord,
    ExecuteReply,
    PeersReply,
    PingReply,
    PlanReply,
    ShortlistReply,
    StatsReply,
)
from icore.records import Record, derive

_OK = {"ok": True, "args": {"candidate": "o1"}, "responses": 1, "accepted": 1,
       "violations": [], "error": None, "infrastructure": False, "infra_failures": 0,
       "mode": "scripted"}
_FAILED = {**_OK, "ok": False, "args": None, "accepted": 0, "error": "schema"}


def _old_rec_info(rec: Record, failed: list[str]) -> dict[str, Any]:
    """What ``publish`` answered before #26 (``rec_info`` + ``replication_failed``)."""
    out: dict[str, Any] = {"id": rec.id, "key": rec.key, "owner": rec.owner, "seq": rec.seq,
                           "parents": list(rec.parents), "type": rec.type,
                           "content": rec.content}
    if rec.supersedes is not None:
        out["supersedes"] = rec.supersedes
    out["replication_failed"] = failed
    return out


R0 = Record.create(key="req/t", owner="reviser-1", seq=1, type="requirement",
                   content={"city": "Paris", "nights": 2})
PLAN = derive(key="plan/t", owner="planner-1", seq=1, type="plan",
              content={"action": "reserve", "args": {"task": "t", "option": "o1"}},
              inputs=[R0])
REV = derive(key="req/t", owner="reviser-1", seq=2, type="requirement",
             content={"city": "Rome"}, inputs=[R0])


def _cases() -> list[tuple[type[Any], dict[str, Any]]]:
    rec, plan = _old_rec_info(R0, []), _old_rec_info(PLAN, ["auditor-1"])
    return [
        (CommittedRecord, rec),
        (CommittedRecord, _old_rec_info(REV, [])),
        (ShortlistReply, {"decision": _OK, "record": rec}),
        (ShortlistReply, {"decision": _FAILED}),
        (PlanReply, {"decision": _OK, "record": plan, "args": {"task": "t", "option": "o1"}}),
        (PlanReply, {"decision": _FAILED}),
        (AuditReply, {"decision": _OK, "consistent": True, "current_requirement": R0.id,
                      "record": rec, "verdict": "accept"}),
        (AuditReply, {"decision": _FAILED, "consistent": False,
                      "current_requirement": R0.id}),
        (PeersReply, {"peers": 5}),
        (PingReply, {"agent": "auditor-1", "role": "auditor"}),
        (StatsReply, {"agent": "planner-1", "external_actions": 0, "records": 3,
                      "server": {"rpcs": 2, "total_bytes": 10}, "client": {"rpcs": 1}}),
        (StatsReply, {"agent": "planner-1", "external_actions": 1,
                      "nats": {"gets": 1, "puts": 2, "cas_conflicts": 0,
                               "permission_denied": 0}}),
        (ExecuteReply, {"decision": _OK, "executed": True, "replanned": True,
                        "roots": [PLAN.id], "args": {"task": "t", "option": "o1"},
                        "detail": "", "outcome": "authorized", "decisions": [],
                        "replan_replies": [None, {"decision": _OK, "record": plan,
                                                  "args": {"task": "t", "option": "o1"}}],
                        "root_parents": {PLAN.id: [R0.id]}, "record": rec}),
    ]


@pytest.mark.parametrize(("kind", "obj"), _cases(),
                         ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_each_reply_round_trips_the_agent_object(kind: type[Any], obj: dict[str, Any]) -> None:
    """``from_dict`` then ``to_dict`` gives the object back; the reply line is the same bytes."""
    typed = kind.from_dict(obj)
    assert typed.to_dict() == obj
    line = dumps(Reply(4, True, obj).to_dict())
    msg = parse_line(line, to_agent=False)
    assert isinstance(msg, Reply) and msg.result is not None
    assert dumps(Reply(4, True, kind.from_dict(msg.result).to_dict()).to_dict()) == line


def test_the_agent_builds_the_old_objects() -> None:
    """What the agent now builds from typed replies is what it wrote before."""
    assert CommittedRecord.of(PLAN, ("auditor-1",)).to_dict() == \
        _old_rec_info(PLAN, ["auditor-1"])
    assert CommittedRecord.of(REV).to_dict() == _old_rec_info(REV, [])
    assert PlanReply(_OK, CommittedRecord.of(PLAN), {"task": "t", "option": "o1"}).to_dict() \
        == {"decision": _OK, "record": _old_rec_info(PLAN, []),
            "args": {"task": "t", "option": "o1"}}
    assert AuditReply(_FAILED, False, R0.id).to_dict() == \
        {"decision": _FAILED, "consistent": False, "current_requirement": R0.id}
    assert StatsReply("a", 2).to_dict() == {"agent": "a", "external_actions": 2}


@pytest.mark.parametrize(("kind", "obj", "field"), [
    (CommittedRecord, {**_old_rec_info(R0, []), "seq": "1"}, "record.seq"),
    (CommittedRecord, {k: v for k, v in _old_rec_info(R0, []).items() if k != "content"},
     "record.content"),
    (PlanReply, {"decision": _OK, "record": {"id": "x"}}, "plan.record.key"),
    (PlanReply, {"record": _old_rec_info(PLAN, [])}, "plan.decision"),
    (ShortlistReply, {"decision": []}, "shortlist.decision"),
    (AuditReply, {"decision": _OK, "consistent": "yes", "current_requirement": "r"},
     "audit.consistent"),
    (PeersReply, {"peers": True}, "peers.peers"),
    (StatsReply, {"agent": "a", "external_actions": 0, "server": [1]}, "stats.server"),
    (ExecuteReply, {"decision": _OK, "executed": False, "outcome": "blocked",
                    "replan_replies": [{"record": None}]},
     "execute.replan_replies[0].decision"),
])
def test_a_malformed_reply_names_its_field(kind: type[Any], obj: dict[str, Any],
                                           field: str) -> None:
    """A missing or mistyped field is a typed live-run error naming it (the step fails)."""
    with pytest.raises(ReplyFormatError) as ei:
        kind.from_dict(obj)
    assert ei.value.fields["field"] == field
    assert isinstance(ei.value, LiveRunError) and ei.value.code.value == "live"


# -- invariants over generated replies -------------------------------------------------
_TEXT = st.text(max_size=6)
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-9, 10**9) | _TEXT,
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(_TEXT, c, max_size=3),
                     max_leaves=6)
_OBJ = st.dictionaries(_TEXT, _JSON, max_size=4)
_RECORDS = st.builds(
    CommittedRecord, _TEXT, _TEXT, _TEXT, st.integers(0, 2**40), _TEXT,
    st.lists(_TEXT, max_size=3).map(tuple), _JSON, st.none() | _TEXT,
    st.lists(_TEXT, max_size=3).map(tuple))
_PLANS = st.builds(PlanReply, _OBJ, st.none() | _RECORDS, st.none() | _OBJ)
_COUNTERS = st.none() | st.dictionaries(_TEXT, st.integers(0, 10**9), max_size=3)
_REPLIES = st.one_of(
    _RECORDS,
    _PLANS,
    st.builds(ShortlistReply, _OBJ, st.none() | _RECORDS),
    st.builds(AuditReply, _OBJ, st.booleans(), _TEXT, st.none() | _RECORDS,
              st.none() | _TEXT),
    st.builds(PeersReply, st.integers(0, 1000)),
    st.builds(PingReply, _TEXT, _TEXT),
    st.builds(StatsReply, _TEXT, st.integers(0, 1000), _COUNTERS, _COUNTERS,
              st.none() | st.integers(0, 10**6), _COUNTERS),
    st.builds(ExecuteReply, _OBJ, st.booleans()),
    st.builds(ExecuteReply, _OBJ, st.booleans(), _TEXT, st.booleans(),
              st.lists(_TEXT, max_size=2).map(tuple), _OBJ, _JSON, st.just(()),
              st.lists(st.none() | _PLANS, max_size=2).map(tuple),
              st.dictionaries(_TEXT, st.lists(_TEXT, max_size=2), max_size=2),
              st.none() | _RECORDS),
)


@given(_REPLIES)
def test_generated_replies_round_trip_through_the_wire(reply: Any) -> None:
    """Any reply survives its control line: typed -> JSON line -> typed is the identity,
    and re-writing what was read gives the same bytes."""
    line = dumps(Reply(1, True, reply.to_dict()).to_dict())
    msg = parse_line(line, to_agent=False)
    assert isinstance(msg, Reply) and msg.result is not None
    back = type(reply).from_dict(json.loads(json.dumps(msg.result)))
    assert back == reply
    assert dumps(Reply(1, True, back.to_dict()).to_dict()) == line
