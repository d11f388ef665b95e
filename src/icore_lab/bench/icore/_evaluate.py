"""``icore bench icore``: the controlled evaluation of iCORE-Audit (icore Sec. 5; design.md 4.5).

Conditions on matched instances (the same ``(mode, seed)`` in every condition, with
common random numbers for every attempt): ``mas_only`` (the host alone), ``passive``
(full-state observation: X built and measured, no intervention) and ``audit``
(iCORE-Audit). Two representation ablations, both scored against the defects the
simulated world injected (ground truth): detection-only on the passive runs' logs
(:mod:`icore_lab.bench.icore._repr`), and loop-level, where the whole audit loop runs with a
G-only, Q-only or full-X view (:mod:`icore_lab.bench.icore._loop`, :mod:`icore.audit._views`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from icore._clock import WallClock
from icore.agents import LLMSettings
from icore.audit import AuditLoop, AuditRunResult, LoopConfig, check_view, run_mas_only
from icore.state import State
from icore_lab.agents import LLMTeam, SimEnvironment, SimTeam, SimWorld, introduce
from icore_lab.bench._checks import check_count
from icore_lab.bench._errors import BadOption, UnknownPreset
from icore_lab.bench.icore._loop import LOOP_VIEWS, loop_detection, loop_table
from icore_lab.bench.icore._repr import DEFECTS, REPRESENTATIONS, detect_all
from icore_lab.workloads import (
    TASK_MODES,
    FaultSettings,
    TaskInstance,
    TaskMode,
    declaration,
    make_instance,
)

CONDITIONS = ("mas_only", "passive", "audit")


@dataclass(frozen=True, slots=True)
class Preset:
    """A named size of the evaluation."""

    name: str
    per_mode: int
    bootstrap: int
    description: str


PRESETS: dict[str, Preset] = {
    "quick": Preset("quick", 6, 500, "6 instances per mode (36 matched): tests and demos"),
    "full": Preset("full", 100, 2000, "100 instances per mode (600 matched): the paper check"),
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``.

    Raises:
        UnknownPreset: no such preset.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownPreset(f"unknown preset {name!r}", known=sorted(PRESETS)) from None


@dataclass(slots=True)
class RunRow:
    """One (instance, condition) result: a CSV row."""

    mode: str
    seed: int
    condition: str
    perf: float
    quality: float | None
    final_cq: float | None
    final_snd: float | None
    final_astab: float | None
    bound: float | None
    declares_bound: bool
    hoeffding: float
    terminal: bool
    steps: int
    agent_calls: int
    extra_calls: int
    interventions: int
    accepted: int
    proposals: int
    rejections: int
    audit_ms_per_proposal: float
    feedback_tokens: int
    wall_ms: float
    p_min: float | None = None
    llm_responses: int = 0
    llm_accepted: int = 0
    llm_violations: int = 0
    llm_corrections: int = 0
    llm_unrecovered: int = 0
    llm_infra_failures: int = 0


@dataclass(slots=True)
class ReprRow:
    """Detections of one representation on one passive run."""

    mode: str
    seed: int
    representation: str
    defect: str
    injected: int
    detected: int
    false_alarms: int


@dataclass(slots=True)
class InstanceResult:
    """All rows of one matched instance."""

    runs: list[RunRow] = field(default_factory=list)
    repr: list[ReprRow] = field(default_factory=list)
    loop_runs: list[RunRow] = field(default_factory=list)
    """Audit runs with a restricted view (conditions ``audit_G``, ``audit_Q``)."""
    loop_repr: list[ReprRow] = field(default_factory=list)
    """What each view's loop named vs the world's injected defects (G, Q, X)."""


def hoeffding_slack(inst: TaskInstance, delta: float) -> float:
    """Slack t with P(Perf < E[Perf] - t) <= δ for independent weighted components."""
    import math

    w = [i.weight for i in inst.items]
    s = sum(w)
    return math.sqrt(math.log(1.0 / delta) * sum(x * x for x in w) / (2.0 * s * s))


def run_condition(
    inst: TaskInstance, condition: str, *, llm: LLMSettings | None = None
) -> tuple[RunRow, State | None, SimWorld]:
    """Run one condition on one instance (fresh world, team and state).

    Args:
        inst: the matched instance.
        condition: ``mas_only``, ``passive``, ``audit``, or ``audit_G`` / ``audit_Q``
            (the audit loop with a restricted view, :mod:`icore.audit._views`).
        llm: run the LLM team behind this endpoint instead of the simulated team.
    """
    row, state, world, _ = _run(inst, condition, llm)
    return row, state, world


def _run(
    inst: TaskInstance, condition: str, llm: LLMSettings | None
) -> tuple[RunRow, State | None, SimWorld, AuditRunResult]:
    from icore_lab.workloads import FAILURE_PROBABILITY

    clock = WallClock()
    t0 = clock.now_ms()
    world = SimWorld(inst)
    team = SimTeam(inst, world) if llm is None else LLMTeam.create(inst, world, llm)
    env = SimEnvironment(world)
    state: State | None = None
    if condition == "mas_only":
        res = run_mas_only(team, max_steps=inst.budget, env=env)
    else:
        state = State(declaration(inst))
        introduce(state, inst)
        view = condition.removeprefix("audit_") if condition.startswith("audit_") else "X"
        loop = AuditLoop(
            state, team, env=env, clock=clock,
            config=LoopConfig(mode="passive" if condition == "passive" else "audit",
                              max_steps=inst.budget, head_view=world.lineage,
                              view=check_view(view)),
        )
        res = loop.run()
    fin = res.final
    row = RunRow(
        mode=str(inst.mode),
        seed=inst.seed,
        condition=condition,
        perf=world.performance(),
        quality=res.trajectory_quality if state is not None else None,
        final_cq=fin.cq if fin else None,
        final_snd=fin.snd if fin else None,
        final_astab=fin.astab if fin else None,
        bound=fin.performance_bound if fin else None,
        declares_bound=inst.declares_bound,
        hoeffding=hoeffding_slack(inst, FAILURE_PROBABILITY),
        terminal=res.terminal,
        steps=res.steps,
        agent_calls=res.agent_calls,
        extra_calls=res.extra_calls,
        interventions=len(res.interventions),
        accepted=res.accepted_recoveries,
        proposals=res.proposals,
        rejections=res.rejections,
        audit_ms_per_proposal=res.audit_ms_per_proposal,
        feedback_tokens=res.feedback_tokens,
        wall_ms=clock.now_ms() - t0,
        p_min=inst.p_min if inst.declares_bound else None,
    )
    if isinstance(team, LLMTeam):
        t = team.tally()
        for k in ("responses", "accepted", "violations", "corrections", "unrecovered",
                  "infra_failures"):
            setattr(row, f"llm_{k}", t[k])
    return row, state, world, res


def run_instance(
    mode: str, seed: int, llm: LLMSettings | None = None, faults: FaultSettings | None = None
) -> InstanceResult:
    """Every condition, plus the ablations, on one matched instance under one fault setting.

    The instance is ``(mode, seed)``; the fault setting is ``faults``.
    """
    inst = make_instance(mode, seed, faults)
    out = InstanceResult()
    views = () if llm is not None else LOOP_VIEWS  # the loop ablation runs simulated teams
    for cond in (*CONDITIONS, *(f"audit_{v}" for v in views)):
        row, state, world, res = _run(inst, cond, llm)
        if cond in CONDITIONS:
            out.runs.append(row)
        else:
            out.loop_runs.append(row)
        if cond.startswith("audit"):
            view = "X" if cond == "audit" else cond.removeprefix("audit_")
            out.loop_repr.extend(
                ReprRow(str(inst.mode), seed, view, d, i, n, fa)
                for d, i, n, fa in loop_detection(world.injected, res.named)
            )
        if cond == "passive" and state is not None:
            det = detect_all(list(state.entries), state.decl)
            truth = set(world.injected)
            for rep in REPRESENTATIONS:
                flags = det[rep]
                for d in DEFECTS:
                    inj = {f for f in truth if f[0] == d}
                    got = {f for f in flags if f[0] == d}
                    out.repr.append(
                        ReprRow(str(inst.mode), seed, rep, d, len(inj), len(inj & got),
                                len(got - inj))
                    )
    return out


def _chunk(
    tasks: Sequence[tuple[str, int]],
    llm: LLMSettings | None = None,
    faults: FaultSettings | None = None,
) -> list[InstanceResult]:
    return [run_instance(m, s, llm, faults) for m, s in tasks]


def _check_run(modes: Sequence[TaskMode | str], per_mode: int, jobs: int) -> list[str]:
    """Validate the arguments of :func:`run_all` / :func:`evaluate`; the mode names.

    Raises:
        BadOption: no mode, an unknown mode, a mode given twice (its matched instances
            would run and count twice), ``per_mode`` or ``jobs`` below 1.
    """
    if isinstance(modes, str) or not modes:
        raise BadOption("modes must name at least one task mode (a list of "
                        f"{', '.join(TASK_MODES)})", option="modes", value=modes,
                        known=[str(m) for m in TASK_MODES])
    names: list[str] = []
    for m in modes:
        try:
            name = str(TaskMode(m))
        except ValueError:
            raise BadOption(f"modes: unknown task mode {m!r}; use one of "
                            f"{', '.join(TASK_MODES)}", option="modes", value=m,
                            known=[str(t) for t in TASK_MODES]) from None
        if name in names:
            raise BadOption(f"modes: task mode {name!r} given twice; give each mode once",
                            option="modes", value=name)
        names.append(name)
    check_count("per_mode", per_mode)
    check_count("jobs", jobs)
    return names


def run_all(
    modes: Sequence[TaskMode | str],
    per_mode: int,
    *,
    seed0: int = 0,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    llm: LLMSettings | None = None,
    faults: FaultSettings | None = None,
) -> list[InstanceResult]:
    """Run every matched instance under the fault setting ``faults``.

    Runs in ``jobs`` processes (order-independent results).

    Raises:
        BadOption: ``modes`` is empty, names an unknown task mode or a mode twice, or
            ``per_mode`` or ``jobs`` is not an integer >= 1.
    """
    names = _check_run(modes, per_mode, jobs)
    tasks = [(m, seed0 + s) for m in names for s in range(per_mode)]
    results: list[InstanceResult] = []
    if jobs <= 1:
        for t in tasks:
            results.append(run_instance(*t, llm, faults))
            if progress:
                progress(1)
        return results
    size = max(1, min(10, len(tasks) // (jobs * 4) or 1))
    chunks = [tasks[i : i + size] for i in range(0, len(tasks), size)]
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        futs = {ex.submit(_chunk, c, llm, faults): len(c) for c in chunks}
        for fut in as_completed(futs):
            results.extend(fut.result())
            if progress:
                progress(futs[fut])
    results.sort(key=lambda r: (r.runs[0].mode, r.runs[0].seed))
    return results


LLM_FIELDS = ("responses", "accepted", "violations", "corrections", "unrecovered",
              "infra_failures")
"""Per-run model-decision counters of the LLM team (``llm_<name>`` columns)."""


def llm_tallies(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Model-decision counters summed per condition (LLM team runs)."""
    out: dict[str, dict[str, int]] = {}
    for r in runs:
        d = out.setdefault(str(r["condition"]), dict.fromkeys(("runs", *LLM_FIELDS), 0))
        d["runs"] += 1
        for k in LLM_FIELDS:
            d[k] += int(r.get(f"llm_{k}", 0) or 0)
    return out


