"""Property: checking the owner rules before the replay lookup changes no outcome (#27).

:class:`~icore.memory.SQLiteStore` looks a committed record up only when the owner rules
refuse it, or learns from its insert that the record was already held
(``Store._write_reports_held``); :class:`~icore.memory.MemoryStore` looks every record
up first. Random mixes of commits, replays of earlier records (committed, refused or only
installed) and installs of the owner's own records give the same result per operation
and the same heads and owner sequences in both, grouped or one by one.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.errors import IcoreError
from icore.memory import CommitOp, MemoryStore, OwnershipMap, SQLiteStore, Store
from icore.records import Record, derive

OM = OwnershipMap({}, {"req/*": "alice"})
KEYS = ("req/a", "req/b")

pytestmark = pytest.mark.timeout(300)

# one step: (what, key, seq step, pick): a new version (its sequence the last one plus
# the step, often valid) commits or installs; a replay commits an earlier record again
_step = st.tuples(st.sampled_from(["commit", "commit", "install", "replay", "replay"]),
                  st.sampled_from(KEYS), st.integers(-1, 2), st.integers(0, 99))


def _records(plan: list[tuple[str, str, int, int]]) -> list[tuple[str, Record]]:
    built: list[Record] = []
    last: dict[str, Record] = {}
    out: list[tuple[str, Record]] = []
    seq = 0
    for what, key, step, pick in plan:
        if what == "replay" and built:
            out.append(("commit", built[pick % len(built)]))
            continue
        prev = last.get(key)
        seq = max(seq + step, 1)
        rec = (Record.create(key=key, owner="alice", seq=seq, content={"s": seq, "k": key})
               if prev is None else
               derive(key=key, owner="alice", seq=seq, content={"s": seq}, inputs=[prev]))
        last[key] = rec
        built.append(rec)
        out.append(("install" if what == "install" else "commit", rec))
    return out


def _run(s: Store, steps: list[tuple[str, Record]], group: int) -> list[object]:
    out: list[object] = []
    pending: list[CommitOp] = []

    def flush() -> None:
        for r in s.commit_many(pending):
            out.append(_outcome(r))
        pending.clear()

    for what, rec in steps:
        if what == "install":
            flush()
            out.append(("installed", s.install(rec)))
        elif group > 1:
            pending.append(CommitOp(rec, "alice"))
            if len(pending) >= group:
                flush()
        else:
            try:
                out.append(_outcome(s.commit(rec, writer="alice")))
            except IcoreError as exc:
                out.append(_outcome(exc))
    flush()
    out.append([(k, s.head(k)) for k in KEYS])
    out.append(s.owner_seq("alice"))
    return out


def _outcome(r: object) -> tuple[object, ...]:
    if isinstance(r, IcoreError):
        return (type(r).__name__, r.code, r.message)
    return ("ok", r.record.id, r.created, r.lineage_complete)  # type: ignore[attr-defined]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_step, min_size=1, max_size=20), st.integers(1, 4), st.booleans())
def test_rules_first_equals_lookup_first(tmp_path_factory: pytest.TempPathFactory,
                                         plan: list[tuple[str, str, int, int]], group: int,
                                         exclusive: bool) -> None:
    """SQLite (rules first) and the in-memory store (lookup first) agree step by step."""
    steps = _records(plan)
    ref = _run(MemoryStore(OM, "alice"), steps, group)
    s = SQLiteStore(tmp_path_factory.mktemp("lo") / "s.sqlite", OM, "alice",
                    exclusive=exclusive)
    try:
        assert _run(s, steps, group) == ref
    finally:
        s.close()


def test_installed_own_record_is_a_replay(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A commit of an own record that was only installed passes every rule, yet is an
    idempotent replay: not created, and the head does not move (as in memory)."""
    a1 = Record.create(key="req/a", owner="alice", seq=1, content={})
    for s in (MemoryStore(OM, "alice"),
              SQLiteStore(tmp_path_factory.mktemp("lo") / "s.sqlite", OM, "alice",
                          exclusive=True)):
        s.install(a1)
        res = s.commit(a1, writer="alice")
        assert (res.created, res.lineage_complete) == (False, True)
        assert s.head("req/a") is None and s.owner_seq("alice") == 0
        s.close()
