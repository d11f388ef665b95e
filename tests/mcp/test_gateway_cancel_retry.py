"""A protected call its client left mid-call: its reads spent at once (QA qa-new18b S1).

Real processes: ``icore mcp`` (stdio, launched by the SDK's client; ``--http`` in a
subprocess) in front of the Python SDK's MCPServer upstream (tests/mcp/upstream_billing.py,
each charge that took effect one line of its log). The client's own short timeout
cancels a slow ``charge`` (or, sessionless over HTTP, closes its connection); the model
retries at once without reading. The call runs on at its upstream, so the retry must be
refused (``not_read``, quoting the earlier call that may still run), never authorized by
the same read: the log holds one charge, not two.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from .conftest import free_port, process, stdio_gateway, text, wait_port

BILLING = Path(__file__).resolve().parent / "upstream_billing.py"
pytestmark = pytest.mark.timeout(120)
SLOW = "sleep:1.5"  # the upstream's call: past the client's 0.3 s timeout


def _manifest(folder: Path, **extra: Any) -> Path:
    up = {"command": sys.executable, "args": [str(BILLING)], "timeout_s": 10,
          "env": {"BILL_STATE": str(folder / "state.json"),
                  "BILL_LOG": str(folder / "bill.log")}}
    m = {"name": "billing-gateway", "upstreams": {"billing": up},
         "tools": {"charge": {"depends_on": ["bill://card"],
                              **extra.pop("charge", {})}},
         "trace": str(folder / "trace.jsonl"), **extra}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def _charged(folder: Path) -> int:
    log = folder / "bill.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


async def _ended(folder: Path) -> None:
    """Until the left call's result line is in the trace (it ran to its end)."""
    trace = folder / "trace.jsonl"
    while not any(json.loads(x).get("delivered") is False
                  for x in (trace.read_text(encoding="utf-8").splitlines()
                            if trace.exists() else []) if x):
        await anyio.sleep(0.05)


async def _cancelled(s: Any, **kw: Any) -> None:
    from mcp.shared.exceptions import MCPError
    with pytest.raises(MCPError):
        await s.call_tool("charge", {"cents": 100, "fail": SLOW}, read_timeout_seconds=0.3,
                          **kw)


def _refused_running(r: Any) -> None:
    assert r.is_error and "(not_read)" in text(r), text(r)
    assert "may still be running" in text(r), text(r)
    assert "read bill://card again" in text(r), text(r)


@pytest.mark.parametrize("no_effect", [False, True])
def test_a_retry_right_after_a_cancel_is_refused_stdio(tmp_path: Path,
                                                       no_effect: bool) -> None:
    """Read, a charge the client cancels (its 0.3 s timeout), the same charge at once:
    refused ``not_read`` (before, it was authorized and both charged); after a read, a
    charge runs. ``error_means_no_effect`` changes none of it."""
    m = _manifest(tmp_path, charge={"error_means_no_effect": True} if no_effect else {})
    out: dict[str, Any] = {}

    async def main() -> None:
        async with stdio_gateway(m) as s:
            await s.read_resource("bill://card")
            await _cancelled(s)
            out["retry"] = await s.call_tool("charge", {"cents": 100})
            await _ended(tmp_path)
            out["charged"] = _charged(tmp_path)
            await s.read_resource("bill://card")
            out["checked"] = await s.call_tool("charge", {"cents": 1})

    anyio.run(main)
    _refused_running(out["retry"])
    assert out["charged"] == 1  # one charge from the one read, never two
    assert not out["checked"].is_error, text(out["checked"])
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert any(x.get("spent") is True for x in lines), "the spend is noted in the trace"


def _gateway(tmp_path: Path, **extra: Any) -> tuple[Path, int]:
    return _manifest(tmp_path, **extra), free_port()


def test_a_retry_right_after_a_cancel_is_refused_http_session(tmp_path: Path) -> None:
    """The same over ``--http`` with an MCP session (the SDK's ClientSession)."""
    from .conftest import http_client
    m, port = _gateway(tmp_path)
    out: dict[str, Any] = {}
    with process([sys.executable, "-m", "icore", "mcp", str(m), "--http",
                  f"127.0.0.1:{port}"]) as gw:
        wait_port(port, gw)

        async def main() -> None:
            async with http_client(f"http://127.0.0.1:{port}/mcp") as s:
                await s.read_resource("bill://card")
                await _cancelled(s)
                out["retry"] = await s.call_tool("charge", {"cents": 100})
                await _ended(tmp_path)
                out["after"] = await s.call_tool("charge", {"cents": 100})

        anyio.run(main)
    _refused_running(out["retry"])
    assert out["after"].is_error and "(not_read)" in text(out["after"]), text(out["after"])
    assert _charged(tmp_path) == 1


