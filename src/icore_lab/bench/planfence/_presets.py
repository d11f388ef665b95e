"""Presets of the PlanFence replay: one per paper table or figure, and ``paper`` running them all.

The tables and figures are those of planfence Sec. 5, App. A.6, B, C.

A preset is a list of :class:`Cell` objects. A cell is one point of a table or figure:
workload parameters, a network, the policy variants compared, the templates and race
seeds. Cells that share ``(params, net)`` share their schedules, and the runner computes
each ``(schedule, policy)`` pair once even when several presets ask for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from icore.fence import Policy
from icore.records import TraversalMode
from icore_lab.bench._errors import UnknownPreset
from icore_lab.bench.planfence._spec import NetSpec, PolicySpec
from icore_lab.workloads import TEMPLATES, Fault, Template, WorkloadParams

P = Policy
LOCAL = PolicySpec(P.LOCAL_REPLICA)
FRESH = PolicySpec(P.OWNER_HEAD_FRESHNESS)
CENTRAL = PolicySpec(P.CENTRALIZED_LINEAGE)
SYNC1 = PolicySpec(P.METADATA_SYNC, k=1)
SYNC4 = PolicySpec(P.METADATA_SYNC, k=4)
PER_KEY = PolicySpec(P.PER_KEY_ALL_KEY)
BATCHED = PolicySpec(P.BATCHED_ALL_KEY)
FENCE = PolicySpec(P.PLANFENCE)
MAJORITY = PolicySpec(P.MAJORITY_REPLICA)
ALL_REPLICA = PolicySpec(P.ALL_REPLICA)

TABLE1_POLICIES = (LOCAL, FRESH, SYNC4, CENTRAL, SYNC1, PER_KEY, BATCHED, FENCE, MAJORITY,
                   ALL_REPLICA)
"""Table 1 rows: the two unsafe baselines, delayed sync (K=4, a safety-cost sensitivity)
and every exact-lineage policy."""
PRIMARY = (CENTRAL, SYNC1, FENCE)
"""The three primary policies of Fig. 3 and Tables 5 and 7."""
RHOS = (0.25, 1.0, 4.0, 16.0)
"""Nominal update targets (Sec. 5.1)."""
LINKS = ("loopback", "att", "tmobile", "verizon")
"""Networks of Fig. 3."""
KEYSPACES = (8, 16, 32, 64, 128)
"""Shared-key counts of Fig. 5 / Tables 8-9."""
ATT_OFFSETS_MS = (0.0, 5000.0, 15000.0)
"""Independent AT&T trace phases of Table 9."""
OMISSIONS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
"""Dependency-omission probabilities of Fig. 6 (left)."""
OVERDECLARE = (0, 4, 8, 16, 32)
"""Extra declared keys of Fig. 6 (right): 4 true dependencies -> 4..36 checked heads."""

RACE = WorkloadParams(work_units=3, rho=1.0)
"""One staged race per episode (plan, revision, action): the App. C mechanism studies."""
LOOP = NetSpec(link="loopback")
ATT = NetSpec(link="att")


@dataclass(frozen=True)
class Cell:
    """One point of a table or figure.

    Attributes:
        study: the table/figure id (``table1``, ``fig3``, ...).
        cell: the point's label inside the study.
        params: workload parameters (``race_seed`` is set per race seed).
        net: the network.
        specs: the policy variants compared on the identical schedules.
        facets: the point's coordinates (for tables and plots).
        templates: templates replayed.
        race_seeds: race seeds per template (App. C uses 100).
    """

    study: str
    cell: str
    params: WorkloadParams
    net: NetSpec
    specs: tuple[PolicySpec, ...]
    facets: Mapping[str, Any] = field(default_factory=dict)
    templates: tuple[Template, ...] = TEMPLATES
    race_seeds: tuple[int, ...] = (0,)

    def scheduled_actions(self) -> int:
        """Protected actions this cell schedules over all its policies."""
        from icore_lab.workloads import action_update_counts

        a, _ = action_update_counts(self.params.work_units, self.params.rho)
        return a * len(self.templates) * len(self.race_seeds) * len(self.specs)


def _seeded(p: WorkloadParams, seed: int) -> WorkloadParams:
    return replace(p, master_seed=seed)


def table1(seed: int = 0) -> list[Cell]:
    """Table 1: AT&T, rho=4, 8 keys, N=5, H=64, d=1, a new TCP+TLS connection per RPC."""
    return [Cell("table1", "att rho=4", _seeded(WorkloadParams(), seed), ATT,
                 TABLE1_POLICIES, {"link": "att", "rho": 4.0})]


def fig3(seed: int = 0) -> list[Cell]:
    """Fig. 3: PlanFence vs the faster proactive safe policy over links x rho."""
    return [Cell("fig3", f"{link} rho={rho:g}", _seeded(WorkloadParams(rho=rho), seed),
                 NetSpec(link=link), PRIMARY, {"link": link, "rho": rho})
            for link in LINKS for rho in RHOS]


def fig4(seed: int = 0) -> list[Cell]:
    """Fig. 4 / Table 4: metadata-sync cadence K on AT&T across rho."""
    specs = (*(PolicySpec(P.METADATA_SYNC, k=k) for k in (1, 2, 4, 8, 16)), FENCE, CENTRAL)
    return [Cell("fig4", f"att rho={rho:g}", _seeded(WorkloadParams(rho=rho), seed), ATT,
                 specs, {"link": "att", "rho": rho}) for rho in RHOS]


def fig5(seed: int = 0) -> list[Cell]:
    """Fig. 5 / Tables 8-9: keyspace 8..128 on loopback and AT&T at offsets 0/5/15 s.

    PlanFence vs batched all-key (the matched comparison); per-key all-key is the
    implementation sensitivity of Sec. 5.1 and runs on loopback only.
    """
    out: list[Cell] = []
    for keys in KEYSPACES:
        p = _seeded(WorkloadParams(keys=keys), seed)
        out.append(Cell("fig5", f"loopback keys={keys}", p, LOOP, (FENCE, BATCHED, PER_KEY),
                        {"link": "loopback", "keys": keys, "offset_s": 0.0}))
        for off in ATT_OFFSETS_MS:
            out.append(Cell("fig5", f"att@{off / 1000:g}s keys={keys}", p,
                            NetSpec(link="att", offset_ms=off), (FENCE, BATCHED),
                            {"link": "att", "keys": keys, "offset_s": off / 1000}))
    return out


def table5(seed: int = 0) -> list[Cell]:
    """Table 5: team size N = 3, 5, 8 (rho=4, AT&T, one dependency)."""
    return [Cell("table5", f"N={n}", _seeded(WorkloadParams(agents=n), seed), ATT, PRIMARY,
                 {"agents": n}) for n in (3, 5, 8)]


def table6(seed: int = 0) -> list[Cell]:
    """Table 6: dependency count d = 1, 2, 8 at |X| = 8 (PlanFence vs batched all-key)."""
    return [Cell("table6", f"d={d}", _seeded(WorkloadParams(deps=d), seed), ATT,
                 (FENCE, BATCHED), {"deps": d}) for d in (1, 2, 8)]


def table7(seed: int = 0) -> list[Cell]:
    """Table 7: episode length H = 16, 64, 256 (rho=4, AT&T)."""
    return [Cell("table7", f"H={h}", _seeded(WorkloadParams(work_units=h), seed), ATT,
                 PRIMARY, {"work_units": h}) for h in (16, 64, 256)]


def appc(seed: int = 0, *, race_seeds: int = 100, small_seeds: int = 10) -> list[Cell]:
    """App. C / Table 11: replan, lineage depth and fail-closed controls.

    Replan vs no replan over 3,000 races; lineage depth 1..8 with full vs direct-parent
    traversal, intact vs missing intermediate; fail-closed vs fail-open under owner outage,
    missing lineage, malformed head, second change.
    """
    races = tuple(range(race_seeds))
    small = tuple(range(small_seeds))
    base = _seeded(RACE, seed)
    out = [Cell("appc", "races", base, LOOP,
                (FENCE, PolicySpec(P.PLANFENCE, replan=False), FRESH, LOCAL),
                {"case": "races"}, race_seeds=races)]
    direct = PolicySpec(P.PLANFENCE, mode=TraversalMode.DIRECT)
    for depth in range(1, 9):
        out.append(Cell("appc", f"depth={depth} intact", replace(base, depth=depth), LOOP,
                        (FENCE, direct), {"case": "depth", "depth": depth,
                                          "chain": "intact"}, race_seeds=small))
        if depth >= 2:
            out.append(Cell("appc", f"depth={depth} missing",
                            replace(base, depth=depth, fault=Fault.MISSING_LINEAGE), LOOP,
                            (FENCE, direct), {"case": "depth", "depth": depth,
                                              "chain": "missing"}, race_seeds=small))
    for fault in (Fault.OUTAGE, Fault.MISSING_LINEAGE, Fault.MALFORMED_HEAD,
                  Fault.SECOND_CHANGE):
        out.append(Cell("appc", f"fault={fault.value}", replace(base, depth=2, fault=fault),
                        LOOP, (FENCE, PolicySpec(P.PLANFENCE, fail_open=True)),
                        {"case": "fault", "fault": fault.value}, race_seeds=small))
    return out


def fig6(seed: int = 0, *, race_seeds: int = 100, small_seeds: int = 10) -> list[Cell]:
    """Fig. 6: dependency omission and over-declaration cost.

    Dependency omission 0..50% (4 true dependencies, the first always declared) and
    over-declaration cost (4 true + 0..32 extra of 36 keys).
    """
    races = tuple(range(race_seeds))
    out = [Cell("fig6", f"omit={p:g}", _seeded(replace(RACE, deps=4, omit_prob=p), seed),
                LOOP, (FENCE,), {"case": "omission", "omit_prob": p}, race_seeds=races)
           for p in OMISSIONS]
    out += [Cell("fig6", f"overdeclare={x}",
                 _seeded(replace(RACE, keys=36, deps=4, overdeclare=x), seed), LOOP, (FENCE,),
                 {"case": "overdeclare", "overdeclare": x},
                 race_seeds=tuple(range(small_seeds))) for x in OVERDECLARE]
    return out


def aligned(seed: int = 0) -> list[Cell]:
    """App. A.6 aligned policy grid: every policy variant x rho x {loopback, AT&T}."""
    specs = (*TABLE1_POLICIES, PolicySpec(P.METADATA_SYNC, k=2))
    return [Cell("aligned", f"{link} rho={rho:g}", _seeded(WorkloadParams(rho=rho), seed),
                 NetSpec(link=link), specs, {"link": link, "rho": rho})
            for link in ("loopback", "att") for rho in RHOS]


ARTIFACT_BYTES = 64 * 1024
"""Size of the large-artifact control's public artifact: 64 KiB, about 45 full-size
packets on a trace link."""
ARTIFACT_POLICIES = (FRESH, CENTRAL, SYNC1, PER_KEY, BATCHED, FENCE, MAJORITY, ALL_REPLICA)
"""Every exact-lineage policy, and owner-head freshness as the stale control."""


def artifact(seed: int = 0) -> list[Cell]:
    """App. A.6 / B large-artifact safety control: 960 runs, 15,360 protected actions.

    4 networks x 30 templates x 8 policies = 960 runs of 16 protected actions (rho = 2,
    H = 64), 15,360 actions; every action fetches and verifies the same changed 64 KiB
    public artifact twice.
    """
    p = _seeded(WorkloadParams(rho=2.0, artifact_bytes=ARTIFACT_BYTES), seed)
    return [Cell("artifact", f"{link} rho=2", p, NetSpec(link=link), ARTIFACT_POLICIES,
                 {"link": link, "rho": 2.0}) for link in LINKS]


def tiny(seed: int = 0) -> list[Cell]:
    """A smoke preset: 3 templates (one per family), Table 1 setting on loopback."""
    tpls = tuple(t for t in TEMPLATES if t.seed == 0)
    return [Cell("tiny", "loopback rho=4", _seeded(WorkloadParams(), seed), LOOP,
                 (LOCAL, FRESH, SYNC1, FENCE, BATCHED), {"link": "loopback", "rho": 4.0},
                 templates=tpls)]


PRESETS: dict[str, Callable[[int], list[Cell]]] = {
    "table1": table1,
    "fig3": fig3,
    "fig4": fig4,
    "table4": fig4,
    "fig5": fig5,
    "tables8-9": fig5,
    "table5": table5,
    "table6": table6,
    "table7": table7,
    "appc": appc,
    "fig6": fig6,
    "aligned": aligned,
    "artifact": artifact,
    "tiny": tiny,
}
"""Preset name -> builder (``paper`` is every study once)."""

PAPER_STUDIES = ("table1", "fig3", "fig4", "fig5", "table5", "table6", "table7", "appc",
                 "fig6", "aligned", "artifact")


def preset_cells(name: str, seed: int = 0) -> list[Cell]:
    """Return the cells of preset ``name`` (``paper`` = every study).

    Raises:
        UnknownPreset: no such preset.
    """
    if name == "paper":
        return [c for s in PAPER_STUDIES for c in PRESETS[s](seed)]
    fn = PRESETS.get(name)
    if fn is None:
        raise UnknownPreset(f"unknown preset {name!r}",
                            known=sorted([*PRESETS, "paper"]))
    return fn(seed)


__all__ = [
    "ATT_OFFSETS_MS",
    "KEYSPACES",
    "LINKS",
    "OMISSIONS",
    "OVERDECLARE",
    "PAPER_STUDIES",
    "PRESETS",
    "PRIMARY",
    "RHOS",
    "TABLE1_POLICIES",
    "Cell",
    "preset_cells",
]
