"""Runs of the SDK's Chat Completions model recorded (QA r6-oa D6).

``OpenAIChatCompletionsModel`` traces chat messages (an assistant message with
``tool_calls``), and a whole ``Response`` dump when streaming; the recorder reads both as
the model's turns. The model is the SDK's own, talking to a scripted Chat Completions
endpoint (an ``httpx2`` transport answering from a script: no network, no SDK mock).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2 as httpx
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from openai import AsyncOpenAI

from icore.integrations import RunRecorder
from icore.integrations.openai_agents import recording


def _message(step: dict[str, Any]) -> dict[str, Any]:
    calls = [{"id": cid, "type": "function",
              "function": {"name": name, "arguments": json.dumps(args)}}
             for cid, name, args in step.get("calls", ())]
    return {"role": "assistant", "content": step.get("text"), **(
        {"tool_calls": calls} if calls else {})}


def _completion(step: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": _message(step),
                         "finish_reason": "tool_calls" if step.get("calls") else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _chunks(step: dict[str, Any]) -> bytes:
    delta: dict[str, Any] = {"role": "assistant"}
    if step.get("text"):
        delta["content"] = step["text"]
    calls = _message(step).get("tool_calls") or []
    if calls:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(calls)]
    chunks = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": {},
                            "finish_reason": "tool_calls" if calls else "stop"}]}]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + \
        b"data: [DONE]\n\n"


def _model(steps: list[dict[str, Any]]) -> OpenAIChatCompletionsModel:
    script = iter(steps)

    def answer(request: httpx.Request) -> httpx.Response:
        step = next(script)
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, content=_chunks(step),
                                  headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=_completion(step))

    client = AsyncOpenAI(api_key="test", base_url="http://scripted/v1",
                         http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)))
    return OpenAIChatCompletionsModel(model="m", openai_client=client)


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_turns_calls_and_answer_are_recorded(stream: bool) -> None:
    """The model's tool-call turn, the call and the final answer are recorded; the run
    audits as ended (not "no terminal marker")."""
    @function_tool
    def get_room(room: str) -> str:
        """Read a room."""
        return json.dumps({"room": room, "rate": 240})

    agent = Agent(name="concierge", tools=[get_room], model=_model([
        {"calls": [("call_1", "get_room", {"room": "301"})]}, {"text": "done"}]))
    rec = RunRecorder("chat-format")

    async def go() -> None:
        with recording(rec, exclusive=True):
            if stream:
                result = Runner.run_streamed(agent, "check room 301")
                async for _ in result.stream_events():
                    pass
            else:
                await Runner.run(agent, "check room 301")

    asyncio.run(go())
    turns = [e for e in rec.events if e["kind"] == "output"]
    assert [t.get("tool_calls") for t in turns] == [
        [{"name": "get_room", "args": {"room": "301"}, "id": "call_1"}], None]  # its id:
    # a fenced call's lines name it, the audit holds them against it (QA qa-new14 S3)
    assert turns[1]["content"] == "done"
    calls = [e for e in rec.events if e["kind"] == "tool_output"]
    assert [(c["tool"], c["exitcode"]) for c in calls] == [("get_room", 0)]
    ends = [e for e in rec.events if e["kind"] == "termination"]
    assert [e["final_answer"] for e in ends] == ["done"]
    assert rec.audit().summary().terminated
