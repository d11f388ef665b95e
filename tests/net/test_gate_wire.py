"""The gate over real TLS on 127.0.0.1: what one validation puts on the wire (issue 27).

A validation's latency is its round trip plus the gate's own work; these tests pin the
wire side: one request frame per owner, in one TLS record and one socket write; the
owner's *same* answer carries the gate's own frontier ids; a silent owner on a live
connection still costs the timeout and blocks (fail closed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from icore.fence import Outcome, Reason, avalidate
from icore.memory import OwnershipMap
from icore.net import (
    FrameDecoder,
    OwnerClient,
    Ping,
    Pong,
    SecureChannel,
    ServerThread,
    TrafficStats,
    TransportError,
    client_context,
    encode_frame,
    server_context,
)

from .conftest import World

DEPS = ["req/a", "req/b", "req/c"]


def _count_writes(link: Any) -> list[bytes]:
    """Record every ciphertext write the connection makes from now on."""
    writes: list[bytes] = []
    write = link._write

    def counted(data: bytes) -> None:
        writes.append(data)
        write(data)

    link._write = counted
    return writes


def _client(servers: dict[str, ServerThread], certs: Path) -> OwnerClient:
    return OwnerClient({o: s.address for o, s in servers.items()}, identity="executor",
                       ssl_context=client_context(certs, "executor"))


def _gate_args(world: World, c: OwnerClient) -> dict[str, Any]:
    return {"roots": [world.plan.id], "deps": DEPS, "lookup": world.local.lookup,
            "ownership": world.ownership, "owners": c}


def test_one_validation_is_one_frame_in_one_write_per_owner(
        world: World, servers: dict[str, ServerThread], certs: Path) -> None:
    """Each owner gets the validation's one head query as one TLS record in one write."""
    async def go() -> None:
        async with _client(servers, certs) as c:
            kw = _gate_args(world, c)
            assert (await avalidate(**kw)).outcome is Outcome.AUTHORIZED  # connects
            writes = {o: _count_writes(c._conns[o]) for o in servers}
            before = c.stats.snapshot()
            for _ in range(3):
                d = await avalidate(**kw)
                assert d.outcome is Outcome.AUTHORIZED, d.detail
            delta = c.stats - before
            assert delta.frames_out == delta.frames_in == delta.rpcs == 9
            for o, w in writes.items():
                assert len(w) == 3, (o, [len(x) for x in w])
                assert all(x[:1] == b"\x17" for x in w)  # each one TLS application record
                assert all(int.from_bytes(x[3:5], "big") + 5 == len(x) for x in w)
    asyncio.run(go())


def test_same_heads_answer_with_the_frontier_ids(
        world: World, servers: dict[str, ServerThread], certs: Path) -> None:
    """Unchanged heads come back as *same*: the decision's heads are the frontier ids;
    a revised head is a full entry and asks for a replan."""
    async def go() -> tuple[Any, Any]:
        async with _client(servers, certs) as c:
            kw = _gate_args(world, c)
            same = await avalidate(**kw)
            world.revise("b")
            return same, await avalidate(**kw)
    same, changed = asyncio.run(go())
    assert same.outcome is Outcome.AUTHORIZED and same.heads == same.frontier
    assert changed.outcome is Outcome.REPLAN_REQUIRED
    assert changed.heads["req/b"] == world.reqs["b"].id != changed.frontier["req/b"]
    assert {k: v for k, v in changed.heads.items() if k != "req/b"} == {
        k: v for k, v in changed.frontier.items() if k != "req/b"}


@pytest.mark.parametrize("timeout_s", [0.2, 0.4])
def test_a_silent_owner_on_a_live_connection_blocks_after_the_timeout(
        world: World, certs: Path, timeout_s: float) -> None:
    """The owner answered a ping, then answers nothing: the gate blocks (owner
    unavailable, the RPC timed out) and the client forgot the request."""
    async def go() -> tuple[Any, int, bool]:
        ended = asyncio.Event()

        async def owner(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            ch = SecureChannel(reader, writer, server_context(certs, "a"), server_side=True,
                               stats=TrafficStats())
            try:
                await ch.handshake()
                dec = FrameDecoder()
                answered = False
                while data := await ch.recv():  # until the client closes
                    for msg in dec.feed(data):
                        if isinstance(msg, Ping) and not answered:
                            ch.send(encode_frame(Pong(msg.rid, "a")))
                            answered = True
            except (ConnectionError, TransportError):
                pass  # the client dropped the connection instead of closing it
            finally:
                ch.abort()
                ended.set()

        srv = await asyncio.start_server(owner, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        try:
            async with OwnerClient({"a": ("127.0.0.1", port)}, identity="executor",
                                   ssl_context=client_context(certs, "executor")) as c:
                assert await c.ping("a") == "a"  # the connection is live
                only_a = OwnershipMap.from_mapping({"req/a": "a", "plan/*": "executor"})
                d = await avalidate(roots=[world.plan.id], deps=["req/a"],
                                    lookup=world.local.lookup, ownership=only_a, owners=c,
                                    timeout_s=timeout_s)
                link = c._conns["a"]
                got = d, len(link.pending), link.dead is None
            await asyncio.wait_for(ended.wait(), 30.0)
            return got
        finally:
            srv.close()
            await srv.wait_closed()

    d, pending, alive = asyncio.run(go())
    assert d.outcome is Outcome.BLOCKED and d.reason is Reason.OWNER_UNAVAILABLE
    assert "RpcTimeout" in d.detail
    assert pending == 0 and alive
