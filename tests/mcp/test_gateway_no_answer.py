"""A protected call whose upstream fails without an answer: outcome unknown (no retry).

Real processes: the SDK's client over stdio, ``icore mcp``, the Python SDK's MCPServer
upstream (tests/mcp/upstream_billing.py) over stdio or streamable HTTP. The upstream
charges, then does not answer: it sleeps past the gateway's ``timeout_s``, its process
exits mid-call (stdio pipe closed; HTTP connection dropped). The client gets an error
result saying the outcome is unknown and to check the effect; the session's reads of
D(a) are spent (a repeat without a fresh read is refused, so the charge never happens
twice from one read); the trace holds the call authorized with outcome unknown, which
``icore audit`` counts (``--fail-on unknown`` fails); the gateway serves the next call.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from .conftest import env, free_port, process, text, wait_port

BILLING = Path(__file__).resolve().parent / "upstream_billing.py"
pytestmark = pytest.mark.timeout(120)


def _manifest(folder: Path, upstream: dict[str, Any], **charge: Any) -> Path:
    m = {"name": "billing-gateway", "upstreams": {"billing": upstream},
         "tools": {"charge": {"depends_on": ["bill://card"], **charge}},
         "trace": str(folder / "trace.jsonl")}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def _bill_env(folder: Path) -> dict[str, str]:
    return {"BILL_STATE": str(folder / "state.json"), "BILL_LOG": str(folder / "bill.log")}


def _stdio(folder: Path, timeout_s: float) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(BILLING)], "timeout_s": timeout_s,
            "env": _bill_env(folder)}


def _charged(folder: Path) -> int:
    log = folder / "bill.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _run(manifest: Path, body: Any) -> dict[str, Any]:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    p = StdioServerParameters(command=sys.executable,
                              args=["-m", "icore", "mcp", str(manifest)], env=env())
    out: dict[str, Any] = {}

    async def main() -> None:
        with open(manifest.parent / "gw.err", "w", encoding="utf-8") as err:
            async with stdio_client(p, errlog=err) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                await body(s, out)

    anyio.run(main)
    return out


async def _fail_then_repeat(s: Any, out: dict[str, Any], fail: str,
                            between: Any = None) -> None:
    """Read the card, a charge that gets no answer, the same charge again (refused:
    the read was spent; its D(a), the card, did not change, so before it was
    authorized and charged twice), the check (the total, the card read again), a
    charge that runs."""
    await s.read_resource("bill://card")
    out["first"] = await s.call_tool("charge", {"cents": 100, "fail": fail})
    if between is not None:
        await between()
    out["again"] = await s.call_tool("charge", {"cents": 100})
    out["total"] = await s.read_resource("bill://total")  # the check
    await s.read_resource("bill://card")
    out["checked"] = await s.call_tool("charge", {"cents": 1})


def _check(folder: Path, out: dict[str, Any], said: str) -> None:
    first, again = out["first"], out["again"]
    assert first.is_error, text(first)
    assert said in text(first), text(first)
    assert "its outcome is unknown: check its effect before calling charge again" in \
        text(first), text(first)
    assert "read bill://card again" in text(first), text(first)
    assert (first.meta or {}).get("icore/upstream", {}).get("may_have_run") is True, \
        first.meta
    # the reads were spent: the repeat from the same read is refused, never run
    assert again.is_error and "(not_read)" in text(again), text(again)
    assert "it may have run" in text(again), text(again)
    assert out["total"].contents[0].text == "100"  # the check: it had charged
    assert not out["checked"].is_error, text(out["checked"])
    assert _charged(folder) == 2  # the first (no answer) and the checked one, never twice
    # one audit of the trace: its counts, and --fail-on unknown fails
    cli = subprocess.run([sys.executable, "-m", "icore", "audit",
                          str(folder / "trace.jsonl"), "--fail-on", "unknown",
                          "--no-report", "--json", str(folder / "audit.json")],
                         env=env(), cwd=folder,
                         capture_output=True, text=True, timeout=120, check=False)
    assert cli.returncode == 3, (cli.returncode, cli.stdout, cli.stderr)
    acts = json.loads((folder / "audit.json").read_text(encoding="utf-8"))["runs"][0][
        "actions"]
    assert (acts["outcome unknown"], acts["valid"], acts["blocked"],
            acts["failed after authorization"]) == (1, 1, 1, 0), acts


def test_a_call_past_the_timeout_is_outcome_unknown(tmp_path: Path) -> None:
    """The upstream charges, then sleeps past ``timeout_s`` (0.5 s): relaunched."""
    m = _manifest(tmp_path, _stdio(tmp_path, 0.5))
    out = _run(m, lambda s, o: _fail_then_repeat(s, o, "hang"))
    _check(tmp_path, out, "did not answer tools/call within 0.5 s")


def test_a_call_whose_upstream_died_is_outcome_unknown(tmp_path: Path) -> None:
    """The upstream charges, then its process exits without answering: relaunched."""
    m = _manifest(tmp_path, _stdio(tmp_path, 10))
    out = _run(m, lambda s, o: _fail_then_repeat(s, o, "die"))
    _check(tmp_path, out, "upstream billing")


def test_error_means_no_effect_does_not_cover_a_timeout(tmp_path: Path) -> None:
    """``error_means_no_effect`` is about the server's error results, not a call it
    never answered: a timeout stays outcome unknown."""
    m = _manifest(tmp_path, _stdio(tmp_path, 0.5), error_means_no_effect=True)
    out = _run(m, lambda s, o: _fail_then_repeat(s, o, "hang"))
    _check(tmp_path, out, "did not answer tools/call within 0.5 s")


def test_an_http_upstream_that_dropped_the_call_is_outcome_unknown(tmp_path: Path) -> None:
    """Streamable HTTP: the upstream process exits mid-call (the connection drops after
    the request was sent); relaunched on its port, the gateway reconnects."""
    port = free_port()
    args = [sys.executable, str(BILLING), "--http", str(port)]
    m = _manifest(tmp_path, {"url": f"http://127.0.0.1:{port}/mcp", "timeout_s": 10})
    with process(args, extra_env=_bill_env(tmp_path)) as up:
        wait_port(port, up)

        async def between() -> None:
            await anyio.to_thread.run_sync(up.wait, 30)
            later = subprocess.Popen(args, env={**env(), **_bill_env(tmp_path)},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            restarted.append(later)
            await anyio.to_thread.run_sync(wait_port, port, later)

        restarted: list[Any] = []
        try:
            out = _run(m, lambda s, o: _fail_then_repeat(s, o, "die", between))
        finally:
            for p in restarted:
                p.terminate()
                p.wait(timeout=5)
    _check(tmp_path, out, "upstream billing")
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert any(x.get("may_have_run") is True for x in lines
               if x.get("kind") == "tool_output"), lines


def test_a_call_its_client_cancelled_spends_the_reads(tmp_path: Path) -> None:
    """The client's own timeout (0.3 s) cancels the call; the gateway lets it run to its
    end (1 s, charged, answered): the agent never saw the result, so its reads are
    spent as well (the trace: outcome unknown, result not delivered)."""
    m = _manifest(tmp_path, _stdio(tmp_path, 10))

    async def body(s: Any, out: dict[str, Any]) -> None:
        from mcp.shared.exceptions import MCPError
        await s.read_resource("bill://card")
        with pytest.raises(MCPError):
            await s.call_tool("charge", {"cents": 100, "fail": "slow"},
                              read_timeout_seconds=0.3)
        trace = tmp_path / "trace.jsonl"
        while "client_cancelled" not in (trace.read_text(encoding="utf-8")
                                         if trace.exists() else ""):
            await anyio.sleep(0.05)  # the upstream ran it on; its answer is recorded
        out["again"] = await s.call_tool("charge", {"cents": 100})
        await s.read_resource("bill://card")
        out["checked"] = await s.call_tool("charge", {"cents": 1})

    out = _run(m, body)
    again = out["again"]
    assert again.is_error and "(not_read)" in text(again), text(again)
    assert "never reached the client" in text(again), text(again)
    assert not out["checked"].is_error, text(out["checked"])
    assert _charged(tmp_path) == 2
