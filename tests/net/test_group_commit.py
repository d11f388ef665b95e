"""Group commit in the owner service over real TLS on 127.0.0.1 (issue 17).

Concurrent commits from several connections share one SQLite transaction and fsync;
every owner rule still holds per record, and only durable commits are acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path

import pytest

from icore.errors import HeadConflict, StoreError
from icore.memory import OwnershipMap, SQLiteStore
from icore.net import (
    Commit,
    GroupCommitter,
    OwnerClient,
    OwnerHandler,
    RemoteError,
    ServerThread,
    client_context,
    server_context,
)
from icore.net._tcp import server as server_mod
from icore.records import Record, derive

OM = OwnershipMap.from_mapping({"req/*": "a", "plan/*": "executor"})
WRITERS = 8
PER_WRITER = 60

pytestmark = pytest.mark.timeout(120)


def _client(server: ServerThread, certs: Path) -> OwnerClient:
    return OwnerClient({"a": server.address}, identity="a",
                       ssl_context=client_context(certs, "a"))


async def _writers(server: ServerThread, certs: Path, *, shared: bool
                   ) -> dict[str, list[Record]]:
    """8 writers of owner a, each appending its own key's chain; one sequence counter."""
    seq = 0
    chains: dict[str, list[Record]] = {f"req/w{i}": [] for i in range(WRITERS)}
    one = _client(server, certs) if shared else None
    clients = [one or _client(server, certs) for _ in range(WRITERS)]

    async def writer(i: int) -> None:
        nonlocal seq
        key = f"req/w{i}"
        for _ in range(PER_WRITER):
            chain = chains[key]
            seq += 1  # allocated right before the request leaves, so arrival order matches
            rec = (Record.create(key=key, owner="a", seq=seq, content={"n": seq})
                   if not chain else
                   derive(key=key, owner="a", seq=seq, content={"n": seq}, inputs=[chain[-1]]))
            if shared:
                await clients[i].commit("a", rec)
            else:  # separate connections may reorder: retry on a lower-sequence refusal
                try:
                    await clients[i].commit("a", rec)
                except RemoteError as exc:
                    if exc.fields["remote_code"] not in ("sequence", "sequence_conflict"):
                        raise
                    seq += 1
                    rec = derive(key=key, owner="a", seq=seq, content={"n": seq},
                                 inputs=chain[-1:]) if chain else Record.create(
                        key=key, owner="a", seq=seq, content={"n": seq})
                    await clients[i].commit("a", rec)
            chain.append(rec)

    try:
        await asyncio.gather(*(writer(i) for i in range(WRITERS)))
    finally:
        for c in set(clients):
            await c.close()
    return chains


@pytest.mark.parametrize("shared", [True, False], ids=["one-connection", "8-connections"])
def test_concurrent_commits_share_transactions_and_stay_chains(
        tmp_path: Path, certs: Path, shared: bool) -> None:
    db = tmp_path / "a.sqlite"
    store = SQLiteStore(db, OM, "a", synchronous="FULL", exclusive=True)
    with ServerThread(store, agent="a", ssl_context=server_context(certs, "a")) as server:
        chains = asyncio.run(_writers(server, certs, shared=shared))
        groups, commits = server.server.group_commits
    store.close()
    assert commits >= WRITERS * PER_WRITER
    assert groups < commits  # commits really were grouped
    # after a restart every acknowledged write is there, each key one chain
    s2 = SQLiteStore(db, OM, "a")
    for key, chain in chains.items():
        assert len(chain) == PER_WRITER
        h = s2.head(key)
        assert h is not None and h.record_id == chain[-1].id
        for prev, nxt in itertools.pairwise(chain):
            assert prev.id in nxt.parents and nxt.seq > prev.seq
            assert s2.get(prev.id) is not None
    s2.close()


def test_same_base_in_one_group_exactly_one_wins(tmp_path: Path, certs: Path) -> None:
    """Two writers from the same head, sent together: one acknowledged, one HeadConflict,
    and the head is the winner's."""
    store = SQLiteStore(tmp_path / "a.sqlite", OM, "a", exclusive=True)
    base = Record.create(key="req/x", owner="a", seq=1, content={"v": 1})
    store.commit(base, writer="a")
    with ServerThread(store, agent="a", ssl_context=server_context(certs, "a")) as server:

        async def race() -> list[object]:
            c = _client(server, certs)
            try:
                r2 = derive(key="req/x", owner="a", seq=2, content={"v": 2}, inputs=[base])
                r3 = derive(key="req/x", owner="a", seq=3, content={"v": 3}, inputs=[base])
                return list(await asyncio.gather(c.commit("a", r2), c.commit("a", r3),
                                                 return_exceptions=True))
            finally:
                await c.close()

        got = asyncio.run(race())
    oks = [g for g in got if not isinstance(g, BaseException)]
    conflicts = [g for g in got if isinstance(g, HeadConflict)]
    assert len(oks) == 1 and len(conflicts) == 1
    h = store.head("req/x")
    assert h is not None and h.seq == 2  # the first in arrival order won
    store.close()


