"""The loop-level representation ablation: what a restricted auditor view may do (#14)."""

from __future__ import annotations

import pytest

from icore.audit import AuditError, AuditLoop, AuditRunResult, LoopConfig
from icore.audit._views import TRIGGERS, GStall
from icore.state import Committed, EventAdded, EventSpec, State
from icore_lab.agents._sim_world import SimWorld
from icore_lab.agents._simulated import SimEnvironment, SimTeam, introduce
from icore_lab.bench.icore._evaluate import run_instance
from icore_lab.bench.icore._loop import loop_detection
from icore_lab.workloads._tasks import declaration, make_instance


def _run(mode: str, seed: int, view: str) -> tuple[AuditRunResult, SimWorld]:
    inst = make_instance(mode, seed)
    world = SimWorld(inst)
    state = State(declaration(inst))
    introduce(state, inst)
    loop = AuditLoop(state, SimTeam(inst, world), env=SimEnvironment(world),
                     config=LoopConfig(max_steps=inst.budget, head_view=world.head_view,
                                       view=view))  # type: ignore[arg-type]
    return loop.run(), world


def test_unknown_view_is_an_audit_error() -> None:
    inst = make_instance("deadline", 0)
    state = State(declaration(inst))
    with pytest.raises(AuditError):
        AuditLoop(state, SimTeam(inst, SimWorld(inst)),
                  config=LoopConfig(view="P"))  # type: ignore[arg-type]


@pytest.mark.parametrize("view", ["G", "Q"])
def test_restricted_views_fire_only_their_triggers(view: str) -> None:
    """G fires only its stall rule, Q never the Π triggers (hard flag, low quality)."""
    for mode in ("deadline", "allocation", "review"):
        res, _ = _run(mode, 1, view)
        assert set(res.fired) <= {str(t) for t in TRIGGERS[view]}


def test_g_view_lets_uncertified_work_through_that_x_rejects() -> None:
    """A rejection whose only reasons are Π's (missing or failed certificate) is not
    enforced by a G- or Q-only auditor: the host's effects are observed, as in passive
    mode; the full-X auditor rejects the same proposals (same instance, same draws)."""
    unenforced = {"G": 0, "Q": 0, "X": 0}
    for seed in range(4):
        for view in unenforced:
            res, _ = _run("allocation", seed, view)
            unenforced[view] += sum(1 for r in res.trajectory if r.decision == "unenforced")
    assert unenforced["X"] == 0
    assert unenforced["G"] > 0 and unenforced["Q"] > 0


def test_x_names_the_worlds_unsupported_work_that_g_misses() -> None:
    """Recall against the world's injected defects, not the detectors' formulas: X
    names every unsupported completion the simulator injected; G (no Q, no Π) names
    none of them."""
    det: dict[str, list[int]] = {"G": [0, 0], "X": [0, 0]}
    for seed in range(4):
        r = run_instance("allocation", seed)
        for row in r.loop_repr:
            if row.defect == "unsupported_work" and row.representation in det:
                det[row.representation][0] += row.injected
                det[row.representation][1] += row.detected
    assert det["X"][0] > 0 and det["X"][1] == det["X"][0]
    assert det["G"][1] == 0


def test_loop_detection_counts_items_named() -> None:
    rows = loop_detection([("stall", "a"), ("assignment", "b"), ("stall", "c")], ["a", "z"])
    by = {d: (i, n, fa) for d, i, n, fa in rows}
    assert by["stall"] == (2, 1, 0) and by["assignment"] == (1, 0, 0)
    assert by["any"] == (3, 1, 1)


def test_gstall_counts_messages_since_the_last_work_artifact() -> None:
    inst = make_instance("deadline", 0)
    state = State(declaration(inst))
    introduce(state, inst)
    item = inst.items[0].id
    agent = next(a for a in state.decl.agents if a not in ("env", "lead"))
    for _ in range(3):
        state.add_event(EventSpec("message", agent, {"item": item, "note": "x"}))
    g = GStall()
    g.update(state.entries_since(0))
    assert g.stalled(3) == (3, [item]) and g.author[item] == agent
    state.add_event(EventSpec("work", agent, {"item": item, "spec": 1}))
    g.update(e for e in state.entries_since(0) if isinstance(e.body, EventAdded | Committed))
    assert g.count[item] == 0


def _stale_runs(view_of: str) -> tuple[int, int, int]:
    """(certificates over ``inputs/`` records, how many of them were revoked, how many
    are still active at the end over a superseded specification) of iCORE-Audit under
    the stale-input fault, with the given head view."""
    from icore.state import Revoked
    from icore_lab.workloads._tasks import TASK_MODES, FaultSettings

    over_inputs = revoked = stale_active = 0
    for mode in TASK_MODES:
        for seed in range(3):
            inst = make_instance(mode, seed, FaultSettings(stale_input=1.0))
            world = SimWorld(inst)
            state = State(declaration(inst))
            introduce(state, inst)
            hv = world.lineage if view_of == "lineage" else world.head_view
            AuditLoop(state, SimTeam(inst, world), env=SimEnvironment(world),
                      config=LoopConfig(max_steps=inst.budget, head_view=hv)).run()
            mine = {c.id for c in state.certificates.values()
                    if any(r.key.startswith("inputs/") for r in c.records)}
            over_inputs += len(mine)
            revoked += len({cid for e in state.entries if isinstance(e.body, Revoked)
                            for cid in e.body.certificates} & mine)
            for cid in mine:
                if state.certificate_active(cid):
                    anc = world.lineage.ancestors(state.certificates[cid].records[0])
                    stale_active += any(world.head_view(r.key) != r.record_id for r in anc)
    return over_inputs, revoked, stale_active


def test_stale_input_certificates_are_revoked_along_lineage() -> None:
    """The stale-input fault (FaultSettings.stale_input): a worker certifies over an input
    record it derived from the specification, which stays its own key's head when the
    owner revises the specification. A one-level head check (``world.head_view``) never
    revokes those certificates; the lineage view (``world.lineage``, the one the
    benchmark uses) revokes them when the specification they derive from is revised,
    and the run ends with no active certificate resting on a superseded specification."""
    n_naive, rev_naive, stale_naive = _stale_runs("naive")
    n_lin, rev_lin, stale_lin = _stale_runs("lineage")
    assert n_naive > 0 and n_lin > 0
    assert rev_naive == 0 and stale_naive > 0
    assert rev_lin > 0 and stale_lin == 0
