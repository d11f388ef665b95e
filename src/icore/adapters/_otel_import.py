"""OpenTelemetry in: OTLP JSON, Phoenix and Langfuse exports into a :class:`Trace`.

Reads, without the ``otel`` extra (plain JSON):

- **OTLP JSON**: one ``ExportTraceServiceRequest`` document (``{"resourceSpans": [...]}``)
  or JSON lines of them — the OpenTelemetry Collector's file exporter format and what
  :class:`icore.adapters.OtlpJsonFileExporter` writes. Ids may be hex (OTLP/JSON) or
  base64 (the generic protobuf JSON mapping); snake_case keys are accepted too.
- **Phoenix** span exports (``phoenix.client.Client().spans.get_spans(...)`` / the REST
  API ``/v1/projects/{id}/spans``): a list (or ``{"data": [...]}``) of spans with
  ``context.span_id``, ``parent_id``, ``span_kind``, ISO times and nested attributes.
- **Langfuse** trace exports: a trace with ``observations`` (or a list of observations)
  with ``type``, ``parentObservationId``, ``input``/``output``, ``level``.
- **Jaeger**: its own JSON (the UI's "Download", ``/api/traces``: ``{"data": [{"traceID",
  "spans": [...]}]}``, tags, references, µs times) and its OTLP API (``/api/v3/traces``:
  ``{"result": {"resourceSpans": [...]}}``).

Mapping into the source-neutral trace (docs/observability.md, "Auditing a trace"):

- agent spans (OpenInference ``AGENT``, GenAI ``invoke_agent``/``create_agent``, Langfuse
  ``AGENT``) -> agents and their turns (``output`` steps, the output text as content);
- LLM spans (``LLM``, ``chat``/``text_completion``/``generate_content``, Langfuse
  ``GENERATION``) -> outputs of the enclosing agent;
- tool spans (``TOOL``, ``execute_tool``, Langfuse ``TOOL``) -> tool outputs, exit code 1
  when the span's status is ERROR, else 0;
- handoffs (a span named ``handoff``/``transfer_to_<agent>``, or with
  ``handoff.to``/``to_agent``) -> instructions assigning the next turn to the target;
- one trace -> one run (:func:`load_otlp_runs` splits a file holding several);
- the root span -> the task (its input) and, once it ended, the termination (its output
  is the final answer);
- parent/child -> causes (each step's parent is the nearest ancestor that is a step);
- every other span kind (chains, retrievers, guardrails, evaluators, ...) -> kept as
  ``thought`` events naming the kind, and counted in ``extras["unknown_spans"]``.

icore's own live-run spans (attribute ``icore.call``) also carry the run's recorded
steps; such a trace has family ``icore_live`` and is re-audited by replaying those
steps through the live run's iCORE audit (:func:`icore.adapters.audit_trace`).

Anything that is not one of these formats raises :class:`AdapterError` naming the field.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from icore._files import not_a_regular_file
from icore.adapters import _otel_names as N
from icore.adapters._errors import AdapterError
from icore.adapters._trace import AgentNames, Step, StepKind, Trace
from icore.adapters._values import (
    MAX_NS,
    check_size,
    finite_float,
    gc_paused,
    integer,
    time_ns,
)

OTEL = "otel"
"""Family of a trace imported from generic OpenTelemetry / OpenInference spans."""
ICORE_LIVE = "icore_live"
"""Family of an icore live run exported by :class:`icore.adapters.OtelExporter`."""

_SUFFIXES = (".otlp.json", ".otlp.jsonl", ".otel.json", ".otel.jsonl")
_AGENT_OPS = {"invoke_agent", "create_agent"}
_LLM_OPS = {"chat", "text_completion", "generate_content", "embeddings"}
_TOOL_OPS = {"execute_tool"}
_HEX = re.compile(r"[0-9a-fA-F]+")
_HANDOFF_NAME = re.compile(r"^(handoff|transfer_to_(?P<to>.+))$", re.IGNORECASE)


@dataclass(slots=True)
class OtelSpan:
    """One span, whatever the source format (times in ns since the epoch).

    Attributes:
        trace_id / span_id / parent_id: ids as lowercase hex ('' parent for a root).
        name: span name.
        kind: the source's span kind (OTLP: 1..5; Phoenix/Langfuse: their kind string).
        start_ns / end_ns: start and end (0 when unknown).
        attributes: flattened attributes (dotted keys).
        events: ``(name, time ns, attributes)``.
        status: ``OK``, ``ERROR`` or ``UNSET``.
        status_message: the status description.
        resource: attributes of the span's resource.
        scope: instrumentation scope name.
    """

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    status: str = "UNSET"
    status_message: str = ""
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str = ""


def is_otel_path(path: str | Path) -> bool:
    """True for a name the OTLP importer claims (``*.otlp.json``, ``*.otlp.jsonl``, ...)."""
    return str(path).lower().endswith(_SUFFIXES)


def sniff_otel(head: str) -> bool:
    """True when the start of a JSON document looks like OTLP / Phoenix / Langfuse spans."""
    h = head[:8192]
    return any(k in h for k in ('"resourceSpans"', '"resource_spans"', '"scopeSpans"',
                                '"operationName"')) or (
        '"context"' in h and '"span_id"' in h) or '"parentObservationId"' in h or (
        '"observations"' in h and '"traceId"' in h)


# ------------------------------------------------------------------------- value decoding
def _any(v: Any, file: str, where: str) -> Any:
    """Decode an OTLP ``AnyValue`` (``{"stringValue": ...}``)."""
    if not isinstance(v, dict):
        raise AdapterError("attribute value must be an AnyValue object", file=file, field=where)
    if not v:
        return None
    k, x = next(iter(v.items()))  # an AnyValue holds one field
    if k in ("stringValue", "string_value"):
        return str(x)
    if k in ("boolValue", "bool_value"):
        if isinstance(x, bool):
            return x
        if x in ("true", "false"):
            return x == "true"
        raise AdapterError(f"boolValue is not a boolean: {x!r}", file=file,
                           field=where)
    if k in ("intValue", "int_value"):  # int64 (a decimal string in OTLP/JSON)
        return integer(x, file=file, field=where, lo=-(2**63), hi=2**63 - 1)
    if k in ("doubleValue", "double_value"):
        return finite_float(x, file=file, field=where)
    if k in ("arrayValue", "array_value"):
        vals = (x or {}).get("values", []) if isinstance(x, dict) else []
        return [_any(e, file, f"{where}.arrayValue.values[{i}]") for i, e in enumerate(vals)]
    if k in ("kvlistValue", "kvlist_value"):
        vals = (x or {}).get("values", []) if isinstance(x, dict) else []
        return _kvs(vals, file, f"{where}.kvlistValue")
    if k in ("bytesValue", "bytes_value"):
        return str(x)
    raise AdapterError(f"unknown AnyValue type {k!r}", file=file, field=where)


def _kvs(items: Any, file: str, where: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise AdapterError("attributes must be a list of {key, value}", file=file, field=where)
    out: dict[str, Any] = {}
    for i, kv in enumerate(items):
        key = kv.get("key") if isinstance(kv, dict) else None
        if not isinstance(key, str):
            raise AdapterError("attribute needs a string 'key'", file=file,
                               field=f"{where}[{i}].key")
        v = kv.get("value", {})
        if isinstance(v, dict) and len(v) == 1:  # fast path: one string or int AnyValue
            (k, x), = v.items()
            if type(x) is str:
                if k == "stringValue":
                    out[key] = x
                    continue
                if k == "intValue" and x.isascii() and x.isdigit() and len(x) <= 18:
                    out[key] = int(x)
                    continue
        out[key] = _any(v, file, f"{where}[{i}].value")
    return out


def _hex_id(v: Any, n: int, file: str, where: str, *, optional: bool = False) -> str:
    """An id as lowercase hex of ``n`` bytes (accepts hex or base64)."""
    if v is None or v == "":
        if optional:
            return ""
        raise AdapterError("missing id", file=file, field=where)
    if not isinstance(v, str):
        raise AdapterError(f"id must be a string, not {type(v).__name__}", file=file,
                           field=where)
    s = v.strip()
    if len(s) == 2 * n:
        try:
            int(s, 16)
            return s.lower()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == n:
        return raw.hex()
    if _HEX.fullmatch(s):
        return s.lower().rjust(2 * n, "0")
    if optional and not s.strip("0"):
        return ""
    return s  # a source-specific id (e.g. Langfuse uuids): keep it as is


def _ns(v: Any, file: str, where: str) -> int:
    """A time in ns (:func:`icore.adapters._values.time_ns`)."""
    return time_ns(v, file=file, field=where)


def _list(v: Any, file: str, where: str) -> list[Any]:
    """A list field (None: empty)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise AdapterError(f"must be a list, not {type(v).__name__}", file=file, field=where)
    return v


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested attribute maps (Phoenix) -> dotted keys (``llm.model_name``)."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                out.update(_flatten(v, key))
            else:
                out[key] = v
    return out


