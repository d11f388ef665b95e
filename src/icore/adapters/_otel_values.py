"""Value decoding for the OpenTelemetry importer: the span type, typed values, ids, times.

A fast path for plain values and the checked slow path. Part of
:mod:`icore.adapters._otel_import` (split for size, issue 26).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from icore.adapters._errors import AdapterError
from icore.adapters._values import (
    MAX_NS,
    finite_float,
    integer,
    time_ns,
)

_HEX = re.compile(r"[0-9a-fA-F]+")
_AGENT_KEYS = ("gen_ai.agent.name", "agent.name", "gen_ai.agent.id", "graph.node.id")
"""The attributes naming a span's agent, first found wins (:func:`span_agent`)."""


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
        # a string ("true") is not OTLP/JSON's bool; read as one, it decided icore.paused
        raise AdapterError(f"boolValue is not a boolean (true or false): {x!r}", file=file,
                           field=where)
    if k in ("intValue", "int_value"):  # int64 (a decimal string in OTLP/JSON)
        return integer(x, file=file, field=where, lo=-(2**63), hi=2**63 - 1)
    if k in ("doubleValue", "double_value"):
        return finite_float(x, file=file, field=where)
    if k in ("arrayValue", "array_value", "kvlistValue", "kvlist_value") and \
            not isinstance(x, dict | None):  # read as empty, it dropped gate deps (sweep)
        raise AdapterError(f"{k} must be an object, not {type(x).__name__}", file=file,
                           field=f"{where}.{k}")
    if k in ("arrayValue", "array_value"):
        vals = (x or {}).get("values", [])
        if not isinstance(vals, list):  # a number would escape as TypeError (sweep)
            raise AdapterError(f"arrayValue.values must be a list, not {type(vals).__name__}",
                               file=file, field=f"{where}.arrayValue.values")
        return [_any(e, file, f"{where}.arrayValue.values[{i}]") for i, e in enumerate(vals)]
    if k in ("kvlistValue", "kvlist_value"):
        vals = (x or {}).get("values", [])
        return _kvs(vals, file, f"{where}.kvlistValue")
    if k in ("bytesValue", "bytes_value"):  # base64 in OTLP/JSON; kept as that text
        if not isinstance(x, str):
            raise AdapterError(f"bytesValue must be a base64 string, not {type(x).__name__}",
                               file=file, field=where)
        try:
            base64.b64decode(x, validate=True)
        except (binascii.Error, ValueError):
            raise AdapterError(f"bytesValue is not base64: {x[:40]!r}", file=file,
                               field=where) from None
        return x
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


def _hex_id(v: Any, n: int, file: str, where: str, *, optional: bool = False,
            exact: bool = False) -> str:
    """An id as lowercase hex of ``n`` bytes (accepts hex or base64).

    ``2n`` hex digits or the base64 of ``n`` bytes; fewer hex digits are left-padded
    with zeros (Jaeger drops leading zeros) unless ``exact`` (OTLP, whose ids always
    have all their digits).

    Raises:
        AdapterError: missing (and not ``optional``), not a string, or not an id of
            ``n`` bytes in hex or base64 (non-hex text, too many digits).
    """
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
    if optional and not s.strip("0"):
        return ""
    if _HEX.fullmatch(s) and len(s) < 2 * n and not exact:
        return s.lower().rjust(2 * n, "0")
    raise AdapterError(f"not an id of {n} bytes ({2 * n} hex digits or base64): "
                       f"{s[:70]!r}", file=file, field=where)


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
    """Nested attribute maps (Phoenix) -> dotted keys (``llm.model_name``).

    The dotted keys are shared across spans (:data:`_KEY_MEMO`). A map under an agent
    name's key stays a map, so that :func:`span_agent` refuses it (not ``agent.name.x``).
    """
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        memo = _KEY_MEMO
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            shared = memo.get(key)
            if shared is not None:
                key = shared
            elif len(memo) < 4096:
                memo[key] = key
            if isinstance(v, dict) and v and key not in _AGENT_KEYS:
                out.update(_flatten(v, key))
            else:
                out[key] = v
    return out


_OTLP_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_UNSET": "UNSET",
                "STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"}


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


_LOWER_HEX = re.compile(r"[0-9a-f]+").fullmatch


def _fast_hex(v: Any, n: int) -> str | None:
    """A plain ``n``-digit hex id, lowercased (what :func:`_hex_id` returns), else None.

    An id already in lower case is returned as it is (one C match, no copy; issue 29).
    """
    if type(v) is str and len(v) == n:
        if _LOWER_HEX(v) is not None:
            return v
        if v.isascii() and v.isalnum():
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


def span_agent(s: OtelSpan, file: str) -> str | None:
    """The span's own agent name: the first non-empty agent attribute.

    Raises:
        AdapterError: an agent attribute that is not a string (a number, an array, a
            map): read as no name, the span's turns went to ``system`` (QA r8-bad D4).
    """
    a = s.attributes
    for k in _AGENT_KEYS:
        v = a.get(k)
        if isinstance(v, str):
            if v:
                return v
        elif v is not None:
            raise AdapterError(f"an agent name must be a string, not {type(v).__name__} "
                               f"{_short_repr(v)}", file=file,
                               field=f"span {s.span_id} ({s.name!r}).{k}")
    return None


def _short_repr(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."
