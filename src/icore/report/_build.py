"""Build view models from audited runs (formatting only; every number comes from upstream)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from icore.adapters import (
    FAILED_AFTER_AUTHORIZATION,
    AuditResult,
    FlagPlace,
    FlagPlaces,
    RunSummary,
    Step,
    trace_lineages,
)
from icore.attribution import Attribution, AttributionScore
from icore.records import is_record_id
from icore.report._lineage_view import link_replans
from icore.report._render import anchor, report_filename
from icore.report._view_model import (
    AssertionView,
    AttributionView,
    CandidateView,
    CertificateView,
    ChainLinkView,
    DiagnosisView,
    EventView,
    FlagView,
    IndexRow,
    IndexView,
    LineageView,
    MetricPointView,
    NoticeView,
    ObligationView,
    RunView,
)
from icore.state import AssertionKind, State

_EXCERPT = 600


def _text(value: Any, limit: int = 160) -> str:
    s = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def view_from_audit(result: AuditResult, *, attribution: Attribution | None = None,
                    links: Sequence[tuple[str, str]] = (),
                    index_href: str | None = None,
                    lineage: Sequence[LineageView] | None = None) -> RunView:
    """The :class:`RunView` of an audited imported run.

    Args:
        result: the audited run.
        attribution: its failure attribution, if computed.
        links: extra ``(label, relative href)`` links (e.g. the PROV-JSON file).
        index_href: the index page's relative href, if an index is written alongside.
        lineage: :func:`lineage_views` of ``result`` when already built (the CLI builds
            them once for its ``--json`` and the report); None: built here.
    """
    x = result.state
    t = result.trace
    s = result.summary()
    # an excerpt's worth of each step's text, read once (a streamed run's steps are read
    # from its file or temporary file: its whole texts are never held together, issue 29)
    text_by_step = {st.index: st.content[:_EXCERPT + 1] for st in t.steps}
    obligations, assertions, events, flags = state_views(
        x, event_step=result.event_step, event_text=text_by_step,
        flag_places=result.flag_places)
    diagnoses = tuple(DiagnosisView(d.id, d.defect, d.step, d.responsible, d.detail, d.events,
                                    d.assertions, d.obligations) for d in result.diagnoses)
    att = None
    if attribution is not None:
        ann = t.annotation
        att = AttributionView(
            attribution.agent, attribution.step, attribution.rule,
            tuple(ChainLinkView(c.diagnosis, c.defect, c.step, c.agent, c.detail)
                  for c in attribution.chain),
            ann.agent if ann else None, ann.step if ann else None,
            tuple(CandidateView(c.agent, c.step, f"{c.score:.2f}",
                                tuple((n, f"{v:.3g}", f"+{w:.2f}") for n, v, w in c.reasons))
                  for c in attribution.candidates),
            attribution.model)
    outcome = {True: "succeeded", False: "failed", None: "unknown"}[t.succeeded]
    summary: tuple[tuple[str, str], ...] = (
        ("family", t.family), ("source", t.file), ("messages", str(s.steps)),
        ("recorded outcome", outcome),
        ("snd (final)", f"{s.snd:.3f}"), ("astab (final)", f"{s.astab:.3f}"),
        ("cq (final / mean / min over the run)", f"{s.cq:.3f} / {s.cq_mean:.3f} / {s.cq_min:.3f}"),
        ("hard flags", str(s.hard_flags)), ("stalls", str(s.stalls)),
        ("replans", str(s.replans)), ("unsupported assertions", str(s.unsupported)),
        ("diagnoses", str(s.diagnoses)),
        ("terminal marker", _terminal_text(s)),
        ("declaration package", f"{x.decl.name} v{x.decl.version}"),
        ("import + audit time", f"{result.elapsed_ms:.0f} ms"),
    )
    lineage = tuple(lineage) if lineage is not None else lineage_views(result)
    if t.warnings:
        summary += (("import warnings", "; ".join(t.warnings)),)
    return RunView(
        id=t.id,
        title=f"Audit of run {t.id}",
        subtitle=_text(t.question, 300),
        summary=summary,
        timeline=tuple(MetricPointView(p.step, p.snd, p.astab, p.cq) for p in result.timeline),
        obligations=tuple(obligations),
        assertions=tuple(assertions),
        events=tuple(events),
        diagnoses=diagnoses,
        flags=flags,
        attribution=att,
        links=tuple(links),
        index_href=index_href,
        lineage=lineage,
        # an action that ran from a stale plan is a defect (red); a refused call is the
        # fence failing closed, as designed (amber): nothing ran; a tool that failed
        # after its authorization (amber) ran from a valid plan and did not finish
        notices=tuple(NoticeView("bad" if lv.status == "INVALID" else "warn",
                                 f"{lv.title}: {lv.reason}", f"#lin-{anchor(lv.id)}")
                      for lv in lineage if lv.status in ("INVALID", "blocked")
                      or lv.error is not None),
    )


def _terminal_text(s: RunSummary) -> str:
    """The report's "terminal marker" line: none, paused, sound, unsound, not checked."""
    if not s.terminated:
        return ("none yet: the run is paused, waiting for a human (the trace was written "
                "at an interrupt; not a run that ended without a final answer)"
                if s.paused else "none")
    if s.answer_checked is False:
        return ("present, final answer not checked (the trace has no ground truth and no "
                "recorded outcome; pass RunRecorder(ground_truth=...) to check it)"
                if s.terminal else "present, unsound: the final answer is empty "
                "(not checked: no ground truth or recorded outcome)")
    return "sound" if s.terminal else "present, unsound"


