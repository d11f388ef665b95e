"""Well-formed seed inputs the sweep damages (issue 29): one per importer and manifest.

Every seed is written here (synthetic), except the two live exports, which the sweep makes
with icore itself (``icore run`` / ``icore audit --otlp-endpoint file:``) before it starts.
"""

from __future__ import annotations

import json
from typing import Any

R = "a" * 64
T0 = "2026-01-01T00:00:{:02d}+00:00"


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        v: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    elif isinstance(value, list):
        v = {"arrayValue": {"values": [{"stringValue": x} for x in value]}}
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


def otlp_doc() -> dict[str, Any]:
    """Four spans: an agent, an LLM call with events, a tool call, a gate decision."""
    def span(sid: int, parent: int | None, kind: str, **attrs: Any) -> dict[str, Any]:
        d: dict[str, Any] = {
            "traceId": "ab" * 16, "spanId": f"{sid:016x}", "name": f"{kind.lower()} {sid}",
            "kind": 1, "startTimeUnixNano": str(1_700_000_000_000_000_000 + sid * 1000),
            "endTimeUnixNano": str(1_700_000_000_000_000_000 + sid * 1000 + 500),
            "status": {"code": 1 if sid != 3 else 2, "message": "ok"},
            "attributes": [_kv("openinference.span.kind", kind), _kv("agent.name", f"a{sid % 2}"),
                           *(_kv(k, v) for k, v in attrs.items())],
            "events": [{"name": "gen_ai.content", "timeUnixNano":
                        str(1_700_000_000_000_000_000 + sid * 1000 + 10),
                        "attributes": [_kv("output.value", f"out {sid}")]}]}
        if parent is not None:
            d["parentSpanId"] = f"{parent:016x}"
        return d

    spans = [span(1, None, "AGENT", **{"input.value": "task: add 2 and 2"}),
             span(2, 1, "LLM", **{"llm.token_count.total": 12, "output.value": "call tool",
                                  "gen_ai.usage.input_tokens": 3, "llm.temperature": 0.5}),
             span(3, 2, "TOOL", **{"tool.name": "add", "output.value": "5",
                                   "tags": ["x", "y"], "flag": True}),
             span(4, 1, "AGENT", **{"gen_ai.operation.name": "apply_guardrail",
                                    "icore.gate.outcome": "authorized",
                                    "icore.gate.reason": "valid", "icore.gate.action": "book",
                                    "icore.gate.roots": [R], "icore.gate.deps": ["req/t"],
                                    "icore.gate.frontier.keys": ["req/t"],
                                    "icore.gate.frontier.ids": [R],
                                    "icore.gate.heads.keys": ["req/t"],
                                    "icore.gate.heads.ids": [R], "icore.gate.point": 1})]
    return {"resourceSpans": [{"resource": {"attributes": [_kv("service.name", "svc")]},
                               "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]}


def phoenix_doc() -> list[dict[str, Any]]:
    """A Phoenix span list (four spans, one with an exception event)."""
    def sp(i: int, parent: int | None, kind: str) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": f"{kind.lower()} {i}", "context": {"trace_id": "1" * 32,
                                                     "span_id": f"{i:016x}"},
            "span_kind": kind, "start_time": T0.format(i), "end_time": T0.format(i + 1),
            "status_code": "ERROR" if i == 3 else "OK", "status_message": "",
            "attributes": {"output": {"value": f"out {i}"}, "agent": {"name": f"a{i % 2}"},
                           "llm": {"token_count": {"total": 3}}},
            "events": [{"name": "exception", "timestamp": T0.format(i),
                        "attributes": {"exception.message": "boom"}}]}
        if parent is not None:
            d["parent_id"] = f"{parent:016x}"
        return d

    return [sp(1, None, "AGENT"), sp(2, 1, "LLM"), sp(3, 2, "TOOL"), sp(4, 1, "CHAIN")]


def langfuse_doc() -> dict[str, Any]:
    """A Langfuse trace with four observations."""
    def ob(i: int, parent: int | None, typ: str) -> dict[str, Any]:
        o: dict[str, Any] = {"id": f"o{i}", "traceId": "tr1", "type": typ, "name": f"a{i % 2}",
                             "startTime": T0.format(i), "endTime": T0.format(i + 1),
                             "input": {"q": "x"}, "output": {"text": f"out {i}"},
                             "level": "ERROR" if i == 3 else "DEFAULT",
                             "usage": {"input": 3, "output": 4, "total": 7},
                             "metadata": {"k": "v"}}
        if parent is not None:
            o["parentObservationId"] = f"o{parent}"
        return o

    return {"id": "tr1", "name": "run", "timestamp": T0.format(0), "input": {"q": "add"},
            "output": {"a": "5"}, "observations": [ob(1, None, "AGENT"), ob(2, 1, "GENERATION"),
                                                   ob(3, 2, "TOOL"), ob(4, 1, "SPAN")]}


def jaeger_doc() -> dict[str, Any]:
    """A Jaeger query-API document, one trace of four spans."""
    def sp(i: int, parent: int | None, kind: str) -> dict[str, Any]:
        return {"traceID": "ab" * 16, "spanID": f"{i:016x}", "operationName": f"{kind} {i}",
                "startTime": 1_700_000_000_000_000 + i, "duration": 5, "processID": "p1",
                "tags": [{"key": "openinference.span.kind", "type": "string", "value": kind},
                         {"key": "output.value", "type": "string", "value": f"out {i}"},
                         {"key": "error", "type": "bool", "value": i == 3}],
                "logs": [{"timestamp": 1_700_000_000_000_000 + i,
                          "fields": [{"key": "event", "value": "x"}]}],
                "references": [] if parent is None else [
                    {"refType": "CHILD_OF", "traceID": "ab" * 16, "spanID": f"{parent:016x}"}]}

    return {"data": [{"traceID": "ab" * 16,
                      "spans": [sp(1, None, "AGENT"), sp(2, 1, "LLM"), sp(3, 2, "TOOL"),
                                sp(4, 1, "CHAIN")],
                      "processes": {"p1": {"serviceName": "svc", "tags": []}}}],
            "total": 1, "limit": 0, "offset": 0, "errors": None}


_DEC = {"outcome": "authorized", "reason": "valid", "action": "book", "roots": [R],
        "deps": ["req/t"], "frontier": {"req/t": R}, "heads": {"req/t": R}, "point": 1,
        "at_ms": 5.0, "task": "t"}


def jsonl_rows() -> list[Any]:
    """The generic JSONL of icore: a run header, messages of every kind, PlanFence lines."""
    return [{"run": {"id": "r1", "succeeded": False, "family": "demo", "ground_truth": "4"}},
            {"agent": "user", "kind": "task", "content": "add 2 and 2", "step": 0},
            {"agent": "planner", "kind": "plan", "content": "1. add\n2. check", "step": 1},
            {"agent": "coder", "kind": "tool_output", "content": "4", "step": 2},
            {"agent": "coder", "kind": "output", "content": "5", "step": 3, "ts": 1.5},
            {"planfence": {"record": {"id": R, "key": "req/t", "owner": "user", "seq": 1}}},
            {"planfence": {"decision": dict(_DEC)}},
            {"agent": "coder", "kind": "termination", "content": "done", "final_answer": "5"}]


def magentic() -> dict[str, Any]:
    """A Who&When Magentic-One run."""
    ledger = {k: {"reason": "r", "answer": v} for k, v in (
        ("is_request_satisfied", False), ("is_in_loop", False),
        ("is_progress_being_made", True), ("next_speaker", "WebSurfer"),
        ("instruction_or_question", "Search."))}
    team = ("Initial plan:\n\nWe are working to address the following user request:\n\n"
            "What is 6*7?\n\nTo answer this request we have assembled the following team:\n\n"
            "WebSurfer: A helpful assistant with access to a web browser.\n\n")
    hist = [{"role": "human", "content": "What is 6*7?"},
            {"role": "Orchestrator (thought)", "content": team},
            {"role": "Orchestrator (thought)", "content": "Updated Ledger:\n" + json.dumps(ledger)},
            {"role": "Orchestrator (-> WebSurfer)", "content": "Search the web for 6*7."},
            {"role": "WebSurfer", "content": "The page shows 42."},
            {"role": "Orchestrator (thought)", "content": "Stalled.... Replanning..."},
            {"role": "Orchestrator (termination condition)", "content": "FINAL ANSWER: 41"}]
    return {"history": hist, "question": "What is 6*7?", "ground_truth": "42",
            "is_corrected": "False", "question_ID": "q1", "mistake_agent": "WebSurfer",
            "mistake_step": "4", "mistake_reason": "r", "level": "1"}


def captain() -> dict[str, Any]:
    """A Who&When CaptainAgent run."""
    hist = [{"role": "assistant", "name": "Math_Expert",
             "content": "You are given a task.\n# General Task\nWhat is 6*7?\n## Plan for "
                        "solving the task\n1. compute"},
            {"role": "user", "name": "Python_Expert", "content": "```python\nprint(6*7\n```"},
            {"role": "user", "name": "Computer_terminal",
             "content": "exitcode: 1 (execution failed)\nCode output: SyntaxError"},
            {"role": "user", "name": "Verification_Expert", "content": "41. TERMINATE"}]
    return {"is_correct": "false", "question": "What is 6*7?", "question_ID": "q2",
            "level": "1", "ground_truth": "42", "history": hist,
            "mistake_agent": "Python_Expert", "mistake_step": 1, "mistake_reason": "bad"}


RUN_MANIFEST = {
    "name": "m", "family": "reservation", "seeds": [0], "policy": "planfence",
    "revision": True, "backend": {"kind": "scripted"},
    "agents": [{"id": "planner-1", "role": "planner"}, {"id": "retriever-1", "role": "retriever"},
               {"id": "reviser-1", "role": "reviser"}, {"id": "executor-1", "role": "executor"},
               {"id": "auditor-1", "role": "auditor"}],
    "ownership": {"req/*": "reviser-1", "cat/*": "retriever-1", "short/*": "retriever-1",
                  "plan/*": "planner-1", "act/*": "executor-1", "audit/*": "auditor-1"},
    "tools": [{"name": "book", "depends_on": ["req/{task}"]}],
    "timeouts": {"rpc_s": 2.0, "step_s": 60, "start_s": 30, "run_s": 120}}

TEAM_MANIFEST = {
    "version": 1, "team": "trip-team", "data_dir": "data", "certs_dir": "certs",
    "synchronous": "NORMAL", "rpc_timeout_s": 2.0,
    "agents": [{"id": "planner", "role": "planner", "host": "127.0.0.1", "port": 0},
               {"id": "booker", "role": "executor", "host": "127.0.0.1", "port": 0}],
    "ownership": {"req/*": "planner", "plan/*": "planner", "booking/*": "booker"}}

MCP_MANIFEST = {
    "name": "gw", "upstreams": {"notes": {"command": "python", "args": ["notes_server.py"],
                                          "cwd": ".", "timeout_s": 20}},
    "store": {"backend": "sqlite", "path": ".icore-mcp/facts"},
    "owners": {"memo://*": "notes"},
    "facts": {"owners": {"fact://plan/*": "planner"}, "initial": {"fact://plan/budget": 150}},
    "tools": {"book": {"depends_on": ["memo://price", "fact://plan/budget"]},
              "set_price": {"depends_on": ["fact://plan/budget"], "writes": ["memo://price"]}},
    "trace": ".icore-mcp/trace.jsonl"}
