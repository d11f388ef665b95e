"""``icore run``: live multi-agent runs and the matched study (planfence Sec. 5.2, App. A.5).

Thin: parses flags, calls :func:`icore.live.run_live` / :func:`icore.live.run_matched`
and prints the result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from icore._files import MARKER, make_room
from icore.agents import LLMConfig, LLMUnavailable
from icore.cli._text import shown
from icore.cli.inputs import (
    FAIL_EXIT,
    adopt_otlp_file,
    check_otlp_endpoint,
    fail_conditions,
    int_list,
    nonempty_path,
    otlp_file_target,
    otlp_undelivered,
    positive_seconds_or_none,
    refuse_foreign_otlp_file,
    refuse_input_as_output,
    refuse_inputs_inside,
    refuse_non_folder,
    refuse_special_file,
    shown_path,
)
from icore.fence import Policy
from icore.live import (
    SEEDS_PER_FAMILY,
    TABLE_HEADER,
    LiveManifestError,
    LiveRunResult,
    Reporter,
    RunManifest,
    RunObserver,
    default_manifest,
    load_manifest,
    run_live,
    run_matched,
)
from icore.report import ICORE_DIR, report_filename, write_live_report

if TYPE_CHECKING:
    from icore.adapters import OtelExporter

_EXCERPT = 160


def _text(value: object, limit: int = _EXCERPT) -> str:
    t = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return t if len(t) <= limit else t[: limit - 1] + "…"


_POLICIES = tuple(p.value for p in Policy)
# the manifest field a command-line override lands in -> the option, so a value the
# manifest refuses (e.g. --concurrency above its maximum) is reported against the option
_OPTION_OF_FIELD = {"concurrency": "--concurrency", "repeat": "--repeat",
                    "seeds": "--seeds", "policy": "--policy", "backend": "--backend",
                    "backend.kind": "--backend", "backend.base_url": "--llm-base-url",
                    "backend.model": "--llm-model", "backend.timeout_s": "--llm-timeout-s"}


def _manifest(path: Path | None, family: str, *, policy: str | None, backend: str | None,
              base_url: str | None, model: str | None, timeout_s: float | None,
              seeds: str | None, concurrency: int | None, repeat: int | None) -> RunManifest:
    try:
        m = load_manifest(path) if path is not None else default_manifest(family)
    except LiveManifestError as exc:
        raise typer.BadParameter(str(exc), param_hint="manifest" if path else "--family") \
            from exc
    changes: dict[str, object] = {}
    if policy is not None:  # given: '' names no policy (not "the manifest's")
        if policy not in _POLICIES:
            raise typer.BadParameter(f"use one of {', '.join(_POLICIES)}", param_hint="--policy")
        changes["policy"] = policy
    if backend or base_url or model or timeout_s is not None:
        b = m.backend.model_dump()
        if backend:
            b["kind"] = backend
        if base_url:
            b["base_url"] = base_url
        if model:
            b["model"] = model
        if timeout_s is not None:
            b["timeout_s"] = timeout_s
        changes["backend"] = b
    if seeds is not None:  # given: '' or ',' names no seed (not "the manifest's")
        seed_list = list(int_list(seeds, "--seeds"))
        changes["seeds"] = seed_list
        if any(x < 0 for x in seed_list):
            raise typer.BadParameter(f"seeds are integers >= 0, got {seeds!r}",
                                     param_hint="--seeds")
    # `is not None`, not truthiness: an explicit 0 must reach the validation, not vanish
    if concurrency is not None:
        changes["concurrency"] = concurrency
    if repeat is not None:
        changes["repeat"] = repeat
    try:
        out = m.with_(**changes) if changes else m
    except LiveManifestError as exc:
        field = str(exc.fields.get("path", ""))
        hint = _OPTION_OF_FIELD.get(field) or _OPTION_OF_FIELD.get(field.split(".")[0])
        raise typer.BadParameter(str(exc), param_hint=hint) from exc
    if out.backend.kind == "llm":
        # a missing base URL or model (flags, manifest or ICORE_LLM_*) is a usage error
        # before any agent starts, not a traceback from inside the run
        b = out.backend.resolved()
        try:
            LLMConfig.from_env(base_url=b.get("base_url"), model=b.get("model"),
                               api_key=b.get("api_key"), timeout_s=b.get("timeout_s"),
                               tool_choice=b.get("tool_choice"), slots=b.get("slots"))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--backend llm") from exc
    return out


def print_decisions(console: Console, rows: list[tuple[str, LiveRunResult]]) -> None:
    """Print the model-decision counters per policy (llm backend).

    Responses, schema violations, corrections used, unrecovered failures, infrastructure
    failures.
    """
    runs = [(p, r) for p, r in rows if r.backend == "llm"]
    if not runs:
        return
    neg = runs[0][1].negotiation
    if neg:
        console.print(shown(str(neg.get("line") or f"tool-call mode: {neg.get('mode')}")))
        for p in neg.get("probes", []):  # notes quote the model server's replies
            console.print(shown(f"  probe {p.get('mode')}: {'ok' if p.get('ok') else 'no'} "
                                 f"({_text(p.get('note', ''), 100)})"))
    t = Table("policy", "tasks ok", "invalid", "responses", "accepted", "violations",
              "corrections", "unrecovered", "infra fail.", "infra unrec.", "wall s",
              title="Model decisions (violations: schema; infra: server errors and "
                    "timeouts, retried)")
    for p, r in runs:
        d = r.llm
        t.add_row(shown(p), f"{r.succeeded}/{len(r.tasks)}", str(r.invalid_actions),
                  str(d["responses"]), str(d["accepted"]), str(d["violations"]),
                  str(d["corrections"]), str(d["unrecovered"]), str(d["infra_failures"]),
                  str(d["infra_unrecovered"]), f"{r.duration_s:.1f}")
    console.print(t)


def _print_run(console: Console, res: LiveRunResult) -> None:
    s = res.summary()
    t = Table("policy", "tasks", "success", "invalid primary", "successful replans",
              "blocked", "redundant auditor", "accepted/responses", "crashes", "seconds",
              title=f"icore run {shown(res.name)}")
    t.add_row(shown(res.policy), str(s["tasks"]), str(s["succeeded"]), str(s["invalid_actions"]),
              str(s["successful_replans"]), str(s["blocked"]),
              str(s["redundant_auditor_actions"]), f"{s['accepted']}/{s['responses']}",
              str(s["crashes"]), f"{res.duration_s:.1f}")
    console.print(t)
    print_decisions(console, [(res.policy, res)])
    for c in res.crashes:
        console.print(f"[red]agent crash[/]: {shown(str(c['agent']))} "
                      f"({shown(str(c['role']))}) exit code "
                      f"{c['returncode']}{' (injected)' if c.get('injected') else ''}")
    for task in res.tasks:
        if task.error:
            console.print(f"[yellow]task {shown(str(task.task))} failed[/]: "
                          f"{shown(_text(task.error))}")
    if res.error:
        console.print(f"[red]run error[/]: {shown(str(res.error))}")
    if res.interrupted:
        console.print("[yellow]interrupted[/]: every agent process was stopped")
    ic = res.icore
    if ic:
        console.print(f"iCORE: cq={ic.get('cq', 0):.3f} snd={ic.get('snd', 0):.3f} "
                      f"proposals={ic.get('proposals')} rejected={ic.get('rejected')} "
                      f"hard flags={ic.get('hard_flags')}")
    console.print(f"report: {shown(str(res.report))}")
    icore_page = res.out_dir / ICORE_DIR / report_filename(res.name)
    if res.report is not None and icore_page.is_file():
        console.print(f"iCORE report: {shown(str(icore_page))}")


def run(
    ctx: typer.Context,
    manifest: Annotated[Path | None, typer.Argument(
        help="Run manifest (YAML). Default: the embedded manifest of --family.",
        exists=True, dir_okay=False, parser=nonempty_path)] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder.",
                                      parser=nonempty_path)] = Path("results/run"),
    policy: Annotated[str | None, typer.Option(
        help="Policy under test (planfence Sec. 5.1), one of: " + ", ".join(_POLICIES)
             + ". Not with --matched, which runs its own three.")
    ] = None,
    family: Annotated[str, typer.Option(
        help="Workflow family of the embedded manifest: reservation, fulfillment, "
             "deployment.")] = "reservation",
    seeds: Annotated[str | None, typer.Option(help="Comma-separated template seeds.")] = None,
    repeat: Annotated[int | None, typer.Option(
        min=1, help="Copies of each workflow (>= 1).")] = None,
    concurrency: Annotated[int | None, typer.Option(
        min=1, help="Workflows at once (>= 1).")] = None,
    backend: Annotated[str | None, typer.Option(help="scripted or llm.")] = None,
    llm_base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible base URL (else ICORE_LLM_BASE_URL).")] = None,
    llm_model: Annotated[str | None, typer.Option(
        help="Model name (else ICORE_LLM_MODEL).")] = None,
    llm_timeout_s: Annotated[float | None, typer.Option(
        callback=positive_seconds_or_none,
        help="Per-request timeout, seconds (finite, > 0).")] = None,
    matched: Annotated[bool, typer.Option(
        "--matched", help="Run the matched study (App. A.5): 3 families x 10 seeds x "
                          "{owner-head freshness, centralized lineage, PlanFence} "
                          "(--seeds narrows the seeds).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    fail_on: Annotated[list[str] | None, typer.Option(
        "--fail-on", help="Exit 3 when the run shows this (repeatable): invalid (a "
                          "primary action ran from a stale plan).")] = None,
    single_file: Annotated[bool, typer.Option(
        "--single-file/--no-single-file", help="Reports as one file each (CSS, JS and "
        "pictures inlined; default), or with an assets/ folder beside them.")] = True,
    otlp_endpoint: Annotated[str | None, typer.Option(
        "--otlp-endpoint", help="Export the run as OpenTelemetry GenAI spans to this "
        "OTLP/HTTP URL (e.g. http://127.0.0.1:6006 for Phoenix; OTEL_EXPORTER_OTLP_* "
        "variables apply), or file:PATH for OTLP JSON lines. Needs icore[otel]. Spans "
        "that cannot be delivered end the command with exit 1 (after the run and its "
        "reports), unless --otlp-best-effort.")] = None,
    otlp_best_effort: Annotated[bool, typer.Option(
        "--otlp-best-effort", help="--otlp-endpoint: undelivered spans are a warning, not "
        "exit 1.")] = False,
) -> None:
    """Run a live multi-agent team: one process per agent, PlanFence-protected tools.

    Owner memory is each agent's SQLite store behind a mutual-TLS owner service, or NATS
    JetStream when the manifest says ``memory: {backend: nats}``.

    An empty MANIFEST or --out, a manifest that is not a regular file, and a
    --concurrency, --repeat or --llm-timeout-s the run manifest refuses (0, negative,
    NaN, infinite, over its maximum), are usage errors: exit 2 naming the input, before
    any agent starts; so are an output that is an input (``--otlp-endpoint file:``
    naming the manifest, also through a link), an --out holding the manifest that would
    be moved aside, and --otlp-best-effort without --otlp-endpoint.
    Exit codes: 0 ok, 1 crash/run error/every workflow stopped early/--otlp-endpoint
    spans not delivered, 2 usage error, 3 a --fail-on condition holds, 130 interrupted.
    """
    console = Console(width=160, highlight=False)
    fails = fail_conditions(fail_on, ("invalid",))

    def reporter(r: LiveRunResult) -> Path:
        return write_live_report(r, single_file=single_file)

    if manifest is not None:
        refuse_special_file(manifest, what="run manifest")
    refuse_non_folder(out, what="--out")
    check_otlp_endpoint(otlp_endpoint, best_effort=otlp_best_effort)
    inputs = [manifest] if manifest is not None else []
    target = otlp_file_target(otlp_endpoint)
    refuse_input_as_output([("--otlp-endpoint file:", target)] if target else [], inputs)
    refuse_foreign_otlp_file(otlp_endpoint)
    if not matched and (out / MARKER).is_file():  # moved aside below, with what it holds
        refuse_inputs_inside(out, inputs, what="--out")
    elif not matched and out.is_dir():  # the user's folder: never marked, never moved
        try:
            make_room(out)
        except FileExistsError as exc:
            typer.echo(f"error: --out {shown_path(out)}: {exc.strerror}", err=True)
            raise typer.Exit(2) from None
    if matched and policy:
        raise typer.BadParameter(
            "--matched runs its own three policies (owner_head_freshness, "
            "centralized_lineage, planfence); drop --policy", param_hint="--policy")
    if backend and backend not in ("scripted", "llm"):
        raise typer.BadParameter("use scripted or llm", param_hint="--backend")
    if manifest is not None and _given(ctx, "family"):
        raise typer.BadParameter("the manifest names its own family; drop --family (it "
                                 "picks the embedded manifest when no MANIFEST is given)",
                                 param_hint="--family")
    m = _manifest(manifest, family, policy=policy, backend=backend, base_url=llm_base_url,
                  model=llm_model, timeout_s=llm_timeout_s, seeds=seeds,
                  concurrency=concurrency, repeat=repeat)
    observer = _otel_observer(ctx, otlp_endpoint)
    code = 0
    try:
        _run(console, m, out, matched=matched, seeds=seeds, concurrency=concurrency,
             reporter=reporter, observer=observer, as_json=as_json, fails=fails)
    except typer.Exit as exc:
        code = exc.exit_code
    if observer is not None and otlp_endpoint:  # every span exported, then counted
        observer.shutdown()
        adopt_otlp_file(otlp_endpoint)
        undelivered = otlp_undelivered(otlp_endpoint, observer.delivery,
                                       best_effort=otlp_best_effort)
        if undelivered:
            typer.echo(undelivered, err=True)
            if not otlp_best_effort and code in (0, FAIL_EXIT):
                code = 1
    if code:
        raise typer.Exit(code)


def _run(console: Console, m: RunManifest, out: Path, *, matched: bool, seeds: str | None,
         concurrency: int | None, reporter: Reporter, observer: RunObserver | None,
         as_json: bool, fails: frozenset[str]) -> None:
    """Run the manifest (or the matched study) and print it; exits by ``typer.Exit``."""
    if not matched and (out / MARKER).is_file():  # icore's own earlier run: say it moves
        moved = make_room(out)
        console.print(f"moved the earlier run in {shown(str(out))} (created by icore) to "
                      f"{shown(str(moved))}")
    if matched:
        try:
            res = run_matched(out, manifest=m,
                              concurrency=10 if concurrency is None else concurrency,
                              seeds=m.seeds if seeds is not None else range(SEEDS_PER_FAMILY),
                              reporter=reporter, observer=observer)
        except LLMUnavailable as exc:
            console.print(f"[red]model server unusable[/]: {shown(str(exc))}")
            raise typer.Exit(1) from None
        if as_json:
            console.print_json(json.dumps(res.to_json()), ensure_ascii=True)
            return
        t = Table(*TABLE_HEADER, title="Matched controlled-live study (planfence App. A.5)")
        for row in res.rows:
            t.add_row(*row.cells())
        console.print(t)
        print_decisions(console, list(res.runs.items()))
        console.print(f"{sum(r.tasks for r in res.rows)} attempts in {res.duration_s:.1f} s; "
                      f"table: {shown(str(out / 'matched.md'))}")
        for p, r in res.runs.items():
            console.print(f"  {shown(p)}: {shown(str(r.report))}")
        if any(r.crashes or r.error or r.interrupted for r in res.runs.values()):
            raise typer.Exit(1)
        # the matched study compares policies: the baselines' invalid actions are its
        # finding, so --fail-on invalid looks at PlanFence's run only
        pf = res.runs.get("planfence")
        if "invalid" in fails and pf is not None and pf.invalid_actions:
            typer.echo(f"--fail-on invalid: {pf.invalid_actions} invalid action(s) under "
                       "planfence", err=True)
            raise typer.Exit(FAIL_EXIT)
        return
    try:
        res1 = run_live(m, out, reporter=reporter, observer=observer)
    except LLMUnavailable as exc:
        console.print(f"[red]model server unusable[/]: {shown(str(exc))}")
        raise typer.Exit(1) from None
    if as_json:
        console.print_json(json.dumps(res1.summary()), ensure_ascii=True)
    else:
        _print_run(console, res1)
    if res1.interrupted:
        raise typer.Exit(130)
    if res1.crashes or res1.error:
        raise typer.Exit(1)
    if res1.tasks and all(t.error for t in res1.tasks):
        # every workflow stopped early (e.g. the model endpoint is unreachable): the run
        # did not test the policy, so it must not look like a success
        raise typer.Exit(1)
    if "invalid" in fails and res1.invalid_actions:
        typer.echo(f"--fail-on invalid: {res1.invalid_actions} primary action(s) ran from "
                   "a stale plan", err=True)
        raise typer.Exit(FAIL_EXIT)


def _given(ctx: typer.Context, name: str) -> bool:
    """True when option ``name`` came from the command line (not its default)."""
    src = ctx.get_parameter_source(name)
    return src is not None and src.name == "COMMANDLINE"


def _otel_observer(ctx: typer.Context, endpoint: str | None) -> OtelExporter | None:
    """The ``--otlp-endpoint`` exporter, flushed and shut down when the command ends.

    However it ends: the command's context closes after it returns or raises (the
    command shuts it down itself first, to count the spans it could not deliver).
    """
    if not endpoint:
        return None
    from icore.adapters import OtelExporter

    ex = OtelExporter(endpoint=endpoint)
    ctx.call_on_close(ex.shutdown)
    return ex


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore run``."""
    app.command("run")(run)
