"""A forked child never keeps a writer's ``flock`` (icore._flock, issue 29).

A child forked while another thread of the parent held a writer's lock shared the lock's
open file description and kept it for its whole life: the parent's next writer waited
for the child to exit. Each test forks a real child (``os.fork``, ``multiprocessing``
with the ``fork`` start method) while a thread holds the lock, lets the thread release
it, and then probes the lock with ``LOCK_NB`` from a new descriptor while the child is
still alive (a probe, not a wait: on the old code it fails at once instead of hanging),
then runs the parent's next real writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import multiprocessing
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icore._files import folder_turn
from icore.integrations import RunRecorder

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _free(path: Path, *, directory: bool = False) -> bool:
    """Whether an exclusive ``flock`` of ``path`` can be taken now (never waits)."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if directory else os.O_NONBLOCK)
    fd = os.open(path, flags)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@contextlib.contextmanager
def _forked_child() -> Iterator[int]:
    """An ``os.fork`` child alive until the block ends; yields its pid.

    Yields once the child runs (its fork handlers ran inside ``os.fork``, before it said
    so): the parent's lock is free from then on, whatever the child does.
    """
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: say it runs, wait for the parent to close the pipe, leave
        try:
            os.close(w)
            os.write(ready_w, b"r")
            os.read(r, 1)
        finally:
            os._exit(0)
    os.close(r)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"r"
        os.close(ready_r)
        yield pid
    finally:
        os.close(w)
        os.waitpid(pid, 0)


def _holding(enter: Any) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """A thread that enters the context ``enter()``, says so, and leaves when told."""
    inside, leave = threading.Event(), threading.Event()

    def run() -> None:
        with enter():
            inside.set()
            leave.wait(30)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert inside.wait(30)
    return t, inside, leave


def test_span_file_lock_is_not_kept_by_a_child_forked_mid_append(tmp_path: Path) -> None:
    """The OTLP span file's append lock: a thread blocked mid-write holds it (a FIFO whose
    reader has not drained yet) while the parent forks; after the append the lock is free
    although the child is alive."""
    from icore.adapters._otlp_file import _append_whole
    fifo = tmp_path / "spans.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    data = b"x" * (1 << 20) + b"\n"  # over the pipe's buffer: the write blocks
    try:
        t = threading.Thread(target=_append_whole, args=(fifo, data), daemon=True)
        t.start()
        for _ in range(3000):  # until the writer holds the lock (bounded)
            if not _free(fifo):
                break
            threading.Event().wait(0.01)
        assert not _free(fifo), "the writer never took the lock"
        with _forked_child():
            got = 0
            os.set_blocking(reader, True)
            while got < len(data):
                got += len(os.read(reader, 1 << 16))
            t.join(30)
            assert not t.is_alive()
            assert _free(fifo), "the forked child kept the span file's lock"
    finally:
        os.close(reader)


def _child_report(conn: Any, folder: str) -> None:
    """In the forked child: the lock descriptors it holds, and whether it may take the
    folder's turn itself once the parent is done (it holds no copy of the parent's)."""
    try:
        from icore import _flock
        conn.send(sorted(_flock.held()))
    except ImportError:  # a version without it: the parent's assertion says so
        conn.send(None)
    conn.recv()  # the parent released its turn
    conn.send(_free(Path(folder), directory=True))
    conn.recv()  # stay alive until the parent's next writer is done


