"""CPU per durable commit of icore's owner service, as a focused sub-bench (#27 item 2).

Two measurements of the commit path of ``icore bench peers`` (8 writers of one owner on
one connection, SQLite ``synchronous=FULL``, so each group of concurrent commits shares
one transaction and one fsync):

* **service** (default): ``icore serve`` in its own process; a fixed number of commits
  from 8 writers, then commits/s, this process's CPU per commit (the writers: building
  and sending records) and the owner's CPU per commit from ``/proc``. Redis with
  ``appendfsync always`` (its Lua compare-and-set) runs the same way when installed.
  On a shared machine the rates follow the disk's fsync; the CPU figures are the ones
  to compare.
* **owner path in process** (``--in-process``): the owner's own work per commit with no
  network or event loop: decode 8 commit frames (records verified), answer them with one
  group commit (:meth:`icore.net.OwnerHandler.handle_commits`, every owner rule, one
  SQLite transaction) and encode the 8 acknowledgements. Run it under
  ``valgrind --tool=callgrind`` with two ``--groups`` values and divide the difference of
  the instruction totals by the difference in commits: a count that repeats whatever
  else the machine is doing. The frames are built by a child process (not counted).
* **writer path in process** (``--writer``): a writer's own work per commit with no
  network: derive the key's next record from the previous one, frame the commit and
  decode the owner's acknowledgement frame with the functions
  :meth:`icore.net.OwnerClient.commit` and its connection use (the acknowledgements are
  built by a child process). Same use of ``--groups``.

Usage::

    PYTHONPATH=src python bench/bench_commit_cpu.py [--n 4000] [--rounds 3] [--no-redis]
    PYTHONPATH=src valgrind --tool=callgrind python bench/bench_commit_cpu.py \\
        --in-process --groups 260   # and --writer
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack

from icore._extras import run_async
from icore.memory import OwnershipMap, SQLiteStore
from icore.net import (
    Commit,
    CommitAck,
    FrameDecoder,
    OwnerHandler,
    decode_body,
    encode_body,
    encode_frame,
)
from icore.net._commitwire import decode_reply, encode_commit
from icore.records import Record, derive
from icore_lab.bench.micro._net import _proc_cpu_s
from icore_lab.bench.micro._peers_icore import IcoreSystem
from icore_lab.bench.micro._peers_systems import Conn, RedisSystem, System

WRITERS = 8


async def _commits(conns: list[Conn], n: int) -> int:
    per = n // len(conns)

    async def loop(c: Conn) -> None:
        for _ in range(per):
            await c.commit()

    await asyncio.gather(*(loop(c) for c in conns))
    return per * len(conns)


async def _service(s: System, n: int, rounds: int) -> None:
    conns, to_close = await s.writers(WRITERS)
    try:
        await _commits(conns, 50 * WRITERS)  # warm
        for _ in range(rounds):
            t0, c0, s0 = time.perf_counter(), time.process_time(), _proc_cpu_s(s.pid)
            done = await _commits(conns, n)
            wall = time.perf_counter() - t0
            print(f"{s.name:28s} {done / wall:8,.0f} commits/s, CPU per commit: writers "
                  f"{(time.process_time() - c0) / done * 1e6:6.1f} µs, server "
                  f"{(_proc_cpu_s(s.pid) - s0) / done * 1e6:6.1f} µs", flush=True)
    finally:
        for c in to_close:
            await c.close()


async def _services(n: int, rounds: int, redis: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="icore-commit-cpu-") as d:
        systems: list[System] = [IcoreSystem(gate=True, synchronous="FULL")]
        if redis:
            systems.append(RedisSystem(appendfsync="always"))
        started: list[System] = []
        try:
            for s in systems:
                await s.start(Path(d))
                started.append(s)
            for s in started:
                await _service(s, n, rounds)
        finally:
            for s in started:
                await s.stop()


def _next(w: int, seq: int, prev: Record | None) -> Record:
    """Writer ``w``'s next record of its key, citing the previous version (if any)."""
    key = f"w/{w}"
    if prev is None:
        return Record.create(key=key, owner="owner", seq=seq, content={"n": seq})
    return derive(key=key, owner="owner", seq=seq, content={"n": seq}, inputs=[prev])


