"""The gate's batched head reads: one ``multi_last`` direct get per owner (#27).

See :meth:`icore.memory.nats.NatsMemory.last_heads`; the owner digests it reads are
described in :mod:`icore.memory.nats._digest`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from nats.aio.client import Client as NatsClient

from icore.memory import HeadEntry
from icore.memory.nats._codec import NatsStats, _BatchReply, _json_req, head_subject_key
from icore.memory.nats._digest import use_digest

DIGEST_RETRY_EVERY = 64
"""An owner found without a digest (or overflowed) is asked for it again every this
many batched reads (a digest-aware writer may have made one meanwhile)."""


class BatchedHeadReads:
    """Batched direct gets of the heads stream on one connection (one reply inbox).

    Args:
        nc: the connected client.
        stream: the heads stream (``KV_<prefix>-heads``), which allows direct gets.
        pre: the heads bucket's subject prefix (``$KV.<prefix>-heads.``).
        stats: the connection's counters (``gets`` counts requests).
        timeout_s: default bound of one read, seconds.
    """

    def __init__(self, nc: NatsClient, stream: str, pre: str, stats: NatsStats,
                 timeout_s: float) -> None:
        self.nc, self.stream, self.pre, self.stats = nc, stream, pre, stats
        self.timeout_s = timeout_s
        self._sub: Any = None
        self._inbox = ""
        self._next = 0
        self._batches: dict[str, _BatchReply] = {}
        # owner -> digest size seen last (-1: none or overflowed); reads since then
        self.digest_keys: dict[str, int] = {}
        self._misses: dict[str, int] = {}

    async def last_heads(self, owner: str, keys: Sequence[str], *,
                         timeout_s: float | None = None
                         ) -> tuple[dict[str, HeadEntry], int] | None:
        """See :meth:`icore.memory.nats.NatsMemory.last_heads` (direct gets allowed)."""
        want = list(dict.fromkeys(keys))
        size = self.digest_keys.get(owner)
        if size == -1:  # no digest last time: look again now and then (it may be made)
            n = self._misses[owner] = self._misses.get(owner, 0) + 1
            size = None if n % DIGEST_RETRY_EVERY == 0 else -1
        if use_digest(len(want), size):
            b = await self._batch({self.pre + owner: owner}, timeout_s, digest=True,
                                  want=want)
            self.digest_keys[owner] = -1 if b.digest_keys is None else b.digest_keys
            heads, upto = b.done.result()
            if upto >= 0 and b.digest_keys is not None and b.digest_keys >= 0:
                return heads, upto
        b = await self._batch({self.pre + head_subject_key(owner, k): k for k in want},
                              timeout_s)
        heads, upto = b.done.result()
        return None if upto < 0 else (heads, upto)

    async def _batch(self, subjects: dict[str, str], timeout_s: float | None, *,
                     digest: bool = False, want: Sequence[str] = ()) -> _BatchReply:
        """One ``multi_last`` direct get of ``subjects``; returns the settled collector."""
        if self._sub is None:
            self._inbox = self.nc.new_inbox()
            self._sub = await self.nc.subscribe(self._inbox + ".*", cb=self._on_batch_msg)
        self._next += 1
        token = str(self._next)
        b = _BatchReply(subjects, asyncio.get_running_loop().create_future(),
                        digest=digest, want=want)
        self._batches[token] = b
        self.stats.gets += 1
        try:
            await self.nc.publish(f"$JS.API.DIRECT.GET.{self.stream}",
                                  _json_req(list(subjects), len(subjects)),
                                  reply=f"{self._inbox}.{token}")
            async with asyncio.timeout(timeout_s or self.timeout_s):
                await b.done  # a timeout cancels it: a late answer is dropped
        finally:
            del self._batches[token]
            if not b.done.done():
                b.done.cancel()
        return b

    async def _on_batch_msg(self, msg: Any) -> None:
        b = self._batches.get(msg.subject.rsplit(".", 1)[-1])
        if b is not None and not b.done.done():
            b.add(msg)
