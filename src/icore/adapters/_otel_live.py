"""Re-audit an icore live run from its exported spans (the OpenTelemetry round trip).

A live run exported by :class:`icore.adapters.OtelExporter` carries, on each span, the
step the run recorded in iCORE (``icore.call``, ``icore.seq`` and the step's arguments:
record ids and keys, the plan's requirement, gate outcomes, verdicts) and the run
manifest on the run span. :func:`audit_live_trace` replays those steps, in recorded
order, through a fresh :class:`icore.live.LiveAudit` over the same declaration package:
every proposal is audited again under icore Def. 6 and every owner revision revokes its
dependent certificates again, so X — and snd, astab, cq — are recomputed from the spans,
not read back from them. Every step's replayed outcome (the id of the event it added to
G, the decisions and targets of the proposals it submitted) is checked against what its
span recorded, and every attribute the replay reads is type-checked, so a reordered,
truncated or edited export (a step moved to another task, an outcome changed to a
number, a JSON field that is not an object) is refused with an :class:`AdapterError`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from icore._clock import ManualClock
from icore.adapters import _otel_names as N
from icore.adapters._decision_check import OUTCOMES
from icore.adapters._errors import AdapterError
from icore.adapters._results import AuditResult, Finding, MetricPoint, compact_diagnosis
from icore.adapters._trace import Trace
from icore.errors import IcoreError
from icore.live import LiveAudit, LiveManifestError, manifest_from_dict
from icore.records import is_record_id
from icore.state import FlagKind


def _s(a: Mapping[str, Any], key: str, file: str, where: str) -> str:
    v = a.get(key)
    if not isinstance(v, str):
        raise AdapterError(f"missing string attribute {key!r}", file=file,
                           field=f"{where}.{key}")
    return v


def _opt_s(a: Mapping[str, Any], key: str, file: str, where: str) -> str | None:
    v = a.get(key)
    if v is not None and not isinstance(v, str):
        raise AdapterError(f"attribute {key!r} must be a string, not {type(v).__name__}",
                           file=file, field=f"{where}.{key}")
    return v


def _rid(a: Mapping[str, Any], key: str, file: str, where: str, *,
         required: bool = False) -> str | None:
    """A record id attribute: 64 lowercase hex digits (what a live run records)."""
    v = _s(a, key, file, where) if required else _opt_s(a, key, file, where)
    if v is not None and not is_record_id(v):
        raise AdapterError(f"not a record id (64 lowercase hex digits): {v[:70]!r}",
                           file=file, field=f"{where}.{key}")
    return v


def _record(a: Mapping[str, Any], file: str, where: str) -> dict[str, Any]:
    """The step's record (id, key), its sequence number checked when recorded."""
    seq = a.get(N.RECORD_SEQ)
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 1):
        raise AdapterError(f"must be an integer >= 1, not {seq!r}", file=file,
                           field=f"{where}.{N.RECORD_SEQ}")
    return {"id": _rid(a, N.RECORD_ID, file, where),
            "key": _opt_s(a, N.RECORD_KEY, file, where)}


def _flag(a: Mapping[str, Any], key: str, file: str, where: str) -> bool:
    v = a.get(key)
    if v is not None and not isinstance(v, bool):
        raise AdapterError(f"must be a boolean, not {v!r}", file=file, field=f"{where}.{key}")
    return bool(v)


def _fields(a: Mapping[str, Any], file: str, where: str) -> dict[str, Any]:
    raw = a.get(N.EVENT_FIELDS)
    if raw is None or raw == "":
        return {}
    try:
        v = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):  # malformed, a 5000-digit integer, too deep
        v = None
    if not isinstance(v, dict):
        raise AdapterError("must be a JSON object (the event's fields)", file=file,
                           field=f"{where}.{N.EVENT_FIELDS}")
    return v


_GATE_STR = ("outcome", "reason", "policy")