def default_jobs() -> int:
    """Both cores by default."""
    return max(1, min(2, os.cpu_count() or 1))


def rows_as_dicts(results: Sequence[InstanceResult]) -> tuple[list[dict[str, object]],
                                                              list[dict[str, object]]]:
    """Flatten results to CSV-ready dicts (runs, representation rows)."""
    runs = [asdict(r) for res in results for r in res.runs]
    reps = [asdict(r) for res in results for r in res.repr]
    return runs, reps


def evaluate(
    *,
    preset: str = "quick",
    per_mode: int | None = None,
    modes: Sequence[TaskMode | str] = TASK_MODES,
    seed0: int = 0,
    jobs: int = 1,
    out: Path | None = None,
    progress: Callable[[int], None] | None = None,
    llm: LLMSettings | None = None,
    faults: FaultSettings | None = None,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Run the controlled evaluation and write its outputs (icore Sec. 5; design.md 4.5).

    Args:
        preset: ``quick`` or ``full`` (see :data:`PRESETS`).
        per_mode: instances per task mode (default: the preset's).
        modes: the task modes to run (at least one, each at most once).
        seed0: first instance seed.
        jobs: worker processes.
        out: output folder (default ``results/icore/<preset>``).
        progress: ``progress(k)`` callback, ``k`` instances done.
        llm: run the LLM team behind this endpoint instead of the simulated team.
        faults: the fault setting (default: none beyond the per-worker faults).

    Returns:
        The summary (as written to ``summary.json``) and the output paths.

    Raises:
        UnknownPreset: no such preset.
        BadOption: ``modes`` is empty, names an unknown task mode or a mode twice, or
            ``per_mode`` or ``jobs`` is not an integer >= 1 (checked before any instance
            runs).
    """
    from icore_lab.bench.icore._report import paired_json, write_all
    from icore_lab.bench.icore._stats import comparisons, costs, prop4_check, representation_table

    p = get_preset(preset)
    n = per_mode if per_mode is not None else p.per_mode
    mode_list = _check_run(modes, n, jobs)
    t0 = time.perf_counter()
    results = run_all(mode_list, n, seed0=seed0, jobs=jobs, progress=progress, llm=llm,
                      faults=faults)
    runtime = time.perf_counter() - t0
    runs, reps = rows_as_dicts(results)
    loop_runs = [asdict(r) for res in results for r in res.loop_runs]
    loop_reps = [asdict(r) for res in results for r in res.loop_repr]
    summary: dict[str, Any] = {
        "preset": p.name,
        "per_mode": n,
        "modes": mode_list,
        "seed0": seed0,
        "instances": len(results),
        "bootstrap": p.bootstrap,
        "jobs": jobs,
        "agents": "simulated" if llm is None else f"llm:{llm.model}@{llm.base_url}",
        "faults": asdict(faults or FaultSettings()),
        "runtime_s": runtime,
        "comparisons": paired_json(comparisons(runs, draws=p.bootstrap)),
        "representation": representation_table(reps),
        "loop_ablation": loop_table(runs, loop_runs, loop_reps, draws=p.bootstrap),
        "prop4": prop4_check(runs),
        "costs": costs(runs),
    }
    if llm is not None:
        summary["llm"] = llm_tallies(runs)
    target = out if out is not None else Path("results") / "icore" / p.name
    paths = write_all(target, summary, runs, reps)
    if loop_runs:
        from icore_lab.bench.icore._report import write_csv

        paths["loop_runs"] = target / "loop_runs.csv"
        paths["loop_detection"] = target / "loop_detection.csv"
        write_csv(paths["loop_runs"], loop_runs)
        write_csv(paths["loop_detection"], loop_reps)
    return summary, paths


GRID: tuple[FaultSettings, ...] = (
    FaultSettings(),
    FaultSettings(fabricate=0.3),
    FaultSettings(gaming=0.3),
    FaultSettings(ignore_feedback=0.3),
    FaultSettings(misread_feedback=0.3),
    FaultSettings(sigma=0.15),
    FaultSettings(stale_input=0.5),
    FaultSettings(fabricate=0.3, gaming=0.2, ignore_feedback=0.3, misread_feedback=0.2,
                  sigma=0.15),
)
"""The settings grid of the controlled evaluation (docs/audit.md "Fault model")."""


def evaluate_grid(
    *,
    preset: str = "quick",
    per_mode: int | None = None,
    modes: Sequence[TaskMode | str] = TASK_MODES,
    seed0: int = 0,
    jobs: int = 1,
    out: Path | None = None,
    grid: Sequence[FaultSettings] = GRID,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[dict[str, Any]], Path]:
    """The controlled evaluation for every fault setting of ``grid`` (issue 14).

    Each setting is a full :func:`evaluate` in ``<out>/<label>``; ``<out>/grid.md`` and
    ``grid.json`` tabulate audit − passive quality and Perf (95% paired bootstrap CI) and
    the Prop. 4 expectation check per setting.

    Returns:
        One row per setting, and the path of ``grid.md``.

    Raises:
        UnknownPreset, BadOption: as :func:`evaluate`.
    """
    import json

    target = out if out is not None else Path("results") / "icore" / f"{preset}-grid"
    rows: list[dict[str, Any]] = []
    for fs in grid:
        summary, _ = evaluate(preset=preset, per_mode=per_mode, modes=modes, seed0=seed0,
                              jobs=jobs, out=target / fs.label().replace(",", "_"),
                              progress=progress, faults=fs)
        comp = {(c["metric"], c["mode"]): c for c in summary["comparisons"]}
        q, pf = comp[("quality", "all")], comp[("perf", "all")]
        p4 = summary["prop4"]
        rows.append({
            "setting": fs.label(), **asdict(fs), "n": q["n"],
            "quality_passive": q["control"], "quality_audit": q["treatment"],
            "d_quality_pp": 100 * q["diff"], "d_quality_lo": 100 * q["lo"],
            "d_quality_hi": 100 * q["hi"],
            "perf_passive": pf["control"], "perf_audit": pf["treatment"],
            "d_perf_pp": 100 * pf["diff"], "d_perf_lo": 100 * pf["lo"],
            "d_perf_hi": 100 * pf["hi"],
            "prop4_declared": bool(p4["expectation"]), "prop4_all_hold": p4["all_hold"],
            **{f"d_perf_pp_{r['representation']}": r["d_perf_pp"]
               for r in summary["loop_ablation"]},
            "runtime_s": summary["runtime_s"],
        })
    target.mkdir(parents=True, exist_ok=True)
    (target / "grid.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    lines = [
        "# iCORE-Audit under the fault grid",
        "",
        f"Preset `{preset}`; each setting runs the same matched instances. Δ = audit − "
        "passive, percentage points, 95% paired bootstrap CI. Paper anchors: +11.5 pp "
        "quality, +15.1 pp terminal performance.",
        "",
        "| setting | n | quality passive → audit | Δ quality pp [95% CI] | Perf passive → "
        "audit | Δ Perf pp [95% CI] | Δ Perf pp, loop view G / Q | Prop. 4 (expectation) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p4s = ("not declared (conditions fail)" if not r["prop4_declared"]
               else "holds" if r["prop4_all_hold"] else "VIOLATED")
        lines.append(
            f"| {r['setting']} | {r['n']} | {r['quality_passive']:.3f} → "
            f"{r['quality_audit']:.3f} | {r['d_quality_pp']:+.1f} [{r['d_quality_lo']:+.1f}, "
            f"{r['d_quality_hi']:+.1f}] | {r['perf_passive']:.3f} → {r['perf_audit']:.3f} | "
            f"{r['d_perf_pp']:+.1f} [{r['d_perf_lo']:+.1f}, {r['d_perf_hi']:+.1f}] | "
            f"{r.get('d_perf_pp_G', float('nan')):+.1f} / "
            f"{r.get('d_perf_pp_Q', float('nan')):+.1f} | {p4s} |"
        )
    md = target / "grid.md"
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows, md


__all__ = [
    "CONDITIONS",
    "GRID",
    "PRESETS",
    "TASK_MODES",
    "InstanceResult",
    "Preset",
    "ReprRow",
    "RunRow",
    "default_jobs",
    "evaluate",
    "evaluate_grid",
    "get_preset",
    "rows_as_dicts",
    "run_all",
    "run_condition",
    "run_instance",
]
