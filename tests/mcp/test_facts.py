"""Facts as versioned records and the gate at the boundary (planfence Alg. 1), in process,
through the gateway's seam over the workspace API (icore.workspace)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import IcoreError
from icore.mcp import FactBook, SessionView, Verdict, expand_deps
from icore.memory import DEFAULT_TIMEOUT_S, HeadEntry, HeadReply, OwnerUnavailable
from icore.records import Record, RecordId

OWNERS = {"memo://price": "trip", "memo://city": "trip", "fact://plan/*": "planner"}
DEPS = ["memo://price", "memo://city"]


class Upstream:
    """Stands in for the forward to the upstream: records what reached it."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, **args: Any) -> str:
        self.calls.append(args)
        return "done"


def _setup(**kw: Any) -> tuple[FactBook, SessionView]:
    book = FactBook(OWNERS, **kw)
    for k in DEPS:
        book.observe(k, {"v": k})
    return book, book.session("s#1")


def _run(book: FactBook, view: SessionView, up: Upstream,
         args: Mapping[str, Any] | None = None) -> Verdict:
    return anyio.run(lambda: book.execute(view, "book", DEPS, args or {"city": "Porto"}, up))


def test_observe_versions_only_on_change() -> None:
    book = FactBook(OWNERS)
    r1, c1 = book.observe("memo://price", {"v": 1})
    r2, c2 = book.observe("memo://price", {"v": 1})
    r3, c3 = book.observe("memo://price", {"v": 2})
    assert c1 and not c2 and c3 and r1 == r2
    assert r3 is not None and r1 is not None
    assert r3.supersedes == r1.id and r3.parents == ()  # the chain link, not an input
    assert book.head("memo://price") == r3
    assert book.observe("other://x", 1) == (None, False)  # no owner: not a fact
    assert book.owner_of("fact://plan/goal") == "planner"


@pytest.mark.parametrize(("before", "after"), [(1, True), (1, 1.0), (0, False),
                                             ({"v": 1}, {"v": True}), ([1], [1.0])])
def test_observe_tells_json_values_python_calls_equal_apart(before: Any, after: Any) -> None:
    """A resource whose JSON changes from ``1`` to ``true`` (Python: ``1 == True``) is
    a new version: a plan read from ``1`` is stale."""
    book = FactBook(OWNERS)
    r1, _ = book.observe("memo://price", before)
    r2, created = book.observe("memo://price", after)
    assert created and r2 is not None and r1 is not None and r2.id != r1.id
    assert book.head("memo://price") == r2 and r2.content == after
    assert book.observe("memo://price", after) == (r2, False)


def test_fresh_stale_replan_second_change() -> None:
    book, view = _setup()
    up = Upstream()
    for k in DEPS:
        book.read(view, k)
    v = _run(book, view, up)
    assert v.call.executed and v.reason == "valid" and len(up.calls) == 1
    assert v.call.record is not None and v.decisions[0].authorized
    # another writer: the session's plan is stale; not forwarded; fresh value handed over
    book.observe("memo://price", {"v": "changed"})
    v = _run(book, view, up)
    assert v.reason == "stale" and not v.call.executed and len(up.calls) == 1
    assert set(v.changed) == {"memo://price"}
    # the next call is the one replan: it runs from the handed-over version
    v = _run(book, view, up)
    assert v.call.executed and len(up.calls) == 2
    # stale, then changed again before the replan: second_change, blocked
    book.observe("memo://price", {"v": "x"})
    assert _run(book, view, up).reason == "stale"
    book.observe("memo://price", {"v": "y"})
    v = _run(book, view, up)
    assert v.reason == "second_change" and "memo://price" in v.changed
    assert _run(book, view, up).reason == "second_change"  # until the session reads again
    book.read(view, "memo://price")
    assert _run(book, view, up).call.executed
    assert len(up.calls) == 3


def test_unread_fact_refused_with_current_value() -> None:
    book, view = _setup()
    up = Upstream()
    book.read(view, "memo://price")
    v = _run(book, view, up)
    assert v.reason == "not_read" and set(v.changed) == {"memo://city"} and not up.calls
    assert _run(book, view, up).call.executed  # handed over = read


def test_unread_fact_refusal_hands_over_a_stale_read_too() -> None:
    book, view = _setup()
    up = Upstream()
    book.read(view, "memo://price")
    book.observe("memo://price", {"v": "changed"})
    v = _run(book, view, up)
    assert v.reason == "not_read" and v.stale == ("memo://price",) and not up.calls
    assert set(v.changed) == set(DEPS)
    assert "changed since read (fresh values handed over): memo://price" in v.call.detail
    assert _run(book, view, up).call.executed  # one new plan from what was handed over


def test_a_stale_read_whose_owner_fails_is_not_handed_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    book, view = _setup()
    up = Upstream()
    book.read(view, "memo://price")
    book.observe("memo://price", {"v": "changed"})
    real = book.head

    def head(key: str) -> Record | None:
        if key == "memo://price":
            raise OwnerUnavailable("owner is unavailable", owner="trip")
        return real(key)

    monkeypatch.setattr(book, "head", head)
    v = _run(book, view, up)  # the refusal stands, without that hand-over
    assert v.reason == "not_read" and v.stale == () and set(v.changed) == {"memo://city"}
    monkeypatch.undo()
    v = _run(book, view, up)  # the gate still asks the owner: the old read is stale
    assert v.reason == "stale" and set(v.changed) == {"memo://price"} and not up.calls