def _frames(groups: int) -> list[list[bytes]]:
    """Commit frame bodies of 8 writers, each citing its key's previous version."""
    om_seq, rid, out = 0, 0, []
    last: list[Record | None] = [None] * WRITERS
    for _ in range(groups):
        group = []
        for w in range(WRITERS):
            om_seq += 1
            rid += 1
            rec = last[w] = _next(w, om_seq, last[w])
            group.append(encode_body(Commit(rid, rec)))
        out.append(group)
    return out


def _child_frames(groups: int) -> list[list[bytes]]:
    """:func:`_frames` built by a child process, so building them is not counted."""
    out = subprocess.run([sys.executable, __file__, "--emit-frames", "--groups", str(groups)],
                         check=True, capture_output=True).stdout
    frames: list[list[bytes]] = msgpack.unpackb(out)
    return frames


def _in_process(groups: int) -> None:
    om = OwnershipMap.from_mapping({"w/*": "owner"})
    frames = _child_frames(groups + 50)
    with tempfile.TemporaryDirectory(prefix="icore-commit-cpu-") as d:
        store = SQLiteStore(Path(d) / "owner.sqlite", om, "owner", synchronous="FULL",
                            exclusive=True)
        handler = OwnerHandler(store, agent="owner")

        def run(part: list[list[bytes]]) -> None:
            for group in part:
                items = [(decode_body(b), "owner") for b in group]
                for reply in handler.handle_commits(items, verified=True):  # type: ignore[arg-type]
                    encode_frame(reply)

        run(frames[:50])  # warm: the SQLite file, the statement cache
        t0 = os.times()
        run(frames[50:])
        t1 = os.times()
        store.close()
    n = groups * WRITERS
    print(f"owner path in process: {n} commits, CPU per commit user "
          f"{(t1.user - t0.user) / n * 1e6:.1f} µs + system "
          f"{(t1.system - t0.system) / n * 1e6:.1f} µs", flush=True)


def _writer(groups: int) -> None:
    """A writer's path per commit: derive the record, frame the commit, decode the ack."""
    acks: list[bytes] = msgpack.unpackb(subprocess.run(
        [sys.executable, __file__, "--emit-acks", "--groups", str(groups + 50)],
        check=True, capture_output=True).stdout)
    dec = FrameDecoder()
    last: list[Record | None] = [None] * WRITERS

    def run(first: int, count: int) -> None:
        rid = first * WRITERS
        for _ in range(count):
            for w in range(WRITERS):
                rid += 1
                rec = last[w] = _next(w, rid, last[w])
                encode_commit(rid, rec)
                for body in dec.bodies(acks[rid - 1]):
                    decode_reply(body)

    run(0, 50)
    t0 = os.times()
    run(50, groups)
    t1 = os.times()
    n = groups * WRITERS
    print(f"writer path in process: {n} commits, CPU per commit user "
          f"{(t1.user - t0.user) / n * 1e6:.1f} µs + system "
          f"{(t1.system - t0.system) / n * 1e6:.1f} µs", flush=True)


def main() -> None:
    """Parse the options and run one of the two measurements."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=4000, help="commits per service round")
    ap.add_argument("--rounds", type=int, default=3, help="service rounds")
    ap.add_argument("--no-redis", action="store_true", help="icore only")
    ap.add_argument("--in-process", action="store_true",
                    help="the owner's commit path in this process (see the docstring)")
    ap.add_argument("--groups", type=int, default=260,
                    help="with --in-process: measured groups of 8 commits")
    ap.add_argument("--writer", action="store_true",
                    help="a writer's path per commit in this process (see the docstring)")
    ap.add_argument("--emit-frames", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--emit-acks", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.emit_frames:  # the child of --in-process
        sys.stdout.buffer.write(msgpack.packb(_frames(ns.groups)))
    elif ns.emit_acks:  # the child of --writer
        sys.stdout.buffer.write(msgpack.packb(
            [encode_frame(CommitAck(rid, "ab" * 32, rid, True, True))
             for rid in range(1, ns.groups * WRITERS + 1)]))
    elif ns.writer:
        _writer(ns.groups)
    elif ns.in_process:
        _in_process(ns.groups)
    else:
        run_async(_services(ns.n, ns.rounds, not ns.no_redis))


if __name__ == "__main__":
    main()
