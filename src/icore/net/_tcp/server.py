"""asyncio TCP owner server with mutual TLS 1.3 (planfence App. A).

:class:`OwnerServer` serves one agent's store to the team (the client side is
:mod:`icore.net._tcp.client`, the thread wrappers :mod:`icore.net._tcp.sync`); commits that
arrive together are applied as one group (:class:`GroupCommitter`). Replies to the
requests of one read go out in one TLS record and one socket write, in request order; each
connection is an asyncio protocol (:mod:`icore.net._tcp.serving`) answering a head query
within the loop callback that read it.

Security behaviour (each case is logged on ``icore.net`` and recorded in
:attr:`OwnerServer.events`; the server keeps serving other connections):

* no client certificate, or one from another CA: the TLS handshake fails;
* a writer committing a key it does not own: typed :class:`ErrorReply` (``ownership``);
* a record whose content does not hash to its id: ``InvalidRecord``, connection closed;
* a replayed or reordered request id: ``SequenceViolation``, connection closed;
* any undecodable frame: a typed :class:`ProtocolError`, connection closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import ssl
import threading
import time
from dataclasses import dataclass

from icore.memory import Store
from icore.net._errors import ConnectionClosed, TransportError
from icore.net._handler import DEFAULT_INLINE_CAP_BYTES, OwnerHandler
from icore.net._headwire import HeadReplyEncoder
from icore.net._protocol import (
    MAX_FRAME_BYTES,
    Commit,
    ErrorReply,
    Message,
)
from icore.net._stats import TrafficStats, error_code_of
from icore.net._tcp.serving import OwnerConnection

log = logging.getLogger("icore.net")

DEFAULT_HANDSHAKE_TIMEOUT_S = 5.0
"""How long a server waits for a client to finish the TLS handshake."""
WORKER_IDLE_S = 2.0
"""How long a group committer's worker thread waits for the next group before it exits."""

SPLIT_AT = 0
"""Default queue length from which a group committer's worker may take half of the
queue (issue 27 item 2); 0: never. Off: on the shared 2-core machine where it was
measured a second group per cycle cost the owner 40-90% and the writers 30-90% more CPU
per commit, and the rate fell (docs/perf-issue27.md, round 15)."""

_Item = tuple[Commit, str, bool, "asyncio.Future[Message]"]


@dataclass(frozen=True, slots=True)
class SecurityEvent:
    """A refused connection or request, as logged by the server.

    Attributes:
        kind: ``handshake``, ``protocol`` or ``request``.
        code: stable error code (``transport``, ``ownership``, ...).
        error: the error class name.
        peer: the authenticated peer id ('' before authentication).
        detail: the error message.
    """

    kind: str
    code: str
    error: str
    peer: str
    detail: str


def check_port(port: object) -> int:
    """Return ``port`` if it is an ``int`` TCP port in 0..65535 (0 = ephemeral).

    Raises:
        ValueError: ``port`` is not an ``int`` (``bool`` included) or is outside
            0..65535.
    """
    if isinstance(port, bool) or not isinstance(port, int):
        raise ValueError(f"port must be an int in 0..65535, got {type(port).__name__} "
                         f"{port!r}")
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535 (0 = ephemeral), got {port}")
    return port


