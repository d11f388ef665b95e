"""The TCP owner transport for plain (synchronous) code: each on a private event loop.

:class:`SyncOwnerClient` wraps :class:`icore.net.OwnerClient` as
:class:`icore.memory.OwnerAccess` for plain scripts; :class:`ServerThread` runs an
:class:`icore.net.OwnerServer` in-process for tests, benchmarks and scripts. Both run
their asyncio object on a private loop in a daemon thread (``icore._threads.LoopThread``,
also used by the NATS store).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from icore._threads import LoopThread as _LoopThread
from icore.memory import DEFAULT_TIMEOUT_S, FROM_PARENTS, ExpectedHead, HeadReply, Store
from icore.net._protocol import MAX_FRAME_BYTES, CommitAck
from icore.net._stats import TrafficStats
from icore.net._tcp.channel import PathModel
from icore.net._tcp.client import OwnerClient, check_addresses
from icore.net._tcp.server import OwnerServer, check_port
from icore.records import Record, RecordId

T = TypeVar("T")


class SyncOwnerClient:
    """Synchronous :class:`icore.memory.OwnerAccess` over :class:`OwnerClient`.

    Runs the async client on a private event loop in a background thread; safe to call
    from many threads at once (each call is one coroutine on that loop). Same arguments
    as :class:`OwnerClient`. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, addresses: Mapping[str, tuple[str, int]], *, identity: str,
                 ssl_context: ssl.SSLContext, new_connection_per_rpc: bool = False,
                 path: PathModel | None = None, inline_max_bytes: int = 0,
                 max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        addresses = check_addresses(addresses)  # before the thread starts
        self._lt = _LoopThread(f"icore-client-{identity}")
        path_ = path

        async def make() -> OwnerClient:
            return OwnerClient(addresses, identity=identity, ssl_context=ssl_context,
                               new_connection_per_rpc=new_connection_per_rpc, path=path_,
                               inline_max_bytes=inline_max_bytes,
                               max_frame_bytes=max_frame_bytes)

        self.client = self._lt.run(make(), 5.0)

    @property
    def stats(self) -> TrafficStats:
        """Traffic counters of the underlying client."""
        return self.client.stats

    def _call(self, fn: Callable[[], Awaitable[T]], timeout_s: float) -> T:
        async def go() -> T:
            return await fn()
        return self._lt.run(go(), timeout_s + 5.0)

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`OwnerClient.query_heads`."""
        return self._call(lambda: self.client.query_heads(owner, keys, known=known,
                                                          timeout_s=timeout_s), timeout_s)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`OwnerClient.fetch`."""
        return self._call(lambda: self.client.fetch(owner, ids, timeout_s=timeout_s),
                          timeout_s)

    def commit(self, owner: str, record: Record, *,
               expected_head: ExpectedHead = FROM_PARENTS,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> CommitAck:
        """See :meth:`OwnerClient.commit`."""
        return self._call(lambda: self.client.commit(owner, record,
                                                     expected_head=expected_head,
                                                     timeout_s=timeout_s), timeout_s)

    def announce(self, to: str, records: Sequence[Record], *,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """See :meth:`OwnerClient.announce`."""
        return self._call(lambda: self.client.announce(to, records, timeout_s=timeout_s),
                          timeout_s)

    def replicate(self, to: str, records: Sequence[Record], *,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """See :meth:`OwnerClient.replicate`."""
        return self._call(lambda: self.client.replicate(to, records, timeout_s=timeout_s),
                          timeout_s)

    def ping(self, owner: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """See :meth:`OwnerClient.ping`."""
        return self._call(lambda: self.client.ping(owner, timeout_s=timeout_s), timeout_s)

    def close(self) -> None:
        """Close connections and stop the loop thread. Idempotent."""
        if self._lt.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._lt.run(self.client.close(), 5.0)
        self._lt.stop()

    def __enter__(self) -> SyncOwnerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServerThread:
    """Run an :class:`OwnerServer` on its own event loop in a background thread.

    For tests, benchmarks and scripts that want an owner in-process. Same arguments as
    :class:`OwnerServer`; use as a context manager.

    Raises:
        ValueError: ``port`` is not an ``int`` in 0..65535 (before the thread starts).
    """

    def __init__(self, store: Store, *, agent: str, ssl_context: ssl.SSLContext,
                 host: str = "127.0.0.1", port: int = 0, **kwargs: Any) -> None:
        check_port(port)
        self._lt = _LoopThread(f"icore-owner-{agent}")

        async def make() -> OwnerServer:
            srv = OwnerServer(store, agent=agent, ssl_context=ssl_context, host=host,
                              port=port, **kwargs)
            await srv.start()
            return srv

        self.server = self._lt.run(make(), 10.0)
        self.port = self.server.port
        self.address = (host, self.port)

    def close(self) -> None:
        """Stop the server and its thread. Idempotent."""
        if self._lt.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._lt.run(self.server.close(), 10.0)
        self._lt.stop()

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
