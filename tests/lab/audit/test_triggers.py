"""Each trigger fires exactly when its condition holds (icore Alg. 1; design.md 4.4)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from icore.audit import TRIGGER_ORDER, Trigger, WorkIndex, evaluate_triggers
from icore.state import State


def fired(x: State, *, h: int = 0) -> set[Trigger]:
    idx = WorkIndex(x)
    hits = evaluate_triggers(x, index=idx, h=h, metrics=x.metrics(), terminal=x.terminal())
    assert [t.trigger for t in hits] == [t for t in TRIGGER_ORDER if t in {h.trigger for h in hits}]
    return {t.trigger for t in hits}


def test_hard_flag_fires_iff_a_flag_is_open(kit) -> None:
    """An unsupported completion claim raises a flag; resolving it stops the trigger."""
    x, team = kit.state()
    x.submit(team.assign("o1", "alice"))
    assert Trigger.HARD_FLAG not in fired(x)
    v = x.submit(team.submit("o1", "alice", evidence=False))
    assert not v.committed
    assert Trigger.HARD_FLAG in fired(x)
    x.resolve_flag(v.flags[0].id, by="alice")
    assert Trigger.HARD_FLAG not in fired(x)


def test_no_productive_work_fires_iff_nothing_enabled(kit) -> None:
    """Open o1 is enabled (o2 waits on it); a failed o1 leaves nothing enabled."""
    x, team = kit.state()
    assert Trigger.NO_PRODUCTIVE_WORK not in fired(x)
    x.submit(team.assign("o1", "alice"))
    assert x.submit(team.fail("o1", "alice")).committed
    assert Trigger.NO_PRODUCTIVE_WORK in fired(x)
    x.submit(team.assign("o1", "alice"))
    assert Trigger.NO_PRODUCTIVE_WORK not in fired(x)


def test_no_productive_work_silent_when_terminal(kit) -> None:
    """A terminal state has no enabled work, and that is not a stall."""
    x, team = kit.state()
    for oid in ("o1", "o2"):
        x.submit(team.assign(oid, "alice"))
        assert x.submit(team.submit(oid, "alice")).committed
    assert x.terminal()
    assert Trigger.NO_PRODUCTIVE_WORK not in fired(x)


@given(h=st.integers(0, 12), patience=st.integers(1, 10))
def test_patience_fires_iff_h_reaches_H(kit, h: int, patience: int) -> None:
    """``patience`` fires exactly when h >= H."""
    x, _ = kit.state(patience=patience)
    assert (Trigger.PATIENCE in fired(x, h=h)) == (h >= patience)


def test_reassignment_fires_iff_beneficial(kit) -> None:
    """Assigned to bob (0.3) while alice (0.9) is feasible: gain 0.6 > ε fires."""
    x, team = kit.state()
    x.submit(team.assign("o1", "bob"))
    assert Trigger.REASSIGNMENT in fired(x)
    x.submit(team.assign("o1", "alice"))
    assert Trigger.REASSIGNMENT not in fired(x)


@given(eps=st.floats(0.0, 1.0))
def test_reassignment_threshold_is_epsilon(kit, eps: float) -> None:
    """With gain 0.9 - 0.3 the trigger fires iff the gain exceeds ε."""
    x, team = kit.state(epsilon=eps)
    x.submit(team.assign("o1", "bob"))
    assert (Trigger.REASSIGNMENT in fired(x)) == (x.gain("o1") > eps)


def test_reassignment_ignores_finished_work(kit) -> None:
    """A discharged obligation is not reassignable (no benefit), even if unstable."""
    x, team = kit.state()
    x.submit(team.assign("o1", "bob"))
    assert x.submit(team.submit("o1", "bob")).committed
    assert x.gain("o1") > x.decl.parameters.epsilon
    assert Trigger.REASSIGNMENT not in fired(x)


@given(tau=st.floats(0.0, 1.0), claim=st.booleans())
def test_low_quality_fires_iff_cq_below_tau(kit, tau: float, claim: bool) -> None:
    """``low_quality`` fires exactly when cq < τ."""
    from icore.audit import observe_unaudited

    x, team = kit.state(tau=tau)
    x.submit(team.assign("o1", "bob"))
    if claim:  # an observed completion claim without evidence makes o1 unsound
        v = x.submit(team.submit("o1", "bob", evidence=False))
        observe_unaudited(x, v.proposal)
    assert (Trigger.LOW_QUALITY in fired(x)) == (x.metrics().cq < tau)


def test_work_index_incremental_equals_rebuild(kit) -> None:
    """The incremental work index agrees with a full recompute after every change."""
    x, team = kit.state()
    x.track_touched()
    idx = WorkIndex(x)
    steps = [
        team.assign("o1", "bob"), team.fail("o1", "bob"), team.assign("o1", "alice"),
        team.submit("o1", "alice"), team.assign("o2", "bob"), team.message("o2", "bob"),
        team.assign("o2", "alice"), team.submit("o2", "alice"),
    ]
    for p in steps:
        x.submit(p)
        idx.update(x.take_touched())  # what the apply step touched, computed once
        fresh = WorkIndex(x)
        assert idx.enabled == fresh.enabled
        assert idx.unstable == fresh.unstable


def test_touched_is_computed_by_the_state(kit) -> None:
    """take_touched() is what the apply step touched; a trial leaves it unchanged."""
    import pytest

    from icore.state import StateError

    x, team = kit.state()
    with pytest.raises(StateError):
        x.take_touched()
    x.track_touched()
    assert x.take_touched() == set()
    x.submit(team.assign("o1", "bob"))
    assert x.take_touched() == {"o1"}
    with x.trial():
        x.submit(team.assign("o2", "bob"))
        with pytest.raises(StateError):
            x.take_touched()
    assert x.take_touched() == set()
