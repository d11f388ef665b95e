"""``icore audit PATH...``: import recorded runs, audit them, write HTML reports.

Thin: calls :mod:`icore.adapters` (import, audit, attribution, PROV) and
:mod:`icore.report` (rendering) only. ``--json FILE`` writes a machine-readable summary
and ``--fail-on`` turns findings into exit code 3, for CI.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from icore import __version__
from icore._files import refuse_foreign
from icore._flock import close_lock, open_lock
from icore._strict_json import strict_dumps
from icore.adapters import (
    ENV_MAX_INPUT,
    OWN_REPORT,
    AdapterError,
    AuditResult,
    FileSteps,
    audit_file,
    max_input_bytes,
    missing_decisions,
    scan_paths,
    write_prov,
)
from icore.attribution import Attribution, attribute
from icore.cli._audit_json import FAIL_ON, action_line, failing, plain, run_counts, run_json
from icore.cli._text import printable, shown
from icore.cli.inputs import (
    FAIL_EXIT,
    adopt_otlp_file,
    check_llm_options,
    check_otlp_endpoint,
    drop_repeated_inputs,
    fail_conditions,
    nonempty_path,
    otlp_file_target,
    otlp_undelivered,
    output_file,
    positive_number,
    refuse_foreign_otlp_file,
    refuse_input_as_output,
    refuse_non_folder,
    refuse_special_file,
    refuse_trace_outputs_in,
)
from icore.errors import IcoreError
from icore.report import (
    ASSETS,
    LineageView,
    index_from_audits,
    lineage_views,
    render_index,
    render_report,
    report_filename,
    view_from_audit,
)


def audit(
    paths: list[Path] = typer.Argument(
        ..., parser=nonempty_path, help="Trace files (.json Who&When, .jsonl generic, "
        ".otlp.json OpenTelemetry / Phoenix / Langfuse spans) or folders of them."),
    out: Path = typer.Option(
        Path("icore-audit"), "--out", "-o", parser=nonempty_path,
        help="Folder for the HTML reports (and PROV)."),
    attribution: bool = typer.Option(
        False, "--attribution", help="Attribute each failure to an agent and step (shipped "
        "scorer, trained on the whole Who&When development half); on annotated runs also "
        "print the cross-validated accuracy per subset next to the baselines."),
    folds: int = typer.Option(5, min=2, help="--attribution: k of the grouped k-fold CV."),
    repeats: int = typer.Option(1, min=1, help="--attribution: CV repeats (icore bench "
                                "attribution uses 5)."),
    llm_base_url: str = typer.Option(
        "", help="--attribution: attribute with an LLM behind this OpenAI-compatible "
        "endpoint, X-derived evidence as context (default: LLM-free)."),
    llm_model: str = typer.Option("gpt-4o-mini", help="Model name for --llm-base-url."),
    llm_mode: str = typer.Option("hybrid", help="all-at-once, step-by-step or hybrid."),
    llm_api_key: str = typer.Option("not-needed", envvar="OPENAI_API_KEY",
                                    help="API key sent to --llm-base-url."),
    prov: bool = typer.Option(False, "--prov", help="Also export each run as PROV-JSON."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write HTML reports."),
    json_out: Path | None = typer.Option(
        None, "--json", parser=nonempty_path, help="Write a JSON summary here (missing "
        "folders are created): per run the summary, hard flags, diagnoses, attribution "
        "and lineage verdicts; import errors."),
    fail_on: list[str] | None = typer.Option(
        None, "--fail-on", help="Exit 3 when any run shows this (repeatable or "
        "comma-separated): hard-flags, unsound (final snd < 1), invalid (an action in the "
        "trace's PlanFence records ran from a stale plan), unknown (a protected action's "
        "outcome is unknown: it may have run), not-ended (a run ended without a terminal "
        "marker; a paused run is not one)."),
    single_file: bool = typer.Option(
        True, "--single-file/--no-single-file", help="Reports as one file each (CSS, JS "
        "and pictures inlined; default), or with an assets/ folder beside them."),
    otlp_endpoint: str | None = typer.Option(
        None, "--otlp-endpoint", help="Also export each audit (metrics, cq timeline, hard "
        "flags, diagnoses) as OpenTelemetry spans to this OTLP/HTTP URL, or file:PATH. "
        "Needs icore[otel]. Spans that cannot be delivered end the command with exit 1 "
        "(after the reports are written), unless --otlp-best-effort."),
    otlp_best_effort: bool = typer.Option(
        False, "--otlp-best-effort", help="--otlp-endpoint: undelivered spans are a "
        "warning, not exit 1."),
    max_input_mb: float | None = typer.Option(
        None, "--max-input-mb", callback=positive_number, help="Refuse trace files larger "
        "than this many MiB (default: $ICORE_MAX_INPUT_MB, else 1024)."),
) -> None:
    """Audit recorded multi-agent runs: snd, astab, cq, hard flags, stalls, diagnoses.

    In a folder, every ``.json`` / ``.jsonl`` regular file below it is audited; an entry
    that is not a regular file (a FIFO, a socket, a device, a broken link) is never
    opened, and a ``warning skipped PATH: ...`` line names it.

    Each file is imported and audited on its own: a file that cannot be (a malformed
    field, a value the audit refuses, even an internal error) is reported with its name
    (and field) on the console, in the index and in --json, the other files are still
    audited and reported, and the command exits 1.

    Exit codes: 0 ok; 1 a file could not be imported (nothing is written when no run
    was read), or --otlp-endpoint spans were not delivered; 2 usage error (no trace
    files, an empty PATH, --out or --json, a FIFO or device as PATH, a bad --fail-on,
    an --out that is a file, a --json that is a folder, an output that is one of the
    inputs or another output, a --json or --otlp-endpoint file: named ``.json``/``.jsonl``
    inside an input folder (the next audit would read it as a trace), a report or PROV
    file that would replace a file icore did not write, --llm-* without --attribution,
    --otlp-best-effort without --otlp-endpoint); 3 a --fail-on condition holds.
    """
    console = Console(width=160, highlight=False)
    fails = fail_conditions(fail_on, FAIL_ON)
    if llm_base_url and not attribution:
        raise typer.BadParameter("applies only with --attribution", param_hint="--llm-base-url")
    if attribution:
        check_llm_options(llm_base_url, llm_mode)
    for p in paths:
        # a FIFO or device given by name would block (or never end) when read: refuse it
        # before anything is read; inside folders only regular files are collected, and
        # what is skipped (a FIFO, a socket, a broken link) is said, one line each
        refuse_special_file(p, what="trace path", dir_ok=True)
    check_otlp_endpoint(otlp_endpoint, best_effort=otlp_best_effort)
    if max_input_mb is None:
        _check_max_input_env()
    if report or prov:
        refuse_non_folder(out, what="--out")
    scan = scan_paths(paths)
    files = drop_repeated_inputs(list(scan.files))
    reports = [q for q, why in scan.skipped if why == OWN_REPORT]
    if reports:  # one line: a folder of runs often holds their --json reports
        console.print(f"skipped {len(reports)} icore audit report(s) (--json), e.g. "
                      f"{shown(str(reports[0]))}")
    for q, why in scan.skipped:
        if why != OWN_REPORT:
            console.print(f"[yellow]warning[/] skipped {shown(str(q))}: {shown(why)}; "
                          "not read (only regular files are audited)")
    if not files:
        where = ", ".join(str(p) for p in paths[:5]) + (" …" if len(paths) > 5 else "")
        console.print(f"[red]no trace files found[/] in {shown(where)} (a folder is "
                      "searched for .json and .jsonl files)")
        raise typer.Exit(2)
    target = otlp_file_target(otlp_endpoint)
    outputs = [(w, p) for w, p in (("--json", json_out), ("--otlp-endpoint file:", target))
               if p is not None]
    refuse_input_as_output(outputs, files)
    refuse_trace_outputs_in(outputs, [p for p in paths if p.is_dir()])
    refuse_foreign_otlp_file(otlp_endpoint)  # spans appended to the user's notes: no
    with _out_lock(out if report or prov else None), \
            output_file(json_out, what="--json file") as jf, _max_input(max_input_mb):
        _audit(console, files, out, attribution=attribution, prov=prov, report=report,
               single_file=single_file, json_file=jf, fails=fails, otlp_endpoint=otlp_endpoint,
               llm=_LlmOptions(llm_base_url, llm_model, llm_mode, llm_api_key),
               folds=folds, repeats=repeats, otlp_best_effort=otlp_best_effort,
               skipped=scan.skipped)


def _still_readable(results: list[AuditResult], errors: list[tuple[str, str]]
                    ) -> list[AuditResult]:
    """The runs whose steps can still be read as imported.

    A streamed JSONL run reads its file again for the table, report and ``--json``: a
    run whose file changed or went away since is an error of its file, and the other
    runs are still reported (#29).
    """
    kept = []
    for r in results:
        steps = r.trace.steps
        if isinstance(steps, FileSteps):
            try:
                steps.check()
            except AdapterError as exc:
                errors.append((exc.file, f"{exc.field}: {exc.problem}"))
                continue
        kept.append(r)
    return kept


@contextlib.contextmanager
def _out_lock(out: Path | None) -> Iterator[None]:
    """Hold the output folder's lock: two audits into one ``--out`` take turns (issue 29).

    Two audits writing one folder at once each checked it, then wrote their reports and
    ``index.html`` over each other's: the first audit's index named the second's runs.
    The lock is ``flock`` on the ``--out`` folder itself, made here when missing (and
    removed again if the audit leaves it empty), so audits into other folders never
    wait; after taking it the folder is checked to be still the one locked (else taken
    again). Released when the audit ends (or its process does); a second audit says once
    on stderr that it waits.
    """
    if out is None:
        yield
        return
    import fcntl
    path = Path(os.path.abspath(out))
    made: list[Path] = []  # the folders made here, deepest first
    told = False
    while True:
        try:
            if not path.is_dir():
                made = [p for p in (path, *path.parents) if not p.exists()]
                path.mkdir(parents=True)
            fd = open_lock(path, os.O_RDONLY | os.O_DIRECTORY)  # never kept by a fork
        except FileExistsError:  # made by another audit just now: lock that one
            made = []
            continue
        except (OSError, ValueError):  # unwritable, a name too long: the writes will say
            yield
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not told:
                    typer.echo("waiting: another icore audit is writing to "
                               f"{shown(str(path))}", err=True)
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_folder(path, fd):
                break
        except OSError:  # a file system without flock: no lock, as before
            break
        close_lock(fd)  # the folder was removed or replaced meanwhile: lock the new one
    try:
        yield
    finally:
        for folder in made:
            try:
                folder.rmdir()  # only when the audit left it empty
            except OSError:
                break
        close_lock(fd)


def _same_folder(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the folder open as ``fd``."""
    try:
        now, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _check_max_input_env() -> None:
    """A bad ``$ICORE_MAX_INPUT_MB`` is a usage error, said once before any work.

    Raises:
        typer.BadParameter: the variable is set but is not a finite number > 0 (it was
            an input error repeated for every file, exit 1; QA r8-bad D9).
    """
    try:
        max_input_bytes()
    except AdapterError as exc:
        raise typer.BadParameter(f"{exc.problem} (or give --max-input-mb)",
                                 param_hint=f"${ENV_MAX_INPUT}") from None


@contextlib.contextmanager
def _max_input(mb: float | None) -> Iterator[None]:
    """``--max-input-mb`` as the importers' ``ICORE_MAX_INPUT_MB`` while the command runs."""
    if mb is None:
        yield
        return
    old = os.environ.get(ENV_MAX_INPUT)
    os.environ[ENV_MAX_INPUT] = repr(mb)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_MAX_INPUT, None)
        else:
            os.environ[ENV_MAX_INPUT] = old