_OTLP_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_UNSET": "UNSET",
                "STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"}


# ------------------------------------------------------------------------------ readers
def _otlp_spans(doc: Mapping[str, Any], file: str, where: str) -> list[OtelSpan]:
    rs = doc.get("resourceSpans", doc.get("resource_spans"))
    if not isinstance(rs, list):
        raise AdapterError("resourceSpans must be a list", file=file,
                           field=f"{where}resourceSpans")
    out: list[OtelSpan] = []
    for i, r in enumerate(rs):
        w = f"{where}resourceSpans[{i}]"
        if not isinstance(r, dict):
            raise AdapterError("must be an object", file=file, field=w)
        res = r.get("resource") or {}
        if not isinstance(res, dict):
            raise AdapterError("resource must be an object", file=file, field=f"{w}.resource")
        rattrs = _kvs(res.get("attributes"), file, f"{w}.resource.attributes")
        scopes = r.get("scopeSpans", r.get("scope_spans",
                                           r.get("instrumentationLibrarySpans", [])))
        if not isinstance(scopes, list):
            raise AdapterError("scopeSpans must be a list", file=file, field=f"{w}.scopeSpans")
        for j, ss in enumerate(scopes):
            ws = f"{w}.scopeSpans[{j}]"
            if not isinstance(ss, dict):
                raise AdapterError("must be an object", file=file, field=ws)
            scope = ss.get("scope") or ss.get("instrumentationLibrary") or {}
            sname = str(scope.get("name", "")) if isinstance(scope, dict) else ""
            spans = ss.get("spans", [])
            if not isinstance(spans, list):
                raise AdapterError("spans must be a list", file=file, field=f"{ws}.spans")
            for k, sp in enumerate(spans):
                out.append(_otlp_span_fast(sp, rattrs, sname)
                           or _otlp_span(sp, file, f"{ws}.spans[{k}]", rattrs, sname))
    return out


_KEY_MEMO: dict[str, str] = {}
"""Attribute keys seen so far, one string object each (a key is a JSON *value* in OTLP,
so the parser makes a new string per span; sharing them cuts the spans' memory)."""


def _fast_kvs(items: Any) -> dict[str, Any] | None:
    """Attributes whose values are all plain strings or small ints, else None (slow path)."""
    if items is None:
        return {}
    if type(items) is not list:
        return None
    out: dict[str, Any] = {}
    memo = _KEY_MEMO
    for kv in items:
        if type(kv) is not dict:
            return None
        key = kv.get("key")
        v = kv.get("value")
        if type(key) is not str or type(v) is not dict or len(v) != 1:
            return None
        shared = memo.get(key)
        if shared is not None:
            key = shared
        elif len(memo) < 4096:
            memo[key] = key
        (k, x), = v.items()
        if type(x) is not str:
            return None
        if k == "stringValue":
            out[key] = x
        elif k == "intValue" and x.isascii() and x.isdigit() and len(x) <= 18:
            out[key] = int(x)
        else:
            return None
    return out


def _fast_hex(v: Any, n: int) -> str | None:
    """A plain ``n``-digit hex id, lowercased (what :func:`_hex_id` returns), else None."""
    if type(v) is str and len(v) == n and v.isascii() and v.isalnum():
        try:
            int(v, 16)
        except ValueError:
            return None
        return v.lower()
    return None


def _fast_ns(v: Any) -> int | None:
    if type(v) is str and v.isascii() and v.isdigit() and len(v) <= 19:
        t = int(v)
        return t if t <= MAX_NS else None
    return None


def _otlp_span_fast(sp: Any, rattrs: Mapping[str, Any], scope: str) -> OtelSpan | None:
    """The common well-formed span, built without per-field error context, else None.

    Anything unusual (base64 ids, events, other value types, a missing field, ...) returns
    None and the caller builds the span with :func:`_otlp_span`, which checks every field
    and names it in its errors: the result is the same span either way.
    """
    if type(sp) is not dict:
        return None
    g = sp.get
    name = g("name")
    status = g("status") or {}
    ev = g("events")
    if type(name) is not str or type(status) is not dict or not (ev is None or ev == []):
        return None
    code = status.get("code", 0)
    msg = status.get("message", "")
    tid = _fast_hex(g("traceId"), 32)
    sid = _fast_hex(g("spanId"), 16)
    start = _fast_ns(g("startTimeUnixNano"))
    end = _fast_ns(g("endTimeUnixNano"))
    attrs = _fast_kvs(g("attributes"))
    par = g("parentSpanId", g("parent_span_id"))
    pid = "" if par is None or par == "" else _fast_hex(par, 16)
    if (type(code) is not int or type(msg) is not str or tid is None or sid is None
            or start is None or end is None or attrs is None or pid is None):
        return None
    return OtelSpan(trace_id=tid, span_id=sid, parent_id=pid, name=name, kind=str(g("kind", 0)),
                    start_ns=start, end_ns=end, attributes=attrs, events=[],
                    status=_OTLP_STATUS.get(code, "UNSET"), status_message=msg,
                    resource=rattrs, scope=scope)


