"""One LangGraph run, recorded natively and traced with OpenTelemetry, audits the same.

QA qa-new15c S2: a supervisor team (a ``supervisor`` node routing with
``Command(goto=...)`` to two ``create_agent`` agents) recorded with :class:`RunRecorder`
audited clean (snd 1.000, no hard flag), while its OpenTelemetry trace (GenAI /
OpenInference spans) gave snd 0.533-0.667 and 5-7 false hard flags: tool outputs read
with Who&When's "Code output:" rule (never evidence), no structured tool calls (a
retry after a failed tool was a repeat), an agent span's output placed before its work,
the supervisor's routing message a repeat. Here the *same* run (one ``invoke`` with both
callback handlers: icore's :class:`RecordingHandler` and a GenAI span handler on the real
OpenTelemetry SDK, exported through ``OtelExporter(endpoint="file:...")``) is audited
both ways: snd, astab, cq, hard flags and diagnoses are equal. Documented difference:
the per-step timeline (cq mean) is not compared, the two traces have different numbers
of steps (the recorder's node thoughts, the importer's turn starts).

Real packages (langgraph, langchain ``create_agent``, opentelemetry-sdk), a scripted
chat model.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict
from uuid import UUID

import pytest

pytest.importorskip("langchain.agents", reason="langchain>=1.0 (icore[langgraph])")
pytest.importorskip("opentelemetry.sdk", reason="icore[otel]")

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import ToolException, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from icore.adapters import OtelExporter, audit_path, load_otlp
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler

TASK = "Write a short survey of multi-agent audit methods and verify it."
AGENTS = {"supervisor": "plans and assigns work",
          "researcher": "searches the web and verifies claims",
          "writer": "writes and saves drafts"}


class _Scripted(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self


def _calls(n: Iterator[int], *cs: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": a, "id": f"c{next(n)}"}
                                     for name, a in cs])


class _State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _team() -> Any:
    """Supervisor -> researcher (two tool calls in one turn) -> writer (``save_draft``
    fails once with "disk full", the model retries) -> researcher (verifies) -> END."""
    ids = iter(range(1, 100))
    attempts = [0]

    @tool
    def search(query: str, since: dt.date | None = None, limit: int = 5) -> list[str]:
        """Search the literature."""
        return [f"paper about {query} #{i}" for i in range(min(limit, 2))]

    @tool
    def fetch_page(url: str) -> str:
        """Fetch a web page."""
        return f"<html>content of {url}</html>"

    @tool
    def save_draft(title: str, body: str, due: dt.datetime) -> str:
        """Save a draft to the shared drive."""
        attempts[0] += 1
        if attempts[0] == 1:
            raise ToolException("disk full")
        return f"saved {title!r} ({len(body)} chars) due {due.isoformat()}"

    save_draft.handle_tool_error = True
    draft = {"title": "Audit survey", "body": "Two papers...",
             "due": "2026-12-10T09:00:00+00:00"}
    researcher = create_agent(_Scripted(messages=iter([
        _calls(ids, ("search", {"query": "multi-agent audit", "since": "2025-01-01"}),
               ("fetch_page", {"url": "https://example.org/a"})),
        AIMessage("Found 2 papers on multi-agent audit; page A summarises them."),
        _calls(ids, ("search", {"query": "icore soundness", "limit": 1})),
        AIMessage("Verified: the draft's claims match paper #0."),
    ])), [search, fetch_page], name="researcher")
    writer = create_agent(_Scripted(messages=iter([
        _calls(ids, ("save_draft", draft)), _calls(ids, ("save_draft", draft)),
        AIMessage("Draft 'Audit survey' saved."),
    ])), [save_draft], name="writer")
    route = iter(["researcher", "writer", "researcher", END])

    def supervisor(state: _State) -> Command[Literal["researcher", "writer", "__end__"]]:
        nxt = next(route)
        say = "FINAL: survey drafted and verified" if nxt == END else \
            f"{nxt}, please take the next step"
        return Command(goto=nxt, update={"messages": [AIMessage(say, name="supervisor")]})

    g = StateGraph(_State)
    g.add_node("supervisor", supervisor)
    g.add_node("researcher", researcher)
    g.add_node("writer", writer)
    g.add_edge(START, "supervisor")
    g.add_edge("researcher", "supervisor")
    g.add_edge("writer", "supervisor")
    return g.compile()


class _GenAISpans(BaseCallbackHandler):
    """A user's own LangChain handler writing GenAI / OpenInference spans: a workflow
    span, ``invoke_agent`` per agent node, ``chat`` per model turn, ``execute_tool`` per
    tool run, ``transfer_to_<agent>`` per supervisor handoff. ``rich``: agent spans carry
    their answer (``output.value``) and model turns their tool calls
    (``gen_ai.output.messages``), as OpenInference instrumentations do."""

    def __init__(self, tracer: trace.Tracer, *, rich: bool) -> None:
        self.t, self.rich = tracer, rich
        self.spans: dict[UUID, Any] = {}
        self.alias: dict[UUID, UUID | None] = {}
        self.agent_of: dict[UUID, str] = {}

    def _parent(self, pid: UUID | None) -> UUID | None:
        while pid is not None and pid not in self.spans:
            pid = self.alias.get(pid)
        return pid

    def _start(self, run_id: UUID, parent: UUID | None, name: str,
               attrs: dict[str, Any]) -> None:
        p = self._parent(parent)
        ctx = trace.set_span_in_context(self.spans[p]) if p is not None else None
        self.spans[run_id] = self.t.start_span(name, context=ctx, attributes=attrs)
        if p is not None and p in self.agent_of:
            self.agent_of.setdefault(run_id, self.agent_of[p])

    def _agent(self, parent: UUID | None) -> str:
        return self.agent_of.get(self._parent(parent), "?")  # type: ignore[arg-type]

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, metadata: Any = None,
                       **kw: Any) -> None:
        name, node = kw.get("name"), (metadata or {}).get("langgraph_node")
        if parent_run_id is None:
            self._start(run_id, None, "invoke_workflow survey", {
                "gen_ai.operation.name": "invoke_workflow", "input.value": TASK})
        elif name in AGENTS and node == name and self._agent(parent_run_id) != name:
            self._start(run_id, parent_run_id, f"invoke_agent {name}", {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                "gen_ai.agent.description": AGENTS[name]})
            self.agent_of[run_id] = name
        else:
            self.alias[run_id] = parent_run_id

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kw: Any) -> None:
        s = self.spans.pop(run_id, None)
        if s is None:
            return
        if isinstance(outputs, Command):  # the supervisor: its message, its handoff
            s.set_attribute("output.value", str(outputs.update["messages"][0].content))
            if outputs.goto != END:
                self.t.start_span(f"transfer_to_{outputs.goto}",
                                  context=trace.set_span_in_context(s), attributes={
                                      "gen_ai.operation.name": "execute_tool",
                                      "handoff.to": str(outputs.goto)}).end()
        elif isinstance(outputs, dict) and outputs.get("messages") and (
                self.rich or s.name.startswith("invoke_workflow")):
            s.set_attribute("output.value", str(outputs["messages"][-1].content))
        s.set_status(Status(StatusCode.OK))
        s.end()

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kw: Any) -> None:
        self._start(run_id, parent_run_id, "chat fake", {
            "gen_ai.operation.name": "chat", "gen_ai.agent.name": self._agent(parent_run_id)})

    def on_llm_end(self, response: Any, *, run_id: UUID, **kw: Any) -> None:
        s = self.spans.pop(run_id)
        msg = response.generations[0][0].message
        s.set_attribute("output.value", msg.content or "calls " + ", ".join(
            f"{c['name']}({json.dumps(c['args'])})" for c in msg.tool_calls))
        if self.rich:
            parts = [{"type": "tool_call", "id": c["id"], "name": c["name"],
                      "arguments": c["args"]} for c in msg.tool_calls]
            s.set_attribute("gen_ai.output.messages", json.dumps(
                [{"role": "assistant", "parts": parts or [
                    {"type": "text", "content": msg.content}]}]))
        s.end()

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, **kw: Any) -> None:
        name = (serialized or {}).get("name") or kw.get("name")
        self._start(run_id, parent_run_id, f"execute_tool {name}", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.agent.name": self._agent(parent_run_id), "input.value": input_str})

    def on_tool_end(self, output: Any, *, run_id: UUID, **kw: Any) -> None:
        s = self.spans.pop(run_id)
        s.set_attribute("output.value", str(getattr(output, "content", output)))
        failed = getattr(output, "status", "success") == "error"
        s.set_status(Status(StatusCode.ERROR if failed else StatusCode.OK))
        s.end()


def _run_both_ways(tmp_path: Path, *, rich: bool) -> tuple[Path, Path]:
    rec = RunRecorder("survey", question=TASK, agents=AGENTS, orchestrator="supervisor",
                      succeeded=True)
    otel_file = tmp_path / "survey.otlp.json"
    exporter = OtelExporter(endpoint=f"file:{otel_file}")
    try:
        _team().invoke({"messages": [HumanMessage(TASK)]}, {"callbacks": [
            RecordingHandler(rec), _GenAISpans(exporter.tracer, rich=rich)]})
    finally:
        exporter.shutdown()
    return rec.write(tmp_path / "survey.jsonl"), otel_file


@pytest.mark.parametrize("rich", [False, True], ids=["plain-spans", "openinference-rich"])
def test_recorded_and_traced_run_audit_the_same(tmp_path: Path, rich: bool) -> None:
    """snd, astab, cq, hard flags and diagnoses of the native recording equal those of
    the OpenTelemetry trace of the same run (with or without agent outputs and
    structured tool calls on the spans); both are clean."""
    native_path, otel_path = _run_both_ways(tmp_path, rich=rich)
    native, otel = audit_path(native_path), audit_path(otel_path)
    a, b = native.summary(), otel.summary()
    assert (a.snd, a.astab, a.cq, a.hard_flags, a.diagnoses, a.unsupported) == \
        (b.snd, b.astab, b.cq, b.hard_flags, b.diagnoses, b.unsupported)
    assert [(d.defect, d.detail) for d in native.diagnoses] == \
        [(d.defect, d.detail) for d in otel.diagnoses]
    assert (a.snd, a.hard_flags, a.diagnoses) == (1.0, 0, 0)
    assert otel.trace.family == "otel" and otel.state.decl.name == "icore/otel-import"
    assert native.state.decl.name == "icore/generic-jsonl"
    t = load_otlp(otel_path)
    assert t.orchestrator == "supervisor"  # it routes (handoff spans)
    # the retried save_draft turns carry their tool calls; the routing message is the
    # instruction (as the recorder writes a handoff), never a repeated output
    writer = [s for s in t.steps if s.agent == "writer" and s.kind.value == "output"]
    assert [bool(s.calls) for s in writer] == [True, True, False]
    assert [s.content for s in t.steps if s.kind.value == "instruction"] == [
        "researcher, please take the next step", "writer, please take the next step",
        "researcher, please take the next step"]
    # an agent's answer comes after its tool work, said once
    said = [s.content for s in t.steps if s.agent == "researcher"
            and s.kind.value in ("output", "tool_output")]
    assert said.index("Found 2 papers on multi-agent audit; page A summarises them.") > \
        said.index("<html>content of https://example.org/a</html>")
    assert said.count("Verified: the draft's claims match paper #0.") == 1


def test_goto_end_is_the_end_of_the_run_not_an_agent(tmp_path: Path) -> None:
    """``Command(goto=END)`` records no instruction to an agent ``__end__`` (QA
    qa-new15c S3: it held open work that lowered astab and cq)."""
    native_path, _ = _run_both_ways(tmp_path, rich=False)
    lines = [json.loads(x) for x in native_path.read_text().splitlines()]
    assert not [x for x in lines if x.get("to") == "__end__" or x.get("agent") == "__end__"]
    assert "__end__" not in lines[0]["run"]["agents"]
    r = audit_path(native_path)
    assert all(o.assignee != "__end__" for o in r.state.obligations.values())
    assert lines[-1]["kind"] == "termination" and lines[-1]["agent"] == "supervisor"
