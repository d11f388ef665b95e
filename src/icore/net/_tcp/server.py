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
import queue
import ssl
import threading
from collections.abc import Sequence
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

_Job = tuple[contextvars.Context, Sequence[tuple[Commit, str]], bool,
             asyncio.AbstractEventLoop, "asyncio.Future[list[Message]]"]


def _settle(fut: asyncio.Future[list[Message]], replies: list[Message] | None,
            exc: BaseException | None) -> None:
    """Resolve a group's future on its loop (called from the worker thread)."""
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        assert replies is not None
        fut.set_result(replies)


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
    """Group commit for one owner service (issue 17).

    Commits that arrive while a write transaction is in flight - from any connection -
    share the next transaction and its one fsync, and each is acknowledged only after
    that transaction committed.

    Every owner rule still applies per record, in arrival order
    (:meth:`OwnerHandler.handle_commits`). With a store whose commits wait for the disk
    (``Store.blocking_writes``: SQLite) the transaction runs in a worker thread, so the
    event loop keeps answering head queries - from the exclusive store's in-memory head
    table - and gathers the next group meanwhile. The worker is the committer's own
    thread (started with the first group, gone after :data:`WORKER_IDLE_S` without
    one), handed each group directly: one queue put and one loop wake-up per group, in
    the caller's context (issue 27: no executor, concurrent future or chained future).

    Args:
        handler: the owner's request handler.
        max_group: most commits in one transaction.
    """

    def __init__(self, handler: OwnerHandler, *, max_group: int = 256) -> None:
        self.handler = handler
        self.max_group = max_group
        self.in_thread = handler.store.blocking_writes
        self._queue: list[tuple[Commit, str, bool, asyncio.Future[Message]]] = []
        self._task: asyncio.Task[None] | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()  # None: stop
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
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
        self._queue.append((msg, peer, verified, fut))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        return fut

    async def _run(self) -> None:
        while self._queue:
            await asyncio.sleep(0)  # let every connection readable now join this group
            group, self._queue = (self._queue[:self.max_group],
                                  self._queue[self.max_group:])
            items = [(m, p) for m, p, _v, _f in group]
            verified = all(v for _m, _p, v, _f in group)
            try:
                if self.in_thread:
                    replies = await self._in_worker(items, verified)
                else:
                    replies = self.handler.handle_commits(items, verified=verified)
            except BaseException as exc:  # nothing of the group was written: fail them all
                for _m, _p, _v, fut in group:
                    if not fut.done():
                        fut.set_exception(exc if isinstance(exc, Exception)
                                          else ConnectionClosed("owner shut down"))
                        fut.exception()
                if not isinstance(exc, Exception):
                    raise
                continue
            self.groups += 1
            self.commits += len(group)
            for (_m, _p, _v, fut), reply in zip(group, replies, strict=True):
                if not fut.done():
                    fut.set_result(reply)

    def _in_worker(self, items: Sequence[tuple[Commit, str]], verified: bool
                   ) -> asyncio.Future[list[Message]]:
        """Hand one group to the worker thread; the future resolves on this loop."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[Message]] = loop.create_future()
        with self._worker_lock:  # the worker exits only with this lock and no job left
            if self._worker is None:  # started before the job is queued: a failed start
                worker = threading.Thread(target=self._work, daemon=True,  # queues nothing
                                          name=f"icore-group-commit-{self.handler.agent}")
                worker.start()
                self._worker = worker
            self._jobs.put((contextvars.copy_context(), items, verified, loop, fut))
        return fut

    async def aclose(self, timeout_s: float = 5.0) -> None:
        """Wait for the group in flight (its transaction ends), then stop the worker.

        Bounded by ``timeout_s`` for each; a group still running after it goes on in the
        worker (daemon), and the store's own close waits for its transaction.
        """
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), timeout_s)
        with self._worker_lock:
            worker = self._worker
            if worker is not None:
                self._jobs.put(None)
        if worker is not None:
            await asyncio.to_thread(worker.join, timeout_s)

    def _work(self) -> None:
        """The worker thread: run each group's transaction, settle its future."""
        try:
            self._serve_jobs()
        finally:  # an error outside a job: the next group starts another worker
            with self._worker_lock:
                if self._worker is threading.current_thread():
                    self._worker = None

    def _serve_jobs(self) -> None:
        jobs = self._jobs
        while True:
            try:
                job = jobs.get(timeout=WORKER_IDLE_S)
            except queue.Empty:
                job = None
            if job is None:  # idle, or aclose: exit unless a group came in meanwhile
                with self._worker_lock:
                    if jobs.empty():
                        self._worker = None
                        return
                continue
            ctx, items, verified, loop, fut = job
            replies: list[Message] | None = None
            exc: BaseException | None = None
            try:
                replies = ctx.run(self.handler.handle_commits, items, verified=verified)
            except BaseException as e:  # handed to the loop, as asyncio.to_thread does
                exc = e
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle, fut, replies, exc)
            del ctx, items, loop, fut, replies, exc, job


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
