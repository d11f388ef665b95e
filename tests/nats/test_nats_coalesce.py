"""Shared quorum barriers never hide an acknowledged write; raw reply lane (#27).

Real nats-server: an owner commits in a loop from its own thread while eight executor
loops on one :class:`NatsOwnerAccess` query concurrently, so queries share barriers
(group commit). Every query must return, for the key being written, a head at least
as new as the last commit acknowledged before the query began. The raw reply lane of
:class:`~icore.memory.nats._reads.LaneClient` is checked against nats-py's own header
parser and against a plain nats-py client.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

import nats
from icore.errors import OwnerUnreachable, StoreError
from icore.memory import OwnershipMap, Store
from icore.memory.nats._codec import NatsStats, _BatchReply
from icore.memory.nats._reads import BatchedHeadReads, LaneClient, parse_headers
from icore.net import client_context
from icore.net.nats import NatsCluster, NatsMemory, NatsOwnerAccess, NatsStore
from icore.records import Record

OM = OwnershipMap.from_mapping({"req/*": "a", "plan/*": "executor"})
KEYS = [f"req/{i}" for i in range(8)]


def _seed(store: Store) -> dict[str, Record]:
    heads = {}
    for i, k in enumerate(KEYS):
        r = Record.create(key=k, owner="a", seq=i + 1, content={"k": k})
        store.commit(r, writer="a")
        heads[k] = r
    return heads


def test_a_write_acknowledged_before_a_query_began_is_seen(
        nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> None:
    """Eight concurrent query loops (d=1 and d=8) against a writer, through a replica
    that now and then answers an older snapshot: no answered query misses a commit
    acknowledged before it began, and the queries shared barriers."""
    store = NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM, agent="a",
                      prefix=prefix, timeout_s=5.0)
    first = _seed(store)["req/0"]
    acked = [first.seq]  # owner seq of req/0's last acknowledged head
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        prev = first
        seq = len(KEYS)
        try:
            while not stop.is_set():
                seq += 1
                r = Record.create(key="req/0", owner="a", seq=seq, content={"n": seq},
                                  parents=[prev.id])
                store.commit(r, writer="a")
                acked[0] = seq  # acknowledged: every later query must see >= seq
                prev = r
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    async def go() -> tuple[int, int, int]:
        mem = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                       identity="executor", ownership=OM, prefix=prefix,
                                       timeout_s=5.0)
        acc = NatsOwnerAccess(mem, identity="executor")
        checked = [0, 0]
        real = mem.last_heads
        older: dict[tuple[str, ...], Any] = {}
        pick = random.Random(27)

        async def lagging(owner: str, keys: Any, **kw: Any) -> Any:
            # a replica behind: now and then the answer (and its snapshot sequence) of
            # an earlier read, a real committed prefix that may miss acknowledged writes
            got = await real(owner, keys, **kw)
            old = older.get(tuple(keys))
            older[tuple(keys)] = got
            return old if old is not None and pick.random() < 0.3 else got
        mem.last_heads = lagging  # type: ignore[method-assign]

        async def loop(keys: list[str]) -> None:
            end = time.monotonic() + 2.0
            while time.monotonic() < end:
                floor = acked[0]  # read as the query begins
                try:
                    rep = await acc.query_heads("a", keys, timeout_s=5.0)
                except OwnerUnreachable:  # behind after every re-read: blocked, allowed
                    checked[1] += 1
                    continue
                assert rep.heads["req/0"].seq >= floor, (rep.heads["req/0"].seq, floor)
                checked[0] += 1
        try:
            await asyncio.gather(*(loop(KEYS if i % 2 else ["req/0"]) for i in range(8)))
            return checked[0], mem.stats.puts, mem.stats.rereads
        finally:
            await mem.close()
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        queries, barriers, _rereads = asyncio.run(go())
    finally:
        stop.set()
        t.join(10.0)
        store.close()
    assert not errors, errors
    assert acked[0] > len(KEYS) + 5  # the writer made progress during the queries
    assert queries > 50
    assert barriers < queries  # concurrent queries shared barriers


def test_plain_client_and_raw_lane_read_the_same(
        nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> None:
    """A NatsMemory on a plain nats-py client (replies through its subscription) and one
    on the LaneClient (raw replies) return the same heads for d=1 and d=8."""
    with NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM, agent="a",
                   prefix=prefix, timeout_s=5.0) as store:
        heads = _seed(store)

    async def go() -> None:
        lane = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                        identity="executor", ownership=OM, prefix=prefix,
                                        timeout_s=5.0)
        plain_nc = await nats.connect(nats_single.urls,
                                      tls=client_context(nats_team_certs, "executor"))
        plain = NatsMemory(plain_nc, OM, prefix=prefix, timeout_s=5.0)
        await plain.open()
        try:
            assert isinstance(lane.nc, LaneClient) and not isinstance(plain.nc, LaneClient)
            for keys in (["req/3"], KEYS):
                got = [await NatsOwnerAccess(m, identity="executor").query_heads("a", keys)
                       for m in (lane, plain)]
                assert got[0].heads == got[1].heads
                assert {k: h.record_id for k, h in got[0].heads.items()} == {
                    k: heads[k].id for k in keys}
            assert lane.stats.puts == plain.stats.puts == 2  # one barrier per query
        finally:
            await lane.close()
            await plain.close()
    asyncio.run(go())


_NAME = st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcxyz-_0123456789"),
                min_size=1, max_size=20)
_VALUE = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=30)


@settings(max_examples=200, deadline=None)
@given(status=st.one_of(st.none(), st.sampled_from(["204 EOB", "404", "408 Request Timeout",
                                                    "503", "409 Message Size Exceeds"])),
       lines=st.lists(st.tuples(_NAME, _VALUE), max_size=6))
def test_raw_headers_parse_as_nats_py_does(status: str | None,
                                           lines: list[tuple[str, str]]) -> None:
    """The lane's header parser agrees with nats-py's on the forms the engine sends
    (a status line or none, then ``Name: value`` lines)."""
    raw = ("NATS/1.0" + (f" {status}" if status else "") + "\r\n"
           + "".join(f"{n}: {v}\r\n" for n, v in lines) + "\r\n").encode()
    if status is None and not lines:
        return  # nats-py sends such a message without headers at all
    if status is not None and " " not in status and lines:
        return  # nats-py folds the lines into the description (the engine sends none)
    theirs = asyncio.run(Client()._process_headers(raw)) or {}
    # nats-py keys the description by its Header enum member
    assert parse_headers(raw) == {getattr(k, "value", k): v for k, v in theirs.items()}


_RID = Record.create(key="req/0", owner="a", seq=1, content={}).id
_FIELD = st.tuples(
    st.sampled_from(["Nats-Subject", "Nats-UpTo-Sequence", "KV-Operation", "Nats-Stream",
                     "Nats-Sequence"]) | _NAME,
    st.sampled_from(["$KV.t-heads.a.x", "$KV.t-heads.a.y", "12", "0", "DEL", "PURGE",
                     "\u00b2"]) | _VALUE)


@settings(max_examples=300, deadline=None)
@given(status=st.one_of(st.none(), st.sampled_from(["204 EOB", "404", "404 No Messages",
                                                    "408 Request Timeout", "503"])),
       lines=st.lists(_FIELD, max_size=6), good=st.booleans())
def test_header_fields_read_in_place_decide_as_the_parsed_block(
        status: str | None, lines: list[tuple[str, str]], good: bool) -> None:
    """A batch reply read from its raw header block (the fields found in place) ends
    exactly as one read from :func:`parse_headers`' dict: the same heads and snapshot
    sequence, or the same error."""
    raw = ("NATS/1.0" + (f" {status}" if status else "") + "\r\n"
           + "".join(f"{n}: {v}\r\n" for n, v in lines) + "\r\n").encode()
    data = msgpack.packb([_RID, 1]) if good else b"\xc1"
    eob = b"NATS/1.0 204 EOB\r\nNats-UpTo-Sequence: 9\r\n\r\n"

    async def outcome(in_place: bool) -> object:
        b = _BatchReply({"$KV.t-heads.a.x": "x"}, asyncio.get_running_loop().create_future())
        for block, payload in ((raw, data), (eob, b"")):
            if b.done.done():
                break
            if in_place:
                b.add_raw(block, payload)
            else:
                b.add(parse_headers(block), payload)
        if not b.done.done():
            return "pending"
        exc = b.done.exception()
        return (type(exc), str(exc)) if exc is not None else b.done.result()

    async def both() -> None:
        assert await outcome(True) == await outcome(False)
    asyncio.run(both())


def test_raw_headers_refuse_a_block_without_the_version_line() -> None:
    with pytest.raises(StoreError, match="malformed message headers"):
        parse_headers(b"HTTP/1.1 200\r\n\r\n")


def test_a_query_never_shares_a_barrier_sequenced_before_a_write_it_must_see(
        nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> None:
    """The race coalescing must not lose: barrier B1 is sequenced, a write W is then
    acknowledged, and only then does query Q2 begin while B1's acknowledgement is still
    on its way. Q2 must not be proven fresh by B1 (its sequence is below W's): given
    the stale answer Q1 got, Q2 reads again after its own later barrier and sees W."""
    store = NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM, agent="a",
                      prefix=prefix, timeout_s=5.0)
    first = _seed(store)["req/0"]

    async def go() -> None:
        mem = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                       identity="executor", ownership=OM, prefix=prefix,
                                       timeout_s=5.0)
        acc = NatsOwnerAccess(mem, identity="executor")
        real_barrier, real_read = mem.barrier, mem.last_heads
        release = asyncio.Event()
        held: list[asyncio.Task[None]] = []
        answers: list[Any] = []
        stale: list[Any] = []

        async def slow_ack(key: str, fut: asyncio.Future[int], **kw: Any) -> None:
            inner: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            await real_barrier(key, inner, **kw)  # sent and sequenced now

            async def deliver() -> None:  # its acknowledgement arrives on release
                seq = await inner
                await release.wait()
                fut.set_result(seq)
            held.append(asyncio.ensure_future(deliver()))

        async def read(owner: str, keys: Any, **kw: Any) -> Any:
            got = await real_read(owner, keys, **kw)
            answers.append(got)
            return stale.pop() if stale else got  # Q2's first answer: Q1's snapshot
        mem.barrier = slow_ack  # type: ignore[method-assign]
        mem.last_heads = read  # type: ignore[method-assign]
        try:
            q1 = asyncio.ensure_future(acc.query_heads("a", KEYS, timeout_s=5.0))
            while not answers or not held:
                await asyncio.sleep(0.005)
            w = Record.create(key="req/0", owner="a", seq=len(KEYS) + 1, content={"n": 1},
                              parents=[first.id])
            await asyncio.to_thread(store.commit, w, writer="a")  # acknowledged
            stale.append(answers[0])
            q2 = asyncio.ensure_future(acc.query_heads("a", KEYS, timeout_s=5.0))
            await asyncio.sleep(0.05)
            release.set()
            r1, r2 = await asyncio.gather(q1, q2)
            assert r1.heads["req/0"].seq in (first.seq, w.seq)
            assert r2.heads["req/0"].record_id == w.id  # W was acknowledged before Q2
            assert mem.stats.puts == 2 and mem.stats.rereads >= 1
        finally:
            await mem.close()
    try:
        asyncio.run(go())
    finally:
        store.close()


@pytest.mark.parametrize(("headers", "data"), [
    (b"NATS/1.0 503\r\n\r\n", b""),  # no responders: JetStream unavailable
    (None, b'{"error": {"code": 503, "description": "no quorum"}}'),
    (None, b'{"stream": "KV_other", "seq": 5}'),
    (None, b'{"stream": "KV_t-heads", "seq": true}'),
    (None, b'{"stream": "KV_t-heads", "seq": 0}'),
    (None, b'[1, 2]'),
    (None, b"not json"),
    (b"HTTP/1.1 200\r\n\r\n", b'{"stream": "KV_t-heads", "seq": 5}'),
])
def test_a_barrier_acknowledgement_counts_only_when_it_is_one(
        headers: bytes | None, data: bytes) -> None:
    """Anything but a JetStream acknowledgement of the heads stream with a positive
    sequence fails the barrier's waiters (StoreError), and the reader never raises."""
    async def go() -> None:
        reads = BatchedHeadReads(None, "KV_t-heads", "$KV.t-heads.",  # type: ignore[arg-type]
                                 NatsStats(), 1.0)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        reads._acks["b1"] = fut
        reads._on_raw(b"_INBOX.x.b1", data, headers)
        with pytest.raises(StoreError):
            await fut
        ok: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        reads._acks["b2"] = ok
        reads._on_raw(b"_INBOX.x.b2", b'{"stream":"KV_t-heads","seq":7}', None)
        assert await ok == 7
    asyncio.run(go())


def test_a_malformed_batch_reply_fails_its_read_without_raising() -> None:
    """A non-ASCII digit in the snapshot sequence (``isdigit`` but not ``int``) fails
    the read with a StoreError instead of escaping into the connection's reader."""
    async def go() -> None:
        reads = BatchedHeadReads(None, "KV_t-heads", "$KV.t-heads.",  # type: ignore[arg-type]
                                 NatsStats(), 1.0)
        b = _BatchReply({"$KV.t-heads.a": "a"},
                        asyncio.get_running_loop().create_future(), digest=True, want=["x"])
        reads._batches["1"] = b
        reads._on_raw(b"_INBOX.x.1", b"",
                      "NATS/1.0 204 EOB\r\nNats-UpTo-Sequence: \u00b2\r\n\r\n".encode())
        with pytest.raises(StoreError):
            await b.done
    asyncio.run(go())


class _NoSubscribe:
    """A connection whose reply-inbox subscription fails (or hangs until cancelled)."""

    def __init__(self, hang: bool) -> None:
        self.hang = hang

    def new_inbox(self) -> str:
        return "_INBOX.x"

    async def subscribe(self, subject: str, cb: Any) -> Any:
        if self.hang:
            await asyncio.sleep(3600)
        raise nats.errors.ConnectionClosedError


@pytest.mark.parametrize("hang", [False, True])
def test_a_barrier_whose_subscribe_fails_settles_its_waiters(hang: bool) -> None:
    """The reply inbox cannot be subscribed (an error, or the query's timeout cancels
    it): the barrier's future is settled anyway (its waiters fail closed) instead of
    staying pending, which would make every later query that shares it time out."""
    async def go() -> None:
        reads = BatchedHeadReads(_NoSubscribe(hang), "KV_t-heads",  # type: ignore[arg-type]
                                 "$KV.t-heads.", NatsStats(), 1.0)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if hang:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await reads.barrier("k", fut, timeout_s=1.0)
            assert fut.cancelled()
        else:
            await reads.barrier("k", fut, timeout_s=1.0)
            with pytest.raises(nats.errors.ConnectionClosedError):
                await fut
    asyncio.run(go())
