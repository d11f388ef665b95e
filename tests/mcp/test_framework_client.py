"""An agent framework as the MCP client: the OpenAI Agents SDK's ``MCPServerStdio``
launching the gateway, driven by a scripted ``Model`` (no network)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("agents")

from agents import Agent, Model, ModelResponse, Runner, Usage
from agents.mcp import MCPServerStdio
from agents.testing import assistant_message, function_call

from .conftest import env, stdio_upstream, upstream_log, write_manifest


class ScriptModel(Model):
    """Each turn returns the next scripted output; keeps what the model was shown."""

    def __init__(self, turns: Iterator[list[Any]]) -> None:
        self.turns = turns
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any,
                           **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        self.tools = [t.name for t in tools]
        return ModelResponse(output=next(self.turns), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


async def book_twice(server: Any, args: dict[str, Any]) -> tuple[ScriptModel, Any]:
    """An agent whose scripted model calls ``book(args)`` twice, then answers.

    The first call is refused (the session read nothing: the gateway shows the facts),
    the second runs. Returns the model (what it was shown) and the run's result.
    """
    model = ScriptModel(iter([
        [function_call("book", args, call_id="c1")],
        [function_call("book", args, call_id="c2")],
        [assistant_message("Booked Porto once the gateway showed me the current facts.")],
    ]))
    async with server:
        agent = Agent(name="traveler", instructions="Book trips.", model=model,
                      mcp_servers=[server])
        return model, await Runner.run(agent, "Book Porto")


def test_openai_agents_through_gateway(tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log, 5.0)})
    args = {"city": "Porto", "price": 100}
    server = MCPServerStdio(params={"command": sys.executable,
                                    "args": ["-m", "icore", "mcp", str(manifest)],
                                    "env": env()},
                            client_session_timeout_seconds=30)
    model, result = anyio.run(book_twice, server, args)
    assert "Booked Porto" in str(result.final_output)
    assert "book" in model.tools and "icore_get_fact" in model.tools
    shown = str(model.inputs[1])
    assert "PlanFence blocked book" in shown and "memo://price" in shown
    books = [x for x in upstream_log(log) if x["tool"] == "book"]
    assert [b["args"] for b in books] == [args]  # the refused call never arrived
    trace = (tmp_path / "trace.jsonl").read_text()
    assert "not_read" in trace and '"valid"' in trace