@pytest.mark.parametrize("at_once", [True, False])
def test_a_sessionless_client_gone_mid_call_spends_its_reads(tmp_path: Path,
                                                             at_once: bool) -> None:
    """A sessionless client (the SDK's ``mcp.Client``, a bearer token) whose call times
    out (its connection closed, no cancel sent): a new Client with the same token calls
    (``at_once``: while the call still runs, found gone then; else once it ended, found
    gone at its end), and again after the call ended: both refused ``not_read`` (before,
    both charged: three charges from one read)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client
    m, port = _gateway(tmp_path, http={"clients": {"alice": {"token_env": "ALICE_TOKEN"}}})
    url = f"http://127.0.0.1:{port}/mcp"

    @contextlib.asynccontextmanager
    async def client() -> AsyncIterator[Any]:
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"},
                                      timeout=30) as h, \
                Client(streamable_http_client(url, http_client=h)) as c:
            yield c

    out: dict[str, Any] = {}
    with process([sys.executable, "-m", "icore", "mcp", str(m), "--http",
                  f"127.0.0.1:{port}"], extra_env={"ALICE_TOKEN": "s3cret"}) as gw:
        wait_port(port, gw)

        async def main() -> None:
            async with client() as c:
                await c.read_resource("bill://card")
                await _cancelled(c)
            if not at_once:
                await _ended(tmp_path)
            async with client() as c:
                out["retry"] = await c.call_tool("charge", {"cents": 100})
            await _ended(tmp_path)
            async with client() as c:
                out["after"] = await c.call_tool("charge", {"cents": 100})

        anyio.run(main)
    retry, after = out["retry"], out["after"]
    assert retry.is_error and "(not_read)" in text(retry), text(retry)
    assert "went away" in text(retry), text(retry)
    assert after.is_error and "(not_read)" in text(after), text(after)
    assert _charged(tmp_path) == 1
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert any(x.get("client_gone") is True for x in lines), lines


def test_owner_unavailable_after_an_unknown_outcome_says_so(tmp_path: Path) -> None:
    """An HTTP upstream dies mid-charge (it charged): outcome unknown. The next charge
    cannot re-read the card (the upstream is down): ``owner_unavailable`` "Try again
    later" now adds that the earlier charge may have run (QA qa-new18b #5)."""
    from .conftest import http_client
    p_up = free_port()
    bill = {"BILL_STATE": str(tmp_path / "state.json"), "BILL_LOG": str(tmp_path / "bill.log")}
    out: dict[str, Any] = {}
    with process([sys.executable, str(BILLING), "--http", str(p_up)], extra_env=bill) as up:
        wait_port(p_up, up)
        m = tmp_path / "gateway.yaml"
        m.write_text(yaml.safe_dump({
            "name": "billing-gateway", "upstreams": {"billing": {
                "url": f"http://127.0.0.1:{p_up}/mcp", "timeout_s": 5}},
            "tools": {"charge": {"depends_on": ["bill://card"]}},
            "trace": str(tmp_path / "trace.jsonl")}), encoding="utf-8")
        port = free_port()
        with process([sys.executable, "-m", "icore", "mcp", str(m), "--http",
                      f"127.0.0.1:{port}"]) as gw:
            wait_port(port, gw)

            async def main() -> None:
                async with http_client(f"http://127.0.0.1:{port}/mcp") as s:
                    await s.read_resource("bill://card")
                    out["died"] = await s.call_tool("charge", {"cents": 100, "fail": "die"})
                    out["down"] = await s.call_tool("charge", {"cents": 100})

            anyio.run(main)
    assert out["died"].is_error and "may have run" in text(out["died"]), text(out["died"])
    down = text(out["down"])
    assert out["down"].is_error and "(owner_unavailable)" in down, down
    assert "an earlier call of this session may have run" in down, down
    assert "charge (on bill://card)" in down, down
    assert _charged(tmp_path) == 1
