"""snd, astab, cq, aggregate gain, matched sets and the Prop. 4 bound (design.md 4.3)."""

from __future__ import annotations

import dataclasses
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state import (
    AgentDecl,
    AssertionKind,
    CertificateRequest,
    DeclarationPackage,
    Effect,
    EffectTemplate,
    EventSpec,
    Interfaces,
    MatchedSet,
    ObservableType,
    OperationDecl,
    Parameters,
    Preconditions,
    Proposal,
    State,
    StateError,
    StateInputError,
    full_metrics,
)
from icore.state._metrics import Metrics, MetricSums, ObligationEval, fixed, make_metrics


def _decl(agents, *, epsilon=0.1, weight=None, params=None) -> DeclarationPackage:
    ops = [
        OperationDecl(
            "introduce",
            preconditions=Preconditions(target_required=False),
            effects=(EffectTemplate(AssertionKind.NODE, target="new", many=True),),
        ),
        OperationDecl(
            "assign",
            effects=(EffectTemplate(AssertionKind.ASSIGNEE),),
        ),
    ]
    ifaces = Interfaces() if weight is None else Interfaces(weight=weight)
    return DeclarationPackage(
        observables=[ObservableType("obs")],
        agents=agents,
        operations=ops,
        interfaces=ifaces,
        parameters=params or Parameters(epsilon=epsilon),
    )


def _state(d: DeclarationPackage, *nodes: Effect) -> State:
    x = State(d)
    v = x.submit(
        Proposal(
            "a",
            "introduce",
            events=(EventSpec("obs", "a", id="e0"),),
            effects=nodes,
            justification=("e0",),
        )
    )
    assert v.committed, v.reasons
    return x


def _assign(x: State, oid: str, agent: str) -> None:
    v = x.submit(
        Proposal(
            "a", "assign", target=oid, effects=(Effect.assign(oid, agent),), justification=("e0",)
        )
    )
    assert v.committed, v.reasons


AGENTS = [AgentDecl("a", {"k": 0.5}), AgentDecl("b", {"k": 0.9}), AgentDecl("c", {})]


class TestStability:
    """icore Def. 9 as fixed by design.md 4.3."""

    def test_empty_state_is_vacuously_perfect(self):
        m = State(_decl(AGENTS)).metrics()
        assert (m.snd, m.astab, m.cq, m.total_weight, m.evaluated) == (1.0, 1.0, 1.0, 0.0, 0)

    def test_unassigned_with_capable_agent_is_unstable(self):
        x = _state(_decl(AGENTS), Effect.node("o", "k"))
        assert x.gain("o") == 0.9 and not x.is_stable("o")
        assert x.metrics().astab == 0.0

    def test_unassigned_without_feasible_agent_is_stable(self):
        x = _state(_decl(AGENTS), Effect.node("o", "unknown-kind"))
        assert x.gain("o") == 0.0 and x.is_stable("o")

    def test_assigned_gain_is_best_alternative_minus_own(self):
        x = _state(_decl(AGENTS), Effect.node("o", "k"))
        _assign(x, "o", "a")
        assert x.gain("o") == pytest.approx(0.4) and not x.is_stable("o")
        _assign(x, "o", "b")
        assert x.gain("o") == pytest.approx(-0.4) and x.is_stable("o")
        assert x.metrics().astab == 1.0 and x.metrics().aggregate_gain == 0.0

    def test_epsilon_tolerance(self):
        x = _state(_decl(AGENTS, epsilon=0.5), Effect.node("o", "k"))
        _assign(x, "o", "a")
        assert x.is_stable("o")  # gain 0.4 <= 0.5

    def test_infeasible_assignee_counts_value_zero(self):
        x = _state(_decl(AGENTS), Effect.node("o", "k"))
        _assign(x, "o", "c")
        assert x.gain("o") == 0.9

    def test_unknown_obligation(self):
        with pytest.raises(StateInputError):
            State(_decl(AGENTS)).gain("nope")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0])),
                min_size=1, max_size=12),
       st.integers(0, 12))
