"""What a protected call's error result says of its effect (QA qa-new15b S2, S3).

An MCP server's ``isError`` result does not say that nothing was done (the TypeScript
SDK's McpServer wraps any throw after its handler ran, a result breaking its own
outputSchema included): the gateway counted such calls "failed after authorization"
(no effect) although they had charged a card. Now such a call's outcome is unknown
(the model told to check, the session's reads spent, ``icore audit``: outcome unknown),
unless its ``writes`` moved (it ran) or the manifest says ``error_means_no_effect``.
Also here: an upstream's ``notifications/tools/list_changed`` relayed to the client,
the manifest checked against the new list. Real processes: the SDK's client, ``icore
mcp`` and the Python SDK's MCPServer upstream (tests/mcp/upstream_billing.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from .conftest import audited_actions, env, text

BILLING = Path(__file__).resolve().parent / "upstream_billing.py"
pytestmark = pytest.mark.timeout(120)


def _manifest(folder: Path, **charge: Any) -> Path:
    m = {"name": "billing-gateway",
         "upstreams": {"billing": {
             "command": sys.executable, "args": [str(BILLING)], "timeout_s": 10,
             "env": {"BILL_STATE": str(folder / "state.json"),
                     "BILL_LOG": str(folder / "bill.log")}}},
         "tools": {"charge": {"depends_on": ["bill://total"], **charge}},
         "trace": str(folder / "trace.jsonl")}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


async def _session(manifest: Path, got: list[str] | None = None) -> Any:
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    p = StdioServerParameters(command=sys.executable,
                              args=["-m", "icore", "mcp", str(manifest)], env=env())

    async def on_message(m: Any) -> None:
        if got is not None:
            got.append(type(getattr(m, "root", m)).__name__)
    return stdio_client(p), lambda r, w: ClientSession(
        r, w, message_handler=on_message)  # type: ignore[arg-type]


def _charged(folder: Path) -> int:
    log = folder / "bill.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _run(manifest: Path, body: Any, got: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}

    async def main() -> None:
        client, session = await _session(manifest, got)
        async with client as (r, w), session(r, w) as s:
            out["init"] = await s.initialize()
            await body(s, out)

    anyio.run(main)
    return out


def test_an_error_result_after_the_effect_is_outcome_unknown(tmp_path: Path) -> None:
    """No ``writes`` to tell: outcome unknown; the repeat needs a fresh read."""
    async def body(s: Any, out: dict[str, Any]) -> None:
        await s.read_resource("bill://total")
        out["first"] = await s.call_tool("charge", {"cents": 100, "fail": "after"})
        out["again"] = await s.call_tool("charge", {"cents": 100})  # reads spent
        await s.read_resource("bill://total")  # checked: a call may run again
        out["checked"] = await s.call_tool("charge", {"cents": 1})

    out = _run(_manifest(tmp_path), body)
    first, again = out["first"], out["again"]
    assert first.is_error and "receipt printer jammed" in text(first), text(first)
    assert "its outcome is unknown: check its effect before calling charge again" in \
        text(first)
    assert (first.meta or {}).get("icore/upstream") == {"may_have_run": True}, first.meta
    assert again.is_error and "(not_read)" in text(again), text(again)
    assert "it may have run" in text(again) and "Nothing ran now" in text(again)
    assert not out["checked"].is_error, text(out["checked"])
    assert _charged(tmp_path) == 2  # the first (it ran) and the checked one
    acts = audited_actions(tmp_path / "trace.jsonl")
    assert (acts["outcome unknown"], acts["valid"], acts["blocked"],
            acts["failed after authorization"]) == (1, 1, 1, 0), acts


def test_an_error_result_whose_writes_moved_ran(tmp_path: Path) -> None:
    """A ``writes`` resource read again at a new version after the error: it ran."""
    async def body(s: Any, out: dict[str, Any]) -> None:
        await s.read_resource("bill://total")
        out["first"] = await s.call_tool("charge", {"cents": 100, "fail": "after"})

    out = _run(_manifest(tmp_path, writes=["bill://total"]), body)
    first = out["first"]
    assert first.is_error and "receipt printer jammed" in text(first), text(first)
    assert "the gateway read bill://total again after the call: a new version, so charge " \
        "ran despite its error result" in text(first)
    assert "outcome is unknown" not in text(first)
    assert (first.meta or {}).get("icore/upstream") == {"ran": True,
                                                        "moved": ["bill://total"]}
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    out_line = next(x for x in lines if x.get("kind") == "tool_output"
                    and x.get("tool") == "charge")
    assert out_line["ran"] is True and out_line.get("exitcode") == 1, out_line
    acts = audited_actions(tmp_path / "trace.jsonl")
    assert (acts["valid"], acts["total"]) == (1, 1), acts


def test_error_means_no_effect_keeps_the_failed_count_and_the_reads(tmp_path: Path) -> None:
    """``error_means_no_effect: true``: the error result is failed after authorization,
    nothing spent (the retry from the same read passes)."""
    async def body(s: Any, out: dict[str, Any]) -> None:
        await s.read_resource("bill://total")
        out["first"] = await s.call_tool("charge", {"cents": 100, "fail": "before"})
        out["retry"] = await s.call_tool("charge", {"cents": 100})

    out = _run(_manifest(tmp_path, error_means_no_effect=True), body)
    assert out["first"].is_error and "card declined" in text(out["first"])
    assert out["first"].meta is None or "icore/upstream" not in out["first"].meta
    assert not out["retry"].is_error, text(out["retry"])
    acts = audited_actions(tmp_path / "trace.jsonl")
    assert (acts["failed after authorization"], acts["valid"]) == (1, 1), acts


def test_an_upstreams_list_change_reaches_the_client_and_a_rename_stays_protected(
        tmp_path: Path) -> None:
    """``notifications/tools/list_changed`` is relayed (``listChanged: true``); a
    protected tool renamed at its upstream is no unprotected tool: blocked."""
    got: list[str] = []

    async def body(s: Any, out: dict[str, Any]) -> None:
        await s.call_tool("add_tool", {"name": "dyn"})
        with anyio.fail_after(20):
            while "ToolListChangedNotification" not in got:
                await anyio.sleep(0.05)
        out["tools"] = [t.name for t in (await s.list_tools()).tools]
        await s.call_tool("rename_charge", {"name": "bill_card"})
        await s.read_resource("bill://total")
        out["renamed"] = await s.call_tool("bill_card", {"cents": 5})

    out = _run(_manifest(tmp_path), body, got)
    assert out["init"].capabilities.tools.list_changed is True
    assert "dyn" in out["tools"]
    renamed = out["renamed"]
    assert renamed.is_error and "unverified_protection" in text(renamed), text(renamed)
    assert _charged(tmp_path) == 0  # never forwarded
    notes = [json.loads(x).get("content", "") for x in
             (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert any("upstream billing changed its tools list" in n for n in notes), notes
    assert any("protected tool charge (tools.charge" in n and "no longer listed" in n
               for n in notes), notes


def _node_modules() -> Path | None:
    """A ``node_modules`` holding ``@modelcontextprotocol/sdk`` and ``zod`` (no network).

    ``$ICORE_TEST_NODE_MODULES``, else one a QA run installed under /work/qa.
    """
    import glob
    import os
    given = os.environ.get("ICORE_TEST_NODE_MODULES")
    found = [given] if given else sorted(glob.glob("/work/qa/*/jsup/node_modules"))
    for d in map(Path, found):
        if (d / "@modelcontextprotocol" / "sdk").is_dir() and (d / "zod").is_dir():
            return d
    return None


def test_a_typescript_mcpservers_error_after_its_commit_is_outcome_unknown(
        tmp_path: Path) -> None:
    """The TypeScript SDK's McpServer (npm ``@modelcontextprotocol/sdk``) commits, then
    answers isError (its own outputSchema check): outcome unknown, never failed."""
    import shutil
    modules = _node_modules()
    if shutil.which("node") is None or modules is None:
        pytest.skip("needs node and a node_modules with @modelcontextprotocol/sdk and zod "
                    "(set ICORE_TEST_NODE_MODULES)")
    shutil.copy(Path(__file__).resolve().parent / "ts" / "spa.mjs", tmp_path / "spa.mjs")
    (tmp_path / "node_modules").symlink_to(modules)
    m = {"name": "spa-gateway", "trace": str(tmp_path / "trace.jsonl"),
         "upstreams": {"spa": {"command": "node", "args": ["spa.mjs"], "timeout_s": 20,
                               "env": {"SPA_STATE": str(tmp_path / "spa.json")}}},
         "tools": {"book_spa": {"depends_on": ["inv://spa"]}}}
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(yaml.safe_dump(m), encoding="utf-8")

    async def body(s: Any, out: dict[str, Any]) -> None:
        await s.read_resource("inv://spa")
        out["first"] = await s.call_tool("book_spa", {"guest_id": 1})

    first = _run(manifest, body)["first"]
    assert first.is_error and "its outcome is unknown" in text(first), text(first)
    assert json.loads((tmp_path / "spa.json").read_text())["booked"] == 1  # it committed
    acts = audited_actions(tmp_path / "trace.jsonl")
    assert (acts["outcome unknown"], acts["failed after authorization"]) == (1, 0), acts
