"""Two gateways, one store: a write planned from one read is forwarded once (QA qa-new13c S1).

Each desktop client launches its own stdio gateway, so two clients on one manifest are two
``icore mcp`` processes. Both sessions read ``wh://stock/R<i>``, then both send
``purge_sku(R<i>)``: before, each gateway's in-flight claim lived in its own process, both
calls passed the gate from the same version and both ran upstream (9 of 10 rounds in QA's
run), and each gateway's audit said every action was valid. Now the second waits for the
first (its gateway notes the wait in its trace) and is refused ``stale``; each trace's
audit counts it blocked. Real processes: the SDK's clients, two ``icore mcp`` over stdio,
each with its own tests/mcp/upstream_stock.py sharing one state file.

Deterministic: the first call is held inside its upstream (``until``: a file) until the
second has either reached its own upstream (the bug) or is waiting in its gateway (the
fix), and only then released.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from .conftest import audited_actions, env, stdio_gateway, text, upstream_log

STOCK = Path(__file__).resolve().parent / "upstream_stock.py"
ROUNDS = 4
pytestmark = pytest.mark.timeout(240)


def _manifest(folder: Path, store: dict[str, Any] | None) -> Path:
    skus = {f"R{i}": 10 + i for i in range(ROUNDS)}
    (folder / "state.json").write_text(json.dumps({"stock": skus}))
    m: dict[str, Any] = {
        "name": "wh-gateway", "owners": {"wh://*": "wh"},
        "upstreams": {"wh": {"command": sys.executable, "args": [str(STOCK)],
                             "env": {"STOCK_STATE": str(folder / "state.json"),
                                     "STOCK_LOG": str(folder / "up.log")},
                             "timeout_s": 30}},
        "tools": {"purge_sku": {"depends_on": ["wh://stock/{sku}"],
                                "writes": ["wh://stock/{sku}"]}},
        "trace": "trace.jsonl"}
    if store is not None:
        m["store"] = store
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def _starts(folder: Path, sku: str) -> int:
    return sum(1 for x in upstream_log(folder / "up.log")
               if x["event"] == "start" and x["sku"] == sku)


def _waiting(folder: Path, sku: str) -> bool:
    return any(f"waits for another gateway's call writing wh://stock/{sku}" in
               p.read_text(encoding="utf-8") for p in folder.glob("trace*.jsonl"))


async def _until(check: Any, what: str, timeout_s: float = 30) -> None:
    with anyio.fail_after(timeout_s):
        while not check():
            await anyio.sleep(0.02)


async def _held_round(folder: Path, first: Any, second: Any, i: int) -> list[Any]:
    """Both read R<i>; ``first`` purges it and is held upstream until ``second``'s purge
    reached its upstream or waits in its gateway; then the hold ends."""
    sku, release = f"R{i}", folder / f"release-{i}"
    await first.read_resource(f"wh://stock/{sku}")
    await second.read_resource(f"wh://stock/{sku}")
    out: list[Any] = [None, None]

    async def call(j: int, s: Any, **extra: Any) -> None:
        out[j] = await s.call_tool("purge_sku", {"sku": sku, **extra})

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: call(0, first, until=str(release)))
        await _until(lambda: _starts(folder, sku) == 1, "the first call upstream")
        tg.start_soon(lambda: call(1, second))
        await _until(lambda: _starts(folder, sku) == 2 or _waiting(folder, sku),
                     "the second call upstream or waiting")
        release.touch()
    return out


def _race(folder: Path, store: dict[str, Any] | None) -> tuple[list[list[Any]], Path]:
    manifest = _manifest(folder, store)

    async def main() -> list[list[Any]]:
        async with stdio_gateway(manifest) as a, stdio_gateway(manifest) as b:
            return [await _held_round(folder, *((a, b) if i % 2 == 0 else (b, a)), i)
                    for i in range(ROUNDS)]

    return anyio.run(main), manifest


def _check(folder: Path, rounds: list[list[Any]]) -> None:
    for i, (first, second) in enumerate(rounds):
        assert not first.is_error, text(first)
        assert second.is_error, f"round {i}: both purges ran: {text(second)}"
        gate = second.meta["icore/gate"]
        assert gate["reason"] == "stale", text(second)
        assert f"wh://stock/R{i}" in gate["changed"]
    ends = [(x["sku"], x["removed"]) for x in upstream_log(folder / "up.log")
            if x["event"] == "end"]
    assert ends == [(f"R{i}", 10 + i) for i in range(ROUNDS)]  # each purge ran once


def _audits(folder: Path) -> list[dict[str, int]]:
    traces = sorted(folder.glob("trace*.jsonl"))
    assert len(traces) == 2, traces
    return [audited_actions(t) for t in traces]


def test_two_gateways_sharing_a_sqlite_store_forward_one_write(tmp_path: Path) -> None:
    rounds, _ = _race(tmp_path, {"backend": "sqlite", "path": "facts"})
    _check(tmp_path, rounds)
    audits = _audits(tmp_path)
    # each gateway ran the first call of half the rounds and had the other half refused:
    # its own audit counts those blocked, never valid (before: 4 valid each)
    for a in audits:
        assert (a.get("valid", 0), a.get("blocked", 0)) == (ROUNDS // 2, ROUNDS // 2), a
    assert not any(tmp_path.glob("facts/icore-writes/*.lock"))  # both gone: removed


def test_two_gateways_on_one_manifest_with_the_memory_store(tmp_path: Path) -> None:
    """The default memory store shares no heads, but the gate reads the upstream again:
    the claims beside the manifest make the second call wait, and it is refused stale."""
    rounds, _ = _race(tmp_path, None)
    _check(tmp_path, rounds)
    assert (tmp_path / ".icore-writes" / "claims.sqlite").is_file()


async def _at_once(a: Any, b: Any, sku: str) -> list[Any]:
    await a.read_resource(f"wh://stock/{sku}")
    await b.read_resource(f"wh://stock/{sku}")
    got: list[Any] = [None, None]

    async def call(j: int, s: Any) -> None:
        got[j] = await s.call_tool("purge_sku", {"sku": sku})

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, 0, a)
        tg.start_soon(call, 1, b)
    return got


def test_simultaneous_calls_never_both_run(tmp_path: Path) -> None:
    """QA's race.py, unheld: both calls sent at once, round after round."""
    manifest = _manifest(tmp_path, {"backend": "sqlite", "path": "facts"})

    async def main() -> list[list[Any]]:
        async with stdio_gateway(manifest) as a, stdio_gateway(manifest) as b:
            return [await _at_once(a, b, f"R{i}") for i in range(ROUNDS)]

    for got in anyio.run(main):
        assert sorted(r.is_error for r in got) == [False, True], [text(r) for r in got]
        assert next(r for r in got if r.is_error).meta["icore/gate"]["reason"] == "stale"
    ends = [x["sku"] for x in upstream_log(tmp_path / "up.log") if x["event"] == "end"]
    assert ends == [f"R{i}" for i in range(ROUNDS)]