class GroupCommitter:
    """Group commit for one owner service (issues 17, 27).

    Commits that arrive while a write transaction is in flight - from any connection -
    share the next transaction and its one fsync, and each is acknowledged only after
    that transaction committed.

    Every owner rule still applies per record, in arrival order
    (:meth:`OwnerHandler.handle_commits`). With a store whose commits wait for the disk
    (``Store.blocking_writes``: SQLite) the transactions run in the committer's own
    worker thread (started with the first commit, gone after :data:`WORKER_IDLE_S`
    without one), so the event loop keeps answering head queries - from the exclusive
    store's in-memory head table - and gathering commits meanwhile. The worker takes
    the commits queued when it is free (the loop wakes it once per loop iteration that
    queued any), so a group is whatever arrived during the previous transaction; the
    replies of a group reach the loop in one wake-up, in the caller's context.

    Pipelining (issue 27 item 2, off by default: :data:`SPLIT_AT`): when ``split_at`` or
    more commits are queued and the transactions mostly wait for the disk - the store's
    ``COMMIT`` (its fsync) took longer than the rest of the transaction, on average over
    the recent groups - the worker takes only the first half of the queue, so the second
    half's transaction and fsync run while the first half's acknowledgements go out and
    its writers send their next commits. Otherwise (a fast disk or ``/dev/shm``: the
    cycle is CPU, and a second group per cycle costs CPU) and below ``split_at`` (a lone
    writer) the queue is taken whole.

    Args:
        handler: the owner's request handler.
        max_group: most commits in one transaction.
        split_at: queue length from which the worker may take half of the queue (0:
            never split; default :data:`SPLIT_AT`).
    """

    def __init__(self, handler: OwnerHandler, *, max_group: int = 256,
                 split_at: int = SPLIT_AT) -> None:
        self.handler = handler
        self.max_group = max_group
        self.split_at = split_at
        self.in_thread = handler.store.blocking_writes
        self._queue: list[_Item] = []  # in the worker mode, under _cond
        self._task: asyncio.Task[None] | None = None
        self._cond = threading.Condition(threading.Lock())
        self._worker: threading.Thread | None = None
        self._stop = False
        self._kick_due = False
        self._ctx = contextvars.Context()  # the last waking loop callback's (under _cond)
        self._disk_s = 0.0  # moving averages: the store's COMMIT, the rest of the tx
        self._cpu_s = 0.0
        self.split_groups = 0
        """Groups taken as the first half of the queue (pipelined) so far."""
        self.groups = 0
        """Transactions run so far."""
        self.commits = 0
        """Commits answered so far."""

    def submit(self, msg: Commit, peer: str, *, verified: bool = False
               ) -> asyncio.Future[Message]:
        """Queue one commit; the future resolves to its reply once its group is durable.

        ``verified``: ``msg`` came from :func:`~icore.net.decode_body`, which verified its
        record (:meth:`OwnerHandler.handle_commits`); a group of such commits only is not
        verified again.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Message] = loop.create_future()
        if not self.in_thread:
            self._queue.append((msg, peer, verified, fut))
            if self._task is None or self._task.done():
                self._task = loop.create_task(self._run())
            return fut
        with self._cond:
            self._queue.append((msg, peer, verified, fut))
        if not self._kick_due:  # once per loop iteration: every read ready now joins
            self._kick_due = True
            loop.call_soon(self._kick, contextvars.copy_context())
        return fut

    async def _run(self) -> None:
        """Inline mode (a store that does not wait for the disk): one group at a time."""
        while self._queue:
            await asyncio.sleep(0)  # let every connection readable now join this group
            group, self._queue = (self._queue[:self.max_group],
                                  self._queue[self.max_group:])
            try:
                replies = self.handler.handle_commits(
                    [(m, p) for m, p, _v, _f in group],
                    verified=all(v for _m, _p, v, _f in group))
            except BaseException as exc:  # nothing of the group was written: fail them all
                self._settle(group, None, exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            self._settle(group, replies, None)

    def _settle(self, group: list[_Item], replies: list[Message] | None,
                exc: BaseException | None) -> None:
        """Resolve a group's futures (on their loop); count it when it committed."""
        if exc is None:
            assert replies is not None
            self.groups += 1
            self.commits += len(group)
            for (_m, _p, _v, fut), reply in zip(group, replies, strict=True):
                if not fut.done():
                    fut.set_result(reply)
            return
        err = exc if isinstance(exc, Exception) else ConnectionClosed("owner shut down")
        for _m, _p, _v, fut in group:
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: a closed connection may not read it

    def _kick(self, ctx: contextvars.Context) -> None:
        """Wake the worker for the commits queued this loop iteration (start it if none)."""
        self._kick_due = False
        with self._cond:
            self._ctx = ctx  # the worker runs the next group in it
            if self._worker is None and self._queue:
                worker = threading.Thread(target=self._work, daemon=True,
                                          name=f"icore-group-commit-{self.handler.agent}")
                try:
                    worker.start()
                except BaseException as exc:  # nothing queued is committed behind them
                    failed, self._queue = self._queue, []
                    self._settle(failed, None, exc)
                    if not isinstance(exc, Exception):
                        raise
                    return
                self._worker = worker
            self._cond.notify()

    def _take(self) -> list[_Item]:
        """The next group (under ``_cond``): the queue, or its first half (``split_at``)."""
        n = len(self._queue)
        take = n
        if self.split_at and n >= self.split_at and self._disk_bound():
            take = (n + 1) // 2
            self.split_groups += 1
        group, self._queue = (self._queue[:min(take, self.max_group)],
                              self._queue[min(take, self.max_group):])
        return group

    def _disk_bound(self) -> bool:
        """The recent transactions waited longer in ``COMMIT`` (the disk) than in the rest."""
        return self._disk_s > self._cpu_s

    async def aclose(self, timeout_s: float = 5.0) -> None:
        """Let the queued groups and the one in flight commit, then stop the worker.

        Bounded by ``timeout_s`` for each; a group still running after it goes on in the
        worker (daemon), and the store's own close waits for its transaction.
        """
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), timeout_s)
        with self._cond:
            worker = self._worker
            if worker is not None:
                self._stop = True
                self._cond.notify()
        if worker is not None:
            await asyncio.to_thread(worker.join, timeout_s)
        await asyncio.sleep(0)  # the replies the worker handed over are set now

    def _work(self) -> None:
        """The worker thread: run each group's transaction, hand its replies to the loop."""
        try:
            self._serve()
        finally:  # an error outside a group: the next commit starts another worker
            with self._cond:
                if self._worker is threading.current_thread():
                    self._worker = None
                self._stop = False

    def _serve(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._queue:
                    if self._stop or (not cond.wait(WORKER_IDLE_S) and not self._queue):
                        self._worker = None  # idle, or aclose: a later commit starts one
                        self._stop = False
                        return
                group = self._take()
                ctx = self._ctx
            replies: list[Message] | None = None
            exc: BaseException | None = None
            t0 = time.perf_counter()
            try:
                replies = ctx.run(self.handler.handle_commits,
                                  [(m, p) for m, p, _v, _f in group],
                                  verified=all(v for _m, _p, v, _f in group))
            except BaseException as e:  # handed to the loop, as asyncio.to_thread does
                exc = e
            else:
                disk = getattr(self.handler.store, "last_commit_s", 0.0)
                self._disk_s += (disk - self._disk_s) / 4
                self._cpu_s += (time.perf_counter() - t0 - disk - self._cpu_s) / 4
            loop = group[0][3].get_loop()
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(self._settle, group, replies, exc)
            del group, replies, exc, loop, ctx


class OwnerServer:
    """Serve one agent's store over mutually authenticated TCP.

    Args:
        store: the agent's store.
        agent: the agent id (must equal the identity in its certificate).
        ssl_context: from :func:`icore.net.server_context`.
        host: bind address (default ``127.0.0.1``).
        port: TCP port (0 = ephemeral; see :attr:`port` after :meth:`start`).
        max_frame_bytes: largest accepted frame body.
        inline_cap_bytes: largest record inlined into head replies.
        handshake_timeout_s: time a client has to complete the TLS handshake.

    Raises:
        ValueError: ``port`` is not an ``int`` in 0..65535 (checked before anything
            is bound).
    """

    def __init__(self, store: Store, *, agent: str, ssl_context: ssl.SSLContext,
                 host: str = "127.0.0.1", port: int = 0,
                 max_frame_bytes: int = MAX_FRAME_BYTES,
                 inline_cap_bytes: int = DEFAULT_INLINE_CAP_BYTES,
                 handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> None:
        check_port(port)
        self.handler = OwnerHandler(store, agent=agent, inline_cap_bytes=inline_cap_bytes)
        self.head_encoder = HeadReplyEncoder(agent, max_frame_bytes=max_frame_bytes)
        self.agent = agent
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.handshake_timeout_s = handshake_timeout_s
        self.stats = TrafficStats()
        self.events: list[SecurityEvent] = []
        self._server: asyncio.Server | None = None
        self._conns: set[OwnerConnection] = set()
        self._group = GroupCommitter(self.handler)

    @property
    def group_commits(self) -> tuple[int, int]:
        """(write transactions, commits answered) of the group committer so far."""
        return self._group.groups, self._group.commits

    async def start(self) -> int:
        """Bind and start accepting; return the bound port.

        Raises:
            TransportError: the host does not resolve or the address cannot be bound
                (the message names the agent, host and port).
        """
        try:
            self._server = await asyncio.get_running_loop().create_server(
                self._accept, self.host, self.port)
        except OSError as exc:
            raise TransportError(f"agent {self.agent}: cannot serve on {self.host}:"
                                 f"{self.port}: {exc.strerror or exc}", agent=self.agent,
                                 host=self.host, port=self.port) from exc
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("owner %s serving on %s:%d", self.agent, self.host, self.port)
        return self.port

    async def serve_forever(self) -> None:
        """Serve until cancelled (start first if needed)."""
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        """Stop accepting, close every connection, let a group in flight end. Idempotent."""
        if self._server is not None:
            self._server.close()
            conns = list(self._conns)
            for c in conns:
                c.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*(c.closed for c in conns)), 2.0)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None
        await self._group.aclose()  # the group in flight ends; its worker thread stops

    # -- ConnectionHost (what each OwnerConnection asks of its server) -------------------
    def submit_commit(self, msg: Commit, peer: str, *, verified: bool = False
                      ) -> asyncio.Future[Message]:
        """Queue a commit in the group commit; the future resolves once it is durable.

        ``verified``: ``msg`` was just decoded by :func:`~icore.net.decode_body` (its
        record verified), see :meth:`GroupCommitter.submit`.
        """
        return self._group.submit(msg, peer, verified=verified)

    def security_event(self, kind: str, exc: BaseException, peer: str) -> None:
        """Record a refused connection or request in :attr:`events` and log it."""
        ev = SecurityEvent(kind, error_code_of(exc), type(exc).__name__, peer,
                           str(exc)[:500])
        if len(self.events) < 10_000:
            self.events.append(ev)
        log.warning("owner %s refused %s from peer=%r: %s: %s [%s]", self.agent, kind,
                    peer, ev.error, ev.detail, ev.code)

    def refused_request(self, reply: ErrorReply, peer: str) -> None:
        """Record a request the handler refused (:class:`OwnerHandler` logged it)."""
        if len(self.events) < 10_000:
            self.events.append(SecurityEvent("request", reply.code, "ErrorReply", peer,
                                             reply.message[:500]))

    def connection_closed(self, conn: OwnerConnection) -> None:
        """Forget a connection that is gone."""
        self._conns.discard(conn)

    def _accept(self) -> OwnerConnection:
        conn = OwnerConnection(self)
        self._conns.add(conn)
        return conn
