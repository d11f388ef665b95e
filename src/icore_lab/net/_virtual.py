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

from collections.abc import Mapping, Sequence

from icore._clock import ManualClock
from icore.memory import DEFAULT_TIMEOUT_S, FROM_PARENTS, ExpectedHead, HeadReply, Store
from icore.net import (
    Announce,
    Commit,
    CommitAck,
    FetchRequest,
    OwnerHandler,
    Replicate,
    TrafficStats,
)
from icore.net._stats import raise_for_error, to_head_reply
from icore.records import Record, RecordId
from icore_lab.net._hostcost import DEFAULT_TLS_COST, HostCost, HostCpu, TlsCost, _Core
from icore_lab.net._links import Link, LinkPair


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
