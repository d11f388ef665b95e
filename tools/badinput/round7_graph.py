"""Round 7's trace-graph family (issue 29): one INVALID action, a damaged graph.

``trace-graph``: a recording and an OTLP trace holding one INVALID (stale) action, with
duplicate or conflicting step/span/record/decision ids, parents forming cycles (self,
2-cycles, through the gate span) and OTLP JSON lines in mixed encodings (hex and base64
ids, numbers as strings and as numbers, camelCase and snake_case, one line UTF-16 or
Latin-1, a BOM mid-file, CRLF and LF, a NUL line). ``icore audit --fail-on invalid``
must still fail (exit 3) or refuse the file naming it (1, 2): exit 0 is a fail-open
(the stale action vanished or was read valid).
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from . import seeds
from .cases import Builder, Case, dumps

_B = "b" * 64


def _stale_rows() -> list[Any]:
    rows = seeds.jsonl_rows()
    rows[6]["planfence"]["decision"]["heads"] = {"req/t": _B}
    return rows


def _stale_otlp() -> dict[str, Any]:
    d = seeds.otlp_doc()
    for a in d["resourceSpans"][0]["scopeSpans"][0]["spans"][3]["attributes"]:
        if a["key"] == "icore.gate.heads.ids":
            a["value"] = {"arrayValue": {"values": [{"stringValue": _B}]}}
    return d


def _spans(d: dict[str, Any]) -> list[dict[str, Any]]:
    return d["resourceSpans"][0]["scopeSpans"][0]["spans"]  # type: ignore[no-any-return]


def _b64(hexid: str) -> str:
    return base64.b64encode(bytes.fromhex(hexid)).decode()


def _snake(x: Any) -> Any:
    names = {"resourceSpans": "resource_spans", "scopeSpans": "scope_spans",
             "traceId": "trace_id", "spanId": "span_id", "parentSpanId": "parent_span_id",
             "startTimeUnixNano": "start_time_unix_nano", "endTimeUnixNano":
             "end_time_unix_nano", "stringValue": "string_value", "intValue": "int_value",
             "arrayValue": "array_value", "boolValue": "bool_value"}
    if isinstance(x, dict):
        return {names.get(k, k): _snake(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_snake(v) for v in x]
    return x


def _graph_jsonl() -> dict[str, list[Any]]:
    rows = _stale_rows()
    msgs = [i for i, r in enumerate(rows) if "agent" in r and "step" in r]
    out: dict[str, list[Any]] = {}
    same = copy.deepcopy(rows)
    for i in msgs:
        same[i]["step"] = 1
    out["steps-all-equal"] = same
    conflict = copy.deepcopy(rows)
    conflict.insert(4, {**rows[msgs[1]], "agent": "intruder", "kind": "output",
                        "content": "other"})
    out["step-conflict"] = conflict
    backwards = copy.deepcopy(rows)
    for n, i in enumerate(msgs):
        backwards[i]["step"] = 100 - n
    out["steps-backwards"] = backwards
    rec = copy.deepcopy(rows)
    rec.insert(5, {"planfence": {"record": {"id": seeds.R, "key": "req/t", "owner": "user",
                                            "seq": 2}}})
    out["record-conflicting-seq"] = rec
    rec2 = copy.deepcopy(rows)
    rec2.append({"planfence": {"record": {"id": _B, "key": "req/t", "owner": "user",
                                          "seq": 1, "parents": [_B]}}})
    out["record-self-parent"] = rec2
    rec3 = copy.deepcopy(rows)
    rec3 += [{"planfence": {"record": {"id": seeds.R, "key": "req/t", "owner": "user",
                                       "seq": 1, "parents": [_B]}}},
             {"planfence": {"record": {"id": _B, "key": "req/t", "owner": "user", "seq": 2,
                                       "parents": [seeds.R]}}}]
    out["record-2-cycle"] = rec3
    dec = copy.deepcopy(rows)
    valid = copy.deepcopy(rows[6])
    valid["planfence"]["decision"]["heads"] = {"req/t": seeds.R}
    dec.append(valid)
    out["decision-twice-conflicting"] = dec
    return out


def _graph_otlp() -> dict[str, tuple[str, str | bytes]]:
    """Name -> (file name, text or bytes) of an OTLP trace holding the stale action."""
    base = _stale_otlp()
    out: dict[str, tuple[str, str | bytes]] = {}

    def doc(f: Any) -> str:
        d = copy.deepcopy(base)
        f(d)
        return json.dumps(d)

    def parents(pairs: dict[int, int]) -> Any:
        def f(d: Any) -> None:
            for i, p in pairs.items():
                _spans(d)[i]["parentSpanId"] = f"{p:016x}"
        return f
    out["self-parent-gate"] = ("t.otlp.json", doc(parents({3: 4})))
    out["self-parent-root"] = ("t.otlp.json", doc(parents({0: 1})))
    out["2-cycle-gate"] = ("t.otlp.json", doc(parents({0: 4, 3: 1})))
    out["2-cycle-tool"] = ("t.otlp.json", doc(parents({1: 3, 2: 2})))
    out["all-one-cycle"] = ("t.otlp.json", doc(parents({0: 4, 1: 1, 2: 2, 3: 3})))

    def dup_gate(d: Any) -> None:
        g = copy.deepcopy(_spans(d)[3])
        for a in g["attributes"]:
            if a["key"] == "icore.gate.heads.ids":
                a["value"] = {"arrayValue": {"values": [{"stringValue": seeds.R}]}}
        _spans(d).append(g)  # same span id, a valid twin
    out["gate-dup-valid-twin"] = ("t.otlp.json", doc(dup_gate))

    def dup_gate_first(d: Any) -> None:
        dup_gate(d)
        s = _spans(d)
        s[3], s[-1] = s[-1], s[3]
    out["gate-dup-valid-twin-first"] = ("t.otlp.json", doc(dup_gate_first))

    def dup_ids_other_trace(d: Any) -> None:
        r2 = copy.deepcopy(d["resourceSpans"][0])
        for s in r2["scopeSpans"][0]["spans"]:
            s["traceId"] = "cd" * 16
        d["resourceSpans"].append(r2)
    out["span-ids-in-two-traces"] = ("t.otlp.json", doc(dup_ids_other_trace))

    def all_same_id(d: Any) -> None:
        for s in _spans(d):
            s["spanId"] = "0" * 15 + "1"
            s.pop("parentSpanId", None)
    out["all-one-span-id"] = ("t.otlp.json", doc(all_same_id))

    def zero_ids(d: Any) -> None:
        for s in _spans(d):
            s["spanId"] = "0" * 16
            s["parentSpanId"] = "0" * 16
    out["zero-ids"] = ("t.otlp.json", doc(zero_ids))
    # JSON lines in mixed encodings: each line one resourceSpans document
    line = json.dumps(base)
    b64 = copy.deepcopy(base)
    for s in _spans(b64):
        s["traceId"], s["spanId"] = _b64(s["traceId"]), _b64(s["spanId"])
        if "parentSpanId" in s:
            s["parentSpanId"] = _b64(s["parentSpanId"])
    out["mixed-hex-base64"] = ("t.otlp.jsonl", line + "\n" + json.dumps(b64) + "\n")
    half = copy.deepcopy(base)
    for s in _spans(half)[::2]:
        s["spanId"] = _b64(s["spanId"])
    out["hex-base64-in-one-trace"] = ("t.otlp.json", json.dumps(half))
    out["mixed-snake-camel"] = ("t.otlp.jsonl", json.dumps(_snake(base)) + "\n" + line + "\n")
    nums = copy.deepcopy(base)  # numbers as JSON numbers where OTLP writes strings
    for s in _spans(nums):
        s["startTimeUnixNano"] = int(s["startTimeUnixNano"])
        for a in s["attributes"]:
            if "intValue" in a["value"]:
                a["value"]["intValue"] = int(a["value"]["intValue"])
    out["mixed-number-forms"] = ("t.otlp.jsonl", line + "\n" + json.dumps(_retraced(nums)) + "\n")
    other = json.dumps(_retraced(base))
    out["line-utf16"] = ("t.otlp.jsonl", line.encode() + b"\n" + other.encode("utf-16") + b"\n")
    out["line-latin1"] = ("t.otlp.jsonl", line.encode() + b"\n" +
                          other.replace("svc", "sv\u00e9").encode("latin-1") + b"\n")
    out["bom-mid-file"] = ("t.otlp.jsonl", line.encode() + b"\n\xef\xbb\xbf" + other.encode()
                           + b"\n")
    out["crlf-and-lf"] = ("t.otlp.jsonl", (line + "\r\n" + other + "\n").encode())
    out["utf16-whole"] = ("t.otlp.json", line.encode("utf-16-le"))
    out["nul-between-lines"] = ("t.otlp.jsonl", line.encode() + b"\n\x00\n" + other.encode())
    return out


def _retraced(d: dict[str, Any]) -> dict[str, Any]:
    e = copy.deepcopy(d)
    for s in _spans(e):
        s["traceId"] = "ef" * 16
    return e


def trace_graph(b: Builder, per_seed: int = 30) -> None:
    """Stale traces with duplicate/conflicting ids, parent cycles, mixed encodings."""
    items: list[tuple[str, str, str | bytes]] = []
    for name, rows in _graph_jsonl().items():
        items.append((f"jsonl/{name}", "run.jsonl",
                      "\n".join(dumps(r) for r in rows) + "\n"))
    for name, (fname, data) in _graph_otlp().items():
        items.append((f"otlp/{name}", fname, data))
    for name, fname, data in sorted(b.rng.sample(items, min(per_seed, len(items)))):
        cid = f"tgraph/{name}"
        d = b._dir(cid)
        p = d / fname
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data, encoding="utf-8")
        # exit 3 (the stale action found) or 1/2 (refused, named); 0 is a fail-open
        b.cases.append(Case(cid, "trace-graph", ["ICORE", "audit", str(p), "--no-report",
                                                 "--json", str(d / "s.json"), "--fail-on",
                                                 "invalid"],
                            inputs=[p], names=[p.name], timeout=120, ok_codes=(1, 2, 3)))



__all__ = ["trace_graph"]