def _otlp_span(sp: Any, file: str, w: str, rattrs: Mapping[str, Any],
               scope: str) -> OtelSpan:
    if not isinstance(sp, dict):
        raise AdapterError("span must be an object", file=file, field=w)
    name = sp.get("name")
    if not isinstance(name, str):
        raise AdapterError("span needs a string 'name'", file=file, field=f"{w}.name")
    g = sp.get
    status = g("status") or {}
    if not isinstance(status, dict):
        raise AdapterError("status must be an object", file=file, field=f"{w}.status")
    code = status.get("code", 0)
    if not isinstance(code, int | str):
        raise AdapterError(f"status code must be an integer or name, not {code!r}",
                           file=file, field=f"{w}.status.code")
    events = []
    for i, e in enumerate(_list(g("events"), file, f"{w}.events")):
        if not isinstance(e, dict):
            raise AdapterError("event must be an object", file=file, field=f"{w}.events[{i}]")
        events.append((str(e.get("name", "")),
                       _ns(e.get("timeUnixNano", e.get("time_unix_nano")), file,
                           f"{w}.events[{i}].timeUnixNano"),
                       _kvs(e.get("attributes"), file, f"{w}.events[{i}].attributes")))
    return OtelSpan(
        trace_id=_hex_id(g("traceId", g("trace_id")), 16, file, f"{w}.traceId"),
        span_id=_hex_id(g("spanId", g("span_id")), 8, file, f"{w}.spanId"),
        parent_id=_hex_id(g("parentSpanId", g("parent_span_id")), 8, file,
                          f"{w}.parentSpanId", optional=True),
        name=name, kind=str(g("kind", 0)),
        start_ns=_ns(g("startTimeUnixNano", g("start_time_unix_nano")), file,
                     f"{w}.startTimeUnixNano"),
        end_ns=_ns(g("endTimeUnixNano", g("end_time_unix_nano")), file,
                   f"{w}.endTimeUnixNano"),
        attributes=_kvs(g("attributes"), file, f"{w}.attributes"), events=events,
        status=_OTLP_STATUS.get(code, "UNSET"),
        status_message=str(status.get("message", "")),
        resource=rattrs, scope=scope)


def _phoenix_spans(items: Sequence[Any], file: str, where: str) -> list[OtelSpan]:
    out = []
    for i, sp in enumerate(items):
        w = f"{where}[{i}]"
        if not isinstance(sp, dict):
            raise AdapterError("span must be an object", file=file, field=w)
        ctx = sp.get("context")
        if not isinstance(ctx, dict):
            raise AdapterError("span needs a 'context' object", file=file, field=f"{w}.context")
        name = sp.get("name")
        if not isinstance(name, str):
            raise AdapterError("span needs a string 'name'", file=file, field=f"{w}.name")
        attrs = sp.get("attributes") or {}
        if not isinstance(attrs, dict):
            raise AdapterError("attributes must be an object", file=file,
                               field=f"{w}.attributes")
        flat = _flatten(attrs)
        kind = str(sp.get("span_kind") or flat.get(N.SPAN_KIND) or "UNKNOWN")
        flat.setdefault(N.SPAN_KIND, kind)
        events = [(str(e.get("name", "")), _ns(e.get("timestamp"), file,
                                                 f"{w}.events[{j}].timestamp"),
                   _flatten(e.get("attributes") or {}))
                  for j, e in enumerate(_list(sp.get("events"), file, f"{w}.events"))
                  if isinstance(e, dict)]
        out.append(OtelSpan(
            trace_id=_hex_id(ctx.get("trace_id"), 16, file, f"{w}.context.trace_id"),
            span_id=_hex_id(ctx.get("span_id"), 8, file, f"{w}.context.span_id"),
            parent_id=_hex_id(sp.get("parent_id"), 8, file, f"{w}.parent_id", optional=True),
            name=name, kind=kind, start_ns=_ns(sp.get("start_time"), file, f"{w}.start_time"),
            end_ns=_ns(sp.get("end_time"), file, f"{w}.end_time"), attributes=flat,
            events=events, status=str(sp.get("status_code") or "UNSET").upper(),
            status_message=str(sp.get("status_message") or "")))
    return out


_LANGFUSE_KIND = {"SPAN": "CHAIN", "GENERATION": "LLM", "EVENT": "EVENT", "AGENT": "AGENT",
                  "TOOL": "TOOL", "CHAIN": "CHAIN", "RETRIEVER": "RETRIEVER",
                  "EVALUATOR": "EVALUATOR", "EMBEDDING": "EMBEDDING", "GUARDRAIL": "GUARDRAIL"}


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)


def _langfuse_spans(obs: Sequence[Any], file: str, where: str,
                    trace_id: str = "") -> list[OtelSpan]:
    out = []
    for i, o in enumerate(obs):
        w = f"{where}[{i}]"
        if not isinstance(o, dict):
            raise AdapterError("observation must be an object", file=file, field=w)
        if not isinstance(o.get("id"), str):
            raise AdapterError("observation needs a string 'id'", file=file, field=f"{w}.id")
        typ = str(o.get("type") or "SPAN").upper()
        kind = _LANGFUSE_KIND.get(typ, typ)
        meta: dict[str, Any] = o["metadata"] if isinstance(o.get("metadata"), dict) else {}
        attrs = _flatten(meta.get("attributes") if isinstance(meta.get("attributes"), dict)
                         else {})
        attrs.setdefault(N.SPAN_KIND, kind)
        attrs[N.OI_INPUT] = _text(o.get("input"))
        attrs[N.OI_OUTPUT] = _text(o.get("output"))
        if o.get("model"):
            attrs.setdefault(N.OI_MODEL, str(o["model"]))
        if kind == "AGENT":
            attrs.setdefault(N.AGENT_NAME, str(o.get("name") or ""))
        level = str(o.get("level") or "DEFAULT").upper()
        out.append(OtelSpan(
            trace_id=str(o.get("traceId") or trace_id), span_id=o["id"],
            parent_id=str(o.get("parentObservationId") or ""), name=str(o.get("name") or typ),
            kind=kind, start_ns=_ns(o.get("startTime"), file, f"{w}.startTime"),
            end_ns=_ns(o.get("endTime"), file, f"{w}.endTime"), attributes=attrs,
            status="ERROR" if level == "ERROR" else "OK",
            status_message=str(o.get("statusMessage") or "")))
    return out


def _jaeger_spans(traces: Sequence[Any], file: str, where: str) -> list[OtelSpan]:
    """Jaeger's own JSON (UI "Download", ``/api/traces``): µs times, tags, references."""
    out = []
    for i, tr in enumerate(traces):
        wt = f"{where}[{i}]"
        if not isinstance(tr, dict) or not isinstance(tr.get("spans"), list):
            raise AdapterError("a Jaeger trace needs a 'spans' list", file=file,
                               field=f"{wt}.spans")
        procs = tr.get("processes") if isinstance(tr.get("processes"), dict) else {}
        for j, sp in enumerate(tr["spans"]):
            w = f"{wt}.spans[{j}]"
            if not isinstance(sp, dict) or not isinstance(sp.get("operationName"), str):
                raise AdapterError("span needs a string 'operationName'", file=file,
                                   field=f"{w}.operationName")
            tags = {t["key"]: t.get("value") for t in _list(sp.get("tags"), file, f"{w}.tags")
                    if isinstance(t, dict) and isinstance(t.get("key"), str)}
            parent = next((r.get("spanID") for r in _list(sp.get("references"), file,
                                                          f"{w}.references")
                           if isinstance(r, dict) and r.get("refType") == "CHILD_OF"), None)
            start = time_ns(sp.get("startTime"), file=file, field=f"{w}.startTime",
                            unit_ns=1000)
            dur = time_ns(sp.get("duration"), file=file, field=f"{w}.duration", unit_ns=1000)
            if start + dur > MAX_NS:
                raise AdapterError("startTime + duration is past year 2262", file=file,
                                   field=f"{w}.duration")
            status = str(tags.get("otel.status_code") or "").upper()
            if tags.get("error") is True:
                status = "ERROR"
            pid = sp.get("processID")
            proc = procs.get(pid) if isinstance(procs, dict) and isinstance(pid, str) else None
            ptags = proc.get("tags") if isinstance(proc, dict) else None
            res = {t["key"]: t.get("value") for t in _list(ptags, file, f"{wt}.processes")
                   if isinstance(t, dict) and isinstance(t.get("key"), str)}
            if isinstance(proc, dict) and proc.get("serviceName"):
                res["service.name"] = proc["serviceName"]
            out.append(OtelSpan(
                trace_id=_hex_id(sp.get("traceID") or tr.get("traceID"), 16, file,
                                 f"{w}.traceID"),
                span_id=_hex_id(sp.get("spanID"), 8, file, f"{w}.spanID"),
                parent_id=_hex_id(parent, 8, file, f"{w}.references", optional=True),
                name=sp["operationName"], kind=str(tags.get("span.kind", "")),
                start_ns=start, end_ns=start + dur, attributes=tags,
                status=status if status in ("OK", "ERROR") else "UNSET",
                status_message=str(tags.get("otel.status_description") or ""), resource=res))
    return out


