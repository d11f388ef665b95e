"""The gate's batched head reads and quorum barriers on one reply inbox (#27).

One ``multi_last`` direct get per owner (see :meth:`icore.memory.nats.NatsMemory.last_heads`;
the owner digests it reads are described in :mod:`icore.memory.nats._digest`) and the
quorum barrier's publish (:meth:`BatchedHeadReads.barrier`) share one reply inbox. With a
:class:`~icore.memory.nats._link.GateLink` (what :meth:`icore.memory.nats.NatsMemory.connect`
sets up) both go over the gate's own NATS connection: the requests of one loop turn leave
in one write, the replies are parsed in its ``data_received``. Otherwise, on a
:class:`LaneClient` (what :func:`icore.memory.nats.connect_nats` opens) their replies are
taken as raw bytes in nats-py's reader, without its header parser, message object, queue
and subscription task; on any other client through the subscription.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nats.aio.client import Client as NatsClient

from icore.errors import StoreError
from icore.memory import HeadEntry
from icore.memory.nats._codec import NatsStats, _BatchReply, _json_req, head_subject_key
from icore.memory.nats._digest import use_digest
from icore.memory.nats._link import GateLink, link_servers

_ACK = re.compile(rb'\{"stream":"([^"\\]*)","seq":([1-9][0-9]{0,17})\}')
"""A JetStream publish acknowledgement as nats-server writes it (anything else: JSON)."""
DIGEST_RETRY_EVERY = 64
"""An owner found without a digest (or overflowed) is asked for it again every this
many batched reads (a digest-aware writer may have made one meanwhile)."""

RawLane = Callable[[bytes, bytes, "bytes | None"], None]
"""A lane's handler: (subject, payload, raw header block or None), called in the reader."""


def _fail(fut: asyncio.Future[Any], exc: BaseException) -> None:
    """Fail ``fut`` with ``exc`` unless settled.

    The outcome is marked retrieved: a shared barrier's waiters may all have gone.
    """
    if not fut.done():
        fut.set_exception(exc)
        fut.exception()


def _malformed(exc: Exception) -> StoreError:
    return exc if isinstance(exc, StoreError) else StoreError(
        "malformed reply from the engine", error=f"{type(exc).__name__}: {exc}")


class LaneClient(NatsClient):
    """nats-py's client whose messages to registered reply prefixes skip its parsing.

    ``lanes`` maps a subject prefix up to its last ``.`` (bytes, e.g. ``b"_INBOX.x."``)
    to a handler called in the connection's reader with the raw subject, payload and
    header block. Every other message takes nats-py's own path. The subscription itself
    stays nats-py's (subscribe, resubscribe on reconnect, unsubscribe); a handler must
    not raise.
    """

    def __init__(self) -> None:
        super().__init__()
        self.lanes: dict[bytes, RawLane] = {}

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes,
                           headers: bytes) -> None:  # headers: None without any
        if self.lanes:
            lane = self.lanes.get(subject[:subject.rfind(b".") + 1])
            if lane is not None:
                lane(subject, data, headers)
                return
        await super()._process_msg(sid, subject, reply, data, headers)


def parse_headers(raw: bytes) -> dict[str, str]:
    """A NATS header block (``NATS/1.0[ status[ description]]`` CRLF, ``Name: value`` lines).

    Returns:
        name -> value (values stripped); the inline status as ``Status`` and
        ``Description``, as nats-py names them.

    Raises:
        StoreError: the block does not start with ``NATS/1.0``.
    """
    if not raw.startswith(b"NATS/1.0"):
        raise StoreError("malformed message headers from the engine", head=repr(raw[:40]))
    lines = raw.decode("utf-8", "replace").split("\r\n")  # one decode per block
    out: dict[str, str] = {}
    status = lines[0][8:].strip()
    if status:
        code, _, desc = status.partition(" ")
        out["Status"] = code
        if desc:
            out["Description"] = desc.strip()
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip()] = value.strip()
    return out


def _pub_ack(stream: str, hdr: Mapping[str, str], data: bytes) -> int:
    """The stream sequence of a JetStream publish acknowledgement for ``stream``.

    Raises:
        StoreError: a status (e.g. 503, no responders), an API error, another stream, or
            no sequence.
    """
    if "Status" in hdr:
        raise StoreError("the engine refused the quorum barrier", status=hdr["Status"],
                         description=hdr.get("Description", "")[:200])
    m = _ACK.fullmatch(data)  # the engine's usual form, read without JSON
    if m is not None and m[1] == stream.encode():
        return int(m[2])
    try:
        ack = json.loads(data)
    except ValueError as exc:
        raise StoreError("malformed quorum-barrier acknowledgement") from exc
    seq = ack.get("seq") if isinstance(ack, dict) else None
    if not isinstance(ack, dict) or "error" in ack or ack.get("stream") != stream \
            or not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise StoreError("the engine refused the quorum barrier",
                         reply=data[:200].decode("utf-8", "replace"))
    return seq


