"""asyncio TCP owner client with mutual TLS 1.3 (planfence App. A).

:class:`OwnerClient` implements :class:`icore.memory.AsyncOwnerAccess` over the owner
servers of :mod:`icore.net._tcp.server`, so the gate runs unchanged over either transport
(the synchronous wrapper is :class:`icore.net.SyncOwnerClient`).

Connections are reused by default (one per owner, requests pipelined and matched to
replies by request id; requests issued in the same event-loop iteration share one TLS
record and one socket write, and so do the replies to one read);
``new_connection_per_rpc=True`` opens, authenticates and closes a connection for every
RPC, paying the TCP and TLS handshakes as in the paper's setting. Every RPC has a
timeout (default 2 s, design.md 3.2). Each connection is an asyncio protocol
(:class:`~icore.net._tcp.link.OwnerLink`): a reply resolves its caller's future within
the loop callback that read it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from icore.errors import TeamManifestError
from icore.memory import DEFAULT_TIMEOUT_S, FROM_PARENTS, ExpectedHead, HeadReply
from icore.net._commitwire import encode_commit
from icore.net._errors import (
    AuthenticationError,
    ConnectionClosed,
    MalformedMessage,
    OwnerUnreachable,
    RpcTimeout,
    TransportError,
)
from icore.net._headwire import encode_head_query
from icore.net._protocol import (
    MAX_FRAME_BYTES,
    Announce,
    CommitAck,
    FetchReply,
    FetchRequest,
    Message,
    Ping,
    Pong,
    Replicate,
)
from icore.net._stats import TrafficStats, raise_for_error, to_head_reply
from icore.net._tcp.channel import PathModel, Shaper
from icore.net._tcp.link import OwnerLink
from icore.records import Record, RecordId


def _abandon(fut: asyncio.Future[Message]) -> None:
    """Make sure nothing can report ``fut`` after its caller left.

    The caller leaves on a reply, an error, a timeout or a cancellation: cancel ``fut``
    if pending, else retrieve its exception.
    """
    if not fut.done():
        fut.cancel()
    elif not fut.cancelled():
        fut.exception()


class _Opening:
    """A connection being opened, and how many callers wait for it."""

    __slots__ = ("future", "waiters")

    def __init__(self, connect: Coroutine[Any, Any, OwnerLink]) -> None:
        self.future: asyncio.Future[OwnerLink] = asyncio.ensure_future(connect)
        self.waiters = 0


def check_addresses(addresses: Any) -> dict[str, tuple[str, int]]:
    """``addresses`` as a dict of owner id -> ``(host, port)``, checked (#29, round 10).

    Raises:
        TeamManifestError: not a mapping, or an entry is not a pair of a host (a
            non-empty ``str``) and a port (an ``int`` in 0..65535) (fields ``field``,
            ``owner``): refused before any connection, not at the first call.
    """
    if not isinstance(addresses, Mapping):
        raise TeamManifestError("addresses must map each owner id to (host, port), got "
                                f"{type(addresses).__name__}", field="addresses")
    out: dict[str, tuple[str, int]] = {}
    for owner, addr in addresses.items():
        ok = isinstance(addr, tuple | list) and len(addr) == 2
        host, port = addr if ok else (None, None)
        if not (ok and isinstance(owner, str) and isinstance(host, str) and host
                and "\x00" not in host and isinstance(port, int)
                and not isinstance(port, bool) and 0 <= port <= 65535):
            raise TeamManifestError(f"addresses[{owner!r:.80}] must be (host, port): a "
                                    "host name and an int port in 0..65535, got "
                                    f"{addr!r:.80}", field="addresses", owner=repr(owner)[:80])
        out[owner] = (host, port)
    return out


class OwnerClient:
    """Async owner access over mutually authenticated TCP (:class:`AsyncOwnerAccess`).

    Safe to share between many concurrent executors (coroutines of one event loop).

    Args:
        addresses: owner id -> (host, port).
        identity: this client's agent id (must match its certificate; it is the writer
            of every commit it sends).
        ssl_context: from :func:`icore.net.client_context`.
        new_connection_per_rpc: open and authenticate a new connection for every RPC
            (paper setting) instead of reusing one per owner.
        path: network model to apply to this client's traffic (None: raw loopback).
        inline_max_bytes: ask owners to inline changed head records up to this size.
        max_frame_bytes: largest accepted frame.

    Raises:
        TeamManifestError: ``addresses`` is no map of owner -> (host, port)
            (:func:`check_addresses`).
    """

    bounds_timeouts = True
    """Every call ends within its ``timeout_s`` (connecting included), raising
    :class:`RpcTimeout`: the gate sets no timer of its own (issue 27)."""

    def __init__(self, addresses: Mapping[str, tuple[str, int]], *, identity: str,
                 ssl_context: ssl.SSLContext, new_connection_per_rpc: bool = False,
                 path: PathModel | None = None, inline_max_bytes: int = 0,
                 max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.addresses = check_addresses(addresses)
        self.identity = identity
        self.ssl_context = ssl_context
        self.new_connection_per_rpc = new_connection_per_rpc
        self.path = path
        self.inline_max_bytes = inline_max_bytes
        self.max_frame_bytes = max_frame_bytes
        self.stats = TrafficStats()
        self._conns: dict[str, OwnerLink] = {}
        self._opening: dict[str, _Opening] = {}
        self._shaper: Shaper | None = None

    async def _connect(self, owner: str) -> OwnerLink:
        addr = self.addresses.get(owner)
        if addr is None:
            raise OwnerUnreachable("no address for this owner", owner=owner)
        if self.path is not None and self._shaper is None:
            self._shaper = Shaper(self.path)
        loop = asyncio.get_running_loop()
        conn = OwnerLink(owner, self.ssl_context, self.stats,
                         max_frame_bytes=self.max_frame_bytes, shaper=self._shaper)
        try:
            await loop.create_connection(lambda: conn, addr[0], addr[1])
        except OSError as exc:
            raise OwnerUnreachable(f"cannot connect: {exc}", owner=owner,
                                   address=f"{addr[0]}:{addr[1]}") from exc
        try:
            peer = await conn.handshake_done
        except BaseException:
            conn.abort()
            raise
        if peer != owner:
            await conn.close()
            raise AuthenticationError("the server's certificate names another agent",
                                      owner=owner, peer=peer)
        self.stats.connections += 1
        return conn

    async def _conn(self, owner: str) -> OwnerLink:
        """The open connection to ``owner``, opening one when there is none.

        Every caller that arrives while a connection is opening waits on the same future,
        so all of them resume in one turn of the loop, in call order, before any later
        request can take the fast path: one connection keeps call order (an owner's own
        writer allocates its sequence numbers in that order).
        """
        conn = self._conns.get(owner)
        if conn is not None and conn.dead is None:
            return conn
        opening = self._opening.get(owner)
        if opening is None:
            opening = self._opening[owner] = _Opening(self._reopen(owner, conn))
            opening.future.add_done_callback(lambda f: self._opened(owner, f))
        opening.waiters += 1
        try:
            return await asyncio.shield(opening.future)  # a waiter's timeout spares the rest
        finally:
            opening.waiters -= 1
            if not opening.waiters and not opening.future.done():
                opening.future.cancel()  # the last waiter gave up: stop connecting, as before

    async def _reopen(self, owner: str, old: OwnerLink | None) -> OwnerLink:
        if old is not None:
            await old.close()
        conn = await self._connect(owner)
        self._conns[owner] = conn
        return conn

    def _opened(self, owner: str, fut: asyncio.Future[OwnerLink]) -> None:
        opening = self._opening.get(owner)
        if opening is not None and opening.future is fut:
            del self._opening[owner]
        if not fut.cancelled():
            fut.exception()  # retrieved: every waiter may have gone (timeouts)

    async def _rpc_once(self, owner: str, build: Callable[[int], Message | bytes]
                        ) -> Message:
        if self.new_connection_per_rpc:
            conn = await self._connect(owner)
            try:
                return await conn.request(build)[1]
            finally:
                await conn.close()
        conn = await self._conn(owner)
        rid, fut = conn.request(build)
        try:
            await conn.drain()
            return await fut
        finally:  # on timeout/cancellation, forget the request (a late reply is dropped)
            conn.pending.pop(rid, None)
            _abandon(fut)

    async def _rpc_live(self, conn: OwnerLink, build: Callable[[int], Message | bytes],
                        timeout_s: float) -> Message:
        """One RPC on an open connection, timed by the connection's deadline sweep."""
        deadline = conn.loop.time() + timeout_s
        rid, fut = conn.request(build)
        conn.expire_at(rid, deadline)
        try:
            if conn.backlogged():
                async with asyncio.timeout_at(deadline):
                    await conn.drain()
            return await fut
        finally:  # on timeout/cancellation, forget the request (a late reply is dropped)
            conn.pending.pop(rid, None)
            _abandon(fut)

    async def rpc(self, owner: str, build: Callable[[int], Message | bytes], *,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> Message:
        """Send one request and return the reply.

        ``build`` makes the request from its request id: the message, or its frame.

        Raises:
            RpcTimeout: no reply within ``timeout_s`` (connecting included).
            OwnerUnreachable: cannot connect, or the connection dropped.
            AuthenticationError: TLS failed or the server is not ``owner``.
            ProtocolError: the owner sent bytes that do not decode.
        """
        try:
            conn = self._conns.get(owner)
            if conn is not None and conn.dead is None and not self.new_connection_per_rpc:
                reply = await self._rpc_live(conn, build, timeout_s)
            else:
                async with asyncio.timeout(timeout_s):  # no extra task (unlike wait_for)
                    reply = await self._rpc_once(owner, build)
        except TimeoutError as exc:
            self.stats.failures += 1
            raise RpcTimeout("owner did not answer in time", owner=owner,
                             timeout_s=timeout_s) from exc
        except ConnectionClosed as exc:
            self.stats.failures += 1
            raise OwnerUnreachable(f"connection to owner lost: {exc.message}",
                                   **{**exc.fields, "owner": owner}) from exc
        except (ConnectionError, OSError) as exc:
            self.stats.failures += 1
            raise OwnerUnreachable(f"connection to owner failed: {exc}", owner=owner) from exc
        except TransportError:
            self.stats.failures += 1
            raise
        self.stats.rpcs += 1
        return reply

    # -- AsyncOwnerAccess ---------------------------------------------------------------
    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """One batched head query to ``owner`` (planfence Alg. 1 line 5)."""
        k = tuple(keys)
        kn = dict(known or {})
        inline = self.inline_max_bytes
        reply = await self.rpc(owner, lambda rid: encode_head_query(rid, k, kn, inline),
                               timeout_s=timeout_s)
        return to_head_reply(reply, owner=owner, keys=k, known=kn)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch exact records from ``owner``; each was verified on decode (Alg. 1 line 8)."""
        t = tuple(ids)
        reply = await self.rpc(owner, lambda rid: FetchRequest(rid, t), timeout_s=timeout_s)
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, FetchReply):
            raise MalformedMessage("expected a fetch reply", owner=owner)
        return list(reply.records)

    # -- writes and replication -----------------------------------------------------------
    async def commit(self, owner: str, record: Record, *,
                     expected_head: ExpectedHead = FROM_PARENTS,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> CommitAck:
        """Commit ``record`` at ``owner``; acknowledged only once durable.

        ``expected_head`` is the head the commit replaces, as in
        :meth:`icore.memory.Store.commit` (the owner checks it atomically).

        Raises:
            HeadConflict: the stated base is not the owner's current head (retryable:
                re-read the head, re-derive, commit again).
            RemoteError: the owner refused (``remote_code`` = ownership, sequence, ...).
        """
        reply = await self.rpc(owner, lambda rid: encode_commit(rid, record, expected_head),
                               timeout_s=timeout_s)
        if type(reply) is CommitAck:  # the usual answer first (issue 27)
            return reply
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, CommitAck):
            raise MalformedMessage("expected a commit ack", owner=owner)
        return reply

    async def announce(self, to: str, records: Sequence[Record], *,
                       timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """Announce heads (metadata envelopes only) of this identity's records to ``to``."""
        env = tuple(r.without_content() for r in records)
        reply = await self.rpc(to, lambda rid: Announce(rid, env), timeout_s=timeout_s)
        raise_for_error(reply, owner=to)
        return len(env)

    async def replicate(self, to: str, records: Sequence[Record], *,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """Push records with content into ``to``'s replica cache."""
        recs = tuple(records)
        reply = await self.rpc(to, lambda rid: Replicate(rid, recs), timeout_s=timeout_s)
        raise_for_error(reply, owner=to)
        return len(recs)

    async def ping(self, owner: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """Round-trip a ping; return the answering agent id."""
        reply = await self.rpc(owner, lambda rid: Ping(rid), timeout_s=timeout_s)
        raise_for_error(reply, owner=owner)
        if not isinstance(reply, Pong):
            raise MalformedMessage("expected a pong", owner=owner)
        return reply.agent

    async def close(self) -> None:
        """Close every connection. Idempotent."""
        conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            await c.close()

    async def __aenter__(self) -> OwnerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