def parse_spans(text: str, *, file: str = "<memory>") -> list[OtelSpan]:
    """Parse OTLP JSON (one document or JSON lines), Phoenix or Langfuse span exports.

    JSON lines are split on a newline (LF) only (a raw U+2028 inside a JSON string is text, not
    a line break).

    Raises:
        AdapterError: malformed JSON or nested too deeply, or a document in none of the
            formats (the error names the missing or invalid field).
    """
    stripped = text.strip()
    if not stripped:
        raise AdapterError("empty file", file=file, field="<root>")
    try:
        doc: Any = _loads(stripped, file, "<root>")
    except AdapterError:
        if "\n" not in stripped:
            raise
        doc = None
    if doc is not None:
        return _document(doc, file, "")
    spans: list[OtelSpan] = []
    for n, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            spans.extend(_document(_loads(line, file, f"line {n}"), file, f"line {n}."))
    return spans


def _loads(text: str | bytes, file: str, where: str) -> Any:
    """One JSON document; AdapterError (never JSONDecodeError/RecursionError) when bad."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AdapterError(f"malformed JSON: {exc.msg}", file=file, field=where,
                           column=exc.colno) from None
    except RecursionError:
        raise AdapterError("JSON nested too deeply", file=file, field=where) from None
    except UnicodeDecodeError as exc:
        raise AdapterError(f"not UTF-8 text: {exc.reason}", file=file, field=where) from None


# ----------------------------------------------------------------------- streaming reader
_SPANS_PREFIXES = ("resourceSpans.item", "resource_spans.item", "result.resourceSpans.item")


def iter_file_spans(path: str | Path) -> Iterator[OtelSpan]:
    """Stream the spans of an export file in bounded memory (issue 29).

    JSON lines are read one line at a time; a one-document OTLP JSON file (also Jaeger's
    ``/api/v3`` ``{"result": ...}``) is parsed incrementally with ijson, span by span, and
    a Jaeger ``{"data": [...]}`` file trace by trace. Only Phoenix and Langfuse
    one-document exports are read whole. The file size is checked first
    (:func:`icore.adapters.max_input_bytes`).

    Raises:
        AdapterError: not a regular file, over the size limit, unreadable, malformed JSON
            (naming the line of a JSON-lines file), or a document in none of the formats.
    """
    p = Path(path)
    file = str(p)
    if (problem := not_a_regular_file(p)) is not None:
        raise AdapterError(f"{problem}; refusing to read it", file=file, field="<root>")
    check_size(p)
    try:
        f = p.open("rb")
    except OSError as exc:
        raise AdapterError(f"cannot read: {exc.strerror or exc}", file=file,
                           field="<root>") from None
    with f:
        try:
            yield from _stream(f, file)
        except OSError as exc:
            raise AdapterError(f"cannot read: {exc.strerror or exc}", file=file,
                               field="<root>") from None


def _stream(f: IO[bytes], file: str) -> Iterator[OtelSpan]:
    head = f.read(65536)
    if not head.strip():
        raise AdapterError("empty file", file=file, field="<root>")
    first = head.split(b"\n", 1)[0]
    one_line_doc = False
    if first.strip() and (b"\n" in head or len(head) < 65536):
        try:
            json.loads(first)
            one_line_doc = True
        except (ValueError, RecursionError):
            pass
    f.seek(0)
    if one_line_doc:  # JSON lines (or a one-line document): one line at a time
        n = 0
        any_line = False
        for n, raw in enumerate(_lines(f), start=1):
            if raw.strip():
                any_line = True
                yield from _document(_loads(raw, file, f"line {n}"), file, f"line {n}.")
        if not any_line:
            raise AdapterError("empty file", file=file, field="<root>")
        return
    text_head = head.decode("utf-8", errors="replace")
    if re.search(r'"(resourceSpans|resource_spans)"\s*:', text_head):
        fast = _one_scope_prefix(f, text_head)
        f.seek(0)
        yield from (_stream_otlp_fast(f, file, fast) if fast else _stream_otlp(f, file))
        return
    if re.match(r'\s*\{\s*"data"\s*:\s*\[\s*\{', text_head) and '"traceID"' in text_head:
        yield from _stream_items(f, file, "data.item", lambda tr, w: _jaeger_spans(
            [tr], file, w))
        return
    yield from _document(_loads(f.read(), file, "<root>"), file, "")


def _lines(f: IO[bytes]) -> Iterator[bytes]:
    """Lines split on a newline (LF) only (bytes: U+2028 and CR never split a line)."""
    yield from f  # binary iteration splits on b"\n" only


def _ijson_errors(file: str) -> tuple[type[BaseException], ...]:
    import ijson

    return (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError, RecursionError)


def _stream_items(f: IO[bytes], file: str, prefix: str,
                  each: Any) -> Iterator[OtelSpan]:
    import ijson

    try:
        for i, item in enumerate(ijson.items(f, prefix, use_float=True)):
            yield from each(item, f"data[{i}]")
    except _ijson_errors(file) as exc:
        raise AdapterError(f"malformed JSON: {exc}", file=file, field="<root>") from None


_RS_KEYS = (b'"resourceSpans"', b'"resource_spans"')
_SS_KEYS = (b'"scopeSpans"', b'"scope_spans"', b'"instrumentationLibrarySpans"')


def _one_scope_prefix(f: IO[bytes], text_head: str) -> str | None:
    """The ijson prefix of a document holding one resource with one scope, else None.

    Counted on the raw bytes (a key's closing quote is never escaped, so a key name
    inside a string value does not match): the usual shape of a big export, whose spans
    can then be built by ijson's C backend one at a time.
    """
    counts = dict.fromkeys((*_RS_KEYS, *_SS_KEYS, b'"spans"'), 0)
    tail = b""
    while chunk := f.read(1 << 22):
        buf = tail + chunk
        for k in counts:
            counts[k] += buf.count(k) - tail.count(k)
        tail = buf[-40:]
    rs = [k for k in _RS_KEYS if counts[k]]
    ss = [k for k in _SS_KEYS if counts[k]]
    if (len(rs) != 1 or counts[rs[0]] != 1 or len(ss) != 1 or counts[ss[0]] != 1
            or counts[b'"spans"'] != 1):  # one resource, one scope, one spans list
        return None
    base = rs[0].decode().strip('"')
    if re.search(r'"result"\s*:\s*\{\s*"resourceSpans"', text_head):
        base = "result." + base
    return f"{base}.item.{ss[0].decode().strip(chr(34))}.item"


def _stream_otlp_fast(f: IO[bytes], file: str, scope_prefix: str) -> Iterator[OtelSpan]:
    """One resource, one scope: spans built by ijson's C backend, one at a time."""
    import ijson

    res_prefix = scope_prefix.rsplit(".", 2)[0] + ".resource"
    try:
        res = next(ijson.items(f, res_prefix, use_float=True), None)
        f.seek(0)
        scope = next(ijson.items(f, scope_prefix + ".scope", use_float=True), None)
        f.seek(0)
        if res is not None and not isinstance(res, dict):
            raise AdapterError("resource must be an object", file=file,
                               field="resourceSpans[0].resource")
        rattrs = _kvs((res or {}).get("attributes"), file,
                      "resourceSpans[0].resource.attributes")
        sname = str(scope.get("name", "")) if isinstance(scope, dict) else ""
        at = _spans_array_at(f)
        f.seek(0)
        items = (_array_items(f, file, at, scope_prefix + ".spans") if at is not None else
                 ijson.items(f, scope_prefix + ".spans.item", use_float=True))
        for k, sp in enumerate(items):
            yield _otlp_span_fast(sp, rattrs, sname) or _otlp_span(
                sp, file, f"resourceSpans[0].scopeSpans[0].spans[{k}]", rattrs, sname)
    except _ijson_errors(file) as exc:
        raise AdapterError(f"malformed JSON: {exc}", file=file, field="<root>") from None