class BatchedHeadReads:
    """Batched direct gets and quorum barriers of the heads stream on one reply inbox.

    Args:
        nc: the connected client (a :class:`LaneClient` takes replies without parsing them
            twice).
        stream: the heads stream (``KV_<prefix>-heads``), which allows direct gets.
        pre: the heads bucket's subject prefix (``$KV.<prefix>-heads.``).
        stats: the connection's counters (``gets`` counts requests, ``puts`` barriers).
        timeout_s: default bound of one read, seconds.

    Attribute ``link``: the gate's own :class:`GateLink` the reads and barriers go over
    (set by :meth:`with_link`), or None: they go over nats-py's ``nc``.
    """

    def __init__(self, nc: NatsClient, stream: str, pre: str, stats: NatsStats,
                 timeout_s: float) -> None:
        self.nc, self.stream, self.pre, self.stats = nc, stream, pre, stats
        self.timeout_s = timeout_s
        self.link: GateLink | None = None
        self._sub: Any = None
        self._inbox = ""
        self._next = 0
        self._batches: dict[str, _BatchReply] = {}
        self._acks: dict[str, asyncio.Future[int]] = {}  # barrier token -> its waiter
        self._timers: dict[str, asyncio.TimerHandle] = {}  # barrier token -> its expiry
        self._api = f"$JS.API.DIRECT.GET.{stream}"
        self._requests: dict[tuple[str, ...], bytes] = {}  # subjects -> request (bounded)
        # owner -> digest size seen last (-1: none or overflowed); reads since then
        self.digest_keys: dict[str, int] = {}
        self._misses: dict[str, int] = {}
        self._decoded: dict[str, tuple[bytes, dict[str, HeadEntry] | None]] = {}

    def with_link(self, servers: Sequence[str], ssl_context: ssl.SSLContext | None,
                  name: str) -> None:
        """Send the reads and barriers over a :class:`GateLink` to ``servers``.

        Nothing changes when a URL carries user credentials (see :func:`link_servers`):
        the reads stay on nats-py. The link connects on the first read.
        """
        where = link_servers(servers)
        if where is not None:
            self.link = GateLink(where, ssl_context=ssl_context, name=name,
                                 on_msg=self.on_wire, on_lost=self.fail_all,
                                 stats=self.stats)
            self._inbox = self.link.inbox

    async def close(self) -> None:
        """Close the gate's own connection, if any (reads in flight fail)."""
        if self.link is not None:
            await self.link.close()

    def fail_all(self, exc: Exception) -> None:
        """Fail every read and barrier in flight with ``exc`` (the link dropped)."""
        for b in self._batches.values():
            if not b.done.done():
                b.done.set_exception(exc)
        for fut in self._acks.values():
            _fail(fut, exc)

    async def last_heads(self, owner: str, keys: Sequence[str], *,
                         timeout_s: float | None = None, bounded: bool = False
                         ) -> tuple[dict[str, HeadEntry], int] | None:
        """See :meth:`icore.memory.nats.NatsMemory.last_heads` (direct gets allowed)."""
        want = list(dict.fromkeys(keys))
        size = self.digest_keys.get(owner)
        if size == -1:  # no digest last time: look again now and then (it may be made)
            n = self._misses[owner] = self._misses.get(owner, 0) + 1
            size = None if n % DIGEST_RETRY_EVERY == 0 else -1
        if use_digest(len(want), size):
            b = await self._batch({self.pre + owner: owner}, timeout_s, bounded,
                                  digest=True, want=want)
            self.digest_keys[owner] = -1 if b.digest_keys is None else b.digest_keys
            heads, upto = b.done.result()
            if upto >= 0 and b.digest_keys is not None and b.digest_keys >= 0:
                return heads, upto
        b = await self._batch({self.pre + head_subject_key(owner, k): k for k in want},
                              timeout_s, bounded)
        heads, upto = b.done.result()
        return None if upto < 0 else (heads, upto)

    async def barrier(self, key: str, fut: asyncio.Future[int], timeout_s: float) -> None:
        """Publish an empty value to ``key`` of the heads bucket; settle ``fut`` with its ack.

        ``fut`` gets the write's stream sequence once the engine acknowledged it
        (committed), or a :class:`~icore.errors.StoreError` (refused, no responders), the
        publish's error, or :class:`TimeoutError` after ``timeout_s`` seconds. The call
        returns once the publish is queued, before the acknowledgement. ``fut`` is settled
        on every path (also a failed or cancelled subscribe), so later queries waiting
        behind it get a barrier of their own.
        """
        try:
            await self._subscribe()
            self._next += 1
            token = f"b{self._next}"
            self._acks[token] = fut
            self._timers[token] = asyncio.get_running_loop().call_later(
                timeout_s, self._expire, token)
            self.stats.puts += 1
            if self.link is not None:
                self.link.publish(self.pre + key, b"", f"{self._inbox}.{token}")
            else:
                await self.nc.publish(self.pre + key, b"", reply=f"{self._inbox}.{token}")
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except Exception as exc:  # handed to every waiter: each fails closed
            _fail(fut, exc)

    def _expire(self, token: str) -> None:
        self._timers.pop(token, None)
        fut = self._acks.pop(token, None)
        if fut is not None:
            _fail(fut, TimeoutError("the quorum barrier was not acknowledged in time"))

    async def _subscribe(self) -> None:
        if self.link is not None:
            if not self.link.connected:
                await self.link.ready(self.timeout_s)
            return
        if self._sub is None:
            self._inbox = self.nc.new_inbox()
            if isinstance(self.nc, LaneClient):
                self.nc.lanes[f"{self._inbox}.".encode()] = self._on_raw
            self._sub = await self.nc.subscribe(self._inbox + ".*", cb=self._on_msg)

    async def _batch(self, subjects: dict[str, str], timeout_s: float | None,
                     bounded: bool, *, digest: bool = False, want: Sequence[str] = ()
                     ) -> _BatchReply:
        """One ``multi_last`` direct get of ``subjects``; returns the settled collector.

        ``bounded``: the caller bounds the wait (no timer of this read's own).
        """
        await self._subscribe()
        self._next += 1
        token = str(self._next)
        b = _BatchReply(subjects, asyncio.get_running_loop().create_future(),
                        digest=digest, want=want, decoded=self._decoded)
        self._batches[token] = b
        self.stats.gets += 1
        req = self._requests.get(key := tuple(subjects))
        if req is None:
            if len(self._requests) >= 1024:
                self._requests.clear()
            req = self._requests[key] = _json_req(list(subjects), len(subjects))
        try:
            if self.link is not None:
                self.link.publish(self._api, req, f"{self._inbox}.{token}")
            else:
                await self.nc.publish(self._api, req, reply=f"{self._inbox}.{token}")
            if bounded:
                await b.done  # the caller's timeout cancels it: a late answer is dropped
            else:
                async with asyncio.timeout(timeout_s or self.timeout_s):
                    await b.done
        finally:
            del self._batches[token]
            if not b.done.done():
                b.done.cancel()
        return b

    def _take(self, token: str, headers: bytes | Mapping[str, str] | None,
              data: bytes) -> None:
        """Hand one reply to the read or barrier ``token`` names (late ones are dropped).

        Never raises (it runs in the connection's reader): anything wrong with the reply
        fails its waiter with a StoreError.
        """
        b = self._batches.get(token)
        if b is not None:
            if b.done.done():
                return
            try:
                if isinstance(headers, bytes):
                    b.add_raw(headers, data)  # the few fields read in place
                else:
                    b.add(headers or {}, data)
            except Exception as exc:  # fail closed: the waiter's query blocks
                _fail(b.done, _malformed(exc))
            return
        ack = self._acks.pop(token, None)
        timer = self._timers.pop(token, None)
        if timer is not None:
            timer.cancel()
        if ack is None or ack.done():
            return
        try:
            hdr = parse_headers(headers) if isinstance(headers, bytes) else headers or {}
            ack.set_result(_pub_ack(self.stream, hdr, data))
        except Exception as exc:  # fail closed: every query sharing the barrier blocks
            _fail(ack, _malformed(exc))

    def _on_raw(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        self._take(subject[subject.rfind(b".") + 1:].decode("ascii", "replace"), headers,
                   data)

    def on_wire(self, subject: bytes, headers: bytes | None, data: bytes) -> None:
        """A reply from the :class:`GateLink` (subject, raw header block or None, payload)."""
        self._take(subject[subject.rfind(b".") + 1:].decode("ascii", "replace"), headers,
                   data)

    async def _on_msg(self, msg: Any) -> None:
        self._take(msg.subject.rsplit(".", 1)[-1], msg.headers, msg.data or b"")
