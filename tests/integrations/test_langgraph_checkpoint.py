"""RecordCheckpointSaver passes LangGraph's own conformance suite; its checkpoints are
icore records whose lineage is the checkpoint history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import END, START, StateGraph

from icore.errors import IntegrationError, OwnershipError, OwnerUnavailable
from icore.integrations.langgraph import RecordCheckpointSaver, RecordStore
from icore.memory import MemoryStore, OwnershipMap, SQLiteStore


@checkpointer_test(name="RecordCheckpointSaver/memory")
async def _memory_saver() -> AsyncIterator[RecordCheckpointSaver]:
    yield RecordCheckpointSaver.in_memory()


def test_conformance_suite_passes() -> None:
    """Every base capability of langgraph-checkpoint-conformance passes, and the extended
    ones implemented (copy_thread, delete_for_runs)."""
    report = asyncio.run(validate(_memory_saver))
    assert report.passed_all_base() and report.passed_all(), report.to_dict()
    done = {c for c, r in report.to_dict()["results"].items()
            if r["detected"] and r["passed"] and r["tests_passed"] > 0}
    assert done == {"put", "put_writes", "get_tuple", "list", "delete_thread",
                    "copy_thread", "delete_for_runs"}


def test_conformance_suite_passes_on_sqlite(tmp_path: Path) -> None:
    """The same suite over a durable SQLiteStore file."""

    @checkpointer_test(name="RecordCheckpointSaver/sqlite")
    async def sqlite_saver() -> AsyncIterator[RecordCheckpointSaver]:
        om = OwnershipMap(patterns={"lg/*": "graph"})
        store = SQLiteStore(tmp_path / "ck.db", om, "graph")
        try:
            yield RecordCheckpointSaver(store)
        finally:
            store.close()

    report = asyncio.run(validate(sqlite_saver))
    assert report.passed_all_base()


class _S(TypedDict, total=False):
    n: int


def _graph(saver: Any) -> Any:
    g = StateGraph(_S)
    g.add_node("inc", lambda s: {"n": s.get("n", 0) + 1})
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    return g.compile(checkpointer=saver)


def test_checkpoints_are_records_citing_their_exact_parent(tmp_path: Path) -> None:
    """Each checkpoint record cites its parent checkpoint's record; a restart sees them."""
    om = OwnershipMap(patterns={"lg/*": "graph"})
    store = SQLiteStore(tmp_path / "g.db", om, "graph")
    saver = RecordCheckpointSaver(store)
    app = _graph(saver)
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    assert app.invoke({"n": 0}, cfg)["n"] == 1
    assert app.invoke({"n": 5}, cfg)["n"] == 6
    tuples = list(saver.list(cfg))
    assert len(tuples) >= 2
    for t in tuples:
        rec = saver.checkpoint_record(t.config)
        assert rec is not None and rec.owner == "graph" and rec.type == "lg_checkpoint"
        if t.parent_config is not None:
            parent = saver.checkpoint_record(t.parent_config)
            assert parent is not None and parent.id in rec.parents
    store.close()
    reopened = RecordCheckpointSaver(SQLiteStore(tmp_path / "g.db", om, "graph"))
    assert [t.config for t in reopened.list(cfg)] == [t.config for t in tuples]
    reopened.store.close()


def test_saver_refuses_keys_it_does_not_own() -> None:
    """The ownership map must give the saver's owner its prefix."""
    om = OwnershipMap(patterns={"lg/*": "someone-else"})
    with pytest.raises(IntegrationError, match="ownership map"):
        RecordCheckpointSaver(MemoryStore(om, "graph"))


def test_record_store_is_versioned_and_owner_checked() -> None:
    """Puts are new versions citing the previous one; another owner's key is refused."""
    om = OwnershipMap(patterns={"store/prefs/*": "alice", "store/shared/*": "bob"})
    st = RecordStore(MemoryStore(om, "alice"), agent="alice")
    st.put(("prefs", "u1"), "lang", {"v": "pt"})
    st.put(("prefs", "u1"), "lang", {"v": "en"})
    item = st.get(("prefs", "u1"), "lang")
    assert item is not None and item.value == {"v": "en"}
    hist = st.history(("prefs", "u1"), "lang")
    assert [r.content["value"] for r in hist] == [{"v": "en"}, {"v": "pt"}]  # type: ignore[index]
    assert hist[1].id in hist[0].parents
    assert [i.key for i in st.search(("prefs",), filter={"v": "en"})] == ["lang"]
    assert st.list_namespaces(prefix=("prefs",)) == [("prefs", "u1")]
    with pytest.raises(OwnershipError):
        st.put(("shared", "x"), "k", {"v": 1})
    st.delete(("prefs", "u1"), "lang")
    assert st.get(("prefs", "u1"), "lang") is None
    assert len(st.history(("prefs", "u1"), "lang")) == 3


