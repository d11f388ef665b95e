"""Learned policy selection (planfence App. B.2, Table 10)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore_lab.bench.planfence import _selector as sel
from icore_lab.bench.planfence._selector import (
    CHOICES,
    FALLBACK,
    FEATURES,
    BlockMetrics,
    Example,
    ExampleSpec,
    PolicyOutcome,
    ResidualMLP,
    build_dataset,
    campaign,
    label,
    no_worse_and_better,
    safe_choice,
    table10,
)
from icore_lab.workloads import TEMPLATES, WorkloadParams

C, S, F = CHOICES


def _o(stall: float, kib: float, invalid: int = 0, completed: int = 10) -> PolicyOutcome:
    return PolicyOutcome(10, completed, invalid, stall, kib)


def test_label_is_the_safe_near_optimal_policy() -> None:
    """Among eligible policies within 10% of the lowest stall, the least traffic."""
    assert label({C: _o(100, 9), S: _o(108, 5), F: _o(150, 1)}) == S
    assert label({C: _o(100, 9), S: _o(111, 5), F: _o(150, 1)}) == C
    # an invalid action or an incomplete run makes a policy ineligible
    assert label({C: _o(100, 9, invalid=1), S: _o(120, 5), F: _o(90, 1, completed=9)}) == S
    assert label({C: _o(1, 1, invalid=1)}) is None


@given(st.lists(st.tuples(st.floats(1, 1e4), st.floats(0.1, 1e3), st.booleans()),
                min_size=3, max_size=3))
def test_label_properties(vals: list[tuple[float, float, bool]]) -> None:
    """The label is eligible, within 10% of the fastest eligible, and no near policy has
    less traffic."""
    oc = {p: _o(s, k, invalid=0 if ok else 1) for p, (s, k, ok) in zip(CHOICES, vals,
                                                                      strict=True)}
    got = label(oc)
    ok = {p: o for p, o in oc.items() if o.eligible}
    if not ok:
        assert got is None
        return
    assert got in ok
    best = min(o.stall_ms for o in ok.values())
    assert oc[got].stall_ms <= best * 1.1 + 1e-9
    assert all(o.kib >= oc[got].kib for o in ok.values() if o.stall_ms <= best * 1.1)


def test_campaign_follows_the_protocol() -> None:
    """1,332 examples: 648/144/180 ID and four disjoint 90-example OOD shifts; six
    workflows from three families each; OOD values never appear in distribution."""
    specs = campaign(0)
    n: dict[str, int] = {}
    for s in specs:
        n[s.split] = n.get(s.split, 0) + 1
        assert len(s.templates) == 6
        assert sorted({t.family for t in s.templates}) == sorted(
            ["reservation", "fulfillment", "deployment"])
    assert n == {"train": 648, "dev": 144, "id_test": 180, "ood_verizon": 90,
                 "ood_rate": 90, "ood_keys": 90, "ood_compound": 90}
    for s in specs:
        p, ver = s.params, s.link == "verizon"
        rate, keys = p.rho in sel.OOD_RHOS, p.keys in sel.OOD_KEYS
        shifted = {"ood_verizon": (True, False, False), "ood_rate": (False, True, False),
                   "ood_keys": (False, False, True), "ood_compound": (True, True, True)}
        assert (ver, rate, keys) == shifted.get(s.split, (False, False, False)), s
    small = campaign(0, 0.05)
    assert {s.id: s for s in small}.keys() <= {s.id for s in specs}
    assert [s for s in small if s.split == "train"] == [
        s for s in specs if s.split == "train"][: len([s for s in small
                                                        if s.split == "train"])]


def test_features_are_pre_action_only() -> None:
    """Workload dimensions and static link calibration: no template, no outcome."""
    s = ExampleSpec("e", "train", WorkloadParams(rho=0.25, keys=16), "loopback", 0.0,
                    TEMPLATES[:6])
    x = sel.features(s)
    assert len(x) == len(FEATURES)
    t = ExampleSpec("f", "train", WorkloadParams(rho=0.25, keys=16), "loopback", 0.0,
                    TEMPLATES[6:12])
    assert sel.features(t) == x  # other workflows, same inputs


class _Bad:
    def __init__(self, out: Any) -> None:
        self.name, self.out = "bad", out

    def predict(self, x: Any) -> Any:
        if isinstance(self.out, Exception):
            raise self.out
        return self.out


@pytest.mark.parametrize("out", [None, "drop_validation", 3, ["planfence"],
                                 RuntimeError("model unavailable")])
def test_malformed_or_unavailable_output_falls_back_to_planfence(out: Any) -> None:
    """Anything but one of the three labels is PlanFence."""
    assert safe_choice(_Bad(out), [0.0] * len(FEATURES)) == (FALLBACK, True)
    assert safe_choice(_Bad(S), [0.0] * len(FEATURES)) == (S, False)


def test_gate_needs_no_worse_and_one_strict_improvement() -> None:
    """The blockwise robustness rule of App. B.2."""
    ref = BlockMetrics(90, 100.0, 90.0, 5.0, 1.0, 20.0, 0, 0)
    same = ref
    better = BlockMetrics(90, 100.0, 92.0, 5.0, 1.0, 20.0, 0, 0)
    mixed = BlockMetrics(90, 100.0, 95.0, 5.0, 1.0, 20.5, 0, 0)
    assert no_worse_and_better(same, ref) == (True, False)
    assert no_worse_and_better(better, ref) == (True, True)
    assert no_worse_and_better(mixed, ref)[0] is False


def test_residual_mlp_learns_a_threshold() -> None:
    """The numpy residual MLP fits a simple rule (rho <= 1 -> sync)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 5, size=(300, 3))
    y = np.where(x[:, 1] <= 0.0, S, F)
    m = ResidualMLP(steps=300, random_state=1).fit(x, y)
    pred = m.classes_[np.argmax(m.predict_proba(x), 1)]
    assert float(np.mean(pred == y)) > 0.9


