"""Owner head digests (#27): codec round trips and refusals, and the engine's use of them.

Codec properties need no server; the engine tests run a real nats-server (session
fixture ``nats_single``): the gate's d=8 read is one digest message, an old writer cannot
commit after a digest-aware one, a legacy owner gets its digest built from its heads,
and without a committed barrier the gate still blocks.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore.errors import StoreError
from icore.fence import Outcome, avalidate
from icore.memory import HeadEntry, OwnershipMap
from icore.memory.nats._codec import _Intent, _pack, _pack_intent, _unpack_intent
from icore.memory.nats._digest import (
    DIGEST_MAX_KEYS,
    DIGEST_VERSION,
    INTENT_LAYOUT,
    decode_digest,
    encode_digest,
    use_digest,
    with_head,
)
from icore.net import OwnerUnreachable
from icore.net.nats import NatsCluster, NatsMemory, NatsOwnerAccess, NatsStore
from icore.records import Record, derive, encode_record

RIDS = st.binary(min_size=32, max_size=32).map(bytes.hex)
SEQS = st.integers(min_value=0, max_value=2**63 - 1)
HEADS = st.dictionaries(st.text(max_size=30), st.tuples(RIDS, SEQS), max_size=40).map(
    lambda d: {k: HeadEntry(k, rid, seq) for k, (rid, seq) in d.items()})


@given(HEADS)
def test_digest_round_trips(heads: dict[str, HeadEntry]) -> None:
    assert decode_digest("a", encode_digest(heads)) == heads
    assert decode_digest("a", encode_digest(None)) is None


@given(HEADS, st.text(max_size=30), RIDS, SEQS)
def test_with_head_moves_forward_only(heads: dict[str, HeadEntry], key: str, rid: str,
                                      seq: int) -> None:
    new = with_head(heads, HeadEntry(key, rid, seq))
    assert new is not None  # 41 keys at most: under the cap
    old = heads.get(key)
    assert new[key] == (old if old is not None and old.seq >= seq else HeadEntry(key, rid, seq))
    assert {k: v for k, v in new.items() if k != key} == {k: v for k, v in heads.items()
                                                           if k != key}
    assert decode_digest("a", encode_digest(new)) == new
    assert with_head(None, HeadEntry(key, rid, seq)) is None


def test_digest_overflows_past_the_cap() -> None:
    heads = {f"k{i}": HeadEntry(f"k{i}", "ab" * 32, i) for i in range(DIGEST_MAX_KEYS)}
    assert with_head(heads, HeadEntry("k0", "cd" * 32, 10**6)) is not None
    assert with_head(heads, HeadEntry("new", "cd" * 32, 1)) is None


@pytest.mark.parametrize("value", [
    b"\xc1", [DIGEST_VERSION], [DIGEST_VERSION, []], [DIGEST_VERSION, {"k": ["ab", 1]}],
    [DIGEST_VERSION, {"k": [b"x" * 31, 1]}], [DIGEST_VERSION, {"k": [b"x" * 32, -1]}],
    [DIGEST_VERSION, {"k": [b"x" * 32, True]}], [DIGEST_VERSION, {1: [b"x" * 32, 1]}],
])
def test_malformed_digests_are_refused(value: object) -> None:
    data = value if isinstance(value, bytes) else msgpack.packb(value, use_bin_type=True)
    with pytest.raises(StoreError, match="malformed"):
        decode_digest("a", data)


@pytest.mark.parametrize("version", [0, 2, True, "1"])
def test_digest_of_another_version_is_refused(version: object) -> None:
    with pytest.raises(StoreError, match="another layout version"):
        decode_digest("a", msgpack.packb([version, {}], use_bin_type=True))


@given(SEQS, RIDS, st.text(max_size=30), st.binary(max_size=64), st.sampled_from([0, 1]))
def test_intent_round_trips_in_both_layouts(seq: int, rid: str, key: str, rec: bytes,
                                            layout: int) -> None:
    it = _Intent(seq, rid, key, rec, layout)
    assert _unpack_intent("a", _pack_intent(it)) == it
    if not layout:  # the layout before digests is the 4-element entry
        assert _pack_intent(it) == _pack([seq, rid, key, rec])


@pytest.mark.parametrize("extra", [[2], [True], [1, 1]])
def test_intent_of_a_newer_layout_is_refused(extra: list[object]) -> None:
    with pytest.raises(StoreError, match="another layout"):
        _unpack_intent("a", _pack([1, "ab" * 32, "k", b"", *extra]))


def test_old_writers_cannot_parse_digest_aware_intents() -> None:
    """A pre-digest writer unpacks owner entries as exactly four elements: a layout-1
    entry makes it raise (its own 'malformed owner entry' StoreError), so it cannot
    commit once a digest-aware writer has."""
    data = _pack_intent(_Intent(1, "ab" * 32, "k", b"", INTENT_LAYOUT))
    with pytest.raises(ValueError, match="too many values"):
        _seq, _rid, _key, _rec = msgpack.unpackb(data, raw=False)


@given(st.integers(min_value=0, max_value=100),
       st.one_of(st.none(), st.integers(min_value=-1, max_value=2000)))
def test_digest_policy(d: int, size: int | None) -> None:
    got = use_digest(d, size)
    if d < 2 or size == -1:
        assert not got
    elif size is None:
        assert got
    else:
        assert got == (size <= 6 * d)


# -- on a real server ---------------------------------------------------------------
OM = OwnershipMap.from_mapping({"req/*": "a", "plan/*": "executor"})
KEYS = [f"req/{i}" for i in range(8)]


def _records() -> list[Record]:
    return [Record.create(key=k, owner="a", seq=i + 1, content={"k": k}, type="requirement")
            for i, k in enumerate(KEYS)]


def test_gate_reads_one_digest_and_blocks_without_quorum(
        nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> None:
    recs = _records()
    with NatsStore(nats_single.urls, certs_dir=nats_team_certs, ownership=OM, agent="a",
                   prefix=prefix, timeout_s=5.0) as s:
        for r in recs:
            s.commit(r, writer="a")
    plan = derive(key="plan/p", owner="executor", seq=1, content={"do": 1}, inputs=recs)

    def lookup(rid: object) -> Record | None:
        return plan if rid == plan.id else next((r for r in recs if r.id == rid), None)

    async def go() -> None:
        mem = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                       identity="executor", ownership=OM, prefix=prefix,
                                       timeout_s=5.0)
        try:
            got = await mem.digest("a")
            assert got is not None and got[0] == {r.key: HeadEntry(r.key, r.id, r.seq)
                                                  for r in recs}
            acc = NatsOwnerAccess(mem, identity="executor")
            before = mem.stats.gets
            rep = await acc.query_heads("a", [*KEYS, "req/none"])
            assert mem.stats.gets == before + 1  # one digest message for d=9
            assert rep.heads == got[0]
            d = await avalidate(roots=[plan.id], deps=KEYS, lookup=lookup, ownership=OM,
                                owners=acc, timeout_s=3.0)
            assert d.outcome is Outcome.AUTHORIZED

            async def no_quorum(key: str, fut: asyncio.Future[int], **kw: Any) -> None:
                fut.set_exception(TimeoutError("no quorum"))
            mem.barrier = no_quorum  # type: ignore[method-assign]
            with pytest.raises(OwnerUnreachable):
                await acc.query_heads("a", KEYS, timeout_s=2.0)
            d = await avalidate(roots=[plan.id], deps=KEYS, lookup=lookup, ownership=OM,
                                owners=acc, timeout_s=2.0)
            assert d.outcome is Outcome.BLOCKED
        finally:
            await mem.close()
    asyncio.run(go())


def test_legacy_owner_gets_its_digest_and_old_writers_are_locked_out(
        nats_single: NatsCluster, nats_team_certs: Path, prefix: str) -> None:
    """Heads written the pre-digest way (4-element intents, no digest) are read per key;
    the first digest-aware commit builds the digest from them; an old writer then meets
    a layout-1 owner entry it cannot parse."""
    pre = prefix
    recs = _records()

    async def go() -> None:
        mem = await NatsMemory.connect(nats_single.urls, certs_dir=nats_team_certs,
                                       identity="a", ownership=OM, prefix=pre, timeout_s=5.0)
        try:
            rev = 0
            for r in recs[:3]:  # the old protocol: owner CAS, record, head; no digest
                it = _Intent(r.seq, r.id, r.key, encode_record(r))
                rev = await mem._write(mem.owners_kv, "a", _pack_intent(it), rev or None, None)
                await mem.roll_forward("a", it)
            assert await mem.digest("a") is None
            acc = NatsOwnerAccess(mem, identity="a")
            assert set((await acc.query_heads("a", KEYS)).heads) == set(KEYS[:3])
            await mem.decide("a", recs[3], rev)  # digest-aware: builds the digest
            got = await mem.digest("a")
            assert got is not None and set(got[0] or {}) == set(KEYS[:4])
            mem._reads.digest_keys.clear()
            assert set((await acc.query_heads("a", KEYS)).heads) == set(KEYS[:4])
            last, _ = await mem.intent("a")
            assert last is not None and last.layout == INTENT_LAYOUT
        finally:
            await mem.close()
    asyncio.run(go())
