"""The inputs of ``icore bench import`` (issue 29): big synthetic traces, written streaming.

One endless OpenInference/GenAI span stream of one trace (agent turns, LLM and tool calls,
retrievals, handoffs; :func:`spans`) written as the formats the importer reads: one OTLP
JSON document (:func:`write_otlp`), a Phoenix span list (:func:`write_phoenix`), a
Langfuse trace with its observations (:func:`write_langfuse`); and a generic JSONL run
(:func:`write_jsonl`). Each writer holds one span at a time.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

MB = 1024 * 1024
_KINDS = ("AGENT", "LLM", "TOOL", "TOOL", "LLM", "RETRIEVER")


def _kv(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else
             {"stringValue": str(v)}} for k, v in d.items()]


def spans(seed: int, agents: int = 8) -> Iterator[dict[str, Any]]:
    """An endless OpenInference/GenAI span stream of one trace (agent turns, calls)."""
    rng = random.Random(seed)
    names = [f"agent-{i}" for i in range(agents)]
    trace_id = f"{rng.getrandbits(128):032x}"
    t = 1_700_000_000_000_000_000
    agent_span = 1
    i = 0
    while True:
        i += 1
        parent: int | None
        attrs: dict[str, Any]
        if i == 1:
            kind, parent, attrs = "CHAIN", None, {"openinference.span.kind": "CHAIN",
                                                  "input.value": "synthetic task"}
        else:
            kind = _KINDS[rng.randrange(len(_KINDS))] if i % 50 else "HANDOFF"
            who = names[rng.randrange(agents)]
            if kind == "AGENT":
                agent_span, parent = i, 1
                attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": who,
                         "openinference.span.kind": "AGENT",
                         "output.value": f"turn {i}: " + "x" * rng.randrange(40, 200)}
            elif kind == "HANDOFF":
                parent = agent_span
                attrs = {"openinference.span.kind": "TOOL", "handoff.to": who}
            else:
                parent = agent_span
                attrs = {"openinference.span.kind": kind,
                         "output.value": f"out {i}: " + "y" * rng.randrange(20, 160),
                         "llm.model_name": "m", "llm.token_count.total": 100 + i % 900}
        span: dict[str, Any] = {
            "traceId": trace_id, "spanId": f"{i:016x}", "name": f"{kind.lower()} {i}",
            "kind": 1, "startTimeUnixNano": str(t + i * 1000),
            "endTimeUnixNano": str(t + i * 1000 + 500), "attributes": _kv(attrs),
            "status": {"code": 2 if kind == "TOOL" and rng.random() < 0.1 else 0}}
        if parent is not None:
            span["parentSpanId"] = f"{parent:016x}"
        yield span


def _write_list(f: IO[str], items: Iterator[dict[str, Any]], limit: int) -> int:
    """Write items as JSON array items (one a line) until ``limit`` bytes; the count."""
    n = written = 0
    for item in items:
        line = json.dumps(item, separators=(",", ":"))
        if n:
            f.write(",\n")
        f.write(line)
        written += len(line) + 2
        n += 1
        if written >= limit:
            break
    return n


def _write(path: Path, size_mb: float, head: str, tail: str,
           items: Iterator[dict[str, Any]]) -> int:
    with path.open("w", encoding="utf-8") as f:
        f.write(head)
        n = _write_list(f, items, int(size_mb * MB))
        f.write(tail)
    return n


def write_otlp(path: Path, size_mb: float, *, seed: int = 0) -> int:
    """Write one OTLP JSON document of about ``size_mb`` MiB; return its span count."""
    return _write(path, size_mb,
                  '{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", '
                  '"value": {"stringValue": "bench"}}]}, "scopeSpans": [{"scope": {"name": '
                  '"bench"}, "spans": [\n', "\n]}]}]}\n", spans(seed))


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    """An OTLP span's attributes as plain values."""
    return {kv["key"]: int(v["intValue"]) if "intValue" in (v := kv["value"]) else
            v["stringValue"] for kv in span["attributes"]}


def _iso(ns_text: str) -> str:
    return dt.datetime.fromtimestamp(int(ns_text) / 1e9, dt.UTC).isoformat()


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """Dotted attribute keys as Phoenix's nested objects (``llm.model_name``)."""
    out: dict[str, Any] = {}
    for k, v in flat.items():
        *path, last = k.split(".")
        cur = out
        for part in path:
            cur = cur.setdefault(part, {})
        cur[last] = v
    return out


