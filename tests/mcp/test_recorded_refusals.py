"""The gateway's refusals as the in-process recorders see them (QA r6-oa D3, r6-lgmcp D5).

The gateway's refusal text is ours (``PlanFence blocked <tool> (<reason>)``): the
recorders read it back with :func:`icore.integrations.read_refusal`, because the
frameworks' MCP clients drop or do not trace the result's ``_meta["icore/gate"]``. These
tests pin that the gateway's text and the parser agree, and that an OpenAI Agents run
recorded in process through the real gateway (stdio, a scripted model) records the
refusals as the calling agent's blocked calls and the stale call's replan.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.integrations import GATEWAY_POLICY, RunRecorder, read_refusal, refusal_head

from .conftest import env, stdio_gateway, stdio_upstream, text, write_manifest

_NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_.\-]{0,30}", fullmatch=True)
_REASON = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)


@given(_NAME, _REASON, st.sampled_from(["", ": hint.", ".", "\nCurrent values:"]))
def test_the_head_reads_back(tool: str, reason: str, rest: str) -> None:
    """Every head :func:`refusal_head` writes is read back, tool and reason."""
    got = read_refusal(refusal_head(tool, reason) + rest, tool)
    assert got is not None and (got.tool, got.reason) == (tool, reason)
    assert read_refusal({"type": "text", "text": refusal_head(tool, reason)}) is not None


@pytest.mark.parametrize("result", [
    "done: PlanFence blocked book (stale): quoted", "PlanFence blocked book", "",
    None, 3, {"type": "image"}, "PlanFence blocked book (Stale)"])
def test_what_is_not_a_refusal(result: Any) -> None:
    """A result that only quotes a refusal, or has no head, is not one."""
    assert read_refusal(result) is None


def test_the_named_tool_must_match() -> None:
    """The refusal must name the called tool (or its last part, for prefixing clients)."""
    head = refusal_head("book", "stale") + ": x"
    assert read_refusal(head, "book") is not None
    assert read_refusal(head, "trip_book") is not None
    assert read_refusal(head, "rebook") is None


def test_the_gateways_refusals_and_the_parser_agree(tmp_path: Path) -> None:
    """Each refusal of the real gateway (not_read, stale) parses to the
    verdict its ``_meta["icore/gate"]`` carries."""
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log", 5.0)})
    seen: list[tuple[str, str]] = []

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            async def book(city: str) -> None:
                r = await s.call_tool("book", {"city": city, "price": 100})
                if r.is_error:
                    got = read_refusal(text(r), "book")
                    assert got is not None, text(r)
                    assert r.meta is not None
                    seen.append((got.reason, r.meta["icore/gate"]["reason"]))
            await book("Porto")                         # not_read
            await book("Porto")                         # valid
            await s.call_tool("icore_get_fact", {"key": "fact://plan/goal"})
            await s.call_tool("set_city", {"value": "Faro"})
            await book("Porto")                         # stale

    anyio.run(main)
    assert [a for a, _ in seen] == ["not_read", "stale"]
    assert all(a == b for a, b in seen)


def _traced() -> Any:
    """The scripted model of test_framework_client, traced as a real one."""
    from agents.tracing import generation_span

    from .test_framework_client import ScriptModel

    class TracedModel(ScriptModel):
        async def get_response(self, system_instructions: Any, input: Any,
                               *args: Any, **kwargs: Any) -> Any:
            given = [{"role": "user", "content": input}] if isinstance(input, str) \
                else list(input)  # the model's input, traced as a real model does
            with generation_span(model="scripted", input=given) as span:
                got = await super().get_response(system_instructions, input, *args,
                                                 **kwargs)
                span.span_data.output = [o.model_dump() for o in got.output]
                return got

    return TracedModel


def _gateway_server(tmp_path: Path, **kw: Any) -> Any:
    from agents.mcp import MCPServerStdio
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log", 5.0)})
    return MCPServerStdio(params={"command": sys.executable,
                                  "args": ["-m", "icore", "mcp", str(manifest)],
                                  "env": env()}, client_session_timeout_seconds=30, **kw)


def _outputs(rec: RunRecorder, tool: str) -> list[dict[str, Any]]:
    """The recorded outputs of ``tool``'s calls, in order."""
    return [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == tool]


def _run_traveler(server: Any, model: Any, run: str) -> RunRecorder:
    """An OpenAI Agents run of agent ``traveler`` through ``server``, recorded in process."""
    from agents import Agent, Runner

    from icore.integrations.openai_agents import recording
    rec = RunRecorder(run)

    async def main() -> None:
        async with server:
            agent = Agent(name="traveler", model=model, mcp_servers=[server])
            with recording(rec, exclusive=True):
                await Runner.run(agent, "Book a trip")

    anyio.run(main)
    return rec


