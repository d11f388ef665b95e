"""The SSE event cap of an HTTP upstream's answers (#29), on any chunking of the stream."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.mcp._upstream_cap import EventCap, sse_cap

LIMIT = 64


class _Chunks:
    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> Any:
        for p in self.parts:
            yield p

    async def aclose(self) -> None:
        pass


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(at)]


def _run(parts: list[bytes], on_over: Any) -> bytes:
    async def main() -> bytes:
        return b"".join([x async for x in EventCap(_Chunks(parts), LIMIT, on_over)])
    return anyio.run(main)


_EVENT = st.builds(lambda n, sep: b"data: " + b"x" * n + sep, st.integers(0, 150),
                   st.sampled_from([b"\n\n", b"\r\n\r\n"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(_EVENT, max_size=6), st.lists(st.integers(0, 10**6), max_size=8))
def test_events_pass_whole_and_one_over_the_cap_is_cut_out(events: list[bytes],
                                                           cuts: list[int]) -> None:
    """Events within the cap come out byte for byte; each one over it is handed to
    ``on_over`` with its first bytes and exact size (then dropped), however the stream
    is cut into chunks."""
    data = b"".join(events)
    seen: list[tuple[bytes, int]] = []

    def on_over(head: bytes, size: int) -> bytes | None:
        seen.append((head, size))
        return None

    out = _run(_cut(data, cuts), on_over)
    def body(e: bytes) -> bytes:
        return e[:len(e) - (4 if e.endswith(b"\r\n\r\n") else 2)]

    kept = [e for e in events if len(body(e)) <= LIMIT]
    over = [e for e in events if len(body(e)) > LIMIT]
    assert len(seen) == len(over) and all(len(h) > 0 for h, _ in seen)
    assert seen == [(e[:len(head)], len(body(e)))
                    for (head, _), e in zip(seen, over, strict=True)]
    assert out == b"".join(kept)


def test_an_answer_over_the_cap_fails_its_request_and_ends_the_stream() -> None:
    """The response event over the cap becomes the request's JSON-RPC error (its id),
    the stream ends there; a notification over the cap is dropped, the stream goes on."""
    import json
    post = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "big"}}).encode()
    note = b'data: {"jsonrpc": "2.0", "method": "notifications/message", "params": "' + \
        b"n" * 200 + b'"}\n\n'
    small = b'data: {"jsonrpc": "2.0", "id": 7, "result": {}}\n\n'
    big = b'data: {"jsonrpc": "2.0", "id": 7, "result": {"x": "' + b"y" * 200 + b'"}}\n\n'
    assert _run([note, small], sse_cap(post, LIMIT, "up")) == small
    out = _run([big[:50], big[50:], small], sse_cap(post, LIMIT, "up"))
    event = json.loads(out.removeprefix(b"event: message\ndata: "))
    assert event["id"] == 7 and event["error"]["code"] == -32098
    assert event["error"]["data"] == {"size": len(big) - 2, "limit": LIMIT,
                                      "request": "tools/call big"}
