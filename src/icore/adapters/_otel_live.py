"""Re-audit an icore live run from its exported spans (the OpenTelemetry round trip).

A live run exported by :class:`icore.adapters.OtelExporter` carries, on each span, the
step the run recorded in iCORE (``icore.call``, ``icore.seq`` and the step's arguments:
record ids and keys, the plan's requirement, gate outcomes, verdicts) and the run
manifest on the run span. :func:`audit_live_trace` replays those steps, in recorded
order, through a fresh :class:`icore.live.LiveAudit` over the same declaration package:
every proposal is audited again under icore Def. 6 and every owner revision revokes its
dependent certificates again, so X — and snd, astab, cq — are recomputed from the spans,
not read back from them. The event ids the replay produces are checked against the ids
the spans recorded, so a reordered, truncated or edited export is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from icore._clock import ManualClock
from icore.adapters import _otel_names as N
from icore.adapters._errors import AdapterError
from icore.adapters._results import AuditResult, Finding, MetricPoint, compact_diagnosis
from icore.adapters._trace import Trace
from icore.live import LiveAudit, LiveManifestError, manifest_from_dict
from icore.state import FlagKind


def _s(a: Mapping[str, Any], key: str, file: str, where: str) -> str:
    v = a.get(key)
    if not isinstance(v, str):
        raise AdapterError(f"missing string attribute {key!r}", file=file,
                           field=f"{where}.{key}")
    return v


def audit_live_trace(trace: Trace) -> AuditResult:
    """Replay an icore live run's exported steps through the live iCORE audit.

    Args:
        trace: a trace of family ``icore_live`` (:func:`icore.adapters.load_otlp`).

    Returns:
        The audited run; ``final`` holds the recomputed snd, astab and cq.

    Raises:
        AdapterError: the run span (manifest) is missing or invalid, a step lacks an
            attribute it needs, or the replayed event ids differ from the recorded ones.
    """
    t0 = time.perf_counter()
    file = trace.file
    raw = trace.extras.get("icore_manifest")
    if not isinstance(raw, str):
        raise AdapterError("no icore run span with the run manifest", file=file,
                           field=N.RUN_MANIFEST)
    try:
        manifest = manifest_from_dict(json.loads(raw), file=file)
    except (json.JSONDecodeError, LiveManifestError) as exc:
        raise AdapterError(f"invalid run manifest: {exc}", file=file,
                           field=N.RUN_MANIFEST) from None
    audit = LiveAudit(manifest, None, ManualClock())
    timeline: list[MetricPoint] = []
    replans = 0
    for c in trace.extras.get("icore_calls", ()):
        a: Mapping[str, Any] = c["attributes"]
        call = str(c["call"])
        where = f"span {c['span']} ({call})"
        task = _s(a, N.TASK, file, where)
        agent = a.get(N.AGENT_ID)
        ag = str(agent) if isinstance(agent, str) else ""
        rec = {"id": a.get(N.RECORD_ID), "key": a.get(N.RECORD_KEY)}
        eid: str | None
        if call == "introduce":
            audit.introduce(task)
            eid = None
        elif call == "committed":
            eid = audit.committed(task, _s(a, N.EVENT_TYPE, file, where), ag, rec)
        elif call == "revised":
            audit.revised(task, ag, rec)
            eid = None
        elif call == "planned":
            replan = bool(a.get(N.REPLAN))
            replans += replan
            audit.planned(task, ag, {**rec, "content": {"args": {
                "option": a.get(N.PLAN_OPTION)}}}, _s(a, N.PLAN_REQ_KEY, file, where),
                _s(a, N.PLAN_REQ_ID, file, where), replan=replan)
            eid = None
        elif call == "gate":
            eid = audit.gate(task, ag, {
                "outcome": a.get(N.G + "outcome"), "reason": a.get(N.G + "reason"),
                "policy": a.get(N.G + "policy"), "replanned": a.get(N.G + "replanned"),
                "point": a.get(N.G + "point")})
        elif call == "executed":
            audit.executed(task, ag, _s(a, N.TOOL_NAME, file, where),
                           _s(a, N.OPTION, file, where), _s(a, N.GATE_EVENT, file, where),
                           _s(a, N.LINEAGE_KEY, file, where),
                           _s(a, N.LINEAGE_FRONTIER, file, where))
            eid = None
        elif call == "audited":
            audit.audited(task, ag, _s(a, N.AUDIT_VERDICT, file, where),
                          _s(a, N.AUDIT_REQ_KEY, file, where), _s(a, N.AUDIT_REQ_ID, file, where))
            eid = None
        elif call in ("failed", "event"):
            fields = json.loads(str(a.get(N.EVENT_FIELDS) or "{}"))
            if call == "failed":
                audit.failed(task, _s(a, N.OBLIGATION, file, where),
                             _s(a, N.EVENT_TYPE, file, where), ag, fields)
                eid = None
            else:
                causes = a.get(N.EVENT_CAUSES)
                eid = audit.event(task, _s(a, N.EVENT_TYPE, file, where), ag, fields,
                                  [str(x) for x in causes] if isinstance(causes, list) else ())
        else:
            raise AdapterError(f"unknown icore step {call!r}", file=file, field=f"{where}.{N.CALL}")
        recorded = a.get(N.EVENT_ID)
        if eid is not None and isinstance(recorded, str) and recorded != eid:
            raise AdapterError(f"replayed event {eid} differs from the recorded {recorded}: "
                               "the export is reordered, truncated or edited", file=file,
                               field=f"{where}.{N.EVENT_ID}")
        m = audit.state.metrics()
        timeline.append(MetricPoint(int(c["seq"]), m.snd, m.astab, m.cq, len(audit.state.flags), 0))
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
