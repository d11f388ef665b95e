"""Real TCP on 127.0.0.1 with mutual TLS 1.3: clients, servers, the gate, security."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from icore.fence import Outcome, avalidate, validate
from icore.memory import AsyncOwnerAccess, OwnerAccess
from icore.net import (
    PROTOCOL_VERSION,
    AuthenticationError,
    ConnectionClosed,
    ErrorReply,
    FrameDecoder,
    MalformedMessage,
    OwnerClient,
    OwnerUnreachable,
    Ping,
    Pong,
    RemoteError,
    RpcTimeout,
    SecureChannel,
    SecurityEvent,
    ServerThread,
    SyncOwnerClient,
    TrafficStats,
    TransportError,
    client_context,
    encode_frame,
    server_context,
)
from icore.records import Record, record_to_wire

from .conftest import World

DEPS = ["req/a", "req/b", "req/c"]


def _addrs(servers: dict[str, ServerThread]) -> dict[str, tuple[str, int]]:
    return {o: s.address for o, s in servers.items()}


@pytest.fixture
def sync_client(servers: dict[str, ServerThread], certs: Path) -> Iterator[SyncOwnerClient]:
    """A sync client authenticated as the executor."""
    with SyncOwnerClient(_addrs(servers), identity="executor",
                         ssl_context=client_context(certs, "executor")) as c:
        yield c


class TestGateOverTcp:
    """The gate runs unchanged over authenticated TCP (sync and async)."""

    def test_protocols(self, sync_client: SyncOwnerClient, certs: Path) -> None:
        """The clients implement the owner-access protocols."""
        assert isinstance(sync_client, OwnerAccess)
        assert isinstance(OwnerClient({}, identity="executor",
                                      ssl_context=client_context(certs, "executor")),
                          AsyncOwnerAccess)

    def test_sync_gate(self, world: World, sync_client: SyncOwnerClient) -> None:
        """Authorized, then replan-required with fresh verified records after a revision."""
        kw = {"roots": [world.plan.id], "deps": DEPS, "lookup": world.local.lookup,
              "ownership": world.ownership, "owners": sync_client}
        assert validate(**kw).outcome is Outcome.AUTHORIZED  # type: ignore[arg-type]
        new = world.revise("c")
        d = validate(**kw)  # type: ignore[arg-type]
        assert d.outcome is Outcome.REPLAN_REQUIRED
        assert d.fresh["req/c"] == new
        assert validate(**kw, replanned=True).outcome is Outcome.BLOCKED  # type: ignore[arg-type]

    @pytest.mark.parametrize("per_rpc", [False, True])
    def test_async_gate(self, world: World, servers: dict[str, ServerThread], certs: Path,
                        per_rpc: bool) -> None:
        """avalidate over OwnerClient, reused or new connection per RPC."""
        async def go() -> tuple[Outcome, TrafficStats]:
            async with OwnerClient(_addrs(servers), identity="executor",
                                   ssl_context=client_context(certs, "executor"),
                                   new_connection_per_rpc=per_rpc) as c:
                d = await avalidate(roots=[world.plan.id], deps=DEPS,
                                    lookup=world.local.lookup, ownership=world.ownership,
                                    owners=c)
                return d.outcome, c.stats
        outcome, stats = asyncio.run(go())
        assert outcome is Outcome.AUTHORIZED
        assert stats.connections == 3 and stats.rpcs == 3
        assert stats.handshake_bytes > 3 * 2000

    def test_many_concurrent_executors(self, world: World,
                                       servers: dict[str, ServerThread], certs: Path) -> None:
        """200 concurrent validations share one client and one connection per owner."""
        async def go() -> list[Outcome]:
            async with OwnerClient(_addrs(servers), identity="executor",
                                   ssl_context=client_context(certs, "executor")) as c:
                kw = {"roots": [world.plan.id], "deps": DEPS, "lookup": world.local.lookup,
                      "ownership": world.ownership, "owners": c, "timeout_s": 30.0}
                first = await avalidate(**kw)  # type: ignore[arg-type]
                ds = [first, *await asyncio.gather(*(
                    avalidate(**kw) for _ in range(200)))]  # type: ignore[arg-type]
                assert c.stats.connections == 3
                return [d.outcome for d in ds]
        assert set(asyncio.run(go())) == {Outcome.AUTHORIZED}

    def test_owner_down_blocks(self, world: World, servers: dict[str, ServerThread],
                               sync_client: SyncOwnerClient) -> None:
        """A stopped owner is unreachable; the gate blocks (fail closed)."""
        servers["b"].close()
        with pytest.raises(OwnerUnreachable):
            sync_client.query_heads("b", ["req/b"])
        d = validate(roots=[world.plan.id], deps=DEPS, lookup=world.local.lookup,
                     ownership=world.ownership, owners=sync_client)
        assert d.outcome is Outcome.BLOCKED

    def test_owner_closing_on_refused_request_is_unreachable(
            self, sync_client: SyncOwnerClient) -> None:
        """An owner that refuses a request and closes: OwnerUnreachable naming the owner
        (was a KeyError from merging the closed connection's fields); the client recovers."""
        with pytest.raises(OwnerUnreachable) as ei:
            sync_client.query_heads("a", ["x" * 600], timeout_s=2.0)
        assert ei.value.fields["owner"] == "a"
        assert sync_client.ping("a") == "a"

    def test_junk_record_id_is_refused_before_sending(
            self, sync_client: SyncOwnerClient) -> None:
        """A fetch of something that is not a record id is a typed MalformedMessage."""
        with pytest.raises(MalformedMessage, match="not a record id"):
            sync_client.fetch("a", ["zz"], timeout_s=2.0)
        with pytest.raises(MalformedMessage):
            sync_client.query_heads("a", ["req/a"], known={"req/a": "ab"}, timeout_s=2.0)
        assert sync_client.ping("a") == "a"


class TestClientBehaviour:
    """Timeouts, traffic accounting, writes."""

    def test_timeout(self, certs: Path) -> None:
        """A listener that never answers the handshake costs the RPC timeout."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen(4)
            addr = ("127.0.0.1", sock.getsockname()[1])
            with SyncOwnerClient({"a": addr}, identity="executor",
                                 ssl_context=client_context(certs, "executor")) as c, \
                    pytest.raises(RpcTimeout):
                c.query_heads("a", ["req/a"], timeout_s=0.3)

    def test_bytes_counted_both_sides(self, world: World, servers: dict[str, ServerThread],
                                      sync_client: SyncOwnerClient) -> None:
        """What the client writes the server reads, byte for byte (TLS included)."""
        sync_client.query_heads("a", ["req/a"])
        sync_client.close()
        srv = servers["a"].server
        for _ in range(100):  # bounded wait for the server to see the close
            if not srv._conns:
                break
            asyncio.run(asyncio.sleep(0.01))
        assert sync_client.stats.bytes_out == srv.stats.bytes_in
        # the server's own close_notify (24 bytes) is written after the client left
        assert srv.stats.bytes_out - sync_client.stats.bytes_in in (0, 24)

    def test_commit_and_writer_rule(self, world: World, servers: dict[str, ServerThread],
                                    certs: Path) -> None:
        """An owner commits its own key; another writer is refused (typed), logged."""
        old = world.reqs["a"]
        rec = Record.create(key="req/a", owner="a", seq=2, content={"v": 2}, parents=[old.id])
        addrs = _addrs(servers)
        with SyncOwnerClient(addrs, identity="mallory",
                             ssl_context=client_context(certs, "mallory")) as m:
            with pytest.raises(RemoteError) as ei:
                m.commit("a", rec)
            assert ei.value.fields["remote_code"] == "ownership"
            assert m.ping("a") == "a"  # the same connection keeps being served
        with SyncOwnerClient(addrs, identity="a", ssl_context=client_context(certs, "a")) as w:
            ack = w.commit("a", rec)
            assert ack.seq == 2 and ack.created
        assert world.stores["a"].head("req/a").record_id == rec.id  # type: ignore[union-attr]
        ev = servers["a"].server.events
        assert [(e.kind, e.code, e.peer) for e in ev] == [("request", "ownership", "mallory")]

    def test_wrong_server_identity(self, servers: dict[str, ServerThread], certs: Path) -> None:
        """A server whose certificate names another agent is refused by the client."""
        with SyncOwnerClient({"a": servers["b"].address}, identity="executor",
                             ssl_context=client_context(certs, "executor")) as c, \
                pytest.raises(AuthenticationError):
            c.query_heads("a", ["req/a"])


async def _raw(addr: tuple[str, int], ctx: ssl.SSLContext, frames: list[bytes]
               ) -> tuple[list[object], bool]:
    """Send raw frames over an authenticated channel; return replies and whether closed."""
    reader, writer = await asyncio.open_connection(*addr)
    ch = SecureChannel(reader, writer, ctx, server_side=False, stats=TrafficStats())
    await ch.handshake()
    for f in frames:
        ch.send(f)
    await ch.drain()
    dec = FrameDecoder()
    out: list[object] = []
    closed = False
    for _ in range(50):  # bounded
        try:
            data = await asyncio.wait_for(ch.recv(), 2.0)
        except TransportError:
            closed = True
            break
        except TimeoutError:
            break
        if not data:
            closed = True
            break
        out += dec.feed(data)
    await ch.close()
    return out, closed


def _events(server: ServerThread, n: int = 1, timeout_s: float = 5.0) -> list[SecurityEvent]:
    """The server's security events once it has logged ``n`` (it logs them on its own
    thread, possibly after the client already saw the refusal)."""
    deadline = time.monotonic() + timeout_s
    while len(server.server.events) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return list(server.server.events)


def _frame(obj: object) -> bytes:
    body = msgpack.packb(obj, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


class TestSecurity:
    """Each attack: typed error, logged, and the service keeps serving others."""

    @pytest.fixture
    def server(self, world: World, servers: dict[str, ServerThread]) -> ServerThread:
        return servers["a"]

    def _still_serves(self, server: ServerThread, certs: Path) -> None:
        with SyncOwnerClient({"a": server.address}, identity="b",
                             ssl_context=client_context(certs, "b")) as c:
            assert c.ping("a") == "a"

    def test_no_certificate(self, server: ServerThread, certs: Path,
                            caplog: pytest.LogCaptureFixture) -> None:
        """A client without a certificate fails the handshake."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(cafile=str(certs / "ca.crt"))
        with caplog.at_level(logging.WARNING, logger="icore.net"), \
                SyncOwnerClient({"a": server.address}, identity="executor",
                                ssl_context=ctx) as c, \
                pytest.raises((AuthenticationError, OwnerUnreachable)):
            c.ping("a", timeout_s=2.0)
        assert [e.kind for e in _events(server)] == ["handshake"]
        assert "refused handshake" in caplog.text
        self._still_serves(server, certs)

    def test_other_ca_client(self, server: ServerThread, certs: Path,
                             other_certs: Path) -> None:
        """A certificate from another CA is refused by the server."""
        with SyncOwnerClient({"a": server.address}, identity="executor",
                             ssl_context=client_context(other_certs, "executor")) as c, \
                pytest.raises(TransportError):
            c.ping("a", timeout_s=2.0)
        assert _events(server)[0].kind == "handshake"
        self._still_serves(server, certs)

    def test_other_ca_server(self, world: World, other_certs: Path, certs: Path) -> None:
        """A server with a certificate from another CA is refused by the client."""
        with ServerThread(world.stores["a"], agent="a",
                          ssl_context=server_context(other_certs, "a")) as evil, \
                SyncOwnerClient({"a": evil.address}, identity="executor",
                                ssl_context=client_context(certs, "executor")) as c, \
                pytest.raises(AuthenticationError):
            c.ping("a")

    def test_record_not_hashing_to_id(self, world: World, server: ServerThread,
                                      certs: Path) -> None:
        """A commit whose content does not hash to the id: InvalidRecord, closed."""
        old = world.reqs["a"]
        rec = Record.create(key="req/a", owner="a", seq=2, content={"v": 2}, parents=[old.id])
        wire = record_to_wire(rec)
        wire[9] = b'{"v":666}'
        replies, closed = asyncio.run(_raw(server.address, client_context(certs, "a"),
                                           [_frame([PROTOCOL_VERSION, 7, 1, wire])]))
        assert closed
        assert isinstance(replies[0], ErrorReply)
        ev = server.server.events[-1]
        assert (ev.kind, ev.error, ev.peer) == ("protocol", "InvalidRecord", "a")
        assert world.stores["a"].head("req/a").record_id == old.id  # type: ignore[union-attr]
        self._still_serves(server, certs)

    @pytest.mark.parametrize("rids", [[1, 1], [5, 3]], ids=["replayed", "reordered"])
    def test_replayed_or_reordered(self, server: ServerThread, certs: Path,
                                   rids: list[int]) -> None:
        """A replayed or reordered request id: SequenceViolation, closed."""
        frames = [encode_frame(Ping(r)) for r in rids]
        replies, closed = asyncio.run(_raw(server.address, client_context(certs, "b"), frames))
        assert closed
        assert isinstance(replies[0], Pong)
        assert isinstance(replies[1], ErrorReply) and replies[1].code == "transport"
        assert server.server.events[-1].error == "SequenceViolation"
        self._still_serves(server, certs)

    @pytest.mark.parametrize("junk", [
        struct.pack(">I", 2**31) + b"x", b"\x00\x00\x00\x03\xc1\xc1\xc1",
        _frame([PROTOCOL_VERSION, 99, 1]), _frame("not an array"),
        _frame([PROTOCOL_VERSION + 1, 11, 1]),
    ], ids=["oversize", "not-msgpack", "unknown-type", "wrong-shape", "version"])
    def test_garbage_frames(self, server: ServerThread, certs: Path, junk: bytes) -> None:
        """Undecodable frames over a real connection: typed error and a closed connection."""
        _replies, closed = asyncio.run(_raw(server.address, client_context(certs, "b"), [junk]))
        assert closed
        assert server.server.events[-1].kind == "protocol"
        assert server.server.events[-1].code == "transport"
        self._still_serves(server, certs)