def test_worker_fails_a_group_then_serves_the_next_and_exits_when_idle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The group committer's own worker thread (issue 27): a group whose write fails gives
    every waiter the store's error and writes nothing; the next group commits; the thread
    is gone once idle, and a later group starts a new one."""
    monkeypatch.setattr(server_mod, "WORKER_IDLE_S", 0.05)
    store = SQLiteStore(tmp_path / "a.sqlite", OM, "a", synchronous="FULL", exclusive=True)
    store._db.execute("CREATE TRIGGER boom BEFORE INSERT ON owner_seq WHEN NEW.seq = 2 "
                      "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    gc = GroupCommitter(OwnerHandler(store, agent="a"))
    recs = [Record.create(key=f"req/k{i}", owner="a", seq=i, content={"i": i})
            for i in (1, 2, 3, 4)]

    async def group(part: list[Record], rid: int) -> list[object]:
        futs = [gc.submit(Commit(rid + i, r), "a") for i, r in enumerate(part)]
        return list(await asyncio.gather(*futs, return_exceptions=True))

    async def run() -> tuple[list[object], list[object], bool, list[object]]:
        failed = await group(recs[:2], 1)  # seq 2 trips the trigger: the whole group fails
        ok = await group(recs[2:3], 3)
        await asyncio.sleep(0.5)
        idle = gc._worker is None
        again = await group(recs[3:], 4)
        return failed, ok, idle, again

    failed, ok, idle, again = asyncio.run(run())
    # the store names its file and that nothing of the group was committed (round 9)
    assert all(isinstance(f, StoreError) and "disk full" in str(f) for f in failed), failed
    assert [type(x).__name__ for x in ok + again] == ["CommitAck", "CommitAck"]
    assert idle
    assert store.head("req/k1") is None and store.head("req/k2") is None
    assert store.owner_seq("a") == 4
    store.close()


def test_a_worker_that_cannot_start_fails_its_group_and_the_next_group_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review (#27): the worker is started before its group is queued, so a failed start
    ("can't start new thread") fails that group alone, leaves nothing queued to be
    committed behind its waiters' backs, and the next group starts a worker and commits."""
    import threading

    store = SQLiteStore(tmp_path / "a.sqlite", OM, "a", synchronous="FULL", exclusive=True)
    gc = GroupCommitter(OwnerHandler(store, agent="a"))
    recs = [Record.create(key=f"req/k{i}", owner="a", seq=i, content={"i": i})
            for i in (1, 2)]
    real_start = threading.Thread.start
    fails = [1]

    def start(self: threading.Thread) -> None:
        if fails and self.name.startswith("icore-group-commit"):
            fails.pop()
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)

    async def run() -> tuple[object, object]:
        first = (await asyncio.gather(gc.submit(Commit(1, recs[0]), "a"),
                                      return_exceptions=True))[0]
        second = await asyncio.wait_for(gc.submit(Commit(2, recs[1]), "a"), 30)
        await gc.aclose()
        return first, second

    first, second = asyncio.run(run())
    assert isinstance(first, RuntimeError) and "can't start" in str(first)
    assert type(second).__name__ == "CommitAck"
    assert store.head("req/k1") is None and store.head("req/k2") is not None
    assert gc._worker is None
    store.close()


def test_aclose_waits_for_the_group_in_flight_and_stops_the_worker(tmp_path: Path) -> None:
    """Review (#27): closing the owner server lets the transaction in flight end (it is
    durable) and joins the worker thread, as ``asyncio.to_thread``'s executor was joined."""
    import threading
    import time

    store = SQLiteStore(tmp_path / "a.sqlite", OM, "a", synchronous="FULL", exclusive=True)
    handler = OwnerHandler(store, agent="a")
    slow = handler.handle_commits

    def handle(items: object, **kw: object) -> object:
        time.sleep(0.5)
        return slow(items, **kw)  # type: ignore[arg-type]

    handler.handle_commits = handle  # type: ignore[method-assign]
    gc = GroupCommitter(handler)
    rec = Record.create(key="req/k1", owner="a", seq=1, content={"i": 1})

    async def run() -> threading.Thread | None:
        fut = gc.submit(Commit(1, rec), "a")
        await asyncio.sleep(0.1)  # the group is in the worker now
        worker = gc._worker
        await gc.aclose()
        assert fut.done()
        return worker

    worker = asyncio.run(run())
    assert worker is not None and not worker.is_alive() and gc._worker is None
    store.close()
    again = SQLiteStore(tmp_path / "a.sqlite", OM, "a")
    assert again.head("req/k1") is not None
    again.close()


def _sizes(handler: OwnerHandler) -> list[int]:
    """Record the size of every group the handler commits."""
    sizes: list[int] = []
    real = handler.handle_commits

    def handle(items: list[tuple[Commit, str]], **kw: bool) -> object:
        sizes.append(len(items))
        return real(items, **kw)

    handler.handle_commits = handle  # type: ignore[method-assign,assignment]
    return sizes


@pytest.mark.parametrize(("queued", "disk_bound", "groups"), [
    (8, True, [4, 4]), (7, True, [4, 3]), (8, False, [8]), (5, True, [5]), (1, True, [1])])
