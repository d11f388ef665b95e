"""A ``not_read`` refusal hands over the stale facts too: one replan (QA r7-mcp D3).

The session read one resource of D(a) (memo://price), not the other (memo://city); the
price then changes. Its call used to be refused ``not_read`` showing the city only, then
``stale`` showing the price: two refusals, two replans. Now the one ``not_read`` refusal
names both, and the next call planned from what it handed over runs. The one-replan rule
is unchanged: that next call is a plan of its own (it was planned from values the session
now holds), so a change before it is refused ``stale`` with the fresh values, and a change
again before that replan is ``second_change``. Real SDK client and upstream over stdio.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from .conftest import env, stdio_gateway, stdio_upstream, text, upstream_log, write_manifest


async def _set_price(s: Any, value: str) -> None:
    """Change the price at the upstream (through the gateway, unprotected)."""
    r = await s.call_tool("set_price", {"value": value})
    assert not r.is_error, text(r)


def test_not_read_names_the_stale_fact_too_and_one_replan_follows(tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log, 10)})
    said: list[str] = []
    metas: list[Any] = []

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")  # 100; memo://city never read
            await _set_price(s, "120")
            r = await s.call_tool("book", {"city": "Porto", "price": 100})
            said.append(text(r))
            metas.append(r.meta)
            assert r.is_error and "(not_read)" in said[-1], said[-1]
            # the next call, planned from what the refusal handed over, runs
            r = await s.call_tool("book", {"city": "Porto", "price": 120})
            assert not r.is_error, text(r)
            # the rule of the one replan is kept: a change makes the plan stale (its
            # fresh value handed over), a change again before the replan blocks it
            await _set_price(s, "130")
            r = await s.call_tool("book", {"city": "Porto", "price": 120})
            assert r.is_error and "(stale)" in text(r) and "130" in text(r), text(r)
            await _set_price(s, "140")
            r = await s.call_tool("book", {"city": "Porto", "price": 130})
            assert r.is_error and "(second_change)" in text(r), text(r)
            r = await s.call_tool("book", {"city": "Porto", "price": 130})
            assert r.is_error and "(second_change)" in text(r), text(r)

    anyio.run(main)
    first = said[0]
    # one refusal names both: the unread city and the stale price, with fresh values
    assert "memo://city = Porto" in first, first
    assert "memo://price = 120" in first and "(changed since read)" in first, first
    assert "Also changed since this session read it: memo://price" in first, first
    gate = metas[0]["icore/gate"]
    assert gate["reason"] == "not_read" and gate["stale"] == ["memo://price"]
    assert set(gate["changed"]) == {"memo://city", "memo://price"}
    books = [x["args"] for x in upstream_log(log) if x["tool"] == "book"]
    assert books == [{"city": "Porto", "price": 120}]  # nothing refused reached it

    # the audit: the not_read call blocked (its reason, the stale fact in its detail),
    # the next call a plan of its own and valid, then stale, replan blocked, a retry
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    decisions = [x["planfence"]["decision"] for x in lines
                 if "decision" in x.get("planfence", {})]
    got = [(d["outcome"], d["reason"]) for d in decisions]
    assert got[0] == ("blocked", "not_read"), got
    assert "changed since read (fresh values handed over): memo://price" in \
        decisions[0]["detail"], decisions[0]
    assert got[1] == ("authorized", "valid"), got
    assert ("replan_required", "stale") in got[2:], got
    assert got[2:].count(("blocked", "second_change")) == 2, got
    out = tmp_path / "audit.json"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(tmp_path / "trace.jsonl"),
                          "--json", str(out), "--fail-on", "invalid"], capture_output=True,
                         text=True, env=env(), timeout=120, check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    actions = json.loads(out.read_text(encoding="utf-8"))["runs"][0]["actions"]
    assert actions["valid"] == 1 and actions["blocked"] == 4, actions
