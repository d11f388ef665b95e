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

import contextlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import yaml

from .conftest import free_port, process, stdio_gateway, text, upstream_log, wait_port
from .test_gateway_reread import LEDGER, _charges, _edit, _manifest

BAL = "acct://main/balance"


def _trusting(folder: Path) -> Path:
    path = _manifest(folder)
    m = yaml.safe_load(path.read_text(encoding="utf-8"))
    m["upstreams"]["ledger"]["trust_updates"] = True
    path.write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")
    return path


def _http_ledger(folder: Path, *, trust: bool, stateless: bool = False
                 ) -> tuple[Path, Callable[[], subprocess.Popen[Any]], contextlib.ExitStack]:
    """A manifest whose ledger upstream is served over HTTP on a free port; ``start()``
    launches (or relaunches) that server, kept until the returned stack closes."""
    port = free_port()
    manifest = _manifest(folder)
    m = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    m["upstreams"]["ledger"] = {"url": f"http://127.0.0.1:{port}/mcp", "timeout_s": 3,
                                **({"trust_updates": True} if trust else {})}
    manifest.write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")
    stack = contextlib.ExitStack()

    def start() -> subprocess.Popen[Any]:
        p = stack.enter_context(process(
            [sys.executable, str(LEDGER), "--http", str(port)],
            extra_env={"LEDGER_STATE": str(folder / "ledger.json"),
                       "LEDGER_LOG": str(folder / "ledger.log"),
                       **({"LEDGER_STATELESS": "1"} if stateless else {})}))
        wait_port(port, p)
        return p

    return manifest, start, stack


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
    # the charge was a tool call to the trusted upstream: its change may be notified
    # only after its answer, so the balance is trusted again only once read after it
    await s.read_resource(BAL)


def _with_trip(folder: Path) -> Path:
    """The trusted ledger plus the trip upstream, whose ``book`` depends on the balance
    (a protected tool of another upstream: no tool call reaches the ledger)."""
    from .conftest import stdio_upstream
    path = _trusting(folder)
    m = yaml.safe_load(path.read_text(encoding="utf-8"))
    m["upstreams"]["trip"] = stdio_upstream(folder / "trip.log")
    m["tools"]["book"] = {"depends_on": [BAL]}
    path.write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")
    return path


