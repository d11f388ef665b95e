"""Property: a group commit judges each record exactly as commits one by one (issue 27).

``Store.commit_many`` runs every owner rule per op inside one transaction; these tests
pin that grouping changes no outcome (and would catch a batched variant that does):
random groups with duplicates (in the group and of earlier groups),
stale parents, foreign writers and owners, reused and backward sequences, explicit
expected heads, and ops marked verified with their received encoding, give the same
result per op, the same heads, owner sequences and stored rows as ``Store.commit`` called
once per op on a twin store.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.errors import IcoreError
from icore.memory import FROM_PARENTS, CommitOp, CommitResult, OwnershipMap, SQLiteStore
from icore.records import Record, derive, encode_record

OM = OwnershipMap({}, {"req/*": "alice", "b/*": "bob"})
KEYS = ("req/a", "req/b", "req/c", "b/x")

pytestmark = pytest.mark.timeout(300)

# one op: (key, seq, how it cites, who writes, expected head, verified)
_op = st.tuples(st.sampled_from(KEYS), st.integers(0, 7),
                st.sampled_from(["create", "last", "stale", "dup", "dup_group"]),
                st.sampled_from(["alice", "alice", "alice", "bob"]),
                st.sampled_from(["parents", "parents", "none", "last", "bogus"]),
                st.booleans())


def _ops(plan: list[tuple[str, int, str, str, str, bool]]) -> list[CommitOp]:
    """Build the commit ops of ``plan``; records cite what the writer last built."""
    built: dict[str, list[Record]] = {}
    ops: list[CommitOp] = []
    for key, seq, cite, writer, exp, verified in plan:
        owner = "bob" if key.startswith("b/") else "alice"
        chain = built.setdefault(key, [])
        if cite in ("dup", "dup_group") and ops:
            rec = ops[-1].record if cite == "dup_group" else ops[len(ops) // 2].record
        elif cite in ("last", "stale") and chain:
            base = chain[-1] if cite == "last" else chain[0]
            rec = derive(key=key, owner=owner, seq=max(seq, 1), content={"s": seq},
                         inputs=[base])
        else:
            rec = Record.create(key=key, owner=owner, seq=max(seq, 1),
                                content={"s": seq, "k": key})
        chain.append(rec)
        expected = {"parents": FROM_PARENTS, "none": None,
                    "last": chain[-2].id if len(chain) > 1 else None,
                    "bogus": "ab" * 32}[exp]
        ops.append(CommitOp(rec, writer, expected, verified,
                            encode_record(rec) if verified else None))
    return ops


def _outcome(r: CommitResult | IcoreError) -> tuple[object, ...]:
    if isinstance(r, CommitResult):
        return ("ok", r.record.id, r.created, r.lineage_complete)
    return (type(r).__name__, r.code, r.message, tuple(sorted(r.fields.items())))


def _one(s: SQLiteStore, op: CommitOp) -> tuple[object, ...]:
    try:
        return _outcome(s.commit(op.record, writer=op.writer, expected_head=op.expected_head))
    except IcoreError as exc:
        return _outcome(exc)


def _state(s: SQLiteStore) -> tuple[object, ...]:
    rows = s._db.execute("SELECT id, key, owner, seq, has_content, complete, body FROM "
                         "records ORDER BY id").fetchall()
    return (rows, [(k, s.head(k)) for k in KEYS], s.owner_seq("alice"), s.owner_seq("bob"))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=1, max_size=24), st.integers(1, 9), st.booleans(),
       st.integers(0, 3))
def test_group_commit_equals_sequential(tmp_path_factory: pytest.TempPathFactory,
                                        plan: list[tuple[str, int, str, str, str, bool]],
                                        group: int, exclusive: bool, warm: int) -> None:
    """Per op the same result (type, code, message, fields; id, created, complete), and the
    same rows, heads and owner sequences, in the file and after reopening it."""
    d = tmp_path_factory.mktemp("gp")
    ops = _ops(plan)
    one = SQLiteStore(d / "one.sqlite", OM, None, exclusive=exclusive)
    grp = SQLiteStore(d / "grp.sqlite", OM, None, exclusive=exclusive)
    seq_out = [_one(one, op) for op in ops]
    cut = min(warm, len(ops))  # the first ops one by one: later duplicates are held rows
    grp_out = [_one(grp, op) for op in ops[:cut]]
    for i in range(cut, len(ops), group):
        grp_out += [_outcome(r) for r in grp.commit_many(ops[i:i + group])]
    assert grp_out == seq_out
    assert _state(grp) == _state(one)
    one.close()
    grp.close()
    one = SQLiteStore(d / "one.sqlite", OM, None, exclusive=exclusive)
    grp = SQLiteStore(d / "grp.sqlite", OM, None, exclusive=exclusive)
    assert _state(grp) == _state(one)
    one.close()
    grp.close()


def test_group_sees_its_own_records(tmp_path: Path) -> None:
    """A record written earlier in the group is a later record's complete parent and a
    later duplicate's original, within the group's one transaction."""
    s = SQLiteStore(tmp_path / "a.sqlite", OM, "alice", exclusive=True)
    a1 = Record.create(key="req/a", owner="alice", seq=1, content={})
    b1 = derive(key="req/b", owner="alice", seq=2, content={}, inputs=[a1])
    res = s.commit_many([CommitOp(a1, "alice"), CommitOp(b1, "alice"),
                         CommitOp(a1, "alice")])
    assert [(r.created, r.lineage_complete) for r in res
            if isinstance(r, CommitResult)] == [(True, True), (True, True), (False, True)]
    assert s._db.execute("SELECT count(*) FROM records").fetchone()[0] == 2
    s.close()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=1, max_size=24),
       st.lists(st.tuples(st.integers(1, 9), st.booleans()), min_size=1, max_size=8),
       st.integers(2, 6))
def test_pipelined_group_commit_equals_sequential(
        tmp_path_factory: pytest.TempPathFactory,
        plan: list[tuple[str, int, str, str, str, bool]],
        chunks: list[tuple[int, bool]], split_at: int) -> None:
    """The owner service's pipelined group commit (issue 27 item 2): commits submitted in
    chunks (some in the same loop iteration, some after the earlier ones' replies), the
    worker splitting every queue of ``split_at`` or more in halves, give each commit the
    reply the handler gives it alone, and the same rows, heads and owner sequences."""
    import asyncio

    from icore.net import Commit, GroupCommitter, Message, OwnerHandler

    d = tmp_path_factory.mktemp("gpp")
    ops = _ops(plan)
    msgs = [Commit(i + 1, op.record, op.expected_head) for i, op in enumerate(ops)]
    one = SQLiteStore(d / "one.sqlite", OM, None, exclusive=True)
    grp = SQLiteStore(d / "grp.sqlite", OM, None, synchronous="FULL", exclusive=True)
    solo = OwnerHandler(one, agent="alice")
    seq_out = [solo.handle_commits([(m, op.writer)])[0] for m, op in zip(msgs, ops,
                                                                           strict=True)]
    gc = GroupCommitter(OwnerHandler(grp, agent="alice"), split_at=split_at)
    gc._disk_bound = lambda: True  # type: ignore[method-assign]

    async def run() -> list[Message]:
        futs: list[asyncio.Future[Message]] = []
        i = 0
        for n, wait in chunks * len(ops):
            if i >= len(ops):
                break
            futs += [gc.submit(m, op.writer) for m, op in zip(msgs[i:i + n], ops[i:i + n],
                                                              strict=True)]
            i += n
            if wait:
                await futs[-1]
            else:
                await asyncio.sleep(0)
        out = list(await asyncio.gather(*futs))
        await gc.aclose()
        return out

    assert asyncio.run(run()) == seq_out
    assert _state(grp) == _state(one)
    one.close()
    grp.close()