def lineage_views(result: AuditResult) -> tuple[LineageView, ...]:
    """The lineage pictures of an audited run's protected actions (its report's, its JSON's).

    :attr:`icore.adapters.AuditResult.lineage` (built once per result) rendered, a stale
    call linked to its replan; one per action, in order (empty without PlanFence lines).
    """
    return link_replans(result.lineage)


def trace_lineage(planfence: object, steps: Sequence[Step] = ()
                  ) -> tuple[LineageView, ...]:
    """Lineage pictures of a trace that carries PlanFence records and decisions.

    The trace's ``Trace.extras["planfence"]`` (see the :mod:`icore.adapters` JSONL
    format), judged by :func:`icore.adapters.trace_lineages` against the trace's
    ``steps`` (a refused call whose recorded output says it ran is ``INVALID``); one
    picture per action, decisions grouped by their ``task`` (else ``action``) field, in
    order.
    """
    return link_replans(trace_lineages(planfence, steps))


def index_from_audits(results: Sequence[AuditResult], *,
                      attributions: dict[str, Attribution] | None = None,
                      score: AttributionScore | None = None,
                      errors: Sequence[tuple[str, str]] = (),
                      elapsed_s: float | None = None,
                      title: str = "icore audit") -> IndexView:
    """The :class:`IndexView` of a set of audited runs (plus accuracy notes if scored)."""
    cols = ["run", "family", "messages", "snd", "astab", "cq", "cq mean", "flags", "stalls",
            "unsupported", "diagnoses"]
    fenced = any(r.lineage for r in results)  # the CLI's "protected actions" counts
    if fenced:
        cols += ["protected actions", "blocked", "INVALID", "failed after authorization",
                 "replans"]
    if attributions is not None:
        cols += ["predicted agent", "predicted step", "annotated agent", "annotated step"]
    rows = []
    for r in results:
        s = r.summary()
        cells = [s.family, str(s.steps), f"{s.snd:.3f}", f"{s.astab:.3f}", f"{s.cq:.3f}",
                 f"{s.cq_mean:.3f}", str(s.hard_flags), str(s.stalls), str(s.unsupported),
                 str(s.diagnoses)]
        if fenced:
            st = [a.counted for a in r.lineage]
            cells += [str(len(st)), str(st.count("blocked")), str(st.count("INVALID")),
                      str(st.count(FAILED_AFTER_AUTHORIZATION)), str(s.replans)]
        if attributions is not None:
            a = attributions.get(r.trace.id)
            ann = r.trace.annotation
            cells += [str(a.agent) if a else "", str(a.step) if a else "",
                      str(ann.agent) if ann else "", str(ann.step) if ann else ""]
        rows.append(IndexRow(r.trace.id, report_filename(r.trace.id), tuple(cells)))
    notes: list[tuple[str, str]] = [("runs", str(len(results)))]
    if elapsed_s is not None:
        notes.append(("import + audit time", f"{elapsed_s:.2f} s"))
    if score is not None:
        notes += [
            ("attribution: runs scored", str(score.n)),
            ("agent-level accuracy, cross-validated, pooled (icore / random / published best)",
             f"{_pct(score.agent_accuracy)} / {_pct(score.random_agent)} / "
             f"{_pct(score.published['agent'])}"),
            ("step-level accuracy, cross-validated, pooled (icore / random / published best)",
             f"{_pct(score.step_accuracy)} / {_pct(score.random_step)} / "
             f"{_pct(score.published['step'])}"),
        ]
        for fam, v in score.by_family.items():
            notes.append((f"{fam} (n={int(v['n'])}): agent / step, cross-validated",
                          f"{_pct(v['agent_accuracy'])} / {_pct(v['step_accuracy'])} "
                          f"(random {_pct(v['random_agent'])} / {_pct(v['random_step'])})"))
    return IndexView(title, tuple(cols), tuple(rows), tuple(notes), tuple(errors))


