"""In-process transport on virtual time with the network model (design.md 3.4).

The same protocol objects as TCP run here: every request and reply is encoded with
:func:`encode_frame`, carried over the link model, decoded (records verified) and served
by :class:`OwnerHandler`. Only the bytes never touch a socket, and time is a
:class:`icore._clock.ManualClock` (a discrete-event clock) instead of the wall clock.

One RPC on a new connection (planfence Fig. 2, the paper's per-RPC setting)::

    client                                   owner
      | -- SYN ------------------------------> |        TCP: 1 RTT
      | <----------------------------- SYN/ACK |
      | -- ClientHello ----------------------> |        TLS 1.3 full handshake: 1 RTT
      | <-- ServerHello..Certificate..Finished |
      | -- Certificate, Finished + request --> |        the request rides the last flight
      | <---------- session tickets + reply -- |
      | -- close_notify ---------------------> |        not waited for
      | <------------------------ close_notify |

With connection reuse (default) only the request and reply are paid once connected.
Byte counts: exact frames plus, with TLS, :class:`TlsCost` (record overhead per message
and handshake flights measured from real TLS 1.3 handshakes with icore team
certificates, see ``TlsCost.measure``).

Timing semantics:

* :class:`VirtualTransport` (sync :class:`icore.memory.OwnerAccess`): each call moves the
  clock to its completion, so calls are sequential.
* :class:`AsyncVirtualTransport` (:class:`icore.memory.AsyncOwnerAccess`): on a
  :class:`VirtualTimeLoop` over the same clock, concurrent calls (``asyncio.gather``)
  overlap in virtual time, as the gate's concurrent owner queries do (Alg. 1 line 5).

The owner reads its store when the request *arrives* (virtual time), so a revision
scheduled between send and arrival is seen, as on a real network.

Each message enters its link when virtual time reaches its send time, so concurrent RPCs
on one path interleave in the link's FIFO (planfence Sec. 5.1 traces, ``mm-link``
semantics). Optional end-host CPUs (:class:`HostCpu`, costs in :class:`HostCost`) make
work of one process queue: a client opening four connections at once pays its four
handshakes one after another.
"""

from __future__ import annotations

import asyncio
import math
import ssl
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass

from icore._clock import ManualClock
from icore.memory import DEFAULT_TIMEOUT_S, FROM_PARENTS, ExpectedHead, HeadReply, Store
from icore.net import (
    Announce,
    Commit,
    CommitAck,
    FetchReply,
    FetchRequest,
    HeadQuery,
    MalformedMessage,
    Message,
    OwnerHandler,
    OwnerUnreachable,
    Replicate,
    RpcTimeout,
    TrafficStats,
    decode_frame,
    encode_frame,
)
from icore.net._stats import raise_for_error, to_head_reply
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


class _Base:
    _core: _Core

    def __init__(self, owners: Mapping[str, Store | OwnerHandler], *,
                 clock: ManualClock | None = None, path: LinkPair | None = None,
                 up: Link | None = None, down: Link | None = None,
                 identity: str = "executor", new_connection_per_rpc: bool = False,
                 tls: TlsCost | None = DEFAULT_TLS_COST, server_time_ms: float = 0.0,
                 inline_max_bytes: int = 0, host_cost: HostCost | None = None,
                 cpu: HostCpu | None = None,
                 owner_cpus: Mapping[str, HostCpu] | None = None) -> None:
        self._core = _Core(owners, clock=clock, path=path, up=up, down=down,
                           identity=identity, new_connection_per_rpc=new_connection_per_rpc,
                           tls=tls, server_time_ms=server_time_ms,
                           inline_max_bytes=inline_max_bytes, host_cost=host_cost,
                           cpu=cpu, owner_cpus=owner_cpus)

    @property
    def clock(self) -> ManualClock:
        """The discrete-event clock (ms)."""
        return self._core.clock

    @property
    def stats(self) -> TrafficStats:
        """Traffic counters of this transport (client view: out = requests)."""
        return self._core.stats

    @property
    def stall_ms(self) -> float:
        """Total virtual time spent inside RPCs (ms)."""
        return self._core.stall_ms

    @property
    def unavailable(self) -> set[str]:
        """Owners that never answer (each RPC to them times out)."""
        return self._core.unavailable

    @property
    def handlers(self) -> dict[str, OwnerHandler]:
        """Owner id -> the handler serving it."""
        return self._core.handlers

    def warm(self, owners: Sequence[str] | None = None) -> None:
        """Open connections to ``owners`` (default: all) at no cost (excluded setup)."""
        self._core.warm(owners)


