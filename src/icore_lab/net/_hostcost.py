"""The host CPU model of the virtual-time transports (planfence Sec. 6.1, App. A.1).

TLS handshake and record costs (:class:`TlsCost`), the per-request host costs
(:class:`HostCost`) and the cores that serve them (:class:`HostCpu`), so that virtual
time charges what a real owner service spends. Used by :mod:`icore_lab.net._virtual`.
"""

from __future__ import annotations

import asyncio
import math
import ssl
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass

from icore._clock import ManualClock
from icore.memory import Store
from icore.net import (
    CommitAck,
    FetchReply,
    HeadQuery,
    MalformedMessage,
    Message,
    OwnerHandler,
    OwnerUnreachable,
    RpcTimeout,
    TrafficStats,
    decode_frame,
    encode_frame,
)
from icore.net._stats import raise_for_error
from icore.records import Record, RecordId
from icore_lab.net._links import Link, LinkPair, Loopback
from icore_lab.net._vloop import VirtualTimeLoop


@dataclass(frozen=True, slots=True)
class TlsCost:
    """Byte cost of TLS 1.3 with mutual certificate authentication.

    Defaults were measured with :meth:`measure` on certificates made by
    ``icore certs init`` (ECDSA P-256 team CA + agent certificate, OpenSSL 3, Python 3.11;
    servers send no session tickets, see :func:`icore.net.server_context`). ECDSA
    signatures vary by a byte or two between certificates.

    Attributes:
        client_hello: first client flight (ClientHello with key share), bytes.
        server_flight: ServerHello..Certificate..CertificateVerify..Finished, bytes.
        client_flight: client Certificate, CertificateVerify, Finished, bytes.
        tickets: NewSessionTicket messages the server sends after the handshake, bytes.
        record_overhead: bytes added to each application message (5-byte header,
            1-byte inner content type, 16-byte AEAD tag).
        close: one close_notify alert, bytes.
    """

    client_hello: int = 225
    server_flight: int = 1313
    client_flight: int = 1090
    tickets: int = 0
    record_overhead: int = 22
    close: int = 24

    @classmethod
    def measure(cls, client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext) -> TlsCost:
        """Measure the flights of one real in-memory TLS handshake between two contexts.

        No sockets: both ends run on ``ssl.MemoryBIO`` pairs in this thread.

        Raises:
            ssl.SSLError: the contexts do not authenticate each other.
        """
        ci, co, si, so = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
        c = client_ctx.wrap_bio(ci, co, server_side=False)
        s = server_ctx.wrap_bio(si, so, server_side=True)

        def step(obj: ssl.SSLObject) -> bool:
            try:
                obj.do_handshake()
                return True
            except ssl.SSLWantReadError:
                return False

        step(c)
        hello = co.read()
        si.write(hello)
        step(s)
        sflight = so.read()
        ci.write(sflight)
        step(c)
        cflight = co.read()
        si.write(cflight)
        step(s)
        tickets = so.read()
        s.write(b"x")
        overhead = len(so.read()) - 1
        try:
            c.unwrap()
        except ssl.SSLError:
            pass
        close = len(co.read())
        return cls(client_hello=len(hello), server_flight=len(sflight),
                   client_flight=len(cflight), tickets=len(tickets),
                   record_overhead=overhead, close=close)

    @property
    def handshake_bytes(self) -> int:
        """Bytes of one full handshake, both directions, tickets included."""
        return self.client_hello + self.server_flight + self.client_flight + self.tickets


DEFAULT_TLS_COST = TlsCost()
"""TLS cost model used when none is given."""


@dataclass(frozen=True, slots=True)
class HostCost:
    """CPU time an end host spends per protocol step, in ms (virtual transports only).

    Attributes:
        message_ms: per message a host sends (encode, TLS record, syscalls).
        handshake_client_ms: client-side TLS 1.3 handshake work with certificates
            (key share, verifying the owner's chain, signing CertificateVerify).
        handshake_server_ms: the same on the owner side.

    The default costs nothing (a pure network model). ``icore bench planfence`` uses
    ``NetSpec.host_cost`` (handshake costs measured with ``icore bench net``).

    Raises:
        ValueError: a cost is negative or not finite.
    """

    message_ms: float = 0.0
    handshake_client_ms: float = 0.0
    handshake_server_ms: float = 0.0

    def __post_init__(self) -> None:
        for name in ("message_ms", "handshake_client_ms", "handshake_server_ms"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"HostCost.{name} must be a finite number >= 0, got {v}")


class HostCpu:
    """One end host's CPU on virtual time: work items run one at a time, in arrival order.

    It models a single-threaded agent or owner process.

    Share one instance between every transport that models the same process, so that
    concurrent handshakes and requests queue for it. Call :meth:`run` in time order.
    """

    __slots__ = ("busy_until_ms",)

    def __init__(self) -> None:
        self.busy_until_ms = -math.inf

    def run(self, t_ms: float, cost_ms: float) -> float:
        """Queue ``cost_ms`` of work arriving at ``t_ms``; return its completion time (ms).

        Zero-cost work completes at once without waiting for the CPU.
        """
        if cost_ms <= 0.0:
            return t_ms
        end = max(t_ms, self.busy_until_ms) + cost_ms
        self.busy_until_ms = end
        return end


