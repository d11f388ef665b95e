"""Approvals bound to exactly what was approved (issue 28 item 5), framework-free."""

from __future__ import annotations

from typing import Any

import pytest

from icore.workspace import ApprovalBook, ApprovalRequest, Workspace, read_answer

ORDER = "order/42"


class _Suspend(Exception):
    """Stands for a framework's interrupt: the run stops until the human answers."""


class Replaying:
    """A replaying framework's ``ask``: answers given so far, by index, else suspend."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.shown: list[dict[str, Any]] = []
        self.i = 0

    def __call__(self, payload: dict[str, Any]) -> Any:
        self.shown.append(payload)
        i, self.i = self.i, self.i + 1
        if i < len(self.answers):
            return self.answers[i]
        raise _Suspend(payload)


def _req(city: str, basis: str = "a" * 64) -> ApprovalRequest:
    return ApprovalRequest.of("ship", {"city": city}, {ORDER: basis})


def test_request_id_binds_arguments_and_versions() -> None:
    """Other arguments or other versions make another request."""
    r = _req("Berlin")
    assert r.id == _req("Berlin").id
    assert r.id != _req("Munich").id and r.id != _req("Berlin", "b" * 64).id
    assert r.covers(r.approve()) and not r.covers(_req("Munich").approve())
    assert not r.covers(True) and not r.covers(r.reject("no"))
    assert r.payload()["planfence.approval"]["args"] == {"city": "Berlin"}  # type: ignore[index]


@pytest.mark.parametrize(("answer", "ok"), [
    (True, True), ("yes", True), ("Approve", True), ({"approved": True}, True),
    ({"type": "accept"}, True), (False, False), ("no", False), ("maybe", False),
    (None, False), (3, False), ({"approved": "yes"}, False)])
def test_read_answer_fails_closed(answer: Any, ok: bool) -> None:
    """Only a clear yes approves; anything unreadable is a rejection."""
    assert read_answer(answer).approved is ok


def test_book_matches_bare_answers_to_what_was_asked() -> None:
    """A "yes" given for Berlin never approves Munich; Munich is put to the human."""
    book = ApprovalBook()
    berlin, munich = _req("Berlin"), _req("Munich")
    with pytest.raises(_Suspend):
        book.resolve("c1", berlin, Replaying([]))
    # the human said yes to Berlin; meanwhile the call became Munich (a replan)
    ask = Replaying(["yes"])
    with pytest.raises(_Suspend) as ei:
        book.resolve("c1", munich, ask)
    assert ei.value.args[0]["planfence.approval"]["args"] == {"city": "Munich"}
    assert [r.id for r in book.asked("c1")] == [berlin.id, munich.id]
    # the human approves Munich too: now it runs
    v = book.resolve("c1", munich, Replaying(["yes", "yes"]))
    assert v.approved and v.request == munich
    # and had the call stayed Berlin, the first yes is Berlin's
    assert book.resolve("c1", berlin, Replaying(["yes", "no"])).approved


def test_book_forgotten_history_asks_again() -> None:
    """After a restart the book is empty: a replayed bare yes approves nothing."""
    book = ApprovalBook()
    munich = _req("Munich")
    with pytest.raises(_Suspend):
        book.resolve("c1", munich, Replaying(["yes"]))  # that yes was for something else
    v = book.resolve("c1", munich, Replaying(["yes", "yes"]))
    assert v.approved
    # an id-bearing answer is attributable anywhere
    book2 = ApprovalBook()
    assert book2.resolve("c9", munich, Replaying([munich.approve()])).approved
    assert not book2.resolve("c8", munich, Replaying([munich.reject("too far")])).approved


def test_sync_prompt_answers_what_it_was_asked() -> None:
    """A synchronous prompt (``fresh_answers``) answers the request just shown."""
    book = ApprovalBook()
    v = book.resolve("c1", _req("Oslo"), lambda payload: "yes", fresh_answers=True)
    assert v.approved


def test_agent_execute_asks_before_running_and_binds_the_basis() -> None:
    """``approve`` sees the authorized call (arguments and the versions read)."""
    ws = Workspace({ORDER: "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    agent = ws.agent("shipper")
    rec = agent.read_record(ORDER)
    assert rec is not None
    asked: list[ApprovalRequest] = []

    def approve(req: ApprovalRequest) -> bool:
        asked.append(req)
        return req.args == {"city": "Berlin"}

    ok = agent.execute("ship", lambda city: city, {"city": "Berlin"}, depends_on={ORDER},
                       approve=approve)
    assert ok.executed and asked[0].basis == ((ORDER, rec.id),)
    # the human is shown the value of each version the call was planned from (QA
    # qa-new13b), and the request's id still binds only action, arguments and record ids
    assert asked[0].values == ((ORDER, {"city": "Berlin"}),)
    assert asked[0].payload()["planfence.approval"]["basis"] == [  # type: ignore[index]
        {"key": ORDER, "id": rec.id, "value": {"city": "Berlin"}}]
    assert asked[0].id == ApprovalRequest.of("ship", {"city": "Berlin"}, {ORDER: rec.id}).id
    assert agent.approval_request(ok).id == asked[0].id
    no = agent.execute("ship", lambda city: city, {"city": "Paris"}, depends_on={ORDER},
                       approve=approve)
    assert no.reason == "approval_rejected" and not no.executed


@pytest.mark.parametrize("is_async", [False, True])
def test_a_change_while_the_human_decides_blocks_the_approved_call(is_async: bool) -> None:
    """#28 D3: ``approve`` is a human who takes their time; the order changes meanwhile.
    The gate validates again after the answer: the approved Berlin call is refused stale
    with the fresh value (nothing ran), and the next call is put to the human again."""
    import asyncio

    ws = Workspace({ORDER: "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    agent = ws.agent("shipper")
    agent.read(ORDER)
    asked: list[ApprovalRequest] = []
    shipped: list[str] = []

    def human(req: ApprovalRequest) -> Any:
        asked.append(req)
        if len(asked) == 1:
            ws.put(ORDER, {"city": "Munich"})  # while the human decides
        return req.approve()

    def ship(city: str) -> None:
        shipped.append(city)

    def run(city: str) -> Any:
        kw: dict[str, Any] = {"depends_on": {ORDER}, "approve": human}
        if is_async:
            return asyncio.run(agent.aexecute("ship", ship, {"city": city}, **kw))
        return agent.execute("ship", ship, {"city": city}, **kw)

    first = run("Berlin")
    assert not first.executed and first.reason == "stale" and shipped == []
    assert first.fresh == {ORDER: {"city": "Munich"}}
    second = run("Munich")  # the agent's replan, from the handed-over value
    assert second.executed and shipped == ["Munich"]
    assert [r.args["city"] for r in asked] == ["Berlin", "Munich"]
    assert asked[0].basis != asked[1].basis


@pytest.mark.parametrize("answer", [
    {"approved": True, "planfence.approval": None}, {"approved": True, "id": None},
    {"type": "accept", "planfence.approval": None},
    {"approved": True, "planfence.approval": None, "id": "x"}])
def test_a_present_null_id_is_a_rejection(answer: Any) -> None:
    """QA qa-new17c #7: an answer naming ``null`` as its id is no bare yes (it approved
    and the call ran): an id that is no str rejects, ``None`` included."""
    got = read_answer(answer)
    assert not got.approved and got.id is None and "no request id" in got.reason


@pytest.mark.parametrize("answer", ["no", "nope", 1, {"approved": True, "id": "x" * 64},
                                    {"approved": True, "planfence.approval": None}])
def test_only_a_readable_yes_for_this_request_approves(answer: Any) -> None:
    """A truthy answer is not a yes: "no" text, a number or another request's id rejects."""
    ws = Workspace({ORDER: "sales"})
    ws.put(ORDER, {"city": "Berlin"})
    agent = ws.agent("shipper")
    agent.read(ORDER)
    ran: list[str] = []
    call = agent.execute("ship", lambda city: ran.append(city), {"city": "Berlin"},
                         depends_on={ORDER}, approve=lambda req: answer)
    assert call.reason == "approval_rejected" and ran == []


