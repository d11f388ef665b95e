"""``trust_updates`` (issue 25 item 7, opt-in): an upstream trusted to notify.

The SDK's client launches ``icore mcp`` over stdio in front of the ledger upstream
(tests/mcp/upstream_ledger.py: a low-level SDK server that accepts
``resources/subscribe``, notifies ``resources/updated`` on ``deposit`` and logs every
read). With ``trust_updates`` a protected call does not read its D(a) again while the
gateway holds a live subscription; an update notification still makes the stale call
refused, and a lost subscription (the upstream crashed and was relaunched) falls back to
the re-read (fail closed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import yaml

from .conftest import stdio_gateway, text, upstream_log
from .test_gateway_reread import _charges, _edit, _manifest

BAL = "acct://main/balance"


def _trusting(folder: Path) -> Path:
    path = _manifest(folder)
    m = yaml.safe_load(path.read_text(encoding="utf-8"))
    m["upstreams"]["ledger"]["trust_updates"] = True
    path.write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")
    return path


def _reads(folder: Path) -> int:
    return sum(x["tool"] == "<read>" for x in upstream_log(folder / "ledger.log"))


async def _until_trusted(s: Any, folder: Path) -> None:
    """Read the balance, wait for the gateway's own subscription, make one call (read
    again under the subscription: from then on the resource is trusted)."""
    await s.read_resource(BAL)
    with anyio.fail_after(30):
        while not any(x["tool"] == "<subscribe>" for x in upstream_log(folder / "ledger.log")):
            await anyio.sleep(0.05)
    await anyio.sleep(0.3)  # the subscription's answer reaches the gateway
    r = await s.call_tool("charge", {"account": "main", "amount": 1})
    assert not r.is_error, text(r)


def test_trusted_upstream_skips_the_reread_and_an_update_still_refuses(
        tmp_path: Path) -> None:
    manifest = _trusting(tmp_path)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await _until_trusted(s, tmp_path)
            n = _reads(tmp_path)
            for amount in (2, 3, 4):
                r = await s.call_tool("charge", {"account": "main", "amount": amount})
                assert not r.is_error, text(r)
            assert _reads(tmp_path) == n  # no read per protected call
            # the upstream changes the balance and notifies: the next call is stale
            r = await s.call_tool("deposit", {"account": "main", "amount": 1000})
            assert not r.is_error, text(r)
            r = await s.call_tool("charge", {"account": "main", "amount": 900})
            assert r.is_error and "(stale)" in text(r) and "= 1500" in text(r), text(r)
            assert r.meta is not None and r.meta["icore/gate"]["reason"] == "stale"
            r = await s.call_tool("charge", {"account": "main", "amount": 800})  # replan
            assert not r.is_error, text(r)
            # what the mode trusts: a change the upstream never notifies is not seen
            _edit(tmp_path, accounts={"main": 7})
            r = await s.call_tool("charge", {"account": "main", "amount": 5})
            assert not r.is_error, text(r)

    anyio.run(main)
    assert [c["amount"] for c in _charges(tmp_path)] == [1, 2, 3, 4, 800, 5]


def test_lost_subscription_falls_back_to_the_reread(tmp_path: Path) -> None:
    manifest = _trusting(tmp_path)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await _until_trusted(s, tmp_path)
            r = await s.call_tool("crash", {})  # the upstream dies: its subscription too
            assert r.is_error, text(r)
            # changed while no subscription exists: nobody can notify it
            _edit(tmp_path, accounts={"main": 3})
            n = _reads(tmp_path)
            r = await s.call_tool("charge", {"account": "main", "amount": 400})
            assert r.is_error and "(stale)" in text(r) and "= 3" in text(r), text(r)
            assert _reads(tmp_path) > n  # read again from the relaunched upstream
            r = await s.call_tool("charge", {"account": "main", "amount": 2})  # replan
            assert not r.is_error, text(r)

    anyio.run(main)
    assert [c["amount"] for c in _charges(tmp_path)] == [1, 2]