class VirtualTransport(_Base):
    """Synchronous :class:`~icore.memory.OwnerAccess` over in-process owners, virtual time.

    Args:
        owners: owner id -> its store (or a ready :class:`OwnerHandler`).
        clock: the discrete-event clock to advance (a new one when None).
        path: both link directions (e.g. ``path_by_name("att", offset_ms=5000)``);
            overrides ``up``/``down``.
        up: client -> owner link (default :class:`Loopback`).
        down: owner -> client link (default :class:`Loopback`).
        identity: the authenticated identity of this client (the writer of commits).
        new_connection_per_rpc: pay TCP + TLS handshakes on every RPC (paper setting);
            otherwise one connection per owner is opened on first use and reused.
        tls: TLS byte-cost model, or None for plaintext accounting.
        server_time_ms: modelled owner processing time per request (on the owner's CPU).
        inline_max_bytes: ask owners to inline changed head records up to this size.
        host_cost: CPU work per message and per TLS handshake (default: none).
        cpu: this client's :class:`HostCpu` (share it between transports of one process).
        owner_cpus: owner id -> the :class:`HostCpu` of the process serving it (share
            them between every client of an owner); missing owners get a private one.

    Example:
        >>> from icore.memory import MemoryStore, OwnershipMap
        >>> om = OwnershipMap.from_mapping({"req/*": "a"})
        >>> net = VirtualTransport({"a": MemoryStore(om, "a")})
        >>> net.query_heads("a", ["req/1"]).heads
        {}
    """

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """One batched head query to ``owner`` (Alg. 1 line 5).

        Raises:
            RpcTimeout / OwnerUnreachable: no answer within ``timeout_s`` (clock moved by
                the timeout); RemoteError: the owner refused.
        """
        c = self._core
        reply = c.run_sync(owner, c.head_query(keys, known), timeout_s)
        return to_head_reply(reply, owner=owner, keys=keys, known=known)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch exact records (verified on decode) from ``owner`` (Alg. 1 line 8)."""
        c = self._core
        reply = c.run_sync(owner, FetchRequest(c.next_rid(), tuple(ids)), timeout_s)
        return c.records_of(reply, owner)

    def commit(self, owner: str, record: Record, *,
               expected_head: ExpectedHead = FROM_PARENTS,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> CommitAck:
        """Commit ``record`` at ``owner``'s service as this transport's identity.

        ``expected_head`` as in :meth:`icore.memory.Store.commit`.

        Raises:
            HeadConflict: the stated base is not the owner's current head.
            RemoteError: any other refusal.
        """
        c = self._core
        msg = Commit(c.next_rid(), record, expected_head)
        return c.commit_ack(c.run_sync(owner, msg, timeout_s), owner)

    def announce(self, to: str, records: Sequence[Record], *,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Send head announcements (envelopes only) for this identity's records to ``to``."""
        c = self._core
        msg = Announce(c.next_rid(), tuple(r.without_content() for r in records))
        raise_for_error(c.run_sync(to, msg, timeout_s), owner=to)

    def replicate(self, to: str, records: Sequence[Record], *,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Push this identity's records with content into ``to``'s replica cache."""
        c = self._core
        raise_for_error(c.run_sync(to, Replicate(c.next_rid(), tuple(records)), timeout_s),
                        owner=to)


class AsyncVirtualTransport(_Base):
    """Async :class:`~icore.memory.AsyncOwnerAccess` on virtual time.

    Same arguments as :class:`VirtualTransport`. Run the caller on a
    :class:`VirtualTimeLoop` over the same clock (``run_virtual(coro, transport.clock)``)
    so that concurrent RPCs overlap in virtual time; on any other loop the calls complete
    immediately and advance the clock like the sync transport.
    """

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Async form of :meth:`VirtualTransport.query_heads`."""
        c = self._core
        reply = await c.run_async(owner, c.head_query(keys, known), timeout_s)
        return to_head_reply(reply, owner=owner, keys=keys, known=known)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Async form of :meth:`VirtualTransport.fetch`."""
        c = self._core
        reply = await c.run_async(owner, FetchRequest(c.next_rid(), tuple(ids)), timeout_s)
        return c.records_of(reply, owner)

    async def commit(self, owner: str, record: Record, *,
                     expected_head: ExpectedHead = FROM_PARENTS,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> CommitAck:
        """Async form of :meth:`VirtualTransport.commit`."""
        c = self._core
        reply = await c.run_async(owner, Commit(c.next_rid(), record, expected_head),
                                  timeout_s)
        return c.commit_ack(reply, owner)

    async def announce(self, to: str, records: Sequence[Record], *,
                       timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Async form of :meth:`VirtualTransport.announce` (envelopes only)."""
        c = self._core
        msg = Announce(c.next_rid(), tuple(r.without_content() for r in records))
        raise_for_error(await c.run_async(to, msg, timeout_s), owner=to)

    async def replicate(self, to: str, records: Sequence[Record], *,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Async form of :meth:`VirtualTransport.replicate` (records with content)."""
        c = self._core
        reply = await c.run_async(to, Replicate(c.next_rid(), tuple(records)), timeout_s)
        raise_for_error(reply, owner=to)
