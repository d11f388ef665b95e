"""The owner's per-connection protocol: reply order, own writes, handshake clock, TLS bytes."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from tests.net.conftest import World

from icore.fence import Outcome, Reason, avalidate
from icore.memory import HeadEntry
from icore.net import (
    Commit,
    CommitAck,
    FrameDecoder,
    HeadQuery,
    HeadReplyMsg,
    Message,
    OwnerClient,
    OwnerServer,
    Ping,
    Pong,
    SecureChannel,
    ServerThread,
    TrafficStats,
    client_context,
    encode_frame,
    server_context,
)
from icore.net._tcp.tls import TlsSession
from icore.records import Record


async def _exchange(addr: tuple[str, int], certs: Path, frames: list[bytes], n: int
                    ) -> list[Message]:
    """Write ``frames`` in one TLS record; return the first ``n`` replies."""
    reader, writer = await asyncio.open_connection(*addr)
    ch = SecureChannel(reader, writer, client_context(certs, "a"), server_side=False,
                       stats=TrafficStats())
    await ch.handshake()
    ch.send(b"".join(frames))
    dec, out = FrameDecoder(), list[Message]()
    while len(out) < n:  # bounded by the timeout below
        out += dec.feed(await asyncio.wait_for(ch.recv(), 5.0))
    await ch.close()
    return out


def test_a_query_behind_a_commit_sees_it_and_replies_keep_order(
        world: World, servers: dict[str, ServerThread], certs: Path) -> None:
    """[query, commit, query, ping] in one read: replies in request order, and the query
    after the commit is answered only once the commit is durable, with its head."""
    old = world.reqs["a"]
    new = Record.create(key="req/a", owner="a", seq=2, content={"v": 2}, parents=[old.id])
    frames = [encode_frame(HeadQuery(1, ("req/a",))), encode_frame(Commit(2, new)),
              encode_frame(HeadQuery(3, ("req/a",))), encode_frame(Ping(4))]
    replies = asyncio.run(_exchange(servers["a"].address, certs, frames, 4))
    assert [r.rid for r in replies] == [1, 2, 3, 4]
    first, ack, second, pong = replies
    assert isinstance(first, HeadReplyMsg) and first.heads == (HeadEntry("req/a", old.id, 1),)
    assert isinstance(ack, CommitAck) and ack.record_id == new.id
    assert isinstance(second, HeadReplyMsg)
    assert second.heads == (HeadEntry("req/a", new.id, 2),)
    assert isinstance(pong, Pong)


def test_a_silent_connection_is_refused_at_the_handshake_timeout(
        world: World, certs: Path) -> None:
    """A client that never speaks TLS costs the owner one timer, then a logged refusal."""

    async def go() -> list[str]:
        server = OwnerServer(world.stores["a"], agent="a",
                             ssl_context=server_context(certs, "a"), handshake_timeout_s=0.2)
        port = await server.start()
        try:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.settimeout(5.0)
                deadline = time.monotonic() + 5.0
                while not server.events and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                assert sock.recv(1) == b""  # the owner closed it
            return [f"{e.kind}:{e.error}" for e in server.events]
        finally:
            await server.close()

    assert asyncio.run(go()) == ["handshake:TimeoutError"]


def test_tls_session_counts_every_byte_both_ways(certs: Path) -> None:
    """Two sessions in memory: each side's bytes out are the other's bytes in."""
    cs, ss = TrafficStats(), TrafficStats()
    cli = TlsSession(client_context(certs, "a"), server_side=False, stats=cs)
    srv = TlsSession(server_context(certs, "b"), server_side=True, stats=ss)
    assert not cli.handshake()
    for _ in range(10):  # bounded: TLS 1.3 needs two flights
        srv.handshake(cli.outgoing())
        back = srv.outgoing()
        if cli.handshake(back) and srv.established:
            break
    assert cli.peer == "b" and srv.peer == "a"
    assert srv.receive(cli.seal(b"hello")) == b"hello"
    assert cli.receive(srv.seal(b"world")) == b"world"
    srv.receive(cli.close())
    assert srv.closed
    assert cs.bytes_out == ss.bytes_in and ss.bytes_out == cs.bytes_in
    assert 0 < cs.handshake_bytes < cs.total_bytes


def test_gate_over_the_owner_client_blocks_in_time(world: World, certs: Path) -> None:
    """The gate sets no timer of its own over OwnerClient (``bounds_timeouts``): an owner
    that accepts but never answers still blocks the gate within the timeout."""
    assert OwnerClient.bounds_timeouts is True

    async def go() -> tuple[Outcome, Reason, float]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen(4)
            addrs = {o: ("127.0.0.1", sock.getsockname()[1]) for o in ("a", "b", "c")}
            async with OwnerClient(addrs, identity="executor",
                                   ssl_context=client_context(certs, "executor")) as c:
                t0 = time.monotonic()
                d = await avalidate(roots=[world.plan.id], deps=["req/a", "req/b", "req/c"],
                                    lookup=world.local.lookup, ownership=world.ownership,
                                    owners=c, timeout_s=0.3)
                return d.outcome, d.reason, time.monotonic() - t0

    outcome, reason, took = asyncio.run(go())
    assert (outcome, reason) == (Outcome.BLOCKED, Reason.OWNER_UNAVAILABLE)
    assert took < 5.0
