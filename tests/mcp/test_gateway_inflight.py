"""Concurrent protected calls and the keys they write (QA qa-mcp7 S2, #25).

Two ``purge_sku(A1)`` sent at once after one read of ``wh://stock/A1`` were both
authorized from the same version and both ran; sent one after the other the second is
refused. Now the second waits for the first (its write read again as a new version) and
is refused as stale, over stdio and over HTTP; calls on disjoint keys still run at the
same time (the upstream proves they met). Real processes: the SDK's clients,
``icore mcp`` and tests/mcp/upstream_stock.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from .conftest import (
    env,
    free_port,
    http_client,
    process,
    stdio_gateway,
    text,
    upstream_log,
    wait_port,
)

STOCK = Path(__file__).resolve().parent / "upstream_stock.py"
pytestmark = pytest.mark.timeout(120)


def _manifest(folder: Path, upstream: dict[str, Any]) -> Path:
    (folder / "state.json").write_text(json.dumps({"stock": {"A1": 40, "B2": 7, "Z-1": 5,
                                                             "Z-2": 6}}))
    m = {"name": "wh-gateway", "upstreams": {"wh": upstream}, "owners": {"wh://*": "wh"},
         "tools": {"purge_sku": {"depends_on": ["wh://stock/{sku}"],
                                 "writes": ["wh://stock/{sku}"]},
                   "purge_zone": {"depends_on": ["wh://stock/{zone}-*"],
                                  "writes": ["wh://stock/{zone}-*"]}},
         "trace": str(folder / "trace.jsonl")}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def _stock_env(folder: Path) -> dict[str, str]:
    return {"STOCK_STATE": str(folder / "state.json"), "STOCK_LOG": str(folder / "up.log")}


def _stdio(folder: Path) -> Path:
    return _manifest(folder, {"command": sys.executable, "args": [str(STOCK)],
                              "env": _stock_env(folder), "timeout_s": 15})


async def _race(s: Any, *calls: dict[str, Any]) -> list[Any]:
    """Read each SKU once, then send the purges at once."""
    for sku in sorted({c["sku"] for c in calls}):
        await s.read_resource(f"wh://stock/{sku}")
    out: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        out[i] = await s.call_tool("purge_sku", calls[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    return out


def _check_one_ran(folder: Path, results: list[Any]) -> None:
    ran = [r for r in results if not r.is_error]
    refused = [r for r in results if r.is_error]
    assert len(ran) == 1 and len(refused) == 1, [text(r) for r in results]
    assert refused[0].meta["icore/gate"]["reason"] == "stale", text(refused[0])
    assert "wh://stock/A1" in refused[0].meta["icore/gate"]["changed"]
    ends = [x for x in upstream_log(folder / "up.log") if x["event"] == "end"]
    assert [(x["sku"], x["removed"]) for x in ends] == [("A1", 40)]


def test_same_key_second_call_waits_and_is_refused_stdio(tmp_path: Path) -> None:
    manifest = _stdio(tmp_path)

    async def main() -> list[Any]:
        async with stdio_gateway(manifest) as s:
            return await _race(s, {"sku": "A1"}, {"sku": "A1", "reason": "recall"})

    _check_one_ran(tmp_path, anyio.run(main))


def test_disjoint_keys_run_at_the_same_time(tmp_path: Path) -> None:
    manifest = _stdio(tmp_path)

    async def main() -> list[Any]:
        async with stdio_gateway(manifest) as s:
            return await _race(s, {"sku": "A1", "meet": 2}, {"sku": "B2", "meet": 2})

    results = anyio.run(main)
    assert not any(r.is_error for r in results), [text(r) for r in results]
    ends = [x for x in upstream_log(tmp_path / "up.log") if x["event"] == "end"]
    assert sorted(x["sku"] for x in ends) == ["A1", "B2"]
    assert all(x["met"] for x in ends), ends  # both were in the upstream at once


def test_same_key_second_call_waits_and_is_refused_http(tmp_path: Path) -> None:
    p_up, p_gw = free_port(), free_port()
    with process([sys.executable, str(STOCK), "--http", str(p_up)],
                 extra_env=_stock_env(tmp_path)) as up:
        wait_port(p_up, up)
        manifest = _manifest(tmp_path, {"url": f"http://127.0.0.1:{p_up}/mcp",
                                        "timeout_s": 15})
        with process([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                      f"127.0.0.1:{p_gw}"], extra_env=env()) as gw:
            wait_port(p_gw, gw)

            async def main() -> list[Any]:
                async with http_client(f"http://127.0.0.1:{p_gw}/mcp", "racer") as s:
                    return await _race(s, {"sku": "A1"}, {"sku": "A1", "reason": "recall"})

            results = anyio.run(main)
    _check_one_ran(tmp_path, results)


def test_a_glob_writes_entry_claims_what_it_matches(tmp_path: Path) -> None:
    """Review (#25): ``writes: [wh://stock/{zone}-*]`` claimed no key, so two zone purges
    sent at once both ran; now the second waits and is refused as sequentially."""
    manifest = _stdio(tmp_path)

    async def main() -> list[Any]:
        async with stdio_gateway(manifest) as s:
            for sku in ("Z-1", "Z-2"):
                await s.read_resource(f"wh://stock/{sku}")
            out: list[Any] = [None, None]

            async def one(i: int) -> None:
                out[i] = await s.call_tool("purge_zone", {"zone": "Z"})

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 0)
                tg.start_soon(one, 1)
            return out

    results = anyio.run(main)
    assert sorted(r.is_error for r in results) == [False, True], [text(r) for r in results]
    ends = [x for x in upstream_log(tmp_path / "up.log") if x["event"] == "end"]
    assert [x["removed"] for x in ends] == [11]


def test_a_call_cancelled_while_it_waits_is_never_sent(tmp_path: Path) -> None:
    """QA qa-re7 N2 / review (#25): a purge queued behind a purge of the same SKU in
    flight, whose client gives up while it waits, never reaches the upstream."""
    manifest = _stdio(tmp_path)

    async def main() -> Any:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("wh://stock/A1")
            await s.call_tool("purge_sku", {"sku": "A1"})  # now 0: a purge changes nothing
            await s.read_resource("wh://stock/A1")
            out: list[Any] = []

            async def first() -> None:
                out.append(await s.call_tool("purge_sku", {"sku": "A1", "hold": 3}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await anyio.sleep(0.5)
                with anyio.move_on_after(0.5):  # the client gives up while it waits
                    await s.call_tool("purge_sku", {"sku": "A1", "reason": "recall"})
            await anyio.sleep(4)  # past the first call's end: a queued call would run now
            return out

    out = anyio.run(main)
    assert [r.is_error for r in out] == [False]
    starts = [x for x in upstream_log(tmp_path / "up.log") if x["event"] == "start"]
    assert len(starts) == 2, starts  # the sequential purge and the held one, not the third


def test_filled_entries_overlap_errs_towards_waiting() -> None:
    from icore.mcp._gateway_inflight import overlap, patterns

    a1, = patterns(["wh://stock/{sku}"], {"sku": "A1"})
    zone, = patterns(["wh://stock/{zone}-*"], {"zone": "Z"})
    star, = patterns(["wh://stock/{sku}"], {"sku": "*"})  # an argument is literal
    missing, = patterns(["wh://stock/{sku}"], {})
    assert a1 == ("wh://stock/A1", False) and star == ("wh://stock/*", False)
    assert overlap(a1, a1) and not overlap(a1, star)
    assert overlap(zone, ("wh://stock/Z-3", False)) and not overlap(zone, a1)
    assert overlap(missing, a1) and overlap(missing, zone)
    assert overlap(zone, patterns(["wh://stock/Z-{n}"], {"n": "1*"})[0])  # a key "Z-1*"
    assert not overlap(zone, patterns(["wh://stock/Y-{n}"], {"n": "*"})[0])
    assert overlap(zone, patterns(["wh://stock/*"], {})[0])