def _check_outcome(a: Mapping[str, Any], told: Mapping[str, Any] | None, file: str,
                   where: str) -> None:
    """The replayed step's outcome must be the one its span recorded."""
    if told is None:
        raise AdapterError("the step did nothing on replay: the export is edited",
                           file=file, field=where)
    recorded = a.get(N.EVENT_ID)
    eid = told.get("event")
    if recorded is not None and eid is not None and recorded != eid:
        raise AdapterError(f"replayed event {eid} differs from the recorded {recorded}: "
                           "the export is reordered, truncated or edited", file=file,
                           field=f"{where}.{N.EVENT_ID}")
    verdicts = told.get("verdicts") or ()
    for key, part in (("icore.verdict.decisions", "decision"),
                      ("icore.verdict.targets", "target")):
        got = [str(v.get(part)) for v in verdicts]
        rec = a.get(key)
        if rec is None and not got:
            continue
        if not isinstance(rec, list) or [str(x) for x in rec] != got:
            raise AdapterError(f"replayed {part}s {got} differ from the recorded {rec!r}: "
                               "the export is reordered, truncated or edited", file=file,
                               field=f"{where}.{key}")


def audit_live_trace(trace: Trace) -> AuditResult:
    """Replay an icore live run's exported steps through the live iCORE audit.

    Args:
        trace: a trace of family ``icore_live`` (:func:`icore.adapters.load_otlp`).

    Returns:
        The audited run; ``final`` holds the recomputed snd, astab and cq.

    Raises:
        AdapterError: the run span (manifest) is missing or invalid, a step lacks an
            attribute it needs, the replayed event ids differ from the recorded ones, a
            gate decision its policy never makes (``planfence`` with ``not_validated``),
            or a task span records an audit verdict
            that no ``audited`` step replays (the last step cut off; QA r8-bad D23).
    """
    t0 = time.perf_counter()
    file = trace.file
    raw = trace.live.manifest if trace.live is not None else None
    if not isinstance(raw, str):
        raise AdapterError("no icore run span with the run manifest", file=file,
                           field=N.RUN_MANIFEST)
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise AdapterError(f"run manifest must be a JSON object, not "
                               f"{type(doc).__name__}", file=file, field=N.RUN_MANIFEST)
        manifest = manifest_from_dict(doc, file=file)
    except (ValueError, RecursionError, LiveManifestError) as exc:  # ValueError: JSON
        raise AdapterError(f"invalid run manifest: {exc}", file=file,
                           field=N.RUN_MANIFEST) from None
    told: list[Mapping[str, Any]] = []
    audit = LiveAudit(manifest, None, ManualClock(),
                      listener=lambda _call, _task, _args, outcome: told.append(outcome))
    timeline: list[MetricPoint] = []
    replans = 0
    verdicts: dict[str, str] = {}  # task -> its task span, while its audited step is due
    for c in (trace.live.calls if trace.live is not None else ()):
        a: Mapping[str, Any] = c["attributes"]
        call = str(c["call"])
        where = f"span {c['span']} ({call})"
        task = _s(a, N.TASK, file, where)
        ag = _opt_s(a, N.AGENT_ID, file, where) or ""
        rec = _record(a, file, where)
        del told[:]
        try:
            if call == "introduce":
                audit.introduce(task)
            elif call == "committed":
                audit.committed(task, _s(a, N.EVENT_TYPE, file, where), ag, rec)
            elif call == "revised":
                audit.revised(task, ag, rec)
            elif call == "planned":
                replan = _flag(a, N.REPLAN, file, where)
                replans += replan
                audit.planned(task, ag, {**rec, "content": {"args": {
                    "option": _opt_s(a, N.PLAN_OPTION, file, where)}}},
                    _s(a, N.PLAN_REQ_KEY, file, where),
                    str(_rid(a, N.PLAN_REQ_ID, file, where, required=True)), replan=replan)
            elif call == "gate":
                for k in _GATE_STR:
                    _opt_s(a, N.G + k, file, where)
                if a.get(N.G + "outcome") not in (None, *OUTCOMES):
                    raise AdapterError(f"unknown outcome {a.get(N.G + 'outcome')!r}",
                                       file=file, field=f"{where}.{N.G}outcome")
                if a.get(N.G + "policy") == "planfence" and \
                        a.get(N.G + "reason") == "not_validated":
                    raise AdapterError("PlanFence never authorizes without validating "
                                       "(reason 'not_validated' is made only by the "
                                       "policies that do not validate): the export is "
                                       "edited", file=file, field=f"{where}.{N.G}policy")
                if not isinstance(a.get(N.G + "replanned"), bool | None):
                    raise AdapterError("must be a boolean", file=file,
                                       field=f"{where}.{N.G}replanned")
                point = a.get(N.G + "point")
                if point is not None and (isinstance(point, bool) or not isinstance(point, int)
                                          or point < 0):
                    raise AdapterError("must be an integer >= 0 (the gate's decision point)",
                                       file=file, field=f"{where}.{N.G}point")
                audit.gate(task, ag, {
                    "outcome": a.get(N.G + "outcome"), "reason": a.get(N.G + "reason"),
                    "policy": a.get(N.G + "policy"), "replanned": a.get(N.G + "replanned"),
                    "point": a.get(N.G + "point")})
            elif call == "executed":
                audit.executed(task, ag, _s(a, N.TOOL_NAME, file, where),
                               _s(a, N.OPTION, file, where), _s(a, N.GATE_EVENT, file, where),
                               _s(a, N.LINEAGE_KEY, file, where),
                               _s(a, N.LINEAGE_FRONTIER, file, where))
            elif call == "audited":
                audit.audited(task, ag, _s(a, N.AUDIT_VERDICT, file, where),
                              _s(a, N.AUDIT_REQ_KEY, file, where),
                              str(_rid(a, N.AUDIT_REQ_ID, file, where, required=True)))
            elif call in ("failed", "event"):
                fields = _fields(a, file, where)
                if call == "failed":
                    audit.failed(task, _s(a, N.OBLIGATION, file, where),
                                 _s(a, N.EVENT_TYPE, file, where), ag, fields)
                else:
                    causes = a.get(N.EVENT_CAUSES)
                    audit.event(task, _s(a, N.EVENT_TYPE, file, where), ag, fields,
                            [str(x) for x in causes] if isinstance(causes, list) else ())
            else:
                raise AdapterError(f"unknown icore step {call!r}", file=file,
                                   field=f"{where}.{N.CALL}")
        except AdapterError:
            raise
        except IcoreError as exc:  # the replayed step is invalid in X: an edited export
            raise AdapterError(f"the recorded step does not replay: {exc}", file=file,
                               field=where) from None
        _check_outcome(a, told[-1] if told else None, file, where)
        if call == "introduce" and a.get(N.AUDIT_VERDICT) is not None:
            verdicts[task] = where
        elif call == "audited":
            verdicts.pop(task, None)
        m = audit.state.metrics()
        timeline.append(MetricPoint(int(c["seq"]), m.snd, m.astab, m.cq, len(audit.state.flags), 0))
    for task, where in verdicts.items():  # the task's audit recorded, its step gone
        raise AdapterError(f"task {task!r} records an audit verdict but no audited step "
                           "replays it: the export is truncated or edited", file=file,
                           field=f"{where}.{N.AUDIT_VERDICT}")
    x = audit.state
    diagnoses = []
    for n, f in enumerate(x.flags.values(), start=1):
        d = audit.diagnoses.get(f.id)  # F of the run's own hard_flag trigger
        if d is not None:
            diagnoses.append(Finding(f"d{n}", d.defect, None, tuple(f.obligations),
                                     tuple(f.assertions), (), f.proposer, d.responsible,
                                     f.detail, "icore.audit", compact_diagnosis(d)))
            continue
        defect = "work" if f.kind == FlagKind.UNSUPPORTED_ASSERTION else "evidence"
        diagnoses.append(Finding(f"d{n}", defect, None, tuple(f.obligations),
                                 tuple(f.assertions), (), f.proposer, f.proposer, f.detail,
                                 "icore.live"))
    unsupported = tuple(a for f in x.flags.values() if f.kind == FlagKind.UNSUPPORTED_ASSERTION
                        for a in f.assertions)
    return AuditResult(trace=trace, state=x, step_events={}, timeline=tuple(timeline),
                       diagnoses=tuple(diagnoses), unsupported=unsupported, stalls=0,
                       replans=replans, final=x.metrics(),
                       elapsed_ms=(time.perf_counter() - t0) * 1000.0, terminated=True)


__all__ = ["audit_live_trace"]
