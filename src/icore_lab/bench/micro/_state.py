"""``icore bench state``: performance of the iCORE state (issue 5; design.md 4.4).

Wall-clock figures suffer when other processes share the CPU; CPU-time figures
(``time.process_time``) are printed next to them.

Measures, on a synthetic code-review team built with the public ``icore.state`` API:

* median and p99 time to audit and record one proposal (``State.submit``: Definition 6,
  log entries, incremental metrics) at 1k, 10k and 100k obligations;
* the speed-up of incremental metric maintenance over a full recompute at 10k;
* the time to rebuild X from a 100k-entry SQLite log;
* memory per obligation (tracemalloc);
* ``icore audit`` of a synthetic generic JSONL run (:func:`generic_run`) of 1k/10k/100k
  events: wall and CPU time, peak resident memory (each size in a fresh process, so the
  peak is that audit's own; issue 14 target at 100k: <= 20 s, <= 500 MB on 2 cores);
* the per-proposal cost of a recovery audit (a :meth:`State.trial` of X: undo journal,
  no replay) at 10k and 100k log entries, next to the replay copy it replaced.

The harness lives here so the CLI and ``bench/bench_state.py`` share it.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import random
import resource
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from icore.state import (
    BUILTIN_VALIDATORS,
    AgentDecl,
    AssertionKind,
    CertificateRequest,
    DeclarationPackage,
    Effect,
    EffectTemplate,
    EventSpec,
    ObservableType,
    OperationDecl,
    Parameters,
    Preconditions,
    Proposal,
    SQLiteLog,
    State,
    Status,
    ValidatorSpec,
    audit,
    rebuild,
)
from icore_lab.bench._checks import check_count
from icore_lab.bench._errors import BadOption

AGENTS = ("alice", "bob", "carol", "dave", "erin")
CHUNK = 1000


def bench_declaration() -> DeclarationPackage:
    """A code-review D (like examples/declarations/code_review.yaml), built in Python."""
    caps = {"alice": 0.9, "bob": 0.6, "carol": 0.7, "dave": 0.5, "erin": 0.8}
    return DeclarationPackage(
        name="bench-code-review",
        observables=[
            ObservableType("task_posted", "action", ("description",)),
            ObservableType("pr_opened", "artifact", ("pr",)),
            ObservableType("ci_run", "action", ("status",)),
        ],
        agents=[AgentDecl("task", roles=("task",)), AgentDecl("lead", roles=("assigner",))]
        + [AgentDecl(a, {"code": c}, ("author",)) for a, c in caps.items()],
        operations=[
            OperationDecl(
                "introduce",
                ("role:task",),
                Preconditions(target_required=False),
                (EffectTemplate(AssertionKind.NODE, target="new", many=True),),
                productive=True,
            ),
            OperationDecl(
                "assign",
                ("role:assigner",),
                Preconditions(status_in=(Status.OPEN, Status.ASSIGNED)),
                (
                    EffectTemplate(AssertionKind.ASSIGNEE),
                    EffectTemplate(AssertionKind.STATUS, values=("assigned",)),
                ),
            ),
            OperationDecl(
                "start",
                ("role:author",),
                Preconditions(status_in=(Status.ASSIGNED,), assignee_is_proposer=True),
                (EffectTemplate(AssertionKind.STATUS, values=("active",)),),
                productive=True,
            ),
            OperationDecl(
                "submit",
                ("role:author",),
                Preconditions(status_in=(Status.ACTIVE,), assignee_is_proposer=True),
                (
                    EffectTemplate(AssertionKind.STATUS, values=("submitted",)),
                    EffectTemplate(AssertionKind.RESULT),
                ),
                requires=("ci_green",),
                productive=True,
            ),
        ],
        validators=[
            ValidatorSpec(
                "ci_green",
                BUILTIN_VALIDATORS["event_field_equals"],
                params={"field": "status", "value": "green"},
                source="builtin:event_field_equals",
            )
        ],
        parameters=Parameters(epsilon=0.1),
    )


def populate(x: State, n: int) -> None:
    """Introduce ``n`` obligations in proposals of ``CHUNK`` nodes each."""
    for start in range(0, n, CHUNK):
        eid = f"t{start}"
        v = x.submit(
            Proposal(
                "task",
                "introduce",
                events=(EventSpec("task_posted", "task", {"description": "d"}, id=eid),),
                effects=tuple(
                    Effect.node(f"o{i}", "code", weight=1.0 + (i % 3))
                    for i in range(start, min(n, start + CHUNK))
                ),
                justification=(eid,),
            )
        )
        if not v.committed:  # pragma: no cover - the bench D is consistent
            raise RuntimeError(f"populate failed: {v.reasons}")


def lifecycle(oid: str, agent: str, k: int) -> list[Proposal]:
    """Assign, start, then submit (with a CI certificate) one obligation."""
    pr, ci = f"pr{k}", f"ci{k}"
    return [
        Proposal(
            "lead",
            "assign",
            target=oid,
            effects=(Effect.assign(oid, agent), Effect.status(oid, "assigned")),
            justification=("t0",),
        ),
        Proposal(
            agent,
            "start",
            target=oid,
            effects=(Effect.status(oid, "active"),),
            justification=("t0",),
        ),
        Proposal(
            agent,
            "submit",
            target=oid,
            events=(
                EventSpec("pr_opened", agent, {"pr": k}, id=pr),
                EventSpec("ci_run", "lead", {"status": "green"}, (pr,), ci),
            ),
            effects=(Effect.status(oid, "submitted"), Effect.result(oid, {"pr": k})),
            justification=(pr, ci),
            certificates=(CertificateRequest("ci_green", events=(ci,)),),
        ),
    ]


def _pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


@dataclass
class AuditFigures:
    """Per-size audit timings, in microseconds."""

    obligations: int
    proposals: int
    audit_median_us: float
    audit_p99_us: float
    submit_median_us: float
    submit_p99_us: float
    build_s: float
    audit_cpu_median_us: float = 0.0
    audit_cpu_p99_us: float = 0.0
    submit_cpu_median_us: float = 0.0
    submit_cpu_p99_us: float = 0.0


@dataclass
class StateBenchResult:
    """Everything ``icore bench state`` measures."""

    audits: list[AuditFigures] = field(default_factory=list)
    incremental_us: float = 0.0
    full_recompute_ms: float = 0.0
    speedup: float = 0.0
    rebuild_entries: int = 0
    rebuild_s: float = 0.0
    rebuild_cpu_s: float = 0.0
    log_write_s: float = 0.0
    bytes_per_obligation: float = 0.0
    bytes_per_obligation_cycled: float = 0.0
    traces: list[TraceFigures] = field(default_factory=list)
    trials: list[TrialFigures] = field(default_factory=list)


@dataclass
class TraceFigures:
    """``icore audit`` of one synthetic generic JSONL run."""

    events: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    diagnoses: int
    base_rss_mb: float = 0.0


@dataclass
class TrialFigures:
    """Per-proposal cost of a recovery audit at a log length."""

    log_entries: int
    trial_median_us: float
    trial_cpu_median_us: float
    copy_ms: float


def bench_audit(n: int, samples: int, rng: random.Random) -> AuditFigures:
    """Median/p99 of ``audit`` alone and of ``State.submit`` at ``n`` obligations."""
    d = bench_declaration()
    t0 = time.perf_counter()
    x = State(d, keep_entries=False)
    populate(x, n)
    build = time.perf_counter() - t0
    picks = rng.sample(range(n), min(samples, n))
    audit_t: list[float] = []
    submit_t: list[float] = []
    audit_c: list[float] = []
    submit_c: list[float] = []
    gc.collect()
    wall, cpu = time.perf_counter, time.process_time
    for k, i in enumerate(picks):
        agent = rng.choice(AGENTS)
        for p in lifecycle(f"o{i}", agent, k):
            a0, c0 = wall(), cpu()
            audit(p, x)
            a1, c1 = wall(), cpu()
            v = x.submit(p)
            a2, c2 = wall(), cpu()
            if not v.committed:  # pragma: no cover
                raise RuntimeError(f"bench proposal rejected: {v.reasons}")
            audit_t.append((a1 - a0) * 1e6)
            submit_t.append((a2 - a1) * 1e6)
            audit_c.append((c1 - c0) * 1e6)
            submit_c.append((c2 - c1) * 1e6)
    if x.metrics() != x.recompute_metrics():  # pragma: no cover
        raise RuntimeError("incremental metrics diverged from full recompute")
    return AuditFigures(
        obligations=n,
        proposals=len(submit_t),
        audit_median_us=statistics.median(audit_t),
        audit_p99_us=_pct(audit_t, 0.99),
        submit_median_us=statistics.median(submit_t),
        submit_p99_us=_pct(submit_t, 0.99),
        build_s=build,
        audit_cpu_median_us=statistics.median(audit_c),
        audit_cpu_p99_us=_pct(audit_c, 0.99),
        submit_cpu_median_us=statistics.median(submit_c),
        submit_cpu_p99_us=_pct(submit_c, 0.99),
    )


def bench_incremental(n: int, rng: random.Random, reps: int = 200) -> tuple[float, float]:
    """(incremental µs per commit, full recompute ms) at ``n`` obligations.

    Incremental = re-evaluating the obligations one commit touches and reading the
    maintained metrics (what ``State`` does after every entry); full = recomputing the
    metrics over all of W from scratch.
    """
    x = State(bench_declaration(), keep_entries=False)
    populate(x, n)
    for k, i in enumerate(rng.sample(range(n), min(n, 500))):
        for p in lifecycle(f"o{i}", rng.choice(AGENTS), k)[:2]:
            x.submit(p)
    touched = [f"o{rng.randrange(n)}" for _ in range(reps)]
    t0 = time.perf_counter()
    for oid in touched:
        x._refresh((oid,))
        x.metrics()
    inc = (time.perf_counter() - t0) / reps * 1e6
    full_reps = 5
    t0 = time.perf_counter()
    for _ in range(full_reps):
        x.recompute_metrics()
    full = (time.perf_counter() - t0) / full_reps * 1e3
    return inc, full


def bench_rebuild(entries: int, rng: random.Random, path: Path) -> tuple[int, float, float, float]:
    """Write a log of about ``entries`` entries to SQLite, then time ``rebuild``."""
    d = bench_declaration()
    x = State(d)
    n_obl = max(10, entries // 6)
    populate(x, n_obl)
    k = 0
    order = list(range(n_obl))
    rng.shuffle(order)
    while x.seq < entries:
        i = order[k % n_obl]
        for p in lifecycle(f"o{i}", rng.choice(AGENTS), k):
            if x.seq >= entries:
                break
            x.submit(p)
        k += 1
    t0 = time.perf_counter()
    with SQLiteLog(path, declaration=d) as log:
        batch = 10_000
        es = x.entries
        for s in range(0, len(es), batch):
            log.append(es[s : s + batch])
    write = time.perf_counter() - t0
    del x
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    with SQLiteLog(path, declaration=d) as log:
        y = rebuild(log, d, keep_entries=False)
    took, took_cpu = time.perf_counter() - t0, time.process_time() - c0
    return y.seq, took, took_cpu, write


def bench_memory(n: int, rng: random.Random) -> tuple[float, float]:
    """Bytes per obligation: introduced only, and after assign/start/submit on all."""
    d = bench_declaration()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    x = State(d, keep_entries=False)
    populate(x, n)
    intro = (tracemalloc.get_traced_memory()[0] - base) / n
    for i in range(n):
        for p in lifecycle(f"o{i}", rng.choice(AGENTS), i):
            x.submit(p)
    cycled = (tracemalloc.get_traced_memory()[0] - base) / n
    tracemalloc.stop()
    return intro, cycled


def generic_run(n: int) -> str:
    """A synthetic generic JSONL run (docs/audit-real-runs.md) of ``n`` events.

    An orchestrator (``planner``) routes work to a coder and a web surfer in turn: a
    ledger, an instruction, the output (code is run by ``terminal``; every fifth run
    fails), a ledger admitting no progress every seventh round, a replan every fiftieth,
    then a termination. Deterministic.
    """
    agents = {"planner": "plans and assigns work", "coder": "writes python code",
              "terminal": "runs code", "surfer": "browses the web"}
    head = {"run": {"id": f"synthetic-{n}", "question": "q", "ground_truth": "42",
                    "succeeded": False, "agents": agents, "orchestrator": "planner"}}
    lines = [json.dumps(head), json.dumps({"agent": "user", "kind": "task", "content": "go"}),
             json.dumps({"agent": "planner", "kind": "plan", "content": "1. compute"})]
    i = 0
    while len(lines) < n - 1:
        w = ("coder", "surfer")[i % 2]
        led = {"is_request_satisfied": False, "is_progress_being_made": i % 7 != 0,
               "is_in_loop": False, "next_speaker": w}
        lines.append(json.dumps({"agent": "planner", "kind": "ledger", "ledger": led}))
        lines.append(json.dumps({"agent": "planner", "kind": "instruction", "to": w,
                                 "content": f"step {i}: compute"}))
        out = "```python\nprint(6*7)\n```" if w == "coder" else f"page {i}"
        lines.append(json.dumps({"agent": w, "kind": "output", "content": out}))
        if w == "coder":
            lines.append(json.dumps({"agent": "terminal", "kind": "tool_output",
                                     "exitcode": int(i % 5 == 0), "content": "42"}))
        if i % 50 == 49:
            lines.append(json.dumps({"agent": "planner", "kind": "plan",
                                     "content": f"replan {i}"}))
        i += 1
    lines = lines[: max(0, n - 1)]
    lines.append(json.dumps({"agent": "planner", "kind": "termination", "final_answer": "42",
                             "content": "done"}))
    return "\n".join(lines) + "\n"


def _rss_mb() -> float:
    """Peak resident memory of this process image, MB.

    ``VmHWM`` (Linux; reset at exec, unlike ``ru_maxrss``, which a spawned child inherits
    from its parent), else ``ru_maxrss``.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _audit_trace_child(n: int, folder: str) -> tuple[float, float, float, int, float]:
    """In a fresh process: write the run, audit it.

    Returns (wall, cpu, peak MB, diagnoses, peak MB before the audit: the interpreter and
    its imports).
    """
    from icore.adapters import audit_path

    path = Path(folder) / f"run-{n}.jsonl"
    path.write_text(generic_run(n), encoding="utf-8")
    gc.collect()
    base = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    r = audit_path(path)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, _rss_mb(), len(r.diagnoses), base