def phoenix_span(span: dict[str, Any]) -> dict[str, Any]:
    """The Phoenix REST API's form of one generated OTLP span."""
    a = _attrs(span)
    out = {"name": span["name"], "context": {"trace_id": span["traceId"],
                                             "span_id": span["spanId"]},
           "span_kind": a.get("openinference.span.kind", "UNKNOWN"),
           "start_time": _iso(span["startTimeUnixNano"]),
           "end_time": _iso(span["endTimeUnixNano"]),
           "status_code": "ERROR" if span["status"]["code"] == 2 else "OK",
           "attributes": _nested(a)}
    if "parentSpanId" in span:
        out["parent_id"] = span["parentSpanId"]
    return out


_LANGFUSE_TYPE = {"AGENT": "AGENT", "LLM": "GENERATION", "TOOL": "TOOL",
                  "RETRIEVER": "RETRIEVER"}


def langfuse_observation(span: dict[str, Any]) -> dict[str, Any]:
    """A Langfuse observation of one generated OTLP span."""
    a = _attrs(span)
    kind = a.get("openinference.span.kind", "CHAIN")
    out: dict[str, Any] = {
        "id": span["spanId"], "traceId": span["traceId"],
        "type": _LANGFUSE_TYPE.get(kind, "SPAN"),
        "name": a.get("gen_ai.agent.name") or span["name"],
        "startTime": _iso(span["startTimeUnixNano"]),
        "endTime": _iso(span["endTimeUnixNano"]), "input": a.get("input.value"),
        "output": a.get("output.value") or {"text": span["name"]},
        "level": "ERROR" if span["status"]["code"] == 2 else "DEFAULT"}
    if "handoff.to" in a:
        out["metadata"] = {"attributes": {"handoff": {"to": a["handoff.to"]}}}
    if "parentSpanId" in span:
        out["parentObservationId"] = span["parentSpanId"]
    if kind == "LLM":
        out["model"] = "m"
    return out


def write_phoenix(path: Path, size_mb: float, *, seed: int = 0) -> int:
    """Write a Phoenix span list (one JSON document) of about ``size_mb`` MiB; its span count."""
    return _write(path, size_mb, "[\n", "\n]\n", map(phoenix_span, spans(seed)))


def write_langfuse(path: Path, size_mb: float, *, seed: int = 0) -> int:
    """Write a Langfuse trace with its observations of about ``size_mb`` MiB; the count."""
    return _write(path, size_mb, '{"id": "bench", "name": "bench", "observations": [\n',
                  '\n], "scores": []}\n', map(langfuse_observation, spans(seed)))


WRITERS: dict[str, Callable[..., int]] = {
    "otlp": write_otlp, "phoenix": write_phoenix, "langfuse": write_langfuse}
"""The one-document span formats, by name."""


def write_jsonl(path: Path, lines: int, *, seed: int = 0) -> None:
    """Write a generic JSONL run of ``lines`` lines (header, task, agent turns, tools)."""
    rng = random.Random(seed)
    agents = [f"agent-{i}" for i in range(8)]
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"run": {"id": "bench", "question": "synthetic task",
                                    "succeeded": False}}) + "\n")
        f.write(json.dumps({"agent": "user", "kind": "task", "content": "synthetic task"})
                + "\n")
        for i in range(2, lines):
            who = agents[rng.randrange(len(agents))]
            r = rng.random()
            if r < 0.1:
                obj: dict[str, Any] = {"agent": "orchestrator", "kind": "instruction",
                                       "to": who, "content": f"do part {i}"}
            elif r < 0.3:
                obj = {"agent": who, "kind": "tool_output", "content": f"ran {i}",
                       "exitcode": int(rng.random() < 0.1)}
            else:
                obj = {"agent": who, "kind": "output",
                       "content": f"turn {i}: " + "z" * rng.randrange(10, 60)}
            f.write(json.dumps(obj) + "\n")



__all__ = ["MB", "WRITERS", "langfuse_observation", "phoenix_span", "spans", "write_jsonl",
           "write_langfuse", "write_otlp", "write_phoenix"]