__all__ = ["flag_views", "index_from_audits", "lineage_views", "state_views", "trace_lineage",
           "view_from_audit"]


def state_views(x: State, *, event_step: Callable[[str], int | None] | None = None,
                event_text: Mapping[int, str] | None = None,
                flag_places: Mapping[str, FlagPlace] | None = None
                ) -> tuple[tuple[ObligationView, ...], tuple[AssertionView, ...],
                           tuple[EventView, ...], tuple[FlagView, ...]]:
    """The obligation, assertion, event and flag views of an iCORE state X.

    Args:
        x: the state.
        event_step: maps an event id to the source step it came from (imported runs).
        event_text: source text by step, shown as each event's excerpt.
        flag_places: hard flag id -> where in the run it was raised
            (:func:`flag_context`); None: no places shown.
    """
    events = []
    for ev in x.events.values():
        step = event_step(ev.id) if event_step is not None else None
        if step is not None and event_text is not None:
            raw = event_text.get(step, "")
        else:
            raw = str(ev.fields.get("text", ""))
        facts = ", ".join(f"{k}={_text(v, 60)}" for k, v in ev.fields.items()
                          if k not in ("step", "text") and v not in (None, False, ""))
        events.append(EventView(ev.id, step, ev.type, ev.kind, ev.agent,
                                _text(raw, _EXCERPT), facts, ev.causes))
    certs = {c.id: CertificateView(c.id, c.validator, c.verdict, x.certificate_active(c.id),
                                   c.events) for c in x.certificates.values()}
    assertions = []
    for a in x.assertions.values():
        j = x.justifications.get(a.id)
        value = a.value
        if a.kind == AssertionKind.NODE and isinstance(value, dict):
            value = {k: v for k, v in value.items() if v not in (None, [], False)}
        assertions.append(AssertionView(
            a.id, a.obligation, str(a.kind), a.key, _text(value), a.proposer,
            j.operation if j else None, x.is_active(a.id), x.assertion_sound(a.id),
            j.events if j else (), tuple(certs[c] for c in (j.certificates if j else ())
                                         if c in certs)))
    in_w = set(x.evaluated())
    obligations = []
    for o in x.obligations.values():
        rels = []
        for (kind, key), aid in o.active.items():
            if kind == str(AssertionKind.RELATION):
                rels.append((key, str(x.assertions[aid].value)))
        obligations.append(ObligationView(
            o.id, o.kind, str(o.effective_status), o.assignee, o.parent, o.weight,
            x.is_sound(o.id), x.is_stable(o.id), o.id in in_w, o.deps, tuple(rels)))
    return tuple(obligations), tuple(assertions), tuple(events), flag_views(
        x, event_step, places=flag_places or None)


def flag_context(x: State) -> dict[str, FlagPlace]:
    """For each hard flag, where in the run it was raised.

    The number of proposals recorded before it, the last event added to G before it, and
    the source ``step`` field of the flagged proposal's events (imported runs; None when
    absent).
    """
    places = FlagPlaces()
    places.feed(x.entries)
    return places.at


def flag_views(x: State, event_step: Callable[[str], int | None] | None = None, *,
               places: Mapping[str, FlagPlace] | None = None) -> tuple[FlagView, ...]:
    """The :class:`FlagView` of every hard flag of X, with step, agent and cited records.

    Args:
        x: the state.
        event_step: maps an event to its source step (imported runs); without it the
            step is the proposal number the flag was raised at (live runs).
        places: where each flag was raised (``AuditResult.flag_places``, for a state
            that keeps no log); default: read from X's log.
    """
    ctx = flag_context(x) if places is None else places
    out = []
    for f in x.flags.values():
        n, last, pstep = ctx.get(f.id, (0, None, None))
        step: int | None = n or None
        if event_step is not None:
            step = pstep if pstep is not None else (
                event_step(last) if last is not None else None)
        agent = f.proposer
        if agent is None and last is not None and last in x.events:
            agent = x.events[last].agent  # e.g. the owner whose revision revoked evidence
        records = [r.subject for r in f.reasons if r.subject and is_record_id(r.subject)]
        for cid in f.certificates:
            c = x.certificates.get(cid)
            if c is not None:
                records += [ref.record_id for ref in c.records]
        out.append(FlagView(f.id, str(f.kind), f.detail, f.assertions, f.obligations,
                            agent, step, tuple(f"{r.code}: {r.detail}" for r in f.reasons),
                            tuple(dict.fromkeys(records)),
                            x.flag_resolution(f.id) is not None))
    return tuple(out)
