"""Readouts of X: normal form, observational equivalence, JSON export, full metrics.

See icore Sec. 3 and design.md 4.3.

:func:`normalize` renames fresh ids (events, assertions, certificates, flags) canonically
in order of first appearance, drops inessential timestamps and proposal ids, and keeps
everything observable: obligations with their assignees, statuses (effective),
results, coverage/compatibility claims, relations, terminal evidence, justifications,
certificate verdicts and activity, and hard flags. Two states are observationally
equivalent iff their normal forms are equal. Obligation ids are kept: they name work.
"""

from __future__ import annotations

from typing import Any

from icore.state._metrics import MatchedSet, Metrics
from icore.state._view import StateView


def _namer(prefix: str, ids: list[str]) -> dict[str, str]:
    return {x: f"{prefix}{i + 1}" for i, x in enumerate(ids)}


def normalize(state: StateView) -> dict[str, Any]:
    """The normal form of X under observational equivalence (design.md 4.3)."""
    ev = _namer("E", list(state.events))
    asr = _namer("A", list(state.assertions))
    cer = _namer("C", list(state.certificates))
    flg = _namer("F", list(state.flags))

    def r(m: dict[str, str], x: str | None) -> str | None:
        return None if x is None else m.get(x, f"?{x}")

    events = [
        {
            "id": ev[e.id],
            "type": e.type,
            "kind": e.kind,
            "agent": e.agent,
            "fields": dict(e.fields),
            "causes": [r(ev, c) for c in e.causes],
        }
        for e in state.events.values()
    ]
    obligations = {
        o.id: {
            "kind": o.kind,
            "weight": o.weight,
            "parent": o.parent,
            "deps": list(o.deps),
            "required_root": o.required_root,
            "status": str(o.effective_status),
            "assignee": o.assignee,
            "result": o.result,
            "active": {f"{k}:{key}": r(asr, a) for (k, key), a in sorted(o.active.items())},
        }
        for o in sorted(state.obligations.values(), key=lambda o: o.id)
    }
    assertions = [
        {
            "id": asr[a.id],
            "obligation": a.obligation,
            "kind": str(a.kind),
            "key": a.key,
            "value": a.value,
            "proposer": a.proposer,
            "active": state.is_active(a.id),
            "superseded_by": r(asr, state.superseded_by(a.id)),
            "sound": state.assertion_sound(a.id),
        }
        for a in state.assertions.values()
    ]
    pi = {
        asr[aid]: {
            "events": [r(ev, e) for e in j.events],
            "operation": j.operation,
            "certificates": [r(cer, c) for c in j.certificates],
            "cites": [r(asr, c) for c in j.cites],
        }
        for aid, j in state.justifications.items()
    }
    certificates = {
        cer[c.id]: {
            "validator": c.validator,
            "version": c.version,
            "events": [r(ev, e) for e in c.events],
            "records": [[x.key, x.record_id] for x in c.records],
            "payload": c.payload,
            "verdict": c.verdict,
            "active": state.certificate_active(c.id),
        }
        for c in state.certificates.values()
    }
    flags = [
        {
            "id": flg[f.id],
            "kind": str(f.kind),
            "obligations": list(f.obligations),
            "assertions": [r(asr, a) for a in f.assertions],
            "certificates": [r(cer, c) if c in cer else c for c in f.certificates],
            "proposer": f.proposer,
            "reasons": [str(x.code) for x in f.reasons],
            "resolved": state.flag_resolution(f.id) is not None,
        }
        for f in state.flags.values()
    ]
    return {
        "declaration": {"name": state.decl.name, "version": state.decl.version},
        "G": events,
        "Q": {"obligations": obligations, "assertions": assertions},
        "Pi": {"justifications": pi, "certificates": certificates},
        "flags": flags,
    }


def equivalent(a: StateView, b: StateView) -> bool:
    """True iff ``a`` and ``b`` are observationally equivalent (equal normal forms)."""
    return normalize(a) == normalize(b)


def export_json(state: StateView) -> dict[str, Any]:
    """Export X to JSON with original ids and times, plus its metrics."""
    m = state.metrics()
    return {
        "declaration": {
            "name": state.decl.name,
            "version": state.decl.version,
            "fingerprint": state.decl.fingerprint(),
        },
        "seq": state.seq,
        "G": [
            {
                "id": e.id,
                "type": e.type,
                "kind": e.kind,
                "agent": e.agent,
                "fields": dict(e.fields),
                "causes": list(e.causes),
                "t_ms": e.t_ms,
            }
            for e in state.events.values()
        ],
        "Q": {
            "obligations": [
                {
                    "id": o.id,
                    "kind": o.kind,
                    "weight": o.weight,
                    "parent": o.parent,
                    "deps": list(o.deps),
                    "required_root": o.required_root,
                    "status": str(o.effective_status),
                    "assignee": o.assignee,
                    "result": o.result,
                    "sound": state.is_sound(o.id),
                    "gain": state.gain(o.id),
                }
                for o in state.obligations.values()
            ],
            "assertions": [
                {
                    "id": a.id,
                    "obligation": a.obligation,
                    "kind": str(a.kind),
                    "key": a.key,
                    "value": a.value,
                    "proposer": a.proposer,
                    "proposal": a.proposal,
                    "active": state.is_active(a.id),
                    "sound": state.assertion_sound(a.id),
                }
                for a in state.assertions.values()
            ],
        },
        "Pi": {
            "justifications": {
                aid: {
                    "events": list(j.events),
                    "operation": j.operation,
                    "certificates": list(j.certificates),
                    "cites": list(j.cites),
                }
                for aid, j in state.justifications.items()
            },
            "certificates": [
                {
                    "id": c.id,
                    "validator": c.validator,
                    "version": c.version,
                    "events": list(c.events),
                    "records": [[x.key, x.record_id] for x in c.records],
                    "payload": c.payload,
                    "verdict": c.verdict,
                    "active": state.certificate_active(c.id),
                }
                for c in state.certificates.values()
            ],
        },
        "flags": [
            {
                "id": f.id,
                "kind": str(f.kind),
                "obligations": list(f.obligations),
                "assertions": list(f.assertions),
                "certificates": list(f.certificates),
                "proposal": f.proposal,
                "proposer": f.proposer,
                "reasons": [
                    {"code": str(x.code), "detail": x.detail, "subject": x.subject}
                    for x in f.reasons
                ],
                "detail": f.detail,
                "resolved": state.flag_resolution(f.id) is not None,
            }
            for f in state.flags.values()
        ],
        "metrics": {
            "snd": m.snd,
            "astab": m.astab,
            "cq": m.cq,
            "aggregate_gain": m.aggregate_gain,
            "total_weight": m.total_weight,
            "evaluated": m.evaluated,
            "epsilon": m.epsilon,
            "frechet": m.frechet,
            "performance_bound": m.performance_bound,
        },
    }


def full_metrics(state: StateView, over: MatchedSet | None = None) -> Metrics:
    """Full recompute over W(X) (or over a matched set); equals ``state.metrics(over)``."""
    if over is not None:
        return state.metrics(over)
    return state.recompute_metrics()
