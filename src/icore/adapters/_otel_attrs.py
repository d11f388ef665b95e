"""OpenTelemetry attributes of gate decisions and audited steps (GenAI guardrail spans).

Part of :mod:`icore.adapters._otel_export` (split for size, issue 26).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from icore._line_chain import CHAIN, ChainWriter
from icore._line_digest import attributes_digest
from icore.adapters import _otel_names as N
from icore.fence import DecisionEntry, GateDecision

AttrValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]


def _now() -> int:
    return time.time_ns()


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str, separators=(",", ":"))


def decision_attributes(d: Mapping[str, Any] | DecisionEntry, *,
                        prefix: str = N.G) -> dict[str, AttrValue]:
    """OTel attributes of one gate decision (a :class:`~icore.fence.DecisionEntry` or its dict).

    Maps become parallel arrays (``<prefix>frontier.keys`` / ``.ids``), since attribute
    values cannot be maps; record sequences are given for fresh records when known
    (``<prefix>fresh.seqs``).
    """
    if isinstance(d, DecisionEntry):
        d = d.to_dict()
    out: dict[str, AttrValue] = {}
    for k in ("outcome", "reason", "action", "policy", "detail"):
        if d.get(k) is not None:
            out[prefix + k] = str(d[k])
    for k in ("replanned",):
        if d.get(k) is not None:
            out[prefix + k] = bool(d[k])
    for k in ("point", "owners_contacted", "heads_checked"):
        if isinstance(d.get(k), int):
            out[prefix + k] = int(d[k])
    if isinstance(d.get("at_ms"), int | float):
        out[prefix + "at_ms"] = float(d["at_ms"])
    out[prefix + "roots"] = [str(r) for r in d.get("roots") or ()]
    out[prefix + "deps"] = [str(r) for r in d.get("deps") or ()]
    for m in ("frontier", "heads", "fresh"):
        v = d.get(m) or {}
        keys = sorted(v)
        out[f"{prefix}{m}.keys"] = keys
        out[f"{prefix}{m}.ids"] = [str(v[k]) for k in keys]
    seqs = d.get("fresh_seqs")
    if isinstance(seqs, Mapping):
        out[prefix + "fresh.seqs"] = [int(seqs.get(k, -1)) for k in sorted(d.get("fresh") or {})]
    return out


def guardrail_attributes(d: Mapping[str, Any]) -> dict[str, AttrValue]:
    """The GenAI guardrail attributes of one gate decision (``apply_guardrail``).

    semantic-conventions-genai, "GenAI guardrails": the component is ``PlanFence``, the
    policy id the gate's policy, the source ``tool_input`` (the gate judges a tool call
    before it runs), and the result the gate's own ``outcome`` field and value
    (``authorized`` / ``replan_required`` / ``blocked``) with its reason code, kept as
    the gate reports them (no allow/deny translation).
    """
    out: dict[str, AttrValue] = {
        N.OPERATION: N.APPLY_GUARDRAIL, N.PROVIDER: "icore", N.GR_COMPONENT: N.GATE_COMPONENT,
        N.GR_SOURCE: N.GATE_SOURCE, N.GR_RESULT_TYPE: N.GATE_RESULT,
        N.GR_RESULT_VALUE: str(d.get("outcome"))}
    if d.get("policy"):
        out[N.GR_POLICY] = str(d["policy"])
    if d.get("reason"):
        out[N.GR_RESULT_REASON] = str(d["reason"])
    return out


class SpanChain:
    """An exporter's chains over the spans it digests, one per trace (thread-safe; #29).

    Each gate decision's and human answer's span gets ``<prefix>digest``
    (:func:`icore._line_digest.attributes_digest`) and its link, ``icore.chain.writer``,
    ``.seq`` and ``.prev`` (:class:`icore._line_chain.ChainWriter`), so the audit sees a
    span lost or repeated between the exporter and the file. One chain per trace (the
    audit reads each trace of a file as its own run, so one chain over an exporter's
    several runs read as broken in every run after the first); its writer id is the
    exporter's random id and the chain's number. A trace's seal (``icore.chain_end.*``: how
    many spans its chain holds, the link of its last) goes on its root span at its end
    (:meth:`end`): a live run's span, a root ``execute_tool`` span, a gate or answer span
    with no parent; so a span lost after the last one is seen. The chains of the
    :data:`TRACES` most recent traces are kept.
    """

    TRACES = 4096
    """How many traces' chains are kept (the least recently used one is dropped)."""

    def __init__(self) -> None:
        self._id = secrets.token_hex(8)
        self._chains: OrderedDict[int, ChainWriter] = OrderedDict()
        self._made = 0
        self._lock = threading.Lock()

    def _chain(self, trace_id: int) -> ChainWriter:
        got = self._chains.get(trace_id)
        if got is None:
            self._made += 1  # a fresh writer id per chain (a trace sealed, then resumed)
            got = self._chains[trace_id] = ChainWriter(f"{self._id}-{self._made}")
            if len(self._chains) > self.TRACES:
                self._chains.popitem(last=False)
        else:
            self._chains.move_to_end(trace_id)
        return got

    def end(self, span: Span) -> None:
        """Seal ``span``'s trace chain on ``span`` (its root, ending now) and forget it.

        Nothing when no span of its trace was chained.
        """
        tid = span.get_span_context().trace_id
        with self._lock:
            chain = self._chains.pop(tid, None)
        if chain is not None:
            span.set_attributes({N.CHAIN_END + k: v for k, v in chain.seal().items()})

    def seal(self, span: Span, attrs: dict[str, AttrValue], prefix: str, *,
             root: bool = False) -> None:
        """Put on ``span`` its digest and its link in its trace's chain.

        The digest is over the ``prefix`` attributes of ``attrs`` (those ``span`` was
        started with). ``root``: ``span`` is its trace's root (no parent): sealed at
        once (:meth:`end`).
        """
        got = attributes_digest(attrs, prefix)
        with self._lock:
            link = self._chain(span.get_span_context().trace_id).chained(
                {"digest": got})[CHAIN]
        span.set_attributes({prefix + "digest": got, N.CHAIN + "writer": link["writer"],
                             N.CHAIN + "seq": link["seq"], N.CHAIN + "prev": link["prev"]})
        if root:
            self.end(span)