_SKELETON_MAX = 1 << 24
"""Most bytes outside the spans array for :func:`_array_items` (else ijson reads it all)."""
_WINDOW = 1 << 20
"""Bytes read at a time by :func:`_array_items`."""
_WS = re.compile(r"[ \t\n\r]*")


def _skip_ws(s: str, i: int) -> int:
    m = _WS.match(s, i)
    return m.end() if m is not None else i


def _spans_array_at(f: IO[bytes]) -> int | None:
    """Byte offset just past the ``[`` of the one ``"spans": [`` key, else None."""
    head = b""
    while len(head) <= _SKELETON_MAX and (chunk := f.read(1 << 20)):
        head += chunk
        m = re.search(rb'"spans"[ \t\n\r]*:[ \t\n\r]*\[', head)
        if m is not None:
            return m.end()
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Skeleton:
    """The document with its spans array emptied, as a byte stream (for ijson to check)."""

    def __init__(self, f: IO[bytes], head: bytes, tail_at: int) -> None:
        self._parts = [head, b"]"]
        self._f, self._tail_at, self._tail = f, tail_at, False

    def read(self, n: int = -1) -> bytes:
        """The next bytes of the skeleton (head, an empty spans array, then the tail)."""
        if n == 0:  # ijson probes the stream's type with read(0)
            return b""
        while self._parts:
            part = self._parts.pop(0)
            if part:
                return part
        if not self._tail:
            self._tail = True
            self._f.seek(self._tail_at)
        return self._f.read(n)


def _array_items(f: IO[bytes], file: str, at: int, prefix: str) -> Iterator[Any]:
    """The items of the JSON array opening at byte ``at``, parsed by the stdlib's C scanner.

    The text is decoded and scanned in 1 MiB windows (a window grows to hold an item bigger
    than it), so memory stays bounded by the largest span; ``NaN``/``Infinity`` are refused
    as ijson refuses them. Once the array ends, the rest of the document (with the array
    emptied) is checked with ijson, so a malformed document is refused as on the ijson path,
    and the emptied array must be the one at ``prefix``.

    Raises:
        AdapterError: malformed JSON or not UTF-8 text.
    """
    import codecs

    import ijson

    head = f.read(at)
    dec = codecs.getincrementaldecoder("utf-8")()
    rd = json.JSONDecoder(parse_constant=_no_constant).raw_decode
    ws = _skip_ws
    buf, pos, eof, want = "", 0, False, _WINDOW
    read = at  # bytes read so far (the tail's offset follows from it)

    def more() -> None:
        nonlocal buf, pos, eof, want, read
        chunk = f.read(max(want, len(buf) - pos))
        read += len(chunk)
        eof = not chunk
        buf = buf[pos:] + dec.decode(chunk, final=eof)
        pos = 0

    try:
        while True:
            pos = ws(buf, pos)
            while pos >= len(buf) and not eof:
                more()
                pos = ws(buf, pos)
            if pos >= len(buf):
                raise AdapterError("malformed JSON: the spans array is not closed", file=file,
                                   field="<root>")
            if buf[pos] == "]":
                break
            while True:
                try:
                    item, end = rd(buf, pos)
                except ValueError:
                    if eof:
                        raise
                    more()
                    continue
                if end < len(buf) or eof:
                    break
                more()  # a number could go on in the next window
            yield item
            pos = ws(buf, end)
            while pos >= len(buf) and not eof:
                more()
                pos = ws(buf, pos)
            if pos < len(buf) and buf[pos] == ",":
                pos += 1
                continue
            if pos < len(buf) and buf[pos] == "]":
                break
            raise AdapterError("malformed JSON: expected ',' or ']' after a span", file=file,
                               field="<root>")
        pos += 1
        tail_at = read - len(buf[pos:].encode("utf-8")) - len(dec.getstate()[0])
    except AdapterError:
        raise
    except json.JSONDecodeError as exc:  # its position is within the window: not shown
        raise AdapterError(f"malformed JSON in the spans array: {exc.msg}", file=file,
                           field="<root>") from None
    except ValueError as exc:  # not UTF-8, NaN/Infinity
        raise AdapterError(f"malformed JSON: {exc}", file=file, field="<root>") from None
    except RecursionError:
        raise AdapterError("JSON nested too deeply", file=file, field="<root>") from None
    here = False
    for p, event, _v in ijson.parse(_Skeleton(f, head, tail_at), use_float=True):
        here = here or (p == prefix and event == "start_array")
    if not here:
        raise AdapterError("the spans array is not at resourceSpans[0].scopeSpans[0].spans",
                           file=file, field="resourceSpans[0].scopeSpans[0].spans")


def _stream_otlp(f: IO[bytes], file: str) -> Iterator[OtelSpan]:
    """Walk ijson events of one OTLP document; build one span (and resource) at a time."""
    import ijson

    r_i = s_i = k_i = -1
    rattrs: dict[str, Any] = {}
    scope_name = ""
    pending: list[OtelSpan] = []  # spans of the current scope (the scope may come later)
    seen_rs = False
    base = ""
    try:
        events = ijson.parse(f, use_float=True, multiple_values=True)
        for prefix, event, _value in events:
            if event == "start_array" and prefix in ("resourceSpans", "resource_spans",
                                                     "result.resourceSpans"):
                seen_rs, base = True, prefix
                continue
            if not prefix.startswith(base + ".item") or not seen_rs:
                continue
            rest = prefix[len(base) + 5:]
            if rest == "":
                if event == "start_map":
                    r_i, s_i = r_i + 1, -1
                    rattrs = {}
                elif event not in ("end_map", "map_key"):
                    raise AdapterError("must be an object", file=file,
                                       field=f"resourceSpans[{r_i + 1}]")
                continue
            if rest == ".resource" and event == "start_map":
                res = _build(events, "start_map")
                rattrs.update(_kvs(res.get("attributes"), file,
                                   f"resourceSpans[{r_i}].resource.attributes"))
                continue
            scope_key = next((k for k in (".scopeSpans.item", ".scope_spans.item",
                                          ".instrumentationLibrarySpans.item")
                              if rest.startswith(k)), None)
            if scope_key is None:
                continue
            tail = rest[len(scope_key):]
            if tail == "" and event == "start_map":
                s_i, k_i = s_i + 1, -1
                scope_name, pending = "", []
            elif tail == "" and event == "end_map":
                for sp in pending:
                    sp.scope = scope_name
                yield from pending
                pending = []
            elif tail in (".scope", ".instrumentationLibrary") and event == "start_map":
                sc = _build(events, "start_map")
                scope_name = str(sc.get("name", ""))
            elif tail == ".spans.item" and event in ("start_map", "start_array", "string",
                                                      "number", "null", "boolean"):
                k_i += 1
                sp = _build(events, event, _value)
                w = f"resourceSpans[{r_i}].scopeSpans[{s_i}].spans[{k_i}]"
                pending.append(_otlp_span_fast(sp, rattrs, "") or _otlp_span(sp, file, w,
                                                                               rattrs, ""))
    except _ijson_errors(file) as exc:
        raise AdapterError(f"malformed JSON: {exc}", file=file, field="<root>") from None
    if not seen_rs:  # "resourceSpans" was only text inside another format: read it whole
        f.seek(0)
        yield from _document(_loads(f.read(), file, "<root>"), file, "")