def bench_trace(n: int) -> TraceFigures:
    """``icore audit`` of :func:`generic_run` ``(n)`` in a fresh process: import + audit, no report.

    Measures wall and CPU time and that process's peak resident memory.
    """
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(1, mp_context=ctx) as ex:
        wall, cpu, peak, diags, base = ex.submit(_audit_trace_child, n, tmp).result()
    return TraceFigures(n, wall, cpu, peak, diags, base)


def bench_trial(entries: int, rng: random.Random, samples: int = 200) -> TrialFigures:
    """Per-proposal cost of judging a recovery on a trial of X with ``entries`` log entries.

    Judging is audit + apply on the candidate, then undo; plus one replay copy.
    """
    d = bench_declaration()
    x = State(d)
    n = max(1, entries // 4)
    populate(x, n)
    k = 0
    while x.seq < entries and k < n:
        for p in lifecycle(f"o{k}", rng.choice(AGENTS), k):
            x.submit(p)
        k += 1
    wall: list[float] = []
    cpu: list[float] = []
    for s in range(samples):
        oid = f"o{k + s % max(1, n - k)}" if k < n else "o0"
        props = lifecycle(oid, rng.choice(AGENTS), 10_000_000 + s)[:2]
        t0, c0 = time.perf_counter(), time.process_time()
        with x.trial():
            for p in props:
                x.apply_verdict(audit(p, x))
        wall.append((time.perf_counter() - t0) / len(props))
        cpu.append((time.process_time() - c0) / len(props))
    t0 = time.perf_counter()
    x.copy()
    copy_ms = (time.perf_counter() - t0) * 1e3
    return TrialFigures(x.seq, statistics.median(wall) * 1e6, statistics.median(cpu) * 1e6,
                        copy_ms)


def run(
    sizes: Sequence[int] = (1_000, 10_000, 100_000),
    *,
    samples: int = 1000,
    speedup_at: int = 10_000,
    rebuild_entries: int = 100_000,
    memory_at: int = 10_000,
    trace_sizes: Sequence[int] = (1_000, 10_000, 100_000),
    trial_at: Sequence[int] = (10_000, 100_000),
    seed: int = 0,
    echo: Callable[[str], None] = print,
) -> StateBenchResult:
    """Run every measurement and print the figures as they come.

    Args:
        sizes: obligation counts at which to time audits (at least one).
        samples: obligations cycled per size (three proposals each).
        speedup_at: obligations for the incremental-vs-full metrics comparison.
        rebuild_entries: entries in the SQLite log that is rebuilt.
        memory_at: obligations for the memory figure.
        trace_sizes: events of the synthetic generic runs audited (may be empty).
        trial_at: log lengths at which the recovery-audit trial is timed (may be empty).
        seed: random seed.
        echo: where the figures are printed.

    Raises:
        BadOption: ``sizes`` is empty, or any count (an entry of ``sizes``,
            ``samples``, ``speedup_at``, ``rebuild_entries``, ``memory_at``) is not an
            integer >= 1; checked before anything is measured.
    """
    if not sizes:
        raise BadOption("sizes must list at least one obligation count", option="sizes",
                        value=list(sizes))
    for n in sizes:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise BadOption(f"sizes must hold integers >= 1, got {n!r} in {list(sizes)}",
                            option="sizes", value=n)
    check_count("samples", samples)
    check_count("speedup_at", speedup_at)
    check_count("rebuild_entries", rebuild_entries)
    check_count("memory_at", memory_at)
    for name, counts in (("trace_sizes", trace_sizes), ("trial_at", trial_at)):
        for c in counts:
            check_count(name, c)
    rng = random.Random(seed)
    res = StateBenchResult()
    for n in sizes:
        f = bench_audit(n, samples, rng)
        res.audits.append(f)
        echo(
            f"audit @ {n:>7} obligations ({f.proposals} proposals; build {f.build_s:.2f} s):\n"
            f"    audit only          wall median {f.audit_median_us:7.1f} µs  p99 "
            f"{f.audit_p99_us:8.1f} µs | cpu median {f.audit_cpu_median_us:7.1f} µs  p99 "
            f"{f.audit_cpu_p99_us:7.1f} µs\n"
            f"    submit (audit+record+incremental metrics) wall median "
            f"{f.submit_median_us:7.1f} µs  p99 {f.submit_p99_us:8.1f} µs | cpu median "
            f"{f.submit_cpu_median_us:7.1f} µs  p99 {f.submit_cpu_p99_us:7.1f} µs"
        )
    inc, full = bench_incremental(speedup_at, rng)
    res.incremental_us, res.full_recompute_ms = inc, full
    res.speedup = full * 1e3 / inc
    echo(
        f"metrics @ {speedup_at} obligations: incremental {inc:.1f} µs/commit, full recompute "
        f"{full:.1f} ms -> speed-up {res.speedup:,.0f}x (target >= 100x)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        n_e, took, took_cpu, write = bench_rebuild(rebuild_entries, rng, Path(tmp) / "state.db")
    res.rebuild_entries, res.rebuild_s, res.log_write_s = n_e, took, write
    res.rebuild_cpu_s = took_cpu
    echo(
        f"rebuild of a {n_e}-entry SQLite log: wall {took:.2f} s, cpu {took_cpu:.2f} s "
        f"(target <= 10 s; writing it took {write:.2f} s)"
    )
    intro, cycled = bench_memory(memory_at, rng)
    res.bytes_per_obligation, res.bytes_per_obligation_cycled = intro, cycled
    echo(
        f"memory @ {memory_at} obligations: {intro:,.0f} B/obligation introduced, "
        f"{cycled:,.0f} B/obligation after assign+start+submit"
    )
    for n in trace_sizes:
        t = bench_trace(n)
        res.traces.append(t)
        echo(
            f"icore audit of a {n}-event generic JSONL run: wall {t.wall_s:.2f} s, cpu "
            f"{t.cpu_s:.2f} s, peak RSS {t.peak_rss_mb:.0f} MB (before the audit "
            f"{t.base_rss_mb:.0f} MB; {t.diagnoses} diagnoses; target at 100k: <= 20 s, "
            f"<= 500 MB)"
        )
    for n in trial_at:
        tr = bench_trial(n, rng)
        res.trials.append(tr)
        echo(
            f"recovery audit @ {tr.log_entries} log entries: {tr.trial_median_us:.1f} µs/"
            f"proposal wall, {tr.trial_cpu_median_us:.1f} µs cpu (trial + undo; the replay "
            f"copy it replaced: {tr.copy_ms:.0f} ms)"
        )
    return res
