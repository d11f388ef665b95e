"""``Workspace.update`` never loses an update (#28 QA CrewAI 2, SAFETY).

Concurrent read-modify-write of one counter: threads on one workspace (in memory and
SQLite) and separate processes on one SQLite folder. Two writers that read the same head
compute the byte-identical next version; the store takes the second as an idempotent
replay, so ``Workspace.commit`` must refuse it (HeadConflict) for ``update`` to retry.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from icore.workspace import Workspace

FACTS = {"stock/*": "warehouse"}
KEY = "stock/w1"


def _hammer(ws: Workspace, n: int, seqs: list[int]) -> None:
    for _ in range(n):
        rec = ws.update(KEY, lambda q: q + 1, retries=10_000)
        seqs.append(rec.seq)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_threads_never_lose_an_update(tmp_path: Path, backend: str) -> None:
    ws = Workspace.sqlite(FACTS, tmp_path) if backend == "sqlite" else Workspace(FACTS)
    ws.put(KEY, 0)
    seqs: list[int] = []
    workers = [threading.Thread(target=_hammer, args=(ws, 40, seqs)) for _ in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=120)
    assert ws.value(KEY) == 160
    assert len(seqs) == len(set(seqs)) == 160  # no two updates claimed one version
    ws.close()


_WRITER = """
import sys
from icore.workspace import Workspace
ws = Workspace.sqlite({"stock/*": "warehouse"}, sys.argv[1])
seqs = [ws.update("stock/w1", lambda q: q + 1, retries=10_000).seq
        for _ in range(int(sys.argv[2]))]
print(" ".join(map(str, seqs)))
ws.close()
"""


def test_processes_on_one_sqlite_folder_never_lose_an_update(tmp_path: Path) -> None:
    ws = Workspace.sqlite(FACTS, tmp_path)
    ws.put(KEY, 0)
    ws.close()
    env_path = str(Path(__file__).resolve().parents[2] / "src")
    import os

    env = {**os.environ, "PYTHONPATH": env_path}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), "50"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(4)]
    seqs: list[int] = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        seqs += [int(x) for x in out.split()]
    with Workspace.sqlite(FACTS, tmp_path) as ws2:
        assert ws2.value(KEY) == 200
    assert len(seqs) == len(set(seqs)) == 200


def test_concurrent_siblings_consuming_one_fact_commit_against_their_basis() -> None:
    """Two sibling calls run at once are both validated before either writes (planfence
    Sec. 6: validation is not atomic with the call); a tool that consumes the fact writes
    with ``expected=`` its basis, so the second gets ``HeadConflict`` and nothing is taken
    twice (docs/workspace.md "Concurrent sibling calls")."""
    import asyncio

    from icore.errors import HeadConflict
    from icore.workspace import running_call

    ws = Workspace({"stock/*": "warehouse"})
    ws.put("stock/x", {"n": 1})
    buyer = ws.agent("buyer")
    buyer.read("stock/x")
    both_validated = asyncio.Event()
    entered = 0

    async def take(qty: int) -> str:
        nonlocal entered
        entered += 1
        if entered == 2:
            both_validated.set()
        await asyncio.wait_for(both_validated.wait(), 5)
        call = running_call()
        assert call is not None
        base = call.basis["stock/x"]
        ws.commit("stock/x", {"n": base.content["n"] - qty}, expected=base.id, by="warehouse")
        return "taken"

    async def main() -> list[object]:
        return await asyncio.gather(
            *(buyer.aexecute("take", take, {"qty": 1}, depends_on={"stock/x"}, turn="m1")
              for _ in range(2)), return_exceptions=True)

    results = asyncio.run(main())
    assert entered == 2                                   # both were authorized
    assert sum(isinstance(r, HeadConflict) for r in results) == 1
    assert ws.value("stock/x") == {"n": 0}