def _build(events: Iterator[tuple[str, str, Any]], event: str, value: Any = None) -> Any:
    """The JSON value whose first event was ``event`` (ijson's ObjectBuilder)."""
    import ijson

    if event not in ("start_map", "start_array"):
        return value
    b = ijson.ObjectBuilder()
    b.event(event, value)
    depth = 1
    for _prefix, ev, val in events:
        b.event(ev, val)
        if ev in ("start_map", "start_array"):
            depth += 1
        elif ev in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return b.value
    raise AdapterError("truncated JSON", file="<stream>", field="<root>")


def _document(doc: Any, file: str, where: str) -> list[OtelSpan]:
    if isinstance(doc, dict):
        if "resourceSpans" in doc or "resource_spans" in doc:
            return _otlp_spans(doc, file, where)
        if isinstance(doc.get("result"), dict):  # Jaeger's OTLP API (api_v3)
            return _document(doc["result"], file, f"{where}result.")
        if isinstance(doc.get("data"), list):
            data = doc["data"]
            if data and isinstance(data[0], dict) and "spans" in data[0] and (
                    "traceID" in data[0] or "processes" in data[0]):
                return _jaeger_spans(data, file, f"{where}data")
            return _document(data, file, f"{where}data")
        if isinstance(doc.get("observations"), list):
            obs = doc["observations"]
            if obs and all(isinstance(o, str) for o in obs):
                raise AdapterError("observations are ids only: export the trace with its "
                                   "observations", file=file, field=f"{where}observations")
            return _langfuse_spans(obs, file, f"{where}observations", str(doc.get("id", "")))
        raise AdapterError("not OTLP JSON: no resourceSpans (nor a Phoenix span list or a "
                           "Langfuse trace with observations)", file=file,
                           field=f"{where}resourceSpans")
    if isinstance(doc, list):
        if not doc:
            return []
        first = doc[0]
        if isinstance(first, dict) and "context" in first:
            return _phoenix_spans(doc, file, where.rstrip("."))
        if isinstance(first, dict) and ("parentObservationId" in first or ("traceId" in first
                                        and "type" in first)):
            return _langfuse_spans(doc, file, where.rstrip("."))
        if isinstance(first, dict) and ("resourceSpans" in first):
            return [s for i, d in enumerate(doc) for s in _document(d, file, f"[{i}].")]
        raise AdapterError("not a span list: items need 'context' (Phoenix) or "
                           "'parentObservationId' (Langfuse)", file=file,
                           field=f"{where}[0].context")
    raise AdapterError(f"not OTLP JSON: a {type(doc).__name__}, not an object",
                       file=file, field="<root>")


# ------------------------------------------------------------------------ classification
_OWN_OPS = {"invoke_workflow": "WORKFLOW", "plan": "PLAN", "apply_guardrail": "GUARDRAIL"}
"""GenAI operations (semantic-conventions-genai v0.1.0) that decide a span's kind before
OpenInference's ``openinference.span.kind`` (which has no workflow or plan kind)."""


def span_kind(s: OtelSpan) -> str:
    """``AGENT``, ``LLM``, ``TOOL``, ``HANDOFF``, ``GUARDRAIL``, ``PLAN``, ``WORKFLOW``, ...

    The 2026 GenAI operations ``invoke_workflow``, ``plan`` and ``apply_guardrail`` come
    first; icore's spans before them (``icore.workflow <task>``, ``icore.gate <tool>``)
    read the same.
    """
    a = s.attributes
    if _handoff_target(s) is not None:
        return "HANDOFF"
    own = _OWN_OPS.get(str(a.get(N.OPERATION)))
    if own is not None:
        return own
    if s.name.startswith("icore.workflow "):
        return "WORKFLOW"
    kind = a.get(N.SPAN_KIND)
    if isinstance(kind, str) and kind:
        return kind.upper()
    op = a.get(N.OPERATION)
    if not isinstance(op, str):
        op = None
    if op in _AGENT_OPS:
        return "AGENT"
    if op in _TOOL_OPS:
        return "TOOL"
    if op in _LLM_OPS:
        return "LLM"
    if s.kind.upper() in _LANGFUSE_KIND.values():
        return s.kind.upper()
    return "UNKNOWN"


def _handoff_target(s: OtelSpan) -> str | None:
    a = s.attributes
    for k in ("handoff.to", "to_agent", "gen_ai.handoff.to", "handoff.to_agent"):
        if isinstance(a.get(k), str) and a[k]:
            return str(a[k])
    m = _HANDOFF_NAME.match(s.name.strip())
    if m is not None:
        if m.group("to"):
            return m.group("to")
        to = a.get(N.OI_OUTPUT) or a.get("output.value")
        return str(to) if isinstance(to, str) and to else None
    return None


def _agent_of(s: OtelSpan) -> str | None:
    a = s.attributes
    for k in (N.AGENT_NAME, N.OI_AGENT_NAME, N.AGENT_ID, "graph.node.id"):
        v = a.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def _content(s: OtelSpan, *keys: str) -> str:
    for k in keys:
        v = s.attributes.get(k)
        if v is not None and v != "":
            return _text(v)
    return ""