def test_a_check_refusing_with_its_own_reason_keeps_the_gate_decisions() -> None:
    """``check`` compares with the request noted before the change (``request_for``):
    the replanned call (same arguments, other version) is refused with the check's own
    reason (``CallRefused``); ``Call.result`` keeps the call's decisions (stale, then the
    replan's valid) and says it did not run."""
    from icore.workspace import APPROVAL_CHANGED, CallRefused

    ws = Workspace({"order/*": "sales"})
    ws.put(ORDER, {"city": "Berlin", "rush": False}, by="sales")
    agent = ws.agent("shipper")
    agent.read(ORDER)
    asked = agent.request_for("ship", {"city": "Berlin"}, [ORDER])
    assert asked is not None and asked.basis[0][0] == ORDER
    ws.update(ORDER, lambda o: {**o, "rush": True}, by="sales")  # while the human decides
    ran: list[str] = []

    def check(req: ApprovalRequest) -> bool:
        if req.id != asked.id:
            raise CallRefused(APPROVAL_CHANGED, "not the request the human approved")
        return True

    call = agent.execute("ship", lambda city: ran.append(city), {"city": "Berlin"},
                         depends_on={ORDER}, replan=lambda st: {"city": "Berlin"},
                         check=check)
    assert (call.executed, call.reason, ran) == (False, APPROVAL_CHANGED, [])
    assert call.detail == "not the request the human approved" and call.replanned
    assert call.result is not None and not call.result.executed
    assert [d.reason.value for d in call.result.decisions] == ["stale", "valid"]
    assert agent.request_for("ship", {"city": "Berlin"}, ["order/7"]) is None
