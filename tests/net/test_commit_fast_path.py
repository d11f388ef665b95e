"""The owner's commit fast path (issue 27): a record the decoder verified is not verified
again, and every commit gets the very reply the general path gives it."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.errors import RecordIdMismatch
from icore.memory import FROM_PARENTS, CommitOp, MemoryStore, OwnershipMap, SQLiteStore, Store
from icore.net import Commit, ErrorReply, decode_body, encode_body
from icore.net._handler import OwnerHandler
from icore.records import Record, decode_record, derive, encode_record

OM = OwnershipMap.from_mapping({"req/*": "a", "b/*": "b"})

# one op: (writer slot, key slot, sequence step, cite the key's head?, writer name)
ops = st.lists(st.tuples(st.integers(0, 2), st.integers(-2, 2), st.booleans(),
                         st.sampled_from(["a", "a", "a", "b"])), min_size=1, max_size=12)


def _frames(plan: list[tuple[int, int, bool, str]]) -> list[tuple[bytes, str]]:
    """Commit frames as a writer builds them: some stale, backward or foreign."""
    heads: dict[str, Record] = {}
    seq, out = 0, []
    for rid, (slot, step, cite, writer) in enumerate(plan, start=1):
        seq = max(1, seq + step)
        key = f"req/{slot}" if writer == "a" or rid % 2 else f"b/{slot}"
        owner = "a" if key.startswith("req/") else "b"
        prev = heads.get(key)
        rec = (derive(key=key, owner=owner, seq=seq, content={"n": seq}, inputs=[prev])
               if cite and prev is not None else
               Record.create(key=key, owner=owner, seq=seq, content={"n": seq}))
        heads[key] = rec
        out.append((encode_body(Commit(rid, rec)), writer))
    return out


def _replies(store: Store, frames: list[tuple[bytes, str]], verified: bool,
             group: int) -> list[object]:
    h = OwnerHandler(store, agent="a")
    got: list[object] = []
    for i in range(0, len(frames), group):
        items = [(decode_body(b), w) for b, w in frames[i:i + group]]
        assert all(isinstance(m, Commit) for m, _w in items)
        got += h.handle_commits(items, verified=verified)  # type: ignore[arg-type]
    return got


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=ops, group=st.integers(1, 8))
def test_verified_path_replies_as_the_general_path(tmp_path_factory: pytest.TempPathFactory,
                                                   plan: list[tuple[int, int, bool, str]],
                                                   group: int) -> None:
    """Decoded commits, in groups: the same acknowledgements and the same typed refusals
    (ownership, head conflict, sequence), and the same heads afterwards."""
    frames = _frames(plan)
    d = tmp_path_factory.mktemp("fast")
    slow = SQLiteStore(d / "slow.sqlite", OM, "a", exclusive=True)
    fast = SQLiteStore(d / "fast.sqlite", OM, "a", exclusive=True)
    try:
        want = _replies(slow, frames, False, group)
        got = _replies(fast, frames, True, group)
        assert got == want
        keys = sorted({*slow.head_keys(), *fast.head_keys()})
        assert [fast.head(k) for k in keys] == [slow.head(k) for k in keys]
        assert fast.owner_seq("a") == slow.owner_seq("a")
    finally:
        slow.close()
        fast.close()


def test_unverified_op_is_verified(tmp_path: Path) -> None:
    """Without ``verified`` the store verifies: a record changed after it was built is
    refused (RecordIdMismatch) and nothing is written."""
    for store in (MemoryStore(OM, "a"), SQLiteStore(tmp_path / "s.sqlite", OM, "a",
                                                    exclusive=True)):
        rec = Record.create(key="req/x", owner="a", seq=1, content={"n": 1})
        rec.content["n"] = 2  # the content no longer hashes to the id
        res = store.commit_many([CommitOp(rec, "a")])
        assert isinstance(res[0], RecordIdMismatch)
        assert store.head("req/x") is None
        store.close()


def test_refusals_keep_their_codes(tmp_path: Path) -> None:
    """A foreign writer on the fast path is still refused by the owner rule."""
    store = SQLiteStore(tmp_path / "s.sqlite", OM, "a", exclusive=True)
    rec = Record.create(key="req/x", owner="a", seq=1, content={})
    out = OwnerHandler(store, agent="a").handle_commits(
        [(decode_body(encode_body(Commit(7, rec))), "b")], verified=True)  # type: ignore[list-item]
    assert isinstance(out[0], ErrorReply) and out[0].code == "ownership"
    assert store.head("req/x") is None
    store.close()


_json = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
                     | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4),
                                                                         c, max_size=3),
                     max_leaves=8)


@settings(max_examples=80, deadline=None)
@given(content=_json, seq=st.integers(1, 2**62), cite=st.booleans(),
       expected=st.sampled_from(["parents", "none", "id"]))
def test_decoded_commit_carries_the_store_encoding(content: object, seq: int, cite: bool,
                                                   expected: str) -> None:
    """The decoder's ``encoded`` is exactly ``encode_record`` of the decoded record, so the
    owner stores the bytes it received (issue 27); it is no part of the message's
    equality."""
    base = Record.create(key="req/base", owner="a", seq=1, content={"b": 1})
    rec = (derive(key="req/x", owner="a", seq=seq, content=content, inputs=[base])
           if cite else Record.create(key="req/x", owner="a", seq=seq, content=content))
    exp = {"parents": FROM_PARENTS, "none": None, "id": base.id}[expected]
    msg = decode_body(encode_body(Commit(3, rec, exp)))
    assert isinstance(msg, Commit) and msg == Commit(3, rec, exp)
    assert msg.encoded == encode_record(rec)
    assert decode_record(msg.encoded) == rec


def test_non_canonical_content_bytes_are_not_stored_as_received(tmp_path: Path) -> None:
    """Content sent as another JSON text of the same value verifies, but its bytes are not
    the canonical ones: the decoder does not carry them, the store encodes the record
    itself, and what it holds decodes to the same record."""
    rec = Record.create(key="req/x", owner="a", seq=1, content={"a": 1, "b": [2]})
    body = encode_body(Commit(4, rec))
    obj = msgpack.unpackb(body, raw=False)
    obj[3][9] = b'{"b": [2], "a": 1}'  # same value, other text (and length)
    msg = decode_body(msgpack.packb(obj, use_bin_type=True))
    assert isinstance(msg, Commit) and msg.record == rec and msg.encoded is None
    store = SQLiteStore(tmp_path / "s.sqlite", OM, "a", exclusive=True)
    out = OwnerHandler(store, agent="a").handle_commits([(msg, "a")], verified=True)
    assert not isinstance(out[0], ErrorReply)
    store.close()
    again = SQLiteStore(tmp_path / "s.sqlite", OM, "a", exclusive=True)
    assert again.get(rec.id) == rec
    again.close()


def test_received_bytes_are_what_the_store_would_write(tmp_path: Path) -> None:
    """Commits stored from the bytes they arrived in: after a reopen every record reads
    back equal, and its stored encoding is byte for byte ``encode_record``'s."""
    store = SQLiteStore(tmp_path / "s.sqlite", OM, "a", exclusive=True)
    h = OwnerHandler(store, agent="a")
    recs, prev = [], None
    for seq in range(1, 13):
        rec = (Record.create(key="req/x", owner="a", seq=seq, content={"n": seq, "t": "é"})
               if prev is None else
               derive(key="req/x", owner="a", seq=seq, content={"n": seq}, inputs=[prev]))
        recs.append(rec)
        prev = rec
    for i in range(0, 12, 4):
        items = [(decode_body(encode_body(Commit(n, r))), "a")
                 for n, r in enumerate(recs[i:i + 4], start=i + 1)]
        assert all(isinstance(m, Commit) and m.encoded is not None for m, _w in items)
        out = h.handle_commits(items, verified=True)  # type: ignore[arg-type]
        assert not any(isinstance(r, ErrorReply) for r in out)
    store.close()
    again = SQLiteStore(tmp_path / "s.sqlite", OM, "a", exclusive=True)
    try:
        for rec in recs:
            assert again.get(rec.id) == rec
            row = again._db.execute("SELECT body FROM records WHERE id=?", (rec.id,)).fetchone()
            assert row[0] == encode_record(rec)
        head = again.head("req/x")
        assert head is not None and head.record_id == recs[-1].id
    finally:
        again.close()