class _Core:
    """Shared machinery of the sync and async virtual transports."""

    def __init__(self, owners: Mapping[str, Store | OwnerHandler], *,
                 clock: ManualClock | None, path: LinkPair | None, up: Link | None,
                 down: Link | None, identity: str, new_connection_per_rpc: bool,
                 tls: TlsCost | None, server_time_ms: float, inline_max_bytes: int,
                 host_cost: HostCost | None = None, cpu: HostCpu | None = None,
                 owner_cpus: Mapping[str, HostCpu] | None = None) -> None:
        self.clock = clock if clock is not None else ManualClock()
        self.cost = host_cost if host_cost is not None else HostCost()
        self.cpu = cpu if cpu is not None else HostCpu()
        self.owner_cpus: dict[str, HostCpu] = dict(owner_cpus or {})
        self.handlers: dict[str, OwnerHandler] = {
            o: h if isinstance(h, OwnerHandler) else OwnerHandler(h, agent=o)
            for o, h in owners.items()
        }
        if path is not None:
            up, down = path.up, path.down
        self.up: Link = up if up is not None else Loopback()
        self.down: Link = down if down is not None else Loopback()
        self.identity = identity
        self.new_connection_per_rpc = new_connection_per_rpc
        self.tls = tls
        self.server_time_ms = float(server_time_ms)
        self.inline_max_bytes = inline_max_bytes
        self.stats = TrafficStats()
        self.unavailable: set[str] = set()
        self._connected: set[str] = set()
        self._rid = 0
        self.stall_ms = 0.0

    def next_rid(self) -> int:
        """The next request id (1, 2, ...: unique per transport)."""
        self._rid += 1
        return self._rid

    def warm(self, owners: Sequence[str] | None = None) -> None:
        """Mark connections to ``owners`` (default: all) as open, without cost (setup)."""
        self._connected.update(owners if owners is not None else self.handlers)

    def _overhead(self) -> int:
        return self.tls.record_overhead if self.tls is not None else 0

    def _send(self, link: Link, t_send: float, nbytes: int
              ) -> Generator[float, None, float]:
        """Wait until ``t_send``, hand ``nbytes`` to ``link`` and wait for the arrival.

        Returns:
            The arrival time, in virtual ms.
        """
        if t_send > self.clock.now_ms() + 1e-6:
            yield t_send
        arrival = link.deliver(t_send, nbytes)
        yield arrival
        return arrival

    def _owner_cpu(self, owner: str) -> HostCpu:
        cpu = self.owner_cpus.get(owner)
        if cpu is None:
            cpu = self.owner_cpus[owner] = HostCpu()
        return cpu

    def steps(self, owner: str, req: Message) -> Generator[float, None, Message]:
        """Yield the virtual times to wait until; return the decoded reply.

        Every message is handed to its link only once virtual time has reached its send
        time (the generator yields that time first), so concurrent RPCs that share a
        link enter its FIFO in send-time order, as packets enter ``mm-link``'s queue;
        the same holds for work queued on a :class:`HostCpu`. A caller that stops
        iterating (a timeout) sends nothing more: bytes already sent stay queued on the
        link, later flights are never sent.
        """
        s = self.stats
        handler = self.handlers.get(owner)
        if handler is None or owner in self.unavailable:
            # a silent owner: the caller waits for its timeout
            yield float("inf")
            raise OwnerUnreachable("owner is unavailable", owner=owner)
        cost, cpu, ocpu = self.cost, self.cpu, self._owner_cpu(owner)
        msg_ms = cost.message_ms
        t = self.clock.now_ms()
        extra_up = 0
        extra_down = 0
        client_work = msg_ms
        if owner not in self._connected:
            s.connections += 1
            t = yield from self._send(self.up, cpu.run(t, msg_ms), 0)          # SYN
            t = yield from self._send(self.down, ocpu.run(t, msg_ms), 0)       # SYN/ACK
            if self.tls is not None:
                tls = self.tls
                s.bytes_out += tls.client_hello
                t = yield from self._send(self.up, cpu.run(t, msg_ms), tls.client_hello)
                s.bytes_in += tls.server_flight
                t = yield from self._send(self.down,
                                     ocpu.run(t, msg_ms + cost.handshake_server_ms),
                                     tls.server_flight)
                s.handshake_bytes += tls.handshake_bytes
                extra_up = tls.client_flight
                extra_down = tls.tickets
                client_work += cost.handshake_client_ms
            if not self.new_connection_per_rpc:
                self._connected.add(owner)
        wire = encode_frame(req)
        n_up = len(wire) + self._overhead() + extra_up
        s.bytes_out += n_up
        s.frames_out += 1
        t = yield from self._send(self.up, cpu.run(t, client_work), n_up)
        served = handler.handle(decode_frame(wire), self.identity)
        reply_wire = encode_frame(served)
        n_down = len(reply_wire) + self._overhead() + extra_down
        s.bytes_in += n_down
        s.frames_in += 1
        t = yield from self._send(self.down, ocpu.run(t, self.server_time_ms + msg_ms), n_down)
        if self.new_connection_per_rpc and self.tls is not None:
            # both close_notify alerts leave once the reply is in; nobody waits for them
            self.up.deliver(t, self.tls.close)
            self.down.deliver(t, self.tls.close)
            s.bytes_out += self.tls.close
            s.bytes_in += self.tls.close
        s.rpcs += 1
        return decode_frame(reply_wire)

    def run_sync(self, owner: str, req: Message, timeout_s: float) -> Message:
        """Run one RPC to ``owner`` by moving the shared clock through :meth:`steps`.

        The time spent (virtual ms) is added to ``stall_ms``.

        Raises:
            RpcTimeout: the reply would arrive after ``timeout_s`` seconds (the clock is
                left at the deadline; ``stats.failures`` counts it).
            OwnerUnreachable: ``owner`` has no handler or is marked unavailable (after
                the timeout, as a silent owner).
        """
        t0 = self.clock.now_ms()
        deadline = t0 + timeout_s * 1000.0
        gen = self.steps(owner, req)
        try:
            t = next(gen)
            while True:
                if t > deadline:
                    gen.close()
                    self.clock.set(max(deadline, self.clock.now_ms()))
                    self.stats.failures += 1
                    raise RpcTimeout("owner did not answer in time", owner=owner,
                                     timeout_s=timeout_s, rid=req.rid)
                self.clock.set(max(t, self.clock.now_ms()))
                t = gen.send(None)
        except StopIteration as stop:
            reply: Message = stop.value
            return reply
        finally:
            self.stall_ms += self.clock.now_ms() - t0

    async def run_async(self, owner: str, req: Message, timeout_s: float) -> Message:
        """:meth:`run_sync` for a coroutine, so concurrent RPCs interleave in virtual time.

        On a :class:`VirtualTimeLoop` over the same clock it sleeps through
        :meth:`steps`; on any other loop it runs :meth:`run_sync` inline.

        Raises:
            RpcTimeout: as :meth:`run_sync`.
            OwnerUnreachable: as :meth:`run_sync`.
        """
        loop = asyncio.get_running_loop()
        if not (isinstance(loop, VirtualTimeLoop) and loop.clock is self.clock):
            return self.run_sync(owner, req, timeout_s)
        t0 = self.clock.now_ms()
        deadline = t0 + timeout_s * 1000.0
        gen = self.steps(owner, req)
        try:
            t = next(gen)
            while True:
                if t > deadline:
                    gen.close()
                    await asyncio.sleep(max(0.0, deadline - self.clock.now_ms()) / 1000.0)
                    self.stats.failures += 1
                    raise RpcTimeout("owner did not answer in time", owner=owner,
                                     timeout_s=timeout_s, rid=req.rid)
                await asyncio.sleep(max(0.0, t - self.clock.now_ms()) / 1000.0)
                t = gen.send(None)
        except StopIteration as stop:
            reply: Message = stop.value
            return reply
        finally:
            self.stall_ms += self.clock.now_ms() - t0

    # -- request builders / reply checks ---------------------------------------------
    def head_query(self, keys: Sequence[str], known: Mapping[str, RecordId] | None
                   ) -> HeadQuery:
        """A head query for ``keys`` with a fresh request id.

        ``known`` maps keys to the ids the caller holds, so the owner may inline a
        changed record of at most ``inline_max_bytes`` bytes (design.md 3.2).
        """
        return HeadQuery(self.next_rid(), tuple(keys), dict(known or {}),
                         self.inline_max_bytes)

    @staticmethod
    def records_of(reply: Message, owner: str) -> list[Record]:
        """The records of a fetch reply from ``owner``.

        Raises:
            HeadConflict: the reply is the owner's head-conflict error.
            RemoteError: the reply is any other error reply.
            MalformedMessage: the reply is not a fetch reply.
        """
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, FetchReply):
            raise MalformedMessage(f"expected a fetch reply, got {type(reply).__name__}",
                                   owner=owner)
        return list(reply.records)

    @staticmethod
    def commit_ack(reply: Message, owner: str) -> CommitAck:
        """The acknowledgement of a commit reply from ``owner``.

        Raises:
            HeadConflict: the owner refused the commit: its base is not the current head.
            RemoteError: any other refusal.
            MalformedMessage: the reply is not a commit ack.
        """
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, CommitAck):
            raise MalformedMessage(f"expected a commit ack, got {type(reply).__name__}",
                                   owner=owner)
        return reply