def _synthetic(n: int, split: str, rng: random.Random) -> list[Example]:
    """Examples whose best policy follows the rate (sync cheap at low rho)."""
    out = []
    for i in range(n):
        rho = rng.choice([0.25, 1.0, 4.0, 16.0] if not split.startswith("ood")
                         else [0.5, 2.0, 8.0])
        s = ExampleSpec(f"{split}{i}", split, WorkloadParams(rho=rho), "loopback", 0.0,
                        TEMPLATES[:6])
        oc = {C: _o(100 + rho, 20), S: _o(40 * rho, 5 + rho), F: _o(60, 3)}
        out.append(Example(s, sel.features(s), oc, label(oc)))
    return out


def test_table10_on_a_synthetic_dataset() -> None:
    """Every selector is scored ID/OOD; the rule is the gate's reference; chosen
    policies never issue an invalid action."""
    rng = random.Random(0)
    ex = [e for split, n in (("train", 80), ("dev", 10), ("id_test", 20),
                             ("ood_verizon", 8), ("ood_rate", 8), ("ood_keys", 8),
                             ("ood_compound", 8)) for e in _synthetic(n, split, rng)]
    res = table10(ex, timing_queries=20)
    rows = res["rows"]
    assert set(rows) == {"rate_rule", "fixed_planfence", "tree", "mlp", "resmlp"}
    assert rows["rate_rule"]["gate"] == "reference"
    assert rows["tree"]["id"]["sno"] == 100.0  # a depth-3 tree finds the rho threshold
    assert all(r["gate"] in ("yes", "no") for k, r in rows.items() if k != "rate_rule")
    assert res["invalid_under_selectors"] == 0
    assert rows["tree"]["inference_ms"] > 0
    md = sel.table10_markdown(res)
    assert "DeBERTa-v3-base" in md and "out of reach" in md


def _loopback_specs() -> list[ExampleSpec]:
    out = []
    for i, (split, rho) in enumerate([("train", 0.25), ("train", 16.0), ("train", 1.0),
                                      ("id_test", 4.0), ("ood_rate", 2.0),
                                      ("ood_keys", 0.25)]):
        keys = 8 if split == "ood_keys" else 16
        out.append(ExampleSpec(f"ex{i:04d}", split,
                               WorkloadParams(agents=3, keys=keys, work_units=16, rho=rho),
                               "loopback", 0.0, (TEMPLATES[0], TEMPLATES[1], TEMPLATES[10],
                                                 TEMPLATES[11], TEMPLATES[20], TEMPLATES[21])))
    return out


def test_dataset_from_the_replay_is_cached(tmp_path: Path) -> None:
    """Examples come from real replays (three exact-lineage policies, six workflows);
    the second build loads the cache."""
    specs = _loopback_specs()[:3]
    cache = tmp_path / "d.json"
    ex, cost = build_dataset(specs, cache=cache)
    assert not cost["cached"] and cost["episodes"] == 3 * 6 * 3
    for e in ex:
        assert set(e.outcomes) == set(CHOICES)
        assert all(o.invalid == 0 and o.eligible for o in e.outcomes.values())
        assert e.target in CHOICES
    again, cost2 = build_dataset(specs, cache=cache)
    assert cost2["cached"] and [e.target for e in again] == [e.target for e in ex]
    assert json.loads(cache.read_text())["digest"] == sel.protocol_digest(specs)


@pytest.mark.slow
def test_cli_prints_table10(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``icore bench planfence selector`` prints Table 10 with the paper's values beside
    ours and writes table10.md / table10.json (a small loopback campaign)."""
    from typer.testing import CliRunner

    from icore.cli import app

    monkeypatch.setattr(sel, "campaign", lambda seed, scale: _loopback_specs())
    r = CliRunner().invoke(app, ["bench", "planfence", "selector", "--scale", "0.5",
                                 "--jobs", "1", "--out", str(tmp_path)],
                           terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "Table 10" in r.output and "89.4 /" in r.output and "out of reach" in r.output
    res = json.loads((tmp_path / "table10.json").read_text())
    assert res["cost"]["examples"] == 6 and (tmp_path / "table10.md").is_file()