def test_folder_turn_is_not_kept_by_a_multiprocessing_fork_child(tmp_path: Path) -> None:
    """RunRecorder's folder turn: held by a thread while ``multiprocessing`` forks; the
    parent's next RunRecorder.write into the folder runs while the child lives."""
    folder = tmp_path / "runs"
    folder.mkdir()
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe()
    t, _, leave = _holding(lambda: folder_turn(folder))
    p = ctx.Process(target=_child_report, args=(theirs, str(folder)))
    p.start()
    try:
        assert mine.poll(30)
        assert mine.recv() == []  # the child holds no lock descriptor
        leave.set()
        t.join(30)
        mine.send("released")
        assert mine.poll(30)
        assert mine.recv() is True  # the child can take the turn: it held no copy
        assert _free(folder, directory=True), "the forked child kept the folder's turn"
        rec = RunRecorder()
        rec.task("q")
        rec.finish("a", "done")
        assert rec.write(folder / "run.jsonl").is_file()
        assert json.loads((folder / "run.jsonl").read_text().splitlines()[0])
    finally:
        mine.send("bye")
        p.join(30)
    assert p.exitcode == 0


def test_ledger_lock_and_gateway_claim_are_dropped_in_the_child(tmp_path: Path) -> None:
    """The ``.icore-files`` ledger lock and a gateway's trace claim (held for the
    gateway's life) are not kept by an ``os.fork`` child either."""
    pytest.importorskip("mcp")
    from icore._files import WRITTEN, _locked
    from icore.mcp._trace_claim import claim_trace
    ledger = tmp_path / WRITTEN
    t, _, leave = _holding(lambda: _locked(ledger))
    claim = claim_trace(tmp_path / "gw.jsonl")
    try:
        with _forked_child():
            leave.set()
            t.join(30)
            assert _free(ledger), "the forked child kept the ledger's lock"
            claim.release()
            assert _free(claim.lock), "the forked child kept the gateway's trace claim"
    finally:
        leave.set()
        claim.undo()


def test_closing_in_the_parent_keeps_the_lock_until_released(tmp_path: Path) -> None:
    """The child closing its copies never releases the parent's lock (no LOCK_UN)."""
    folder = tmp_path / "f"
    folder.mkdir()
    with folder_turn(folder), _forked_child():
        assert not _free(folder, directory=True)
    assert _free(folder, directory=True)


@pytest.mark.parametrize("exclusive", [True, False])
def test_a_forked_child_does_not_keep_a_memory_store_lock(tmp_path: Path,
                                                          exclusive: bool) -> None:
    """The SQLite store's ``<file>.lock`` (exclusive for an owner service, shared for a
    workspace) is opened through ``icore._flock``: a child forked while the store is
    open does not keep it. Before, the parent closed its store and the owner service
    could not open the file again ("in use by another process") while the child lived."""
    from icore.memory import OwnershipMap, SQLiteStore
    from icore.records import Record

    om = OwnershipMap.from_mapping({"req/*": "alice"})
    path = tmp_path / "alice.sqlite"
    store = SQLiteStore(path, om, "alice", exclusive=exclusive)
    store.commit(Record.create(key="req/a", owner="alice", seq=1, content=1),
                 writer="alice")
    with _forked_child():
        store.close()
        assert _free(path.with_name(path.name + ".lock"))
        again = SQLiteStore(path, om, "alice", exclusive=True)  # the service restarts
        try:
            head = again.head("req/a")
            assert head is not None and head.seq == 1
        finally:
            again.close()


def test_locked_elsewhere_tells_held_free_and_unreadable(tmp_path: Path) -> None:
    """The one probe behind "is this lock held by a live process" (attempts, gateway trace)."""
    from icore._flock import held, locked_elsewhere

    before = held()
    lock = tmp_path / "x.lock"
    assert locked_elsewhere(lock, exclusive=True) is None  # missing
    lock.write_bytes(b"")
    assert locked_elsewhere(lock, exclusive=True) is False
    assert locked_elsewhere(lock, exclusive=False) is False
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        assert locked_elsewhere(lock, exclusive=True) is True  # any holder counts
        assert locked_elsewhere(lock, exclusive=False) is False  # shared with shared
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert locked_elsewhere(lock, exclusive=False) is True
    finally:
        os.close(fd)
    assert locked_elsewhere(lock, exclusive=True) is False  # released with its holder
    assert held() == before  # the probes' descriptors are closed