def test_the_worker_takes_half_of_a_long_queue_only_when_the_disk_dominates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, queued: int, disk_bound: bool,
        groups: list[int]) -> None:
    """Issue 27 item 2: ``split_at`` (6) or more queued commits are taken in two halves
    when the transactions wait mostly for the disk; fewer, or a CPU-bound cycle, one group.
    Every commit is acknowledged, with its own record, and the heads are the last ones."""
    store = SQLiteStore(tmp_path / "a.sqlite", OM, "a", synchronous="FULL", exclusive=True)
    handler = OwnerHandler(store, agent="a")
    sizes = _sizes(handler)
    gc = GroupCommitter(handler, split_at=6)
    monkeypatch.setattr(gc, "_disk_bound", lambda: disk_bound)
    recs = [Record.create(key=f"req/k{i}", owner="a", seq=i + 1, content={"i": i})
            for i in range(queued)]

    async def run() -> list[object]:
        futs = [gc.submit(Commit(i + 1, r), "a") for i, r in enumerate(recs)]
        out = list(await asyncio.gather(*futs))
        await gc.aclose()
        return out

    acks = asyncio.run(run())
    assert sizes == groups
    assert gc.split_groups == (len(groups) - 1) and (gc.groups, gc.commits) == (len(groups),
                                                                               queued)
    assert [(type(a).__name__, a.record_id) for a in acks] == [  # type: ignore[attr-defined]
        ("CommitAck", r.id) for r in recs]
    assert all(store.head(r.key).record_id == r.id for r in recs)  # type: ignore[union-attr]
    store.close()


def test_the_disk_estimate_follows_the_stores_commit_time(tmp_path: Path) -> None:
    """The split rule's inputs are measured: after a group, the disk estimate is a share of
    the store's last ``COMMIT`` time, the rest of the transaction the other estimate."""
    store = SQLiteStore(tmp_path / "a.sqlite", OM, "a", synchronous="FULL", exclusive=True)
    gc = GroupCommitter(OwnerHandler(store, agent="a"))
    rec = Record.create(key="req/k", owner="a", seq=1, content={})

    async def run() -> None:
        await gc.submit(Commit(1, rec), "a")
        await gc.aclose()

    assert gc._disk_s == 0.0 and gc._cpu_s == 0.0 and not gc._disk_bound()
    asyncio.run(run())
    assert store.last_commit_s > 0
    assert gc._disk_s == pytest.approx(store.last_commit_s / 4)
    assert gc._cpu_s > 0
    store.close()


_CHILD = r"""
import asyncio, sys
from pathlib import Path
from icore.memory import OwnershipMap, SQLiteStore
from icore.net import OwnerServer, server_context

async def main() -> None:
    store = SQLiteStore(Path(sys.argv[2]), OwnershipMap.from_mapping({"req/*": "a"}), "a",
                        synchronous="FULL", exclusive=True)
    server = OwnerServer(store, agent="a", ssl_context=server_context(Path(sys.argv[1]), "a"))
    server._group.split_at = 6  # pipelined groups (off by default), whatever the disk
    server._group._disk_bound = lambda: True
    print(await server.start(), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def test_every_acknowledged_commit_survives_a_killed_owner(tmp_path: Path,
                                                           certs: Path) -> None:
    """An owner process pipelining its groups, killed with SIGKILL while 8 writers commit:
    every commit it acknowledged is in the reopened store (heads at least as new)."""
    import os
    import signal
    import subprocess
    import sys

    db = tmp_path / "a.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(certs), str(db)],
                            stdout=subprocess.PIPE, text=True, env=env)
    acked: dict[str, list[Record]] = {f"req/w{i}": [] for i in range(WRITERS)}
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())

        async def drive() -> None:
            c = OwnerClient({"a": ("127.0.0.1", port)}, identity="a",
                            ssl_context=client_context(certs, "a"))
            seq = 0

            async def writer(key: str) -> None:
                nonlocal seq
                chain = acked[key]
                while True:
                    seq += 1
                    rec = (derive(key=key, owner="a", seq=seq, content={"n": seq},
                                  inputs=[chain[-1]]) if chain else
                           Record.create(key=key, owner="a", seq=seq, content={"n": seq}))
                    await c.commit("a", rec, timeout_s=10)
                    chain.append(rec)
                    if sum(map(len, acked.values())) == 200:
                        os.kill(proc.pid, signal.SIGKILL)  # commits still in flight

            got = await asyncio.gather(*(writer(k) for k in acked), return_exceptions=True)
            assert all(isinstance(g, Exception) for g in got)  # the owner is gone
            with contextlib.suppress(Exception):
                await c.close()

        asyncio.run(drive())
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert sum(map(len, acked.values())) >= 200
    s = SQLiteStore(db, OM, "a")
    for key, chain in acked.items():
        for rec in chain:
            assert s.get(rec.id) is not None, (key, rec.seq)
        h = s.head(key)
        assert chain and h is not None and h.seq >= chain[-1].seq
    s.close()