@pytest.mark.parametrize("decide", ["approve", "reject"])
def test_openai_agents_mcp_tool_with_require_approval(tmp_path: Path, decide: str) -> None:
    """An MCP tool the SDK puts to a human (``require_approval``): the trace written while
    the human decides audits as paused; after the resume, the human's decision, then the
    call's run (approved) or its refusal (rejected: exit code 1, not a run with output
    null) (QA r6-oa D4)."""
    pytest.importorskip("agents")
    from agents import Agent, Runner
    from agents.testing import assistant_message, function_call

    from icore.integrations.openai_agents import recording

    server = _gateway_server(tmp_path, require_approval="always")
    model = _traced()(iter([
        [function_call("icore_get_fact", {"key": "fact://plan/goal"}, call_id="c1")],
        [function_call("set_city", {"value": "Faro"}, call_id="c2")],
        [assistant_message("Done.")]]))
    rec = RunRecorder("mcp-approval")
    paused: list[Any] = []

    async def main() -> None:
        async with server:
            agent = Agent(name="traveler", model=model, mcp_servers=[server])
            with recording(rec, exclusive=True):
                result = await Runner.run(agent, "Go to Faro")
                while result.interruptions:
                    paused.append(rec.audit().summary())
                    state = result.to_state()
                    for it in result.interruptions:
                        if it.raw_item.name == "set_city":
                            getattr(state, decide)(it)
                        else:
                            state.approve(it)
                    result = await Runner.run(agent, state)

    anyio.run(main)
    assert paused and all(p.paused and not p.terminated for p in paused)
    said = [(e["tool"], e["decision"]) for e in rec.events if e.get("answered_by") == "human"]
    assert ("set_city", decide) in said
    calls = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "set_city"]
    assert len(calls) == 1
    if decide == "approve":
        assert calls[0]["exitcode"] == 0 and "Faro" in str(calls[0]["content"])
    else:
        assert calls[0]["exitcode"] == 1 and calls[0]["blocked"] and calls[0]["content"]
    assert rec.audit().summary().terminated


def test_openai_agents_recording_through_the_gateway(tmp_path: Path) -> None:
    """The SDK traces an MCP ``isError`` result without an error: the recorder reads the
    gateway's refusal from the span's output. Both audits count the blocked calls; the
    in-process one names the agent and counts the stale call's replan."""
    pytest.importorskip("agents")
    from agents.testing import assistant_message, function_call


    server = _gateway_server(tmp_path)
    model = _traced()(iter([
        [function_call("book", {"city": "Porto", "price": 100}, call_id="c1")],  # not_read
        [function_call("book", {"city": "Porto", "price": 100}, call_id="c2")],  # valid
        [function_call("icore_get_fact", {"key": "fact://plan/goal"}, call_id="c3")],
        [function_call("set_city", {"value": "Faro"}, call_id="c3b")],
        [function_call("book", {"city": "Porto", "price": 100}, call_id="c4")],  # stale
        [function_call("book", {"city": "Faro", "price": 100}, call_id="c5")],   # replan
        [assistant_message("Booked Faro.")],
    ]))
    rec = _run_traveler(server, model, "through-gateway")
    books = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "book"]
    assert [(e["exitcode"], e.get("blocked"), e.get("reason")) for e in books] == [
        (1, True, "not_read"), (0, None, None), (1, True, "stale"), (0, None, None)]
    assert {e["agent"] for e in books} == {"traveler"}
    assert books[0]["content"].startswith("PlanFence blocked book (not_read)")
    plans = [e for e in rec.events if e["kind"] == "plan"]
    assert [bool(p.get("replan")) for p in plans] == [False, False, True]
    assert plans[1]["plan_id"] == plans[2]["plan_id"]
    decisions = [x["planfence"]["decision"] for x in rec.planfence]
    assert [(d["outcome"], d["reason"], d["policy"]) for d in decisions] == [
        ("blocked", "not_read", GATEWAY_POLICY), ("blocked", "stale", GATEWAY_POLICY)]
    summary = rec.audit().summary()
    assert summary.replans == 1 and summary.terminated
    gw = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    gw_refused = [x["planfence"]["decision"]["reason"] for x in gw if "planfence" in x
                  and "decision" in x["planfence"]
                  and x["planfence"]["decision"]["outcome"] != "authorized"]
    assert gw_refused == ["not_read", "stale"]  # the same refusals in both traces