def test_gain_equals_the_best_alternative_over_every_agent(caps, pick) -> None:
    """The per-kind best-two index gives the gain a loop over all of D's agents gives
    (icore Def. 9): assignees with the best value, ties, none able, unassigned."""
    agents = [AgentDecl(f"g{i}", {} if v is None else {"k": v}) for i, v in enumerate(caps)]
    agents.append(AgentDecl("a", {}))
    x = _state(_decl(agents), Effect.node("o", "k"))
    able = {f"g{i}": v for i, v in enumerate(caps) if v is not None}
    assert x.gain("o") == max(able.values(), default=0.0)
    who = f"g{pick % len(caps)}"
    _assign(x, "o", who)
    others = [v for aid, v in able.items() if aid != who]
    want = 0.0 if not others else max(others) - able.get(who, 0.0)
    assert x.gain("o") == pytest.approx(want)


class TestWeightsAndAggregates:
    """Weighted shares, aggregate gain, Fréchet and Prop. 4."""

    def test_weighted_shares(self):
        x = _state(_decl(AGENTS), Effect.node("o1", "k", weight=3.0), Effect.node("o2", "k"))
        _assign(x, "o1", "b")
        m = x.metrics()
        assert m.total_weight == 4.0 and m.astab == 0.75 and m.snd == 1.0
        assert m.cq == pytest.approx(0.875)
        assert m.frechet == pytest.approx(0.75)
        assert m.aggregate_gain == pytest.approx(0.9)  # o2 unassigned, gain 0.9, weight 1
        assert m.performance_bound is None  # D declares no Prop. 4 conditions

    def test_aggregate_gain_bound_when_all_stable(self):
        x = _state(
            _decl(AGENTS, epsilon=0.45), Effect.node("o1", "k", weight=2.0), Effect.node("o2", "k")
        )
        _assign(x, "o1", "a")
        _assign(x, "o2", "a")
        m = x.metrics()
        assert m.astab == 1.0
        assert m.aggregate_gain <= m.gain_bound + 1e-12

    def test_performance_bound_when_declared(self):
        params = Parameters(
            p_min=0.8, bound_conditions=("decomposable", "validator_adequacy", "value_calibration")
        )
        x = _state(_decl(AGENTS, params=params), Effect.node("o", "k"))
        _assign(x, "o", "b")
        m = x.metrics()
        assert m.cq == 1.0 and m.performance_bound == pytest.approx(0.8)

    def test_bad_weight_interface(self):
        """A D bug: typed, names interface, field and value; nothing recorded
        (tests/state/test_interface_errors.py covers every interface and update)."""
        x = State(_decl(AGENTS, weight=lambda o: float("nan")))
        with pytest.raises(StateError, match=r"interfaces\.weight: weight\(o\) returned nan"):
            x.submit(
                Proposal(
                    "a",
                    "introduce",
                    events=(EventSpec("obs", "a", id="e0"),),
                    effects=(Effect.node("o", "k"),),
                    justification=("e0",),
                )
            )
        assert x.seq == 0 and not x.obligations and not x.events

    def test_custom_weight_interface(self):
        x = _state(_decl(AGENTS, weight=lambda o: 2.0), Effect.node("o", "k", weight=7.0))
        assert x.metrics().total_weight == 2.0


class TestSoundnessAndMatchedSets:
    """snd over W and over a frozen matched set W_F."""

    def test_import_without_justification_is_unsound(self):
        x = _state(_decl(AGENTS), Effect.node("o1", "k"), Effect.node("o2", "k"))
        x.import_assertion(Effect.result("o1", "claimed done"), justified=False)
        assert not x.is_sound("o1") and x.is_sound("o2")
        assert x.metrics().snd == 0.5
        assert x.metrics() == x.recompute_metrics() == full_metrics(x)

    def test_matched_set_uses_frozen_weights(self):
        x = _state(_decl(AGENTS), Effect.node("o1", "k", weight=1.0), Effect.node("o2", "k"))
        w = x.freeze(["o1", "o1"])
        assert w == MatchedSet(("o1",), (1.0,))
        x.import_assertion(Effect.result("o1", "bad"), justified=False)
        m = x.metrics(over=w)
        assert m.snd == 0.0 and m.evaluated == 1
        assert full_metrics(x, over=w) == m

    def test_matched_member_missing_from_q_counts_unsound_and_unstable(self):
        x = _state(_decl(AGENTS), Effect.node("o1", "k"))
        m = x.metrics(over=MatchedSet(("o1", "gone"), (1.0, 1.0)))
        assert m.snd == 0.5 and m.astab == 0.0

    def test_settled_member_counts_by_closing_evidence(self, flow):
        flow.introduce("o1", "o2")
        w = flow.x.freeze(["o1", "o2"])
        # o1 is transported to o2 with evidence: counts as satisfied
        flow.ok(
            Proposal(
                "lead",
                "transfer",
                target="o1",
                effects=(
                    Effect.status("o1", "superseded"),
                    Effect.relation("o1", "transported_to", "o2"),
                ),
                events=(EventSpec("review_posted", "bob", {"pr": 1, "verdict": "approve"},
                                  id="tie"),),
                justification=("tie",),
                certificates=(CertificateRequest("approved", events=("tie",),
                                                 obligations=("o1", "o2")),),
            )
        )
        assert flow.x.is_sound("o1")
        assert "o1" in flow.x.evaluated()  # required root stays in W
        # o2 "removed" by an unsupported import: stays in W_F and counts unsound
        flow.x.import_assertion(Effect.status("o2", "superseded"), justified=False)
        m = flow.x.metrics(over=w)
        assert m.snd == 0.5
        assert flow.x.freeze(["o1"]).weights == (1.0,)
        with pytest.raises(StateInputError):
            flow.x.freeze(["nope"])

    def test_metrics_dataclass_is_frozen(self):
        m = State(_decl(AGENTS)).metrics()
        with pytest.raises(dataclasses.FrozenInstanceError):
            m.snd = 0.0  # type: ignore[misc]