def test_sessions_are_independent() -> None:
    book, a = _setup()
    b = book.session("s#2")
    up = Upstream()
    for k in DEPS:
        book.read(a, k)
        book.read(b, k)
    book.observe("memo://city", {"v": "Faro"})  # e.g. a write by a third session
    book.read(b, "memo://city")
    assert _run(book, a, up).reason == "stale"
    assert _run(book, b, up).call.executed
    assert len(up.calls) == 1


def test_owner_down_blocks_fail_closed() -> None:
    book, view = _setup()
    up = Upstream()
    for k in DEPS:
        book.read(view, k)

    class Down:
        def query_heads(self, owner: str, keys: Sequence[str], *,
                        known: Mapping[str, RecordId] | None = None,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
            raise OwnerUnavailable("owner is unavailable", owner=owner)

        def fetch(self, owner: str, ids: Sequence[RecordId], *,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
            raise OwnerUnavailable("owner is unavailable", owner=owner)

    view.agent.fence.validator.context = _with_owners(view, Down())  # type: ignore[attr-defined]
    v = _run(book, view, up)
    assert v.reason == "owner_unavailable" and not up.calls


def _with_owners(view: SessionView, owners: Any) -> Any:
    from dataclasses import replace
    return replace(view.agent.fence.validator.context, owners=owners)  # type: ignore[attr-defined]


def test_malformed_owner_reply_blocks() -> None:
    book, view = _setup()
    up = Upstream()
    for k in DEPS:
        book.read(view, k)
    rec = book.head("memo://price")
    assert rec is not None

    class Liar:
        def query_heads(self, owner: str, keys: Sequence[str], *,
                        known: Mapping[str, RecordId] | None = None,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
            return HeadReply.from_entries(owner, [HeadEntry("memo://elsewhere", rec.id, 1)])

        def fetch(self, owner: str, ids: Sequence[RecordId], *,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
            return []

    view.agent.fence.validator.context = _with_owners(view, Liar())  # type: ignore[attr-defined]
    v = _run(book, view, up)
    assert not v.call.executed and v.reason in ("wrong_key", "malformed_head") and not up.calls


def test_arguments_not_json_refused() -> None:
    book, view = _setup()
    up = Upstream()
    for k in DEPS:
        book.read(view, k)
    v = _run(book, view, up, {"x": float("nan")})
    assert not v.call.executed and not up.calls


def test_expand_deps_binds_arguments_and_globs() -> None:
    keys = expand_deps(["fact://plan/{trip}", "memo://*"], {"trip": "t1"},
                       ["memo://a", "memo://b", "fact://plan/t2"])
    assert keys == {"fact://plan/t1", "memo://a", "memo://b"}
    with pytest.raises(IcoreError, match="needs argument"):
        expand_deps(["fact://plan/{trip}"], {}, [])
    with pytest.raises(IcoreError, match="string or number"):
        expand_deps(["fact://plan/{trip}"], {"trip": ["x"]}, [])


def test_sqlite_store_keeps_versions_across_restart(tmp_path: Path) -> None:
    book = FactBook(OWNERS, backend="sqlite", path=tmp_path)
    r1, _ = book.observe("memo://price", {"v": 1})
    book.close()
    book2 = FactBook(OWNERS, backend="sqlite", path=tmp_path)
    assert book2.head("memo://price") == r1
    r2, created = book2.observe("memo://price", {"v": 2})
    assert created and r2 is not None and r1 is not None
    assert r2.supersedes == r1.id and r2.parents == ()
    book2.observe("memo://city", {"v": "c"})
    view = book2.session("s#1")
    for k in DEPS:
        book2.read(view, k)
    assert _run(book2, view, Upstream()).call.executed
    book2.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["read", "write"]), st.sampled_from(DEPS),
                          st.integers(0, 3)), max_size=12))
def test_first_call_runs_iff_reads_are_current(ops: list[tuple[str, str, int]]) -> None:
    """Invariant: a session's first call reaches the upstream exactly when every fact of
    D(a) it read is still the owner's head; a stale read is refused ``stale``, an unread
    fact ``not_read``; a refused call never reaches the upstream."""
    book = FactBook(OWNERS)
    for k in DEPS:
        book.observe(k, {"v": -1})
    view = book.session("s#1")
    for op, key, val in ops:
        if op == "write":
            book.observe(key, {"v": val})
        else:
            book.read(view, key)
    seen = view.seen
    heads = {k: book.head(k) for k in DEPS}
    up = Upstream()
    v = _run(book, view, up)
    if any(k not in seen for k in DEPS):
        assert v.reason == "not_read"
        # the read facts that are stale are handed over too (QA r7-mcp D3): with no
        # change in between, the next call runs (one replan, not two)
        stale = {k for k in DEPS if k in seen and seen[k] != heads[k]}
        assert set(v.stale) == stale
        assert set(v.changed) == {k for k in DEPS if k not in seen} | stale
        assert all(v.changed[k] == heads[k] for k in v.changed)
        assert _run(book, view, up).call.executed
        assert len(up.calls) == 1
        book.close()
        return
    elif all(seen[k] == heads[k] for k in DEPS):
        assert v.call.executed
    else:
        assert v.reason == "stale"
    assert bool(up.calls) == v.call.executed
    book.close()
