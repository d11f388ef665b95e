"""A notified change is never trusted, whatever form the resource is shown in (QA
qa-mcp S1, S2): the SDK's client launches ``icore mcp`` over stdio in front of the ledger
upstream (tests/mcp/upstream_ledger.py, a low-level SDK server) marked ``trust_updates``.

Another writer changes the balance and the upstream notifies ``resources/updated`` for
the concrete URI. Over every shape - the resource listed or served through its URI
template only, shown bare or namespaced ``<upstream>.<uri>`` by a clash with a second
upstream - the stale call is refused (never forwarded), the gateway re-reads the concrete
URI (never the literal template) and a client subscribed through the gateway is notified.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from .conftest import env, text, upstream_log
from .test_gateway_reread import LEDGER


def _ledger(folder: Path, name: str, template_only: bool) -> dict[str, Any]:
    state = folder / f"{name}.json"
    state.write_text(json.dumps({"accounts": {"main": 500}}), encoding="utf-8")
    extra = {"LEDGER_TEMPLATE_ONLY": "1"} if template_only else {}
    return {"command": sys.executable, "args": [str(LEDGER)], "timeout_s": 5,
            "trust_updates": True,
            "env": {"LEDGER_STATE": str(state), "LEDGER_LOG": str(folder / f"{name}.log"),
                    **extra}}


def _manifest(folder: Path, namespaced: bool, template_only: bool) -> tuple[Path, str, str]:
    """The manifest; the URI and the tool the client uses."""
    ups = {"ledger": _ledger(folder, "ledger", template_only)}
    prefix = ""
    if namespaced:  # a second upstream serving the same names: both shown namespaced
        ups["spare"] = _ledger(folder, "spare", template_only)
        prefix = "ledger."
    m = {"name": "notified", "upstreams": ups,
         "tools": {f"{prefix}charge": {"depends_on": [f"{prefix}acct://{{account}}/balance"]}},
         "trace": str(folder / "trace.jsonl")}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path, f"{prefix}acct://main/balance", f"{prefix}charge"


@contextlib.asynccontextmanager
async def _client(manifest: Path, got: list[str]) -> AsyncIterator[Any]:
    """The SDK's client over stdio, recording the URIs of the updates it is sent."""
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def handler(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            got.append(str(message.params.uri))

    p = StdioServerParameters(command=sys.executable,
                              args=["-m", "icore", "mcp", str(manifest)], env=env())
    with open(os.devnull, "w") as devnull:
        async with stdio_client(p, errlog=devnull) as (r, w), \
                ClientSession(r, w, message_handler=handler) as s:
            await s.initialize()
            yield s


def _log(folder: Path) -> list[dict[str, Any]]:
    return upstream_log(folder / "ledger.log")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("template_only", [False, True], ids=["listed", "template-only"])
@pytest.mark.parametrize("namespaced", [False, True], ids=["bare", "namespaced"])
def test_a_notified_change_is_never_trusted(tmp_path: Path, namespaced: bool,
                                            template_only: bool) -> None:
    manifest, uri, tool = _manifest(tmp_path, namespaced, template_only)
    got: list[str] = []

    async def main() -> None:
        import warnings
        async with _client(manifest, got) as s:
            assert (await s.read_resource(uri)).contents[0].text == "500"
            with warnings.catch_warnings():  # the SDK deprecates subscribe (2026-07-28)
                warnings.simplefilter("ignore")
                await s.subscribe_resource(uri)
            with anyio.fail_after(30):  # the gateway's own subscription at the upstream
                while not any(x["tool"] == "<subscribe>" for x in _log(tmp_path)):
                    await anyio.sleep(0.05)
            r = await s.call_tool(tool, {"account": "main", "amount": 1})
            assert not r.is_error, text(r)
            await s.read_resource(uri)  # read under the subscription: trusted from now
            r = await s.call_tool(tool, {"account": "main", "amount": 2})
            assert not r.is_error, text(r)
            n = len(_log(tmp_path))
            # another writer: the upstream notifies the concrete URI
            st = json.loads((tmp_path / "ledger.json").read_text(encoding="utf-8"))
            (tmp_path / "ledger.json").write_text(json.dumps(
                {**st, "pending": {"account": "main", "value": 100}}), encoding="utf-8")
            with anyio.fail_after(30):  # notified, then read again by the gateway
                while not any(x["tool"] == "<read>" for x in _log(tmp_path)[n:]
                              if any(y["tool"] == "<notified>" for y in _log(tmp_path)[n:])):
                    await anyio.sleep(0.05)
            with anyio.fail_after(30):  # the subscribed client is told
                while uri not in got:
                    await anyio.sleep(0.05)
            r = await s.call_tool(tool, {"account": "main", "amount": 400})
            assert r.is_error and r.meta is not None, text(r)
            assert r.meta["icore/gate"]["reason"] == "stale", text(r)
            assert "100" in text(r)

    anyio.run(main)
    log = _log(tmp_path)
    assert [x["args"]["amount"] for x in log if x["tool"] == "charge"] == [1, 2]
    # the gateway read the concrete URI only, never the literal template
    assert {x["args"]["uri"] for x in log if x["tool"] == "<read>"} == {"acct://main/balance"}
    assert set(got) == {uri}
    gates = [json.loads(x)["gate"] for x in (tmp_path / "trace.jsonl").read_text(
        encoding="utf-8").splitlines() if '"gate"' in x]
    assert [g["reason"] for g in gates][-1] == "stale"  # recorded as refused, not valid



@pytest.mark.parametrize(("read", "notified"), [
    ("http://main.ledger", "http://main.ledger/"),  # an AnyUrl's trailing slash
    ("acct://main/balance", "ACCT://MAIN/balance"),
    ("acct://main/balance", "acct://main/%62alance"),
    ("acct://main/a%2fb", "acct://main/a%2Fb"),
    ("acct://main/balance", "acct://elsewhere/main"),  # no trusted read has it
])
def test_a_notification_in_another_spelling_drops_the_trusted_read(read: str,
                                                                   notified: str) -> None:
    """The trust of a read (``trust_updates``) is dropped by an update notification
    whatever spelling of the URI the upstream uses, and by one naming a URI no trusted
    read has (every trusted read of that upstream is read again: fail closed). The
    exact-string key let a change notified as ``http://main.ledger/`` through (review
    #25)."""
    from types import SimpleNamespace

    from icore.mcp._gateway_resources import _Resources, uri_key

    host = SimpleNamespace(upstreams={}, resources={}, template_routes={})
    res = _Resources(host, lambda ctx: ctx)  # type: ignore[arg-type]
    res._fresh[("ledger", uri_key(read))] = (1, 1, 0, 0)
    res._fresh[("other", uri_key(read))] = (1, 1, 0, 0)
    before = res._stray.get("ledger", 0)
    msg = SimpleNamespace(method="notifications/resources/updated",
                          params=SimpleNamespace(uri=notified))
    anyio.run(res.on_upstream_notification, "ledger", msg)
    dropped = ("ledger", uri_key(read)) not in res._fresh
    assert dropped or res._stray.get("ledger", 0) == before + 1
    assert ("other", uri_key(read)) in res._fresh  # another upstream's read stands
    assert uri_key(read) == uri_key(notified) or not dropped


def test_uri_key_merges_only_equivalent_spellings() -> None:
    from icore.mcp._gateway_resources import uri_key
    assert uri_key("HTTP://Main.Ledger/") == uri_key("http://main.ledger")
    assert uri_key("acct://main/%7Euser") == uri_key("acct://main/~user")
    assert uri_key("acct://main/balance") != uri_key("acct://main/Balance")  # path case
    assert uri_key("acct://main/a%2fb") != uri_key("acct://main/a/b")  # reserved stays