@dataclasses.dataclass(frozen=True)
class _LlmOptions:
    """``--llm-*`` of ``--attribution`` (an empty base URL: LLM-free)."""

    base_url: str
    model: str
    mode: str
    api_key: str


def _audit(console: Console, files: list[Path], out: Path, *, attribution: bool, prov: bool,
           report: bool, single_file: bool, json_file: Any, fails: frozenset[str],
           otlp_endpoint: str | None, llm: _LlmOptions, folds: int, repeats: int,
           otlp_best_effort: bool = False,
           skipped: tuple[tuple[Path, str], ...] = ()) -> None:
    results: list[AuditResult] = []
    errors: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    for f in files:  # one file's failure never stops the others (issue 29)
        try:
            results.extend(audit_file(f))  # an OpenTelemetry export: one run per trace
        except AdapterError as exc:
            errors.append((exc.file, f"{exc.field}: {exc.problem}"))
        except IcoreError as exc:  # audit_file names the file; any other typed error too
            errors.append((str(f), f"{type(exc).__name__}: {exc}"))
        except Exception as exc:  # last resort: a bug in icore, not in the file
            errors.append((str(f), f"internal error {type(exc).__name__}: {exc} (a bug "
                                   "in icore: please report it with this file)"))
    elapsed = time.perf_counter() - t0
    results = _unique_ids(_still_readable(results, errors))
    table = Table("run", "family", "msgs", "snd", "astab", "cq", "cq mean", "cq min",
                  "hard flags", "stalls", "unsupported", "diagnoses",
                  title="iCORE audit (final X; cq mean/min over the run)")
    for r in results:
        s = r.summary()
        table.add_row(shown(s.run), shown(s.family), str(s.steps), f"{s.snd:.3f}",
                      f"{s.astab:.3f}",
                      f"{s.cq:.3f}", f"{s.cq_mean:.3f}", f"{s.cq_min:.3f}", str(s.hard_flags),
                      str(s.stalls), str(s.unsupported), str(s.diagnoses))
    if results:
        console.print(table)
    _print_action_lines(console, results)
    unchecked = [r.trace.id for r in results if r.answer_checked is False]
    if unchecked:
        console.print(
            f"final answer not checked (the trace has no ground truth and no recorded "
            f"outcome; not counted as wrong): {shown(', '.join(unchecked[:10]))}"
            f"{' …' if len(unchecked) > 10 else ''}. Record one with "
            "RunRecorder(ground_truth=...) or succeeded=True/False to check it.")
    paused = [r.trace.id for r in results if r.paused]
    if paused:
        console.print(
            f"paused, waiting for a human (the trace ends at an interrupt: no final answer "
            f"yet, not counted as a run that failed to end): {shown(', '.join(paused[:10]))}"
            f"{' …' if len(paused) > 10 else ''}.")
    stopped = [r.trace.id for r in results if r.summary().terminated is False
               and r.trace.unclosed and r.trace.steps and r.trace.steps[-1].pause]
    if stopped:  # paused, then the process stopped while it waited (QA qa-new16 S3)
        console.print(
            f"paused, then stopped while waiting for a human (its trace was never closed: "
            f"not ended; a resume in another process is in that process's trace, audit "
            f"both files): {shown(', '.join(stopped[:10]))}"
            f"{' …' if len(stopped) > 10 else ''}.")
    unended = [r.trace.id for r in results
               if r.summary().terminated is False and not r.paused
               and r.trace.id not in stopped]
    if unended:  # said, not only under --fail-on not-ended or --json (QA qa-new16 S3)
        console.print(
            f"did not end (no end line: the run stopped, was killed, or its trace was cut; "
            f"--fail-on not-ended fails it): {shown(', '.join(unended[:10]))}"
            f"{' …' if len(unended) > 10 else ''}.")
    for r in results:  # a call whose decision line was cut is named too (qa-new15b)
        for w in (*r.trace.extras.get("warnings", ()), *missing_decisions(r.lineage)):
            console.print(f"[yellow]warning[/] {shown(str(w))}")
    for file, err in errors:
        console.print(f"[red]error[/] {shown(f'{file}: {err}')}")
    console.print(f"imported and audited {len(results)} run(s) in {elapsed:.2f} s "
                  f"(import + audit){f'; {len(errors)} file(s) failed' if errors else ''}")
    if not results:
        # nothing was read: write no report, index or JSON (a typo in PATH must not
        # leave an empty ./icore-audit behind)
        console.print("[red]no run could be imported; nothing written[/]")
        raise typer.Exit(1)
    if report or prov:  # no report may replace an input (a trace named index.html ...)
        planned = [("report", out / report_filename(r.trace.id)) for r in results
                   if report] + [("report", out / "index.html")] * report + [
            ("--prov", out / f"{Path(report_filename(r.trace.id)).stem}.prov.json")
            for r in results if prov] + [
            ("report", out / "assets" / a) for a in ASSETS if report and not single_file]
        extra = [(w, p) for w, p in (("--json", json_file.path if json_file else None),
                                     ("--otlp-endpoint file:", otlp_file_target(
                                         otlp_endpoint))) if p is not None]
        refuse_input_as_output(planned + extra, files)  # nor --json on a report's path
        try:  # nor a file icore did not write (the user's r1.prov.json, ...): issue 29
            refuse_foreign(p for _w, p in planned)
        except FileExistsError as exc:
            typer.echo(f"error: {exc.strerror}", err=True)
            raise typer.Exit(2) from None
    undelivered = ""
    if otlp_endpoint:
        from icore.adapters import exporting

        with exporting(endpoint=otlp_endpoint) as ex:
            for r in results:
                ex.audit(r)
        adopt_otlp_file(otlp_endpoint)
        undelivered = otlp_undelivered(otlp_endpoint, ex.delivery,
                                       best_effort=otlp_best_effort)
        if undelivered:
            kind, _, rest = undelivered.partition(" ")
            console.print(f"[{'yellow' if otlp_best_effort else 'red'}]{kind}[/] "
                          f"{shown(rest)}")
    built: dict[int, tuple[LineageView, ...]] = {}  # each run's pictures, built once

    def views(r: AuditResult) -> tuple[LineageView, ...]:
        """The run's lineage pictures, for its report and its ``--json`` entry."""
        got = built.get(id(r))
        if got is None:
            got = lineage_views(r)
            if json_file is not None or fails:  # read again by the JSON below
                built[id(r)] = got
        return got

    atts: dict[str, Attribution] = {}
    sc = None
    if attribution:
        attr: Callable[[AuditResult], Attribution | None] = attribute
        if llm.base_url:
            from icore.agents import LLMSettings
            from icore.attribution import LLMAttributor

            attr = LLMAttributor(LLMSettings(base_url=llm.base_url, model=llm.model,
                                             api_key=llm.api_key), mode=llm.mode).attribute
        for r in results:
            a = attr(r)
            if a is not None:
                atts[r.trace.id] = a
        _print_candidates(console, atts)
        if any(r.trace.annotation is not None and r.trace.succeeded is not True
               for r in results):
            from icore.attribution import cross_validate, cv_score, markdown

            ev = cross_validate(results, folds=folds, repeats=repeats)
            if ev.rows:
                from rich.markdown import Markdown

                console.print(Markdown(markdown(ev, weights=False)))
                cv = cv_score(ev)
                sc = cv if cv.n else None  # no subset had two question groups to fold
    if prov:
        out.mkdir(parents=True, exist_ok=True)
    if report or prov:
        for r in results:
            links: list[tuple[str, str]] = []
            if prov:
                p = write_prov(r.state, out / f"{Path(report_filename(r.trace.id)).stem}"
                               ".prov.json", run_id=r.trace.id)
                links.append(("PROV-JSON", p.name))
            if report:
                render_report(view_from_audit(r, attribution=atts.get(r.trace.id),
                                              links=links, index_href="index.html",
                                              lineage=views(r)), out,
                              single_file=single_file)
        if report:
            idx = render_index(index_from_audits(
                results, attributions=atts if attribution else None, score=sc,
                errors=errors, elapsed_s=elapsed), out, single_file=single_file)
            console.print(f"reports: {shown(str(idx))}")
        if prov:
            console.print(f"PROV-JSON: {shown(str(out))}/*.prov.json (read back and validated)")
    runs = [run_json(r, atts.get(r.trace.id), out if report else None, views(r))
            for r in results] if json_file is not None or fails else []
    not_ended = set(unended) | set(stopped)
    if json_file is not None:
        doc = {"icore": __version__, "runs": runs,
               "errors": [{"file": f, "error": e} for f, e in errors],
               "skipped": [{"path": str(q), "why": why} for q, why in skipped],
               "attribution_score": plain(sc) if sc is not None else None,
               "elapsed_s": round(elapsed, 3)}
        json_file.write(strict_dumps(doc, indent=1, default=str) + "\n")
        console.print(f"JSON summary: {shown(str(json_file.path))}")
    if errors or (undelivered and not otlp_best_effort):
        raise typer.Exit(1)
    hit = failing(runs, fails, not_ended)
    if hit:
        for line in hit:
            typer.echo(f"--fail-on {printable(line)}", err=True)
        raise typer.Exit(FAIL_EXIT)


