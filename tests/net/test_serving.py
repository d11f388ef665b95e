"""The owner's per-connection protocol: reply order, own writes, handshake clock, TLS bytes."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from icore.memory import HeadEntry
from icore.net import (
    Commit,
    CommitAck,
    FrameDecoder,
    HeadQuery,
    HeadReplyMsg,
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
from tests.net.conftest import World


async def _exchange(addr: tuple[str, int], certs: Path, frames: list[bytes], n: int
                    ) -> list[object]:
    """Write ``frames`` in one TLS record; return the first ``n`` replies."""
    reader, writer = await asyncio.open_connection(*addr)
    ch = SecureChannel(reader, writer, client_context(certs, "a"), server_side=False,
                       stats=TrafficStats())
    await ch.handshake()
    ch.send(b"".join(frames))
    dec, out = FrameDecoder(), []
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
    assert [r.rid for r in replies] == [1, 2, 3, 4]  # type: ignore[attr-defined]
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
