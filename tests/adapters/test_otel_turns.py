"""Agent turns of an OpenTelemetry trace read as a recorder writes them (QA qa-new15c).

An agent span's output at its end, the tool calls of a model turn (structured, or the
tool spans that follow it), tool outputs as evidence, a handoff's routing message, and
the orchestrator only where something routes. The whole LangGraph run, recorded and
traced, is compared in tests/integrations/test_langgraph_otel_same_audit.py.
"""

from __future__ import annotations

import json
from typing import Any

from icore.adapters import StepKind, audit_trace, parse_otlp
from icore.adapters._otel_turns import span_calls

_T0 = 1_700_000_000_000_000_000


def _span(sid: int, name: str, parent: int | None, start: int, end: int,
          attrs: dict[str, Any], status: int = 1) -> dict[str, Any]:
    d: dict[str, Any] = {
        "traceId": "cd" * 16, "spanId": f"{sid:016x}", "name": name, "kind": 1,
        "startTimeUnixNano": str(_T0 + start), "endTimeUnixNano": str(_T0 + end),
        "attributes": [{"key": k, "value": {"stringValue": str(v)}} for k, v in attrs.items()],
        "status": {"code": status}}
    if parent is not None:
        d["parentSpanId"] = f"{parent:016x}"
    return d


def _doc(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def _agent(sid: int, name: str, parent: int | None, start: int, end: int,
           **more: Any) -> dict[str, Any]:
    return _span(sid, f"invoke_agent {name}", parent, start, end, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **more})


def _chat(sid: int, parent: int, t: int, text: str, **more: Any) -> dict[str, Any]:
    return _span(sid, "chat m", parent, t, t + 1, {"gen_ai.operation.name": "chat",
                                                   "output.value": text, **more})


def _tool(sid: int, parent: int, t: int, name: str, out: str, args: str,
          status: int = 1) -> dict[str, Any]:
    return _span(sid, f"execute_tool {name}", parent, t, t + 1, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
        "gen_ai.tool.call.arguments": args, "output.value": out}, status)


def _root(end: int, answer: str) -> dict[str, Any]:
    return _span(1, "invoke_workflow w", None, 0, end, {
        "gen_ai.operation.name": "invoke_workflow", "input.value": "find and check",
        "output.value": answer})


def test_agent_output_comes_after_its_work_and_a_repeat_of_its_answer_is_one_output() -> None:
    """The agent span's ``output.value`` (its answer, as its last model turn said it)
    is placed at its end, once; its tool output counts as evidence, so the conclusion
    is supported (no hard flag)."""
    t = parse_otlp(_doc(
        _root(100, "done"),
        _agent(2, "bob", 1, 10, 50, **{"output.value": "Verified: it matches."}),
        _chat(3, 2, 11, "calls search"),
        _tool(4, 2, 13, "search", "two results", '{"q": "x"}'),
        _chat(5, 2, 20, "Verified: it matches."),
    ))
    assert [(s.kind, s.content) for s in t.steps][1:] == [
        (StepKind.THOUGHT, "bob starts its turn"),
        (StepKind.OUTPUT, "calls search"), (StepKind.TOOL_OUTPUT, "two results"),
        (StepKind.OUTPUT, "Verified: it matches."), (StepKind.TERMINATION, "done")]
    # the call the tool span ran, its arguments as recorded
    assert json.loads(t.steps[2].calls or "") == [{"name": "search", "args": '{"q": "x"}'}]
    r = audit_trace(t)
    assert r.summary().hard_flags == 0 and r.summary().snd == 1.0


def test_a_retry_after_a_failed_tool_is_a_new_action_not_a_repeat() -> None:
    """Two equal model turns asking for the same call, the first answered with an
    error: the second is a retry (its calls read from the tool spans), no flag."""
    args = '{"title": "t"}'
    t = parse_otlp(_doc(
        _root(100, "saved"),
        _agent(2, "w", 1, 10, 60),
        _chat(3, 2, 11, "calls save"), _tool(4, 2, 13, "save", "disk full", args, 2),
        _chat(5, 2, 20, "calls save"), _tool(6, 2, 22, "save", "saved", args),
        _chat(7, 2, 30, "Draft saved."),
    ))
    outs = [s for s in t.steps if s.kind == StepKind.OUTPUT]
    assert [s.calls is not None for s in outs] == [True, True, False]
    assert audit_trace(t).summary().hard_flags == 0


