"""Helpers of the AG2 tests: an order world, scripted calls, a run's tool results."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ag2 import Agent
from ag2.events import ToolCallEvent, ToolResultEvent

from icore.workspace import Workspace


def orders() -> tuple[Any, Any, list[tuple[str, str]]]:
    """A workspace with ``order/42`` (Berlin) owned by sales, its shipper, a ship log."""
    ws = Workspace({"order/*": "sales"})
    ws.put("order/42", {"city": "Berlin"}, by="sales")
    return ws, ws.agent("shipper"), []


def call(name: str, **args: Any) -> ToolCallEvent:
    """The model's call of tool ``name`` with JSON ``args``."""
    return ToolCallEvent(name, arguments=json.dumps(args))


def run(agent: Agent, msg: str = "go") -> list[ToolResultEvent]:
    """``agent.ask(msg)``; the tool results (and errors) of the conversation."""
    async def go() -> list[ToolResultEvent]:
        reply = await agent.ask(msg)
        return [e for e in await reply.history.get_events()
                if isinstance(e, ToolResultEvent)]

    return asyncio.run(go())