_DEAD = """
import os, sys, anyio
from pathlib import Path
from icore.mcp._shared_writes import SharedWrites
s = SharedWrites(Path(sys.argv[1]))
anyio.run(lambda: s.enter([], [("wh://stock/R0", False)]))
os._exit(0)  # dies holding its claim: that write's outcome is unknown
"""


def test_a_claim_of_a_gateway_that_died_fails_closed_once(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, {"backend": "sqlite", "path": "facts"})
    subprocess.run([sys.executable, "-c", _DEAD, str(tmp_path / "facts" / "icore-writes")],
                   env=env(), check=True, timeout=60)

    async def main() -> list[Any]:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("wh://stock/R0")
            return [await s.call_tool("purge_sku", {"sku": "R0"}) for _ in range(2)]

    gone, then = anyio.run(main)
    assert gone.is_error and gone.meta["icore/gate"]["reason"] == "write_unknown", text(gone)
    assert "wh://stock/R0" in text(gone)
    assert not then.is_error, text(then)  # the dead claim was removed: checked as usual
    assert [x["sku"] for x in upstream_log(tmp_path / "up.log")
            if x["event"] == "end"] == ["R0"]


def test_shared_claims_wait_claim_and_release(tmp_path: Path) -> None:
    """Two holders in one folder (as two gateways): overlapping D(a) waits, disjoint keys
    do not, a waiter cancelled claims nothing, and a leave lets the waiter claim."""
    from icore.mcp._shared_writes import SharedWrites

    a, b = SharedWrites(tmp_path), SharedWrites(tmp_path)
    k1, k2, zone = ("k://1", False), ("k://2", False), ("k://*", True)

    async def main() -> None:
        c1 = await a.enter([k1], [k1])
        assert c1 is not None
        assert await b.enter([k2], []) is None  # disjoint: no wait, nothing to claim
        said: list[list[str]] = []
        with anyio.move_on_after(0.3) as scope:
            await b.enter([zone], [k2], waiting=said.append)
        assert scope.cancelled_caught and said == [["k://1"]]
        assert b._try([k2], []) is None  # the cancelled waiter claimed nothing (k2 free)
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            got: list[Any] = []

            async def waiter() -> None:
                got.append(await b.enter([k1], [k1]))

            tg.start_soon(waiter)
            await anyio.sleep(0.2)
            assert not got
            await a.leave(c1)
        assert got and got[0] is not None and time.monotonic() - started >= 0.2
        assert a._try([k1], []) == ["k://1"]  # now b's claim

    try:
        anyio.run(main)
    finally:
        b.close()
        a.close()


def test_a_manifest_built_in_python_says_its_claims_are_not_shared() -> None:
    from icore.mcp import manifest_from_dict
    from icore.mcp._session_log import GatewayTrace
    from icore.mcp._shared_writes import share_claims

    m = manifest_from_dict({"name": "g", "upstreams": {"u": {"command": "x"}},
                            "tools": {"t": {"depends_on": ["u://a"], "writes": ["u://a"]}}})
    trace = GatewayTrace("g")
    assert share_claims(m, trace) is None
    assert "built in Python" in trace.jsonl() and "tools" in trace.jsonl()