# ---------------------------------------------------------------------------- to a Trace
def spans_to_trace(spans: Sequence[OtelSpan], *, file: str = "<memory>",
                   run_id: str = "run") -> Trace:
    """The source-neutral trace of one file's spans (see the module docstring).

    Raises:
        AdapterError: no spans, or duplicate span ids.
    """
    if not spans:
        raise AdapterError("no spans", file=file, field="resourceSpans")
    by_id: dict[str, OtelSpan] = {}
    for s in spans:
        if s.span_id in by_id:
            raise AdapterError(f"duplicate span id {s.span_id}", file=file,
                               field=f"span {s.name!r}.spanId")
        by_id[s.span_id] = s
    _check_parents(by_id, file)
    order = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    kinds = {s.span_id: span_kind(s) for s in spans}
    names = AgentNames()
    descriptions: dict[str, str] = {}
    agent_of_span: dict[str, str] = {}

    def owner(s: OtelSpan) -> str:
        """The agent a span belongs to: its own, else the nearest agent ancestor's."""
        seen = 0
        cur: OtelSpan | None = s
        while cur is not None and seen < 10_000:
            got = agent_of_span.get(cur.span_id)
            if got is not None:
                return got
            a = _agent_of(cur) if kinds[cur.span_id] in ("AGENT", "TOOL", "LLM") else None
            if a is not None:
                return names.canonical(a) or names.add(a)
            cur = by_id.get(cur.parent_id) if cur.parent_id else None
            seen += 1
        return "system"

    steps: list[Step] = []
    decisions: list[dict[str, Any]] = []
    step_of_span: dict[str, int] = {}
    unknown: dict[str, int] = {}
    roots = [s for s in order if not s.parent_id or s.parent_id not in by_id]
    root = roots[0]
    question = _content(root, N.OI_INPUT, N.INPUT_MESSAGES)
    orchestrator: str | None = None

    def parent_step(s: OtelSpan) -> int | None:
        cur = by_id.get(s.parent_id) if s.parent_id else None
        guard = 0
        while cur is not None and guard < 10_000:
            if cur.span_id in step_of_span:
                return step_of_span[cur.span_id]
            cur = by_id.get(cur.parent_id) if cur.parent_id else None
            guard += 1
        return None

    def add(s: OtelSpan, kind: StepKind, agent: str, content: str, **kw: Any) -> None:
        idx = len(steps)
        steps.append(Step(index=idx, agent=agent, kind=kind, content=content, role=s.name,
                          parent=parent_step(s) if kind != StepKind.TASK else None, **kw))
        step_of_span[s.span_id] = idx  # a root agent's turn, not the task, parents its children

    add(root, StepKind.TASK, "user", question)
    for s in order:
        k = kinds[s.span_id]
        if k == "AGENT":
            who = owner(s)
            agent_of_span[s.span_id] = who
            desc = s.attributes.get(N.AGENT_DESCRIPTION)
            if isinstance(desc, str):
                descriptions.setdefault(who, desc)
            if orchestrator is None:
                orchestrator = who
        if s is root and k not in ("AGENT", "LLM", "TOOL", "HANDOFF"):
            continue
        if k == "WORKFLOW":  # groups agent turns; its name is the run's or the task's
            continue
        if k == "AGENT":
            add(s, StepKind.OUTPUT, agent_of_span[s.span_id],
                _content(s, N.OI_OUTPUT, N.OUTPUT_MESSAGES))
        elif k == "LLM":
            add(s, StepKind.OUTPUT, owner(s), _content(s, N.OI_OUTPUT, N.OUTPUT_MESSAGES,
                                                       "llm.output_messages.0.message.content"))
        elif k == "TOOL":
            add(s, StepKind.TOOL_OUTPUT, owner(s),
                _content(s, N.OI_OUTPUT, N.TOOL_RESULT) or s.status_message,
                exitcode=1 if s.status == "ERROR" else 0)
        elif k == "HANDOFF":
            to = _handoff_target(s) or ""
            who = names.canonical(to) or names.add(to)
            add(s, StepKind.INSTRUCTION, owner(s), f"handoff to {who}", to=who)
        elif k == "PLAN":
            own = _agent_of(s)
            who = (names.canonical(own) or names.add(own)) if own else owner(s)
            add(s, StepKind.PLAN, who, _content(s, N.OI_OUTPUT, N.OUTPUT_MESSAGES,
                                                N.PLAN_OPTION) or s.name)
        elif k == "GUARDRAIL":
            a = s.attributes
            value = a.get(N.GR_RESULT_VALUE, a.get(N.G + "outcome", ""))
            why = a.get(N.GR_RESULT_REASON, a.get(N.G + "reason", ""))
            comp = a.get(N.GR_COMPONENT, "guardrail")
            add(s, StepKind.THOUGHT, owner(s), f"{comp} {value}/{why}: {s.name}".strip())
            dec = _gate_decision(s, by_id)
            if dec is not None:
                decisions.append(dec)
        else:
            unknown[k] = unknown.get(k, 0) + 1
            add(s, StepKind.THOUGHT, owner(s), f"{k.lower()} span {s.name!r}")
    if root.end_ns:
        final = _content(root, N.OI_OUTPUT, N.OUTPUT_MESSAGES) or None
        idx = len(steps)
        steps.append(Step(index=idx, agent=agent_of_span.get(root.span_id, orchestrator or
                                                             "system"),
                          kind=StepKind.TERMINATION, content=root.status_message or "done",
                          role=root.name, final_answer=final, terminates=True, parent=0))
    agents = {n: descriptions.get(n, "") for n in names.names}
    for st in steps:
        if st.agent not in agents and st.agent != "user":
            agents[st.agent] = ""
    extras: dict[str, Any] = {"spans": len(spans), "traces": len({s.trace_id for s in spans})}
    if orchestrator:
        extras["orchestrator"] = orchestrator
    if decisions:
        extras["planfence"] = {"records": [], "decisions": decisions}
    if unknown:
        extras["unknown_spans"] = dict(sorted(unknown.items()))
        extras["warnings"] = [f"{file}: kept {n} {k.lower()} span(s) as events (no mapping)"
                              for k, n in sorted(unknown.items())]
    family = OTEL
    calls = _icore_calls(spans)
    if calls:
        family = ICORE_LIVE
        extras["icore_calls"] = calls
        man = next((s.attributes.get(N.RUN_MANIFEST) for s in spans
                    if s.attributes.get(N.CALL) == "run"), None)
        if isinstance(man, str):
            extras["icore_manifest"] = man
        extras.pop("warnings", None)
    succeeded = None
    if root.status in ("OK", "ERROR") and root.end_ns:
        succeeded = root.status == "OK"
    return Trace(id=run_id, file=file, family=family, question=question, ground_truth=None,
                 succeeded=succeeded, agents=agents, steps=tuple(steps), extras=extras)


def _check_parents(by_id: Mapping[str, OtelSpan], file: str) -> None:
    """Refuse parent links that form a cycle (a self-parent, a 2-cycle, ...).

    Every span must reach a root (no parent, or a parent outside the file) by following
    parents; a span on a cycle never does.

    Raises:
        AdapterError: naming the trace and the spans of the first cycle found.
    """
    done: set[str] = set()
    for start in by_id:
        path: list[str] = []
        on_path: set[str] = set()
        cur: str | None = start
        while cur is not None and cur not in done:
            if cur in on_path:
                cyc = path[path.index(cur):]
                names = ", ".join(f"{x} ({by_id[x].name!r})" for x in cyc[:8])
                raise AdapterError(
                    f"parent links form a cycle in trace {by_id[cur].trace_id}: "
                    f"{names}{' ...' if len(cyc) > 8 else ''} (each span is its own "
                    "ancestor; the file is refused)", file=file,
                    field=f"span {cur}.parentSpanId")
            path.append(cur)
            on_path.add(cur)
            sp = by_id[cur]
            cur = sp.parent_id if sp.parent_id and sp.parent_id in by_id else None
        done.update(path)