class _DelayLink:
    """A link model of the test's own (the emulator's links live in the lab)."""

    def __init__(self, delay_ms: float) -> None:
        self.delay_ms, self.sent = delay_ms, 0

    def deliver(self, t_ms: float, nbytes: int) -> float:
        self.sent += nbytes
        return t_ms + self.delay_ms


class _Path:
    """Any object with ``up``/``down`` links satisfies :class:`icore.net.PathModel`."""

    def __init__(self) -> None:
        self.up, self.down = _DelayLink(1.0), _DelayLink(2.0)


def test_shaped_client_runs_gate(world: World, servers: dict[str, ServerThread],
                                 certs: Path) -> None:
    """A client shaping its real connection with a path model still validates correctly;
    the model sees every byte both ways (the TCP client needs no link emulator)."""
    path = _Path()

    async def go() -> Outcome:
        async with OwnerClient(_addrs(servers), identity="executor",
                               ssl_context=client_context(certs, "executor"),
                               path=path) as c:
            d = await avalidate(roots=[world.plan.id], deps=DEPS, lookup=world.local.lookup,
                                ownership=world.ownership, owners=c, timeout_s=30.0)
            assert d.outcome is Outcome.AUTHORIZED, d.detail
            return d.outcome
    assert asyncio.run(go()) is Outcome.AUTHORIZED
    assert path.up.sent > 0 and path.down.sent > 0