def _gate_lines(folder: Path) -> list[dict[str, Any]]:
    import json
    out = []
    for line in (folder / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        x = json.loads(line)
        gate = (x.get("fields") or {}).get("gate") if isinstance(x, dict) else None
        if gate is None:
            gate = x.get("gate") if isinstance(x, dict) else None
        if gate is not None:
            out.append(gate)
    return out


def test_trusted_upstream_skips_the_reread_and_an_update_still_refuses(
        tmp_path: Path) -> None:
    manifest = _with_trip(tmp_path)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await _until_trusted(s, tmp_path)
            n = _reads(tmp_path)
            for price in (2, 3, 4):
                r = await s.call_tool("book", {"city": "Porto", "price": price})
                assert not r.is_error, text(r)
            assert _reads(tmp_path) == n  # no read per protected call
            # the upstream changes the balance and notifies: the next call is stale
            r = await s.call_tool("deposit", {"account": "main", "amount": 1000})
            assert not r.is_error, text(r)
            r = await s.call_tool("book", {"city": "Porto", "price": 900})
            assert r.is_error and "(stale)" in text(r) and "= 1500" in text(r), text(r)
            assert r.meta is not None and r.meta["icore/gate"]["reason"] == "stale"
            r = await s.call_tool("book", {"city": "Porto", "price": 800})  # replan
            assert not r.is_error, text(r)
            # what the mode trusts: a change the upstream never notifies is not seen
            _edit(tmp_path, accounts={"main": 7})
            r = await s.call_tool("book", {"city": "Porto", "price": 5})
            assert not r.is_error, text(r)

    anyio.run(main)
    books = [x["args"]["price"] for x in upstream_log(tmp_path / "trip.log")
             if x["tool"] == "book"]
    assert books == [2, 3, 4, 800, 5]
    # the trace says which heads were taken on trust, which were read again
    gates = [g for g in _gate_lines(tmp_path) if g["tool"] == "book"]
    assert [g["head_source"]["trusted"] for g in gates][:3] == [[BAL]] * 3
    assert gates[3]["head_source"] == {"reread": [BAL], "trusted": []}  # after the update


def test_late_notification_after_a_forwarded_call_is_not_trusted(tmp_path: Path) -> None:
    """S1: the upstream notifies its change only after answering the call that made it
    (from a background task). The next protected call reads again: refused."""
    manifest = _trusting(tmp_path)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await _until_trusted(s, tmp_path)
            _edit(tmp_path, notify_delay=0.5)
            r = await s.call_tool("deposit", {"account": "main", "amount": 1000})
            assert not r.is_error, text(r)
            r = await s.call_tool("charge", {"account": "main", "amount": 900})
            assert r.is_error and "(stale)" in text(r) and "= 1500" in text(r), text(r)

    anyio.run(main)
    assert [c["amount"] for c in _charges(tmp_path)] == [1]


def test_upstream_killed_while_idle_is_not_trusted(tmp_path: Path) -> None:
    """A1: the trusted stdio upstream is killed while idle and its data changed: the gate
    does not take the old head on trust; the upstream is relaunched and read again, the
    stale call refused as stale (and recorded so)."""
    import os
    import signal
    manifest = _trusting(tmp_path)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await _until_trusted(s, tmp_path)
            pid = [x["args"]["pid"] for x in upstream_log(tmp_path / "ledger.log")
                   if x["tool"] == "<start>"][-1]
            os.kill(pid, signal.SIGKILL)
            _edit(tmp_path, accounts={"main": 3})
            await anyio.sleep(1.0)  # the gateway is idle: nothing fails on the pipe
            r = await s.call_tool("charge", {"account": "main", "amount": 400})
            assert r.is_error and r.meta is not None, text(r)
            assert r.meta["icore/gate"]["reason"] == "stale", text(r)

    anyio.run(main)
    assert [c["amount"] for c in _charges(tmp_path)] == [1]
    gates = [g for g in _gate_lines(tmp_path) if g["tool"] == "charge"]
    assert gates[-1]["reason"] == "stale" and gates[-1]["head_source"]["reread"] == [BAL]


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


def test_trusted_http_upstream_notifies_on_its_get_stream_and_a_restart_untrusts(
        tmp_path: Path) -> None:
    """Over HTTP the notification travels on the upstream's GET stream; once the gateway
    has it the stale call is refused. The upstream restarted (its GET stream lost) after
    a silent change: the call is not trusted, and never reaches the upstream."""
    manifest, start, stack = _http_ledger(tmp_path, trust=True)
    first = start()

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await _until_trusted(s, tmp_path)
            n = _reads(tmp_path)
            r = await s.call_tool("charge", {"account": "main", "amount": 2})
            assert not r.is_error, text(r)
            assert _reads(tmp_path) == n  # trusted: not read again
            r = await s.call_tool("charge", {"account": "main", "amount": 3})
            assert not r.is_error, text(r)
            assert _reads(tmp_path) == n + 1  # read again after its own tools/call
            n = _reads(tmp_path)
            r = await s.call_tool("deposit", {"account": "main", "amount": 1000})
            assert not r.is_error, text(r)
            with anyio.fail_after(30):  # the gateway's re-read on the notification
                while _reads(tmp_path) == n:
                    await anyio.sleep(0.05)
            r = await s.call_tool("charge", {"account": "main", "amount": 900})
            assert r.is_error and "(stale)" in text(r), text(r)
            r = await s.call_tool("charge", {"account": "main", "amount": 800})  # replan
            assert not r.is_error, text(r)
            first.terminate()  # the upstream goes down: its GET stream with it
            first.wait(timeout=10)
            _edit(tmp_path, accounts={"main": 3})  # changed while nobody can notify
            start()
            r = await s.call_tool("charge", {"account": "main", "amount": 400})
            # refused by the gate (read again, not trusted), not an upstream error
            assert r.is_error and r.meta is not None and "icore/gate" in r.meta, text(r)

    with stack:
        anyio.run(main)
    assert [c["amount"] for c in _charges(tmp_path)] == [1, 2, 3, 800]
    # a stateful upstream's GET stream opened: no "trust not in effect" warning
    assert "no notification can reach" not in (tmp_path / "trace.jsonl").read_text(
        encoding="utf-8")


def test_trust_without_subscribe_support_warns(tmp_path: Path) -> None:
    """An upstream marked ``trust_updates`` that cannot subscribe (the SDK's MCPServer):
    a warning in the trace; a stale call is still refused."""
    from .conftest import stdio_upstream, write_manifest
    up = {**stdio_upstream(tmp_path / "up.log"), "trust_updates": True}
    manifest = write_manifest(tmp_path, {"trip": up})

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            for uri in ("memo://price", "memo://city"):
                await s.read_resource(uri)
            r = await s.call_tool("set_price", {"value": "120"})  # notifies; no subscriber
            assert not r.is_error, text(r)
            r = await s.call_tool("book", {"city": "Porto", "price": 100})
            assert r.is_error and "(stale)" in text(r) and "120" in text(r), text(r)

    anyio.run(main)
    trace = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    assert "marked trust_updates but does not support resources/subscribe" in trace


def test_a_refused_subscription_warns_and_the_reread_stays(tmp_path: Path) -> None:
    """A trusted upstream that declares ``resources.subscribe`` but refuses it: trust is
    never in effect, and the gateway says so (log and trace) instead of staying silent;
    a silent change is still caught by the re-read."""
    path = _trusting(tmp_path)
    m = yaml.safe_load(path.read_text(encoding="utf-8"))
    m["upstreams"]["ledger"]["env"]["LEDGER_REFUSE_SUBSCRIBE"] = "1"
    path.write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")

    async def main() -> None:
        async with stdio_gateway(path) as s:
            await s.read_resource(BAL)
            with anyio.fail_after(30):
                while "refused the subscription" not in (
                        tmp_path / "trace.jsonl").read_text(encoding="utf-8"):
                    await anyio.sleep(0.05)
            _edit(tmp_path, accounts={"main": 100})  # a change nobody notifies
            r = await s.call_tool("charge", {"account": "main", "amount": 30})
            assert r.is_error and "(stale)" in text(r), text(r)

    anyio.run(main)
    assert _charges(tmp_path) == []


def test_a_stateless_http_upstream_warns_and_the_reread_stays(tmp_path: Path) -> None:
    """A trusted HTTP upstream without sessions (stateless: no GET stream) accepts the
    subscription but can never notify: the gateway says so (log and trace, QA r3 U2), the
    gate lines say the heads were read again, and a silent change is refused ``stale``."""
    import json
    manifest, start, stack = _http_ledger(tmp_path, trust=True, stateless=True)
    start()
    trace = tmp_path / "trace.jsonl"

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource(BAL)
            with anyio.fail_after(30):
                while "no notification can reach the gateway" not in trace.read_text(
                        encoding="utf-8"):
                    await anyio.sleep(0.05)
            r = await s.call_tool("charge", {"account": "main", "amount": 1})
            assert not r.is_error, text(r)
            await s.read_resource(BAL)
            _edit(tmp_path, accounts={"main": 100})  # a change nobody notifies
            r = await s.call_tool("charge", {"account": "main", "amount": 30})
            assert r.is_error and "(stale)" in text(r), text(r)

    with stack:
        anyio.run(main)
    assert [c["amount"] for c in _charges(tmp_path)] == [1]
    notes = [json.loads(x) for x in trace.read_text(encoding="utf-8").splitlines()
             if "no notification can reach" in x]
    assert len(notes) == 1 and "stateless" in notes[0]["content"], notes
    assert all(g["head_source"]["trusted"] == [] for g in _gate_lines(tmp_path))


def test_second_gateway_on_the_manifest_warns_trust_is_not_shared(tmp_path: Path) -> None:
    """S2: a second gateway with the same manifest (two desktop clients) launches its
    own upstream, which never notifies changes made through the first: it warns."""
    manifest = _trusting(tmp_path)

    async def main() -> None:
        async with stdio_gateway(manifest) as a, stdio_gateway(manifest) as b:
            for s in (a, b):
                await s.read_resource(BAL)

    anyio.run(main)
    second = (tmp_path / "trace-gw2.jsonl").read_text(encoding="utf-8")
    assert "another icore gateway is running with this manifest" in second
    assert "another icore gateway" not in (tmp_path / "trace.jsonl").read_text(
        encoding="utf-8")


def test_http_upstream_restarted_while_idle_is_reconnected(tmp_path: Path) -> None:
    """C1: the HTTP upstream restarts on its URL while the gateway is idle; the new
    server answers 404 to the old session id. The gateway starts a new session (the
    request is sent again: the server never saw it) instead of failing for good."""
    manifest, start, stack = _http_ledger(tmp_path, trust=False)
    up = start()

    async def main() -> None:
        nonlocal up
        async with stdio_gateway(manifest) as s:
            for amount in (1, 2, 3):
                await s.read_resource(BAL)
                r = await s.call_tool("charge", {"account": "main", "amount": amount})
                assert not r.is_error, text(r)
                up.terminate()
                up.wait(timeout=10)
                up = start()
                await anyio.sleep(0.5)
            assert "acct://main/balance" in str((await s.read_resource(BAL)).contents[0])

    with stack:
        anyio.run(main)
    assert [c["amount"] for c in _charges(tmp_path)] == [1, 2, 3]
