"""Reports of a live run (``icore run``): the run page and its iCORE page, cross-linked.

The run page (``<run folder>/report.html``) puts the decision first: the reason of an
invalid or blocked action at the top, then for every protected action its lineage
picture (plan and action records, exact parents, F(x) and H(x) at each validation point,
the revision that made the plan stale) and the gate's decisions on a timeline
(planfence Sec. 3-4, App. A.3). The iCORE page (``icore-report/<run>.html``) shows X of
the run: G as a graph, Q, Π, hard flags and their diagnoses (icore Sec. 3-4).

Formatting only: the outcomes come from the run (:class:`icore.live.LiveRunResult`), the
diagnoses too (``LiveRunResult.diagnoses``, made by :func:`icore.audit.diagnose_flags` as
the run went; see :func:`live_diagnoses`).
"""

from __future__ import annotations

from pathlib import Path

from icore.live import LiveRunResult, TaskResult
from icore.report._build import flag_context, flag_views, state_views
from icore.report._lineage_view import lineage_view
from icore.report._render import anchor, render_live, render_report, report_filename
from icore.report._view_model import (
    DiagnosisView,
    LineageView,
    LiveRunView,
    LiveTaskView,
    MetricPointView,
    NoticeView,
    RunView,
)
from icore.state import State

ICORE_DIR = "icore-report"
"""Sub-folder of the run folder holding the iCORE page."""


def live_diagnoses(res: LiveRunResult) -> tuple[DiagnosisView, ...]:
    """The rows of a live run's diagnoses: the run's own, rendered (icore Sec. 4).

    Renders :attr:`LiveRunResult.diagnoses <icore.live.LiveRunResult>`, which the run's
    ledger made with :func:`icore.audit.diagnose_flags` (the one diagnosis step and its
    step rule) as each hard flag appeared; nothing is diagnosed here. Each row cites the
    last event added to G before its flag and the flag's assertions (read from X).
    A step of 0 (a flag raised before any proposal) is shown as none.
    """
    x = res.state
    if not isinstance(x, State):
        return ()
    ctx = flag_context(x)
    out = []
    for d in res.diagnoses:
        fid = d.flags[0] if d.flags else None
        flag = x.flags.get(fid) if fid is not None else None
        last = ctx.get(fid, (0, None, None))[1] if fid is not None else None
        events = tuple(e for e in (last,) if e is not None)
        out.append(DiagnosisView(d.id, d.defect, d.step or None, d.responsible, d.detail,
                                 events, flag.assertions if flag is not None else (),
                                 d.obligations))
    return tuple(out)


def _task_lineage(t: TaskResult) -> LineageView:
    status = ("blocked" if t.blocked else "not issued" if not t.executed
              else "INVALID" if t.invalid else "valid")
    note = f"Auditor: {t.audit_verdict}." if t.audit_verdict else ""
    if t.error and not t.blocked:
        note = f"{note} Stopped: {t.error}".strip()
    return lineage_view(anchor(t.task), f"{t.task} · {t.family} · seed {t.seed}",
                        t.lineage, t.gate, status=status, outcome_note=note)


def _task_row(t: TaskResult) -> LiveTaskView:
    primary = ("INVALID" if t.invalid else "valid") if t.executed else (
        "blocked" if t.blocked else "not issued")
    return LiveTaskView(
        task=t.task, ok=t.success, primary=primary,
        replanned="yes" if t.replanned else "no", blocked=t.block_reason or "-",
        auditor=t.audit_verdict or "-", responses=f"{t.accepted}/{t.responses}",
        ms=f"{t.duration_ms:.0f}", error=t.error,
        steps=tuple((str(s.get("step")), str(s.get("agent")), bool(s.get("ok")),
                     str(s.get("ms")), str(s.get("detail", ""))[:200]) for s in t.steps),
        proposals=tuple((str(v.get("operation")), str(v.get("proposer")),
                         str(v.get("decision")), "; ".join(v.get("reasons", []))[:300])
                        for v in t.icore))


