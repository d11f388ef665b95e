"""Patience that a re-assign loop cannot dodge (issue 30 item 3).

code_review.yaml (H = 4): the lead re-assigns ``fix`` alice -> bob -> alice ... every
step. Each re-assignment commits, is not productive and leaves the status ``assigned``:
activity, not progress. The obligation's counter keeps growing and ``patience`` fires,
in passive and in audit mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from icore.audit import AuditLoop, FunctionPolicy, LoopConfig
from icore.state import Effect, EventSpec, Proposal, State, load_declaration

CODE_REVIEW = Path(__file__).resolve().parents[3] / "examples" / "declarations" / \
    "code_review.yaml"


def _state() -> State:
    x = State(load_declaration(CODE_REVIEW))
    v = x.submit(Proposal("task", "introduce",
                          events=(EventSpec("task_posted", "task", {"description": "fix"},
                                            id="t"),),
                          effects=(Effect.node("fix", "code", required_root=True),),
                          justification=("t",)))
    assert v.committed, v.reasons
    return x


def _reassign_loop(steps: int) -> FunctionPolicy:
    """The lead assigns fix to alice, bob, alice, ... one per step."""
    def propose(view):
        who = ("alice", "bob")[view.step % 2]
        return Proposal("lead", "assign", target="fix",
                        effects=(Effect.assign("fix", who), Effect.status("fix", "assigned")),
                        justification=("t",))
    return FunctionPolicy(propose)


@pytest.mark.parametrize("mode", ["passive", "audit"])
def test_a_reassignment_loop_trips_patience(mode: str) -> None:
    x = _state()
    assert x.decl.parameters.patience == 4
    loop = AuditLoop(x, _reassign_loop(12), config=LoopConfig(mode=mode, max_steps=12))
    res = loop.run()
    # never reset by a new assignee (recoveries the audit asks for are activity too)
    assert [r.h for r in res.trajectory[:5]] == [0, 1, 2, 3, 4]
    assert "patience" in res.trajectory[4].triggers
    assert res.fired.get("patience", 0) >= 1
    assert x.obligations["fix"].status == "assigned"
    if mode == "passive":  # nothing intervenes: it keeps firing, h keeps growing
        assert all(r.decision == "commit" for r in res.trajectory)
        assert [r.h for r in res.trajectory] == list(range(12))
        assert res.fired["patience"] == 8
    else:
        assert any(i.diagnosis.primary == "patience" for i in res.interventions)


def test_progress_still_resets_the_counter() -> None:
    """The same loop, but at step 3 alice starts the work (status assigned -> active):
    a productive change of a progress field, so the window restarts there."""
    x = _state()

    def propose(view):
        if view.step == 3:
            return Proposal("alice", "start", target="fix",
                            effects=(Effect.status("fix", "active"),), justification=("t",))
        if view.step > 3:
            return None
        who = ("alice", "bob")[view.step % 2]
        if view.step == 2:
            who = "alice"
        return Proposal("lead", "assign", target="fix",
                        effects=(Effect.assign("fix", who), Effect.status("fix", "assigned")),
                        justification=("t",))

    res = AuditLoop(x, FunctionPolicy(propose),
                    config=LoopConfig(mode="passive", max_steps=6)).run()
    assert [r.decision for r in res.trajectory[:4]] == ["commit"] * 4
    assert [r.h for r in res.trajectory] == [0, 1, 2, 0, 1, 2]