def is_root(context: Any = None) -> bool:
    """Whether a span started in ``context`` (None: the current one) has no parent."""
    return not trace.get_current_span(context).get_span_context().is_valid


def _guardrail_span(tracer: trace.Tracer, d: Mapping[str, Any], extra: Mapping[str, AttrValue],
                    *, context: Any = None, start: int | None = None,
                    chain: SpanChain | None = None) -> Span:
    """An ``apply_guardrail PlanFence`` span for one decision, with its result event.

    With ``chain``: the decision's digest and its link in its trace's chain (#29).
    """
    attrs = {**extra, **decision_attributes(d), **guardrail_attributes(d),
             N.SPAN_KIND: "GUARDRAIL", N.DECISION: str(d.get("outcome")),
             N.REASON: str(d.get("reason"))}
    root = is_root(context)
    span = tracer.start_span(f"{N.APPLY_GUARDRAIL} {N.GATE_COMPONENT}", context=context,
                             start_time=start, kind=SpanKind.CLIENT, attributes=attrs)
    if chain is not None:
        chain.seal(span, attrs, N.G, root=root)
    span.add_event(N.EV_GUARDRAIL_RESULT, {k: v for k, v in attrs.items()
                                           if k.startswith("gen_ai.guardrail.")})
    return span


def _decision_dict(d: GateDecision) -> dict[str, Any]:
    out = d.to_dict()
    out["fresh_seqs"] = {k: r.seq for k, r in d.fresh.items()}
    return out


def _outcome_events(span: Span, outcome: Mapping[str, Any]) -> None:
    """Verdicts (attributes), hard flags and metrics (span events) of one audited step."""
    verdicts = outcome.get("verdicts") or ()
    if verdicts:  # attributes, not events: one set call per step (export cost)
        span.set_attributes({
            "icore.verdict.operations": [str(v.get("operation")) for v in verdicts],
            "icore.verdict.targets": [str(v.get("target")) for v in verdicts],
            "icore.verdict.decisions": [str(v.get("decision")) for v in verdicts],
            "icore.verdict.reasons": ["; ".join(map(str, v.get("reasons") or ()))
                                      for v in verdicts]})
    for f in outcome.get("flags") or ():
        span.add_event(N.EV_FLAG, {
            "icore.flag.id": str(f.get("id")), "icore.flag.kind": str(f.get("kind")),
            "icore.flag.obligations": [str(o) for o in f.get("obligations") or ()],
            "icore.flag.assertions": [str(a) for a in f.get("assertions") or ()],
            "icore.flag.detail": str(f.get("detail", ""))})
    if "cq" in outcome:
        span.add_event(N.EV_METRICS, {"icore.snd": float(outcome["snd"]),
                                      "icore.astab": float(outcome["astab"]),
                                      "icore.cq": float(outcome["cq"])})