class TestOwnerDropsConnection:
    """An owner dropping the connection with requests pending: every caller still waiting
    gets a typed error, and asyncio reports no "Future exception was never retrieved"
    (reply futures whose caller had already given up: timed out, cancelled, or failed
    while its request was still being written)."""

    @pytest.mark.parametrize("how", ["close", "reset"])
    def test_pending_requests_fail_typed_and_nothing_is_reported(
            self, certs: Path, how: str) -> None:
        reports: list[dict[str, object]] = []

        async def go() -> None:
            asyncio.get_running_loop().set_exception_handler(
                lambda loop, ctx: reports.append(ctx))
            received = [asyncio.Event(), asyncio.Event()]  # 1st, 2nd request read
            drop = asyncio.Event()

            async def owner(reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
                """Authenticates, reads two requests, answers nothing, stops reading
                (so the client's writes back up), then drops the connection."""
                ch = SecureChannel(reader, writer, server_context(certs, "a"),
                                   server_side=True, stats=TrafficStats())
                try:
                    await ch.handshake()
                    dec, n = FrameDecoder(), 0
                    while n < 2:
                        n += len(dec.feed(await ch.recv()))
                        for ev in received[:n]:
                            ev.set()
                    await drop.wait()
                finally:
                    if how == "reset":
                        ch.abort()
                    else:
                        await ch.close()

            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # back up early
            sock.bind(("127.0.0.1", 0))
            srv = await asyncio.start_server(owner, sock=sock)
            addr = ("127.0.0.1", sock.getsockname()[1])
            big = [Record.create(key=f"big/{i}", owner="executor", seq=1,
                                 content="x" * (4 * 2**20 - 1024)) for i in range(3)]
            async with OwnerClient({"a": addr}, identity="executor",
                                   ssl_context=client_context(certs, "executor")) as c:
                waiting = asyncio.create_task(c.ping("a", timeout_s=30.0))
                await asyncio.wait_for(received[0].wait(), 30.0)  # connected
                timed_out = asyncio.create_task(c.ping("a", timeout_s=0.2))
                await asyncio.wait_for(received[1].wait(), 30.0)
                with pytest.raises(RpcTimeout):  # this caller gives up first
                    await timed_out
                replicate = asyncio.create_task(c.replicate("a", big, timeout_s=30.0))
                transport = c._conns["a"].transport
                assert transport is not None
                for _ in range(1000):  # bounded: until the owner's backlog pauses writes
                    if transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:
                        break
                    await asyncio.sleep(0.01)
                else:
                    pytest.fail("the client's writes never backed up")
                # these callers now wait in drain() with their reply futures registered
                in_drain = [asyncio.create_task(c.ping("a", timeout_s=30.0)) for _ in range(2)]
                cancelled = asyncio.create_task(c.ping("a", timeout_s=30.0))
                late = asyncio.create_task(c.ping("a", timeout_s=0.3))
                await asyncio.sleep(0.05)
                cancelled.cancel()
                with pytest.raises(RpcTimeout):
                    await late
                assert not any(t.done() for t in (waiting, replicate, *in_drain))
                drop.set()
                results = await asyncio.gather(waiting, replicate, *in_drain,
                                               return_exceptions=True)
                for r in results:
                    assert isinstance(r, OwnerUnreachable), r
                    assert isinstance(r.__cause__, ConnectionClosed), r.__cause__
                    assert r.fields["owner"] == "a"
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
                del results, r, timed_out, waiting, replicate, in_drain, cancelled, late
            srv.close()
            await srv.wait_closed()
            for _ in range(3):  # reply futures are collected (and would report) here
                gc.collect()
                await asyncio.sleep(0)

        asyncio.run(go())
        gc.collect()
        never = [r for r in reports if "never retrieved" in str(r.get("message"))]
        assert never == [], never