# issue 29: X's sums use the finest power of two their terms need, not a fixed 2**1100
_floats = st.floats(min_value=0.0, max_value=1e300, allow_nan=False, allow_infinity=False)
_evals = st.builds(ObligationEval, in_w=st.booleans(), weight=_floats, sound=st.booleans(),
                   stable=st.booleans(),
                   gain=st.floats(min_value=-1.0, max_value=1.0, allow_nan=False))


def _fixed_point_metrics(evs: list[ObligationEval], p: Parameters) -> Metrics:
    """The former arithmetic: every term at the fixed scale of :func:`fixed`."""
    w = s = stb = g = n = 0
    for ev in evs:
        if not ev.in_w:
            continue
        fw = fixed(ev.weight)
        w, n = w + fw, n + 1
        s += fw if ev.sound else 0
        stb += fw if ev.stable else 0
        g += fw * fixed(ev.gain) if ev.gain > 0 else 0
    return make_metrics(w, s, stb, g, n, p)


@settings(max_examples=200, deadline=None)
@given(st.lists(_evals, max_size=12), st.lists(_evals, max_size=12), st.randoms())
def test_dynamic_scale_sums_equal_the_fixed_point_and_the_exact_rationals(
        keep: list[ObligationEval], drop: list[ObligationEval], rnd: random.Random) -> None:
    """Adding and removing in any order gives the metrics of the kept terms exactly."""
    p = Parameters(epsilon=0.1)
    sums = MetricSums()
    ops = [("add", e) for e in keep + drop]
    rnd.shuffle(ops)
    for e in drop:  # each dropped term is removed after it was added
        ops.insert(rnd.randint(ops.index(("add", e)) + 1, len(ops)), ("remove", e))
    for op, e in ops:
        getattr(sums, op)(e)
    got = sums.metrics(p)
    assert got == _fixed_point_metrics(keep, p)
    inw = [e for e in keep if e.in_w]
    w = sum(Fraction(e.weight) for e in inw)
    gain = sum(Fraction(e.weight) * Fraction(e.gain) for e in inw if e.gain > 0)
    assert got.total_weight == float(w) and got.aggregate_gain == float(gain)
    if w:
        assert got.snd == float(sum(Fraction(e.weight) for e in inw if e.sound) / w)
        assert got.cq == float(sum(Fraction(e.weight) * (e.sound + e.stable) for e in inw)
                               / (2 * w))
    assert sums.scale <= 1074 and sums.gain_scale <= 2 * 1074 + 1  # never more than needed


def test_unit_weights_keep_the_sums_small() -> None:
    """Weights 1.0 and 0.5 (the common case) need 1 bit of scale, not 1100."""
    sums = MetricSums()
    for w in (1.0, 0.5, 1.0):
        sums.add(ObligationEval(in_w=True, weight=w, sound=True, stable=True, gain=0.25))
    assert (sums.scale, sums.weight, sums.gain_scale) == (1, 5, 3)
    assert sums.metrics(Parameters(epsilon=0.1)).aggregate_gain == 0.625
