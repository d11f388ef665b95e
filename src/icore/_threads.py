"""A private event loop in a daemon thread, for sync wrappers of asyncio clients.

Shared by the TCP owner transport's sync wrappers (``icore.net``) and the NATS store
(``icore.memory.nats``): each runs its asyncio object on one such loop and hands plain
callers results through :meth:`LoopThread.run`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from icore.errors import RpcTimeout

T = TypeVar("T")


class LoopThread:
    """A private event loop running in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        """Run ``coro`` on the loop thread and wait for its result.

        Args:
            coro: the coroutine (its exception, if any, is raised here).
            timeout_s: seconds to wait (None: no limit); on expiry ``coro`` is cancelled.

        Raises:
            RpcTimeout: no result within ``timeout_s``.
        """
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError as exc:
            fut.cancel()
            raise RpcTimeout("the client loop did not answer in time",
                             timeout_s=timeout_s) from exc

    def stop(self) -> None:
        """Stop the loop and join its thread (bounded, 5 s); idempotent."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5.0)
        if not self.thread.is_alive():
            self.loop.close()