def _gate_decision(s: OtelSpan, by_id: Mapping[str, OtelSpan]) -> dict[str, Any] | None:
    """The gate decision an icore guardrail span carries (``icore.gate.*``), or None.

    The inverse of the exporter's ``decision_attributes``: parallel key/id arrays back to
    maps. ``task`` groups one protected call's decisions: the span's ``icore.task`` and
    the enclosing ``execute_tool`` span.
    """
    a, g = s.attributes, N.G
    if not isinstance(a.get(g + "outcome"), str) or not isinstance(a.get(g + "reason"), str):
        return None
    d: dict[str, Any] = {k: a[g + k] for k in ("outcome", "reason", "action", "policy",
                                                "detail") if isinstance(a.get(g + k), str)}
    for k in ("point", "owners_contacted", "heads_checked"):
        if isinstance(a.get(g + k), int) and not isinstance(a.get(g + k), bool):
            d[k] = a[g + k]
    if isinstance(a.get(g + "replanned"), bool):
        d["replanned"] = a[g + "replanned"]
    for k in ("roots", "deps"):
        v = a.get(g + k)
        d[k] = [str(x) for x in v] if isinstance(v, list | tuple) else []
    for m in ("frontier", "heads", "fresh"):
        keys, ids = a.get(f"{g}{m}.keys"), a.get(f"{g}{m}.ids")
        if isinstance(keys, list | tuple) and isinstance(ids, list | tuple) and \
                len(keys) == len(ids):
            d[m] = {str(k): str(i) for k, i in zip(keys, ids, strict=True)}
    parent = by_id.get(s.parent_id)
    call = parent.span_id[:8] if parent is not None and span_kind(parent) == "TOOL" else ""
    task = a.get(N.TASK)
    d["task"] = "/".join(str(x) for x in (task, d.get("action"), call) if x)
    return d


def _icore_calls(spans: Iterable[OtelSpan]) -> list[dict[str, Any]]:
    """Icore live-run steps carried by the spans (``icore.call``), in recorded order."""
    out = []
    for s in spans:
        a = s.attributes
        call = a.get(N.CALL)
        if not isinstance(call, str) or call == "run" or not isinstance(a.get(N.SEQ), int):
            continue
        out.append({"seq": a[N.SEQ], "call": call, "span": s.span_id,
                    "attributes": {k: v for k, v in a.items() if k.startswith(("icore.",
                                                                            "gen_ai."))}})
    out.sort(key=lambda c: int(c["seq"]))
    return out


def _run_name(path: str | Path) -> str:
    p = Path(path)
    name = p.name
    for suf in (*_SUFFIXES, ".jsonl", ".json"):
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
            break
    return name or p.stem


_MAPPED = frozenset({
    N.SPAN_KIND, N.OPERATION, "handoff.to", "to_agent", "handoff.to_agent", N.AGENT_NAME,
    N.OI_AGENT_NAME, N.AGENT_ID, "graph.node.id", N.AGENT_DESCRIPTION, N.OI_INPUT,
    N.INPUT_MESSAGES, N.OI_OUTPUT, N.OUTPUT_MESSAGES, N.TOOL_RESULT, "output.value",
    "llm.output_messages.0.message.content"})
"""Span attributes :func:`spans_to_trace` reads (besides every ``icore.*``/``gen_ai.*``)."""


def _compact(spans: Iterable[OtelSpan]) -> Iterator[OtelSpan]:
    """Spans as streamed, slimmed to what the mapping reads (bounded memory, issue 29).

    Attributes the mapping never reads, span events and per-span copies of the trace id
    are dropped or shared; the resulting trace is the same.
    """
    ids: dict[str, str] = {}
    keep: dict[str, bool] = {}  # attribute key -> read by the mapping (few distinct keys)
    for sp in spans:
        a = sp.attributes
        for k in a:
            kept = keep.get(k)
            if kept is None:
                kept = k in _MAPPED or k.startswith(("icore.", "gen_ai."))
                if len(keep) < 65536:
                    keep[k] = kept
            if not kept:
                sp.attributes = {k: v for k, v in a.items()
                                 if k in _MAPPED or k.startswith(("icore.", "gen_ai."))}
                break
        sp.events = []
        sp.trace_id = ids.setdefault(sp.trace_id, sp.trace_id)
        yield sp


def load_otlp(path: str | Path) -> Trace:
    """Import a one-run OTLP JSON / Phoenix / Langfuse / Jaeger export (module docstring).

    The file is streamed (:func:`iter_file_spans`).

    Raises:
        AdapterError: unreadable or not a regular file (field ``<root>``), over the input
            size limit, malformed JSON, not one of the formats (the error names the field),
            a cycle of parent links, or several traces in the file (field ``traceId``;
            use :func:`load_otlp_runs`).
    """
    with gc_paused():
        spans = list(_compact(iter_file_spans(path)))
    file = str(Path(path))
    n = len({s.trace_id for s in spans})
    if n > 1:
        raise AdapterError(f"holds {n} traces (runs); read them with load_otlp_runs "
                           "(icore audit audits each)", file=file, field="traceId")
    return spans_to_trace(spans, file=file, run_id=_run_name(path))


def load_otlp_runs(path: str | Path) -> list[Trace]:
    """Import every run of an export: one :class:`Trace` per trace id, in start order.

    A Collector's file exporter appends every trace it receives, and ``icore run
    --matched`` exports one trace per policy; each trace is one run. Run ids are the file
    stem, suffixed (``-<policy>`` for icore runs, else ``-<trace id prefix>``) when the
    file holds several. The file is streamed (:func:`iter_file_spans`).

    A trace whose parent links form a cycle (a self-parent, a 2-cycle, ...) refuses the
    whole file: its other traces are not audited either (the error names the trace and
    the spans), so a damaged export is never mistaken for a complete one.

    Raises:
        AdapterError: as :func:`load_otlp` (but several traces are fine).
    """
    with gc_paused():
        return _runs(_groups(_compact(iter_file_spans(path))), file=str(Path(path)),
                     run_id=_run_name(path))


def _groups(spans: Iterable[OtelSpan]) -> list[list[OtelSpan]]:
    by: dict[str, list[OtelSpan]] = {}
    for sp in spans:
        by.setdefault(sp.trace_id, []).append(sp)
    return sorted(by.values(), key=lambda g: min(x.start_ns for x in g))


def parse_otlp_runs(text: str, *, file: str = "<memory>", run_id: str = "run") -> list[Trace]:
    """Parse every run (trace) of a string (see :func:`load_otlp_runs`)."""
    return _runs(_groups(parse_spans(text, file=file)), file=file, run_id=run_id)


def _runs(groups: list[list[OtelSpan]], *, file: str, run_id: str) -> list[Trace]:
    if len(groups) <= 1:
        return [spans_to_trace(groups[0] if groups else [], file=file, run_id=run_id)]
    out, used = [], set()
    for g in groups:
        policy = next((x.attributes.get(N.RUN_POLICY) for x in g
                       if x.attributes.get(N.CALL) == "run"), None)
        rid = f"{run_id}-{policy}" if isinstance(policy, str) else f"{run_id}-{g[0].trace_id[:8]}"
        while rid in used:
            rid = f"{rid}-{g[0].trace_id[:8]}"
        used.add(rid)
        out.append(spans_to_trace(g, file=file, run_id=rid))
    return out


def parse_otlp(text: str, *, file: str = "<memory>", run_id: str = "run") -> Trace:
    """Parse a one-run export from a string into a :class:`Trace` (see :func:`load_otlp`).

    Raises:
        AdapterError: as :func:`load_otlp`.
    """
    spans = parse_spans(text, file=file)
    n = len({s.trace_id for s in spans})
    if n > 1:
        raise AdapterError(f"holds {n} traces (runs); read them with load_otlp_runs "
                           "(icore audit audits each)", file=file, field="traceId")
    return spans_to_trace(spans, file=file, run_id=run_id)


__all__ = [
    "ICORE_LIVE",
    "OTEL",
    "OtelSpan",
    "is_otel_path",
    "iter_file_spans",
    "load_otlp",
    "load_otlp_runs",
    "parse_otlp",
    "parse_otlp_runs",
    "parse_spans",
    "sniff_otel",
    "span_kind",
    "spans_to_trace",
]