def _unique_ids(results: list[AuditResult]) -> list[AuditResult]:
    """Give runs whose ids (hence report files) collide a ``-2``, ``-3`` ... suffix."""
    seen: set[str] = set()
    out = []
    for r in results:
        rid, n = r.trace.id, 1
        while report_filename(rid).lower() in seen:  # case-insensitive file systems too
            n += 1
            rid = f"{r.trace.id}-{n}"
        seen.add(report_filename(rid).lower())
        out.append(r if rid == r.trace.id else replace(r, trace=replace(r.trace, id=rid)))
    return out


def _print_candidates(console: Console, atts: dict[str, Attribution]) -> None:
    """The top three (agent, step) candidates of each attributed run and their features."""
    t = Table("run", "rank", "agent", "step", "score", "features that ranked it",
              title="Failure attribution: top candidates (shipped scorer, trained on the "
              "whole development half; in-sample for those runs)")
    for rid, a in atts.items():
        for i, c in enumerate(a.candidates, 1):
            why = ", ".join(f"{n}={v:.2g} (+{w:.2f})" for n, v, w in c.reasons)
            t.add_row(shown(rid) if i == 1 else "", str(i), shown(c.agent), str(c.step),
                      f"{c.score:.2f}", shown(why))
        if not a.candidates:
            t.add_row(shown(rid), "-", shown(str(a.agent)), str(a.step), "", shown(a.rule))
    console.print(t)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore audit``."""
    app.command("audit")(audit)


ACTION_LINES = 20
"""Runs whose protected-action line the console prints when all their actions are valid
or blocked; a run with any other count (INVALID, outcome unknown, failed after
authorization, unchecked, not issued) always gets its line (QA qa-new12 S3)."""
_QUIET = ("total", "valid", "blocked")


def _print_action_lines(console: Console, results: list[AuditResult]) -> None:
    """One line per run with protected actions (see :data:`ACTION_LINES`).

    Every run that needs a look, the first :data:`ACTION_LINES` others, then how many
    were left out.
    """
    shown_n = left = 0
    for r in results:
        line = action_line(r)
        if line is None:
            continue
        quiet = all(not n for st, n in run_counts(r).items() if st not in _QUIET)
        if quiet and shown_n >= ACTION_LINES:
            left += 1
            continue
        shown_n += quiet
        console.print(shown(line))
    if left:
        console.print(f"… {left} more run(s) whose protected actions are all valid or "
                      "blocked (every run's actions are in --json)")

