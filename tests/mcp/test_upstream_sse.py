"""An HTTP upstream's SSE answer handed to the SDK as JSON only when it holds nothing but
the response; otherwise every byte replayed as it came (#25 item 7)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anyio
import httpx2
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.mcp._upstream_sse import as_answer, first_answer

RESPONSE = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a\\nb"}]}}'
NOTE = b'{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"m://p"}}'


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, parts: list[bytes]) -> None:
        self.parts, self.closed = parts, False

    async def __aiter__(self) -> Any:
        for p in self.parts:
            yield p

    async def aclose(self) -> None:
        self.closed = True


def _answer(parts: list[bytes]) -> tuple[str, bytes, bool]:
    async def main() -> tuple[str, bytes, bool]:
        inner = _Chunks(parts)
        resp = httpx2.Response(200, headers={"content-type": "text/event-stream"},
                               stream=inner)
        got = await as_answer(resp, 1.0)
        body = b"".join([p async for p in got.stream])
        await got.stream.aclose()
        return got.headers["content-type"], body, inner.closed

    return anyio.run(main)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    idx = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(idx)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=400), max_size=6),
       st.sampled_from([b"\r\n", b"\n"]))
def test_only_the_response_becomes_json(cuts: list[int], nl: bytes) -> None:
    stream = b"event: message" + nl + b"data: " + RESPONSE + nl + nl
    kind, body, closed = _answer(_split(stream, cuts))
    assert kind == "application/json" and json.loads(body)["id"] == 7 and closed


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=400), max_size=6),
       st.sampled_from(["note first", "event id", "priming", "retry", "other event"]))
def test_anything_else_is_replayed_byte_for_byte(cuts: list[int], case: str) -> None:
    first = {"note first": b"event: message\r\ndata: " + NOTE + b"\r\n\r\n",
             "event id": b"id: 1\r\nevent: message\r\ndata: " + RESPONSE + b"\r\n\r\n",
             "priming": b"id: 0\r\ndata: \r\n\r\n",
             "retry": b"retry: 100\r\ndata: " + RESPONSE + b"\r\n\r\n",
             "other event": b"event: ping\r\ndata: x\r\n\r\n"}[case]
    stream = first + b"event: message\r\ndata: " + RESPONSE + b"\r\n\r\n"
    kind, body, closed = _answer(_split(stream, cuts))
    assert kind == "text/event-stream" and body == stream and closed


def test_first_answer_waits_for_the_end_of_the_event() -> None:
    assert first_answer(b"data: " + RESPONSE + b"\r\n") == (None, False)
    assert first_answer(b"data: " + RESPONSE + b"\n\n") == (RESPONSE, True)
    assert first_answer(b"data: " + NOTE + b"\n\n") == (None, True)