def live_run_view(res: LiveRunResult, *, icore_href: str | None = None) -> LiveRunView:
    """The run page's view model (``report.html``).

    Args:
        res: the finished run.
        icore_href: relative link to the iCORE page (None: no link).
    """
    s = res.summary()
    lineage = tuple(_task_lineage(t) for t in res.tasks)
    notices: list[NoticeView] = []
    if res.interrupted:
        notices.append(NoticeView("warn", "Interrupted (Ctrl-C): every agent process was "
                                  "stopped; results cover the workflows that finished."))
    if res.error:
        notices.append(NoticeView("bad", f"Run error: {res.error}"))
    for c in res.crashes:
        notices.append(NoticeView(
            "bad", f"Agent crash: {c.get('agent')} ({c.get('role')}) exited with code "
            f"{c.get('returncode')}{' (injected fault)' if c.get('injected') else ''}; "
            "actions depending on it fail closed."))
    for t, lv in zip(res.tasks, lineage, strict=True):
        if lv.status in ("INVALID", "blocked"):
            notices.append(NoticeView("bad", f"{t.task}: {lv.reason}", f"#lin-{lv.id}"))
        elif t.error:
            notices.append(NoticeView("warn", f"{t.task}: {t.error}", f"#lin-{lv.id}"))
    bad = s["invalid_actions"] or s["blocked"] or res.crashes or res.error
    headline = (f"{s['invalid_actions']} invalid action(s), {s['blocked']} blocked, "
                f"{s['succeeded']}/{s['tasks']} workflow(s) succeeded")
    ic = res.icore
    icore_rows: tuple[tuple[str, str], ...] = ()
    if ic:
        icore_rows = (
            ("snd / astab / cq", f"{ic.get('snd', 0):.3f} / {ic.get('astab', 0):.3f} / "
                                 f"{ic.get('cq', 0):.3f}"),
            ("events in G", str(ic.get("events"))),
            ("proposals (committed / rejected)",
             f"{ic.get('proposals')} ({ic.get('committed')} / {ic.get('rejected')})"),
            ("hard flags (open)", f"{ic.get('hard_flags')} ({ic.get('open_flags')})"))
    x = res.state
    return LiveRunView(
        id=res.name, title=f"icore run: {res.name}",
        subtitle=f"policy {res.policy} · family {res.family} · backend {res.backend} · "
                 f"{len(res.tasks)} workflow(s) · {res.duration_s:.2f} s",
        verdict="bad" if bad else "ok", headline=headline, notices=tuple(notices),
        summary=(
            ("task success", f"{s['succeeded']}/{s['tasks']}"),
            ("invalid primary actions", f"{s['invalid_actions']}/{s['tasks']}"),
            ("successful replans", str(s["successful_replans"])),
            ("blocked actions (fail closed)", str(s["blocked"])),
            ("redundant auditor actions", str(s["redundant_auditor_actions"])),
            ("accepted / total responses", f"{s['accepted']}/{s['responses']}"),
            ("agent crashes", str(s["crashes"])),
            ("committed records verified after shutdown",
             f"{s['records_checked']} checked, {s['records_lost']} lost"),
            ("agent processes left running", str(s["processes_left"]))),
        icore=icore_rows, lineage=lineage, tasks=tuple(_task_row(t) for t in res.tasks),
        diagnoses=live_diagnoses(res),
        flags=flag_views(x) if isinstance(x, State) else (),
        icore_href=icore_href,
        files=(("run.json", "the run's results"), ("icore.sqlite", "iCORE event log"),
               ("agents/*.sqlite", "per-agent owner memories"),
               ("team.yaml", "the net team manifest"), ("logs/", "agent logs")))


def icore_run_view(res: LiveRunResult, *, run_href: str | None = "../report.html") -> RunView:
    """The iCORE page's view model: X of the run (G, Q, Π, flags, diagnoses, lineage).

    Raises:
        ValueError: the run carries no state (``res.state`` is None).
    """
    x = res.state
    if not isinstance(x, State):
        raise ValueError("the run has no iCORE state")
    obligations, assertions, events, flags = state_views(x)
    s = res.summary()
    ic = res.icore
    summary = (("policy", res.policy), ("family", res.family), ("backend", res.backend),
               ("task success", f"{s['succeeded']}/{s['tasks']}"),
               ("invalid primary actions", str(s["invalid_actions"])),
               ("successful replans", str(s["successful_replans"])),
               ("blocked (fail closed)", str(s["blocked"])),
               ("agent crashes", str(s["crashes"])),
               ("snd / astab / cq", f"{ic.get('snd', 0):.3f} / {ic.get('astab', 0):.3f} / "
                                    f"{ic.get('cq', 0):.3f}"),
               ("proposals (committed / rejected)",
                f"{ic.get('committed')} / {ic.get('rejected')}"),
               ("hard flags", str(ic.get("hard_flags"))),
               ("x axis of the timeline", "proposal number"))
    lineage = tuple(_task_lineage(t) for t in res.tasks)
    notices = tuple(NoticeView("bad", f"{lv.title.split(' · ')[0]}: {lv.reason}",
                               f"#lin-{lv.id}")
                    for lv in lineage if lv.status in ("INVALID", "blocked"))
    return RunView(
        id=res.name, title=f"iCORE audit of live run {res.name}",
        subtitle=f"{res.policy} · {res.family} · {len(res.tasks)} workflow(s)",
        summary=summary,
        timeline=tuple(MetricPointView(i, a, b, c) for i, a, b, c in res.timeline),
        obligations=obligations, assertions=assertions, events=events, flags=flags,
        diagnoses=live_diagnoses(res),
        links=(("run report", run_href),) if run_href else (),
        lineage=lineage, notices=notices, brand="icore run · iCORE")


def write_live_report(res: LiveRunResult, *, single_file: bool = True) -> Path:
    """Write a live run's reports; return the run page's path.

    Writes ``<run folder>/report.html`` and, when the run has an iCORE state,
    ``<run folder>/icore-report/<run>.html``, each linking the other.

    Args:
        res: the finished run (also an interrupted one).
        single_file: inline CSS and JS into each page (default); False writes them to
            ``assets/`` beside each page.
    """
    out = Path(res.out_dir)
    has_x = isinstance(res.state, State)
    name = report_filename(res.name)
    if has_x:
        render_report(icore_run_view(res), out / ICORE_DIR, single_file=single_file)
    view = live_run_view(res, icore_href=f"{ICORE_DIR}/{name}" if has_x else None)
    return render_live(view, out, single_file=single_file)


__all__ = ["ICORE_DIR", "icore_run_view", "live_diagnoses", "live_run_view",
           "write_live_report"]