def test_graph_nodes_use_record_store_through_the_store_api() -> None:
    """A compiled graph with ``store=RecordStore``: nodes read and write icore records."""
    from langgraph.runtime import Runtime

    om = OwnershipMap(patterns={"store/*": "graph"})
    st = RecordStore(MemoryStore(om, "graph"), agent="graph")

    def remember(state: _S, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        prev = runtime.store.get(("counts",), "n")
        n = (prev.value["n"] if prev else 0) + state.get("n", 0)
        runtime.store.put(("counts",), "n", {"n": n})
        return {"n": n}

    g = StateGraph(_S)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    g.add_edge("remember", END)
    app = g.compile(store=st, checkpointer=RecordCheckpointSaver.in_memory())
    cfg: Any = {"configurable": {"thread_id": "s"}}
    assert app.invoke({"n": 2}, cfg)["n"] == 2
    assert asyncio.run(app.ainvoke({"n": 3}, cfg))["n"] == 5
    hist = st.history(("counts",), "n")
    assert [r.content["value"]["n"] for r in hist] == [5, 2]  # type: ignore[index]
    rec = st.record_of(("counts",), "n")
    assert rec is not None and rec.owner == "graph" and hist[1].id in rec.parents


_OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from(["a", "b"]), st.sampled_from(["", "sub"]),
              st.integers(0, 9), st.dictionaries(st.sampled_from(["x", "y", "z"]),
                                                  st.integers(-5, 5), max_size=3)),
    st.tuples(st.just("writes"), st.sampled_from(["a", "b"]), st.sampled_from(["", "sub"]),
              st.integers(0, 9), st.sampled_from(["t1", "t2"])),
    st.tuples(st.just("delete"), st.sampled_from(["a", "b"]))), max_size=18)


def _snapshot(saver: Any) -> list[tuple[Any, ...]]:
    out = []
    for t in saver.list(None):
        c = t.checkpoint
        out.append((t.config["configurable"]["thread_id"],
                    t.config["configurable"]["checkpoint_ns"],
                    t.config["configurable"]["checkpoint_id"],
                    (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                    sorted(c["channel_values"].items()), dict(t.metadata or {}),
                    sorted(t.pending_writes or [])))
    return sorted(out)


@settings(max_examples=40)
@given(_OPS)
def test_behaves_like_langgraphs_in_memory_saver(ops: list[tuple[Any, ...]]) -> None:
    """Any sequence of puts (forks included), pending writes and deletes leaves the icore
    saver listing exactly what LangGraph's own InMemorySaver lists."""
    from langgraph.checkpoint.memory import InMemorySaver

    savers = [InMemorySaver(), RecordCheckpointSaver.in_memory()]
    made: dict[tuple[str, str], list[str]] = {}
    n = 0
    for op in ops:
        if op[0] == "put":
            _, thread, ns, pick, values = op
            n += 1
            cid = f"{n:08d}"
            prev = made.get((thread, ns), [])
            parent = prev[pick % len(prev)] if prev and pick < 7 else None
            vers = {k: f"{n:032}.{i:016}" for i, k in enumerate(sorted(values))}
            for s in savers:
                cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
                if parent:
                    cfg["configurable"]["checkpoint_id"] = parent
                ck: Any = {"v": 1, "id": cid, "ts": "2026-01-01T00:00:00+00:00",
                           "channel_values": dict(values), "channel_versions": vers,
                           "versions_seen": {}, "updated_channels": None}
                s.put(cfg, ck, {"step": n, "source": "loop"}, vers)
            made.setdefault((thread, ns), []).append(cid)
        elif op[0] == "writes":
            _, thread, ns, pick, task = op
            prev = made.get((thread, ns), [])
            if not prev:
                continue
            cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                    "checkpoint_id": prev[pick % len(prev)]}}
            for s in savers:
                s.put_writes(cfg, [("x", pick), ("y", task)], task)
        else:
            for s in savers:
                s.delete_thread(op[1])
            made = {k: v for k, v in made.items() if k[0] != op[1]}
    assert _snapshot(savers[1]) == _snapshot(savers[0])


def test_resume_after_the_checkpoint_file_was_deleted_raises(tmp_path: Path) -> None:
    """QA qa-new12b S1 (b2 s8, #29): the saver's SQLite file deleted between the pause
    and the resume; the resume raises ``OwnerUnavailable`` naming the path and the
    paused node never runs (it used to carry on from the orphaned file)."""
    om = OwnershipMap(patterns={"lg/*": "graph"})
    db = tmp_path / "ck" / "graph.db"
    store = SQLiteStore(db, om, "graph")
    ran: list[int] = []
    g = StateGraph(_S)
    g.add_node("plan", lambda s: {"n": 1})
    g.add_node("act", lambda s: ran.append(s["n"]) or {"n": 2})
    g.add_edge(START, "plan")
    g.add_edge("plan", "act")
    g.add_edge("act", END)
    app = g.compile(checkpointer=RecordCheckpointSaver(store), interrupt_before=["act"])
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    app.invoke({"n": 0}, cfg)
    assert ran == []
    for f in list(db.parent.iterdir()):
        f.unlink()
    with pytest.raises(OwnerUnavailable) as err:
        app.invoke(None, cfg)
    assert err.value.fields["path"] == str(db) and ran == []
    assert not db.exists()  # nothing was written as if the old state were current
    store.close()
