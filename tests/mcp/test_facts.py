"""Facts as versioned records and the gate at the boundary (planfence Alg. 1), in process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import IcoreError
from icore.fence import Outcome, Reason
from icore.mcp import FactBook, SessionView, expand_deps
from icore.memory import DEFAULT_TIMEOUT_S, HeadEntry, HeadReply
from icore.records import Record, RecordId

OWNERS = {"memo://price": "trip", "memo://city": "trip", "fact://plan/*": "planner"}
DEPS = ["memo://price", "memo://city"]


def _book(**kw: object) -> FactBook:
    return FactBook(OWNERS, **kw)  # type: ignore[arg-type]


def _read(book: FactBook, view: SessionView, key: str) -> Record:
    rec = book.head(key)
    assert rec is not None
    view.saw(rec)
    return rec


def _gate(book: FactBook, view: SessionView, deps: Sequence[str] = DEPS,
          args: Mapping[str, object] | None = None):  # type: ignore[no-untyped-def]
    return anyio.run(lambda: book.gate(view, "book", deps, args or {"city": "Porto"}))


def test_observe_versions_only_on_change() -> None:
    book = _book()
    r1, c1 = book.observe("memo://price", {"v": 1})
    r2, c2 = book.observe("memo://price", {"v": 1})
    r3, c3 = book.observe("memo://price", {"v": 2})
    assert c1 and not c2 and c3 and r1 == r2
    assert r3 is not None and r1 is not None and r3.parents == (r1.id,)
    assert book.head("memo://price") == r3
    assert book.observe("other://x", 1) == (None, False)  # no owner: not a fact


def test_fresh_stale_replan_second_change() -> None:
    book = _book()
    view = SessionView("s#1")
    for k in DEPS:
        book.observe(k, {"v": k})
        _read(book, view, k)
    v = _gate(book, view)
    assert v.decision.authorized and v.plan is not None
    book.observe("memo://price", {"v": "changed"})
    v = _gate(book, view)
    assert v.decision.outcome is Outcome.REPLAN_REQUIRED and set(v.changed) == {
        "memo://price"}
    # the gateway shows the fresh values and makes the next call the one replan
    view.pending.add("book")
    for r in v.changed.values():
        view.saw(r)
    book.observe("memo://price", {"v": "changed again"})
    v = _gate(book, view)
    assert (v.decision.outcome, v.decision.reason) == (Outcome.BLOCKED,
                                                       Reason.SECOND_CHANGE)
    assert "memo://price" in v.changed


def test_unread_fact_blocks_with_current_value() -> None:
    book = _book()
    view = SessionView("s#1")
    for k in DEPS:
        book.observe(k, {"v": k})
    _read(book, view, "memo://price")
    v = _gate(book, view)
    assert v.decision.reason is Reason.MISSING_BOUNDARY and not v.decision.authorized
    assert set(v.changed) == {"memo://city"}


def test_owner_down_blocks_fail_closed() -> None:
    book = _book()
    view = SessionView("s#1")
    for k in DEPS:
        book.observe(k, {"v": k})
        _read(book, view, k)
    book.local.down.add("trip")
    v = _gate(book, view)
    assert (v.decision.outcome, v.decision.reason) == (Outcome.BLOCKED,
                                                       Reason.OWNER_UNAVAILABLE)


def test_malformed_owner_reply_blocks() -> None:
    book = _book()
    view = SessionView("s#1")
    for k in DEPS:
        book.observe(k, {"v": k})
        _read(book, view, k)
    rec = book.head("memo://price")
    assert rec is not None

    class Liar:
        async def query_heads(self, owner: str, keys: Sequence[str], *,
                              known: Mapping[str, RecordId] | None = None,
                              timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
            wrong = HeadEntry("memo://elsewhere", rec.id, rec.seq)
            return HeadReply.from_entries(owner, [wrong])

        async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
            return []

    object.__setattr__(book._ctx, "owners", Liar())
    v = _gate(book, view)
    assert v.decision.outcome is Outcome.BLOCKED
    assert v.decision.reason in (Reason.WRONG_KEY, Reason.MALFORMED_HEAD)


def test_arguments_not_json_blocked() -> None:
    book = _book()
    view = SessionView("s#1")
    for k in DEPS:
        book.observe(k, {"v": k})
        _read(book, view, k)
    v = _gate(book, view, args={"x": float("nan")})
    assert v.decision.reason is Reason.ARGS_MISMATCH and v.plan is None


def test_expand_deps_binds_arguments_and_globs() -> None:
    keys = expand_deps(["fact://plan/{trip}", "memo://*"], {"trip": "t1"},
                       ["memo://a", "memo://b", "fact://plan/t2"])
    assert keys == {"fact://plan/t1", "memo://a", "memo://b"}
    with pytest.raises(IcoreError, match="needs argument"):
        expand_deps(["fact://plan/{trip}"], {}, [])
    with pytest.raises(IcoreError, match="string or number"):
        expand_deps(["fact://plan/{trip}"], {"trip": ["x"]}, [])


def test_sqlite_store_keeps_versions_across_restart(tmp_path: Path) -> None:
    book = _book(backend="sqlite", path=tmp_path)
    r1, _ = book.observe("memo://price", {"v": 1})
    book.close()
    book2 = _book(backend="sqlite", path=tmp_path)
    assert book2.head("memo://price") == r1
    r2, created = book2.observe("memo://price", {"v": 2})
    assert created and r2 is not None and r1 is not None and r2.parents == (r1.id,)
    view = SessionView("s#2")
    view.saw(r2)
    book2.observe("memo://city", {"v": "c"})
    _read(book2, view, "memo://city")
    assert _gate(book2, view).decision.authorized
    book2.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["read", "write"]), st.sampled_from(DEPS),
                          st.integers(0, 3)), max_size=12))
def test_first_validation_authorizes_iff_reads_are_current(
        ops: list[tuple[str, str, int]]) -> None:
    """Invariant: a first attempt runs exactly when every fact of D(a) the session saw is
    the owner's head; a stale view is replan_required; an unread fact blocks."""
    book = _book()
    view = SessionView("s#1")
    for k in DEPS:
        book.observe(k, {"v": -1})
    for op, key, val in ops:
        if op == "write":
            book.observe(key, {"v": val})
        else:
            _read(book, view, key)
    d = _gate(book, view).decision
    if any(k not in view.seen for k in DEPS):
        assert d.outcome is Outcome.BLOCKED
    elif all(view.seen[k] == book.head(k) for k in DEPS):
        assert d.authorized
    else:
        assert d.outcome is Outcome.REPLAN_REQUIRED