def test_structured_tool_calls_of_a_model_turn() -> None:
    """GenAI ``gen_ai.output.messages`` tool_call parts and OpenInference's flattened
    ``llm.output_messages`` tool calls; malformed values are no calls."""
    genai = json.dumps([{"role": "assistant", "parts": [
        {"type": "text", "content": "let me look"},
        {"type": "tool_call", "id": "c1", "name": "search", "arguments": {"q": "a"}}]}])
    assert span_calls({"gen_ai.output.messages": genai}) == [
        {"name": "search", "args": {"q": "a"}}]
    oi = {"llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "fetch",
          "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments":
              '{"url": "u"}',
          "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
          "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "x"}
    assert span_calls(oi) == [{"name": "search", "args": "x"},
                              {"name": "fetch", "args": {"url": "u"}}]
    assert span_calls({"gen_ai.output.messages": "[{tool_call"}) == []
    assert span_calls({"gen_ai.output.messages": 5}) == []


def test_routing_message_is_the_handoff_and_the_router_is_the_orchestrator() -> None:
    """A supervisor turn that only routes: its message is the instruction's text (no
    output of its own, so the same message for two handoffs is no repeat); its agent
    is the orchestrator. The last agent's output that is the final answer is the
    termination's, attributed to it."""
    def route(sid: int, start: int, to: str) -> list[dict[str, Any]]:
        return [_agent(sid, "sup", 1, start, start + 3,
                       **{"output.value": "next, please take the next step"}),
                _span(sid + 1, f"transfer_to_{to}", sid, start + 1, start + 2,
                      {"handoff.to": to})]
    t = parse_otlp(_doc(
        _root(200, "FINAL"),
        *route(2, 10, "a"), _agent(4, "a", 1, 20, 30), _chat(5, 4, 21, "A done."),
        *route(6, 40, "b"), _agent(8, "b", 1, 50, 60), _chat(9, 8, 51, "B done."),
        _agent(10, "sup", 1, 70, 80, **{"output.value": "FINAL"}),
    ))
    assert t.orchestrator == "sup"
    assert [(s.agent, s.content, s.to) for s in t.steps
            if s.kind == StepKind.INSTRUCTION] == [
        ("sup", "next, please take the next step", "a"),
        ("sup", "next, please take the next step", "b")]
    assert not [s for s in t.steps if s.agent == "sup" and s.kind == StepKind.OUTPUT]
    end = t.steps[-1]
    assert (end.kind, end.agent, end.final_answer) == (StepKind.TERMINATION, "sup", "FINAL")
    r = audit_trace(t)
    assert r.summary().hard_flags == 0 and r.state.decl.name == "icore/otel-import"


def test_no_routing_span_means_no_orchestrator() -> None:
    """Without a handoff no agent gets assignment authority (the first agent span's
    agent used to); a worker's answer handed back with a handoff stays its output."""
    t = parse_otlp(_doc(
        _root(100, "ok"),
        _agent(2, "researcher", 1, 10, 20), _chat(3, 2, 11, "found it"),
        _agent(4, "writer", 1, 30, 40), _chat(5, 4, 31, "wrote it"),
    ))
    assert t.orchestrator is None
    assert t.steps[-1].agent == "writer"  # the last agent that spoke ends the run
    t2 = parse_otlp(_doc(
        _root(100, "ok"),
        _agent(2, "math", 1, 10, 20, **{"output.value": "42"}),
        _tool(3, 2, 11, "calc", "42", "{}"),
        _span(4, "transfer_to_triage", 2, 14, 15, {"handoff.to": "triage"}),
    ))
    assert t2.orchestrator == "math"
    assert [(s.kind, s.content) for s in t2.steps if s.kind in (
        StepKind.INSTRUCTION, StepKind.OUTPUT)] == [
        (StepKind.INSTRUCTION, "handoff to triage"), (StepKind.OUTPUT, "42")]