def test_invalid_arguments_are_recorded_blocked_in_process_and_at_the_gateway(
        tmp_path: Path) -> None:
    """A protected call whose arguments break the tool's schema (#25): the gateway's
    answer is a gate refusal (head, ``_meta``), so the in-process recorder of an OpenAI
    Agents run records it as the agent's blocked call, not a failed one, and both
    audits count it blocked; the upstream never sees it."""
    pytest.importorskip("agents")
    from agents.testing import assistant_message, function_call


    server = _gateway_server(tmp_path)
    model = _traced()(iter([
        [function_call("book", {"city": "Porto", "price": "cheap"}, call_id="c1")],
        [function_call("book", {"city": "Porto", "price": 100}, call_id="c2")],  # not_read
        [function_call("book", {"city": "Porto", "price": 100}, call_id="c3")],  # valid
        [assistant_message("Booked.")],
    ]))
    rec = _run_traveler(server, model, "invalid-args")
    books = _outputs(rec, "book")
    assert [(e["exitcode"], e.get("blocked"), e.get("reason")) for e in books] == [
        (1, True, "invalid_arguments"), (1, True, "not_read"), (0, None, None)]
    assert books[0]["content"].startswith("PlanFence blocked book (invalid_arguments): ")
    assert "price" in books[0]["content"]
    decisions = [x["planfence"]["decision"] for x in rec.planfence]
    assert [(d["outcome"], d["reason"], d["policy"]) for d in decisions] == [
        ("blocked", "invalid_arguments", GATEWAY_POLICY),
        ("blocked", "not_read", GATEWAY_POLICY)]
    assert rec.audit().summary().terminated
    gw = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    outcomes = [(x["planfence"]["decision"]["outcome"], x["planfence"]["decision"]["reason"])
                for x in gw if "decision" in x.get("planfence", {})]
    assert ("blocked", "invalid_arguments") in outcomes
    failed = [x for x in gw if x.get("kind") == "tool_output" and x.get("tool") == "book"
              and x.get("exitcode") == 1 and not x.get("blocked")]
    assert failed == []  # read as blocked, never as a failed call
    books_up = [x for x in (tmp_path / "up.log").read_text().splitlines() if '"book"' in x]
    assert len(books_up) == 1 and '"price": 100' in books_up[0]


def test_langgraph_recording_through_the_gateway(tmp_path: Path) -> None:
    """A LangGraph agent whose MCP tool reaches the real gateway as langchain-mcp-adapters
    builds it (an ``isError`` result raised as a ``ToolException`` carrying the content
    blocks, turned into a ``ToolMessage`` with ``status="error"``; ``_meta`` dropped):
    ``RecordingHandler`` records the refusal as the agent's blocked call, not a generic
    error, and the stale call's next call as its replan."""
    pytest.importorskip("langgraph")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import StructuredTool, ToolException
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import ToolNode, tools_condition

    from icore.integrations.langgraph import RecordingHandler

    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log", 5.0)})

    class Fake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kw: Any) -> Fake:
            return self

    S = TypedDict("S", {"messages": Annotated[list[Any], add_messages]})  # noqa: UP013

    class McpError(ToolException):  # the adapters' isError exception: the blocks kept
        def __init__(self, blocks: list[dict[str, Any]]) -> None:
            super().__init__(" ".join(b["text"] for b in blocks))
            self.blocks = blocks

    def mcp_tool(session: Any, name: str, params: dict[str, Any]) -> StructuredTool:
        async def call(**args: Any) -> tuple[Any, Any]:
            r = await session.call_tool(name, args)
            blocks = [{"type": "text", "text": c.text} for c in r.content]
            if r.is_error:
                raise McpError(blocks)
            return blocks, None  # the artifact: _meta is not passed on

        return StructuredTool(name=name, description=name, args_schema={
            "type": "object", "properties": params}, coroutine=call,
            response_format="content_and_artifact",
            handle_tool_error=lambda e: getattr(e, "blocks", str(e)))

    def ask(name: str, args: dict[str, Any], cid: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}])

    rec = RunRecorder("lg-through-gateway")

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            price = {"type": "integer"}
            tools = [mcp_tool(s, "book", {"city": {"type": "string"}, "price": price}),
                     mcp_tool(s, "set_city", {"value": {"type": "string"}}),
                     mcp_tool(s, "icore_get_fact", {"key": {"type": "string"}})]
            llm = Fake(messages=iter([
                ask("book", {"city": "Porto", "price": 100}, "c1"),
                ask("book", {"city": "Porto", "price": 100}, "c2"),
                ask("icore_get_fact", {"key": "fact://plan/goal"}, "c3"),
                ask("set_city", {"value": "Faro"}, "c4"),
                ask("book", {"city": "Porto", "price": 100}, "c5"),
                ask("book", {"city": "Faro", "price": 100}, "c6"),
                AIMessage("Booked Faro.")]))
            g = StateGraph(S)
            g.add_node("planner", lambda st: {"messages": [llm.invoke(st["messages"])]})
            g.add_node("tools", ToolNode(tools))
            g.add_edge(START, "planner")
            g.add_conditional_edges("planner", tools_condition)
            g.add_edge("tools", "planner")
            await g.compile().ainvoke({"messages": [("user", "Book a trip")]},
                                      {"callbacks": [RecordingHandler(rec)]})

    anyio.run(main)
    books = [e for e in rec.events if e["kind"] == "tool_output" and e["tool"] == "book"]
    assert [(e["exitcode"], e.get("blocked"), e.get("reason")) for e in books] == [
        (1, True, "not_read"), (0, None, None), (1, True, "stale"), (0, None, None)]
    assert {e["agent"] for e in books} == {"planner"}
    decisions = [x["planfence"]["decision"] for x in rec.planfence]
    assert [(d["reason"], d["policy"]) for d in decisions] == [
        ("not_read", GATEWAY_POLICY), ("stale", GATEWAY_POLICY)]
    assert rec.audit().summary().replans == 1
