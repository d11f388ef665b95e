"""Owner stores shared by gateway processes: icore's owner service and NATS JetStream.

Two gateway processes, each launched over stdio by the SDK's real client with its own
upstream, share one owner's facts (``store:`` in the manifest). A write through one
gateway makes the other gateway's session's plan stale: its protected call is refused
and never reaches its upstream. When the store becomes unreachable, the call is blocked
(fail closed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from .conftest import (
    free_port,
    http_client,
    process,
    stdio_gateway,
    stdio_upstream,
    text,
    upstream_log,
    wait_port,
)

GOAL = "fact://plan/goal"
OTHER = "other-agent-token-5c1d"


def _manifest(folder: Path, name: str, store: dict[str, Any]) -> Path:
    m = {"name": name, "upstreams": {"trip": stdio_upstream(folder / f"{name}.log", 10)},
         "store": store,
         "facts": {"owners": {"fact://plan/*": "planner"}, "initial": {GOAL: "Porto"},
                   "stdio_speaks_for": ["planner"], "writers": {"planner": ["other-agent"]}},
         "http": {"clients": {"other-agent": {"token_sha256": hashlib.sha256(
             OTHER.encode()).hexdigest()}}},
         "tools": {"echo": {"depends_on": [GOAL]}},
         "trace": str(folder / f"{name}-trace.jsonl"), "gate_timeout_s": 2}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


async def _stale_across_gateways(a_url: str, b_manifest: Path, cut_store: Any) -> None:
    """B's session plans from the goal; A (over HTTP) changes it: B's call is stale; the
    store cut: blocked."""
    async with stdio_gateway(b_manifest) as b:
        got = await b.call_tool("icore_get_fact", {"key": GOAL})
        assert not got.is_error and json.loads(text(got)) == "Porto"
        ok = await b.call_tool("echo", {"text": "ship to Porto"})
        assert not ok.is_error and text(ok) == "ship to Porto"
        async with http_client(a_url, "other-agent", token=OTHER) as a:
            put = await a.call_tool("icore_put_fact", {"key": GOAL, "value": "Lisbon"})
            assert not put.is_error, text(put)
        r = await b.call_tool("echo", {"text": "ship to Porto"})
        assert r.is_error and "(stale)" in text(r) and "Lisbon" in text(r)
        assert r.meta is not None and r.meta["icore/gate"]["reason"] == "stale"
        cut_store()
        r = await b.call_tool("echo", {"text": "ship to Lisbon"})
        assert r.is_error and "owner_unavailable" in text(r), text(r)


@contextlib.contextmanager
def _gateway_http(manifest: Path) -> Iterator[tuple[str, Any]]:
    """Gateway ``manifest`` as a subprocess serving streamable HTTP."""
    port = free_port()
    with process([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                  f"127.0.0.1:{port}"]) as p:
        wait_port(port, p, timeout_s=60)
        yield f"http://127.0.0.1:{port}/mcp", p


def _forwarded(folder: Path, name: str) -> list[str]:
    return [x["args"]["text"] for x in upstream_log(folder / f"{name}.log")]


def test_owner_service_shared_by_two_gateways(tmp_path: Path) -> None:
    """Gateway A hosts owner ``planner`` and serves its store (owner service, mutual TLS);
    gateway B reads and validates ``planner``'s facts there."""
    from icore.net import init_team_certs

    certs = init_team_certs(tmp_path / "certs", ["planner", "gw-a", "gw-b"], team="t")
    port = free_port()
    a = _manifest(tmp_path, "a", {"backend": "owner-service", "identity": "gw-a",
                                  "certs_dir": str(certs),
                                  "serve": {"planner": f"127.0.0.1:{port}"}})
    b = _manifest(tmp_path, "b", {"backend": "owner-service", "identity": "gw-b",
                                  "certs_dir": str(certs),
                                  "addresses": {"planner": f"127.0.0.1:{port}"}})
    with _gateway_http(a) as (url, pa):
        def stop_a() -> None:
            pa.kill()
            pa.wait(timeout=10)
        anyio.run(_stale_across_gateways, url, b, stop_a)
    assert _forwarded(tmp_path, "b") == ["ship to Porto"]  # stale and blocked: never sent
    assert not _forwarded(tmp_path, "a")


def test_nats_store_shared_by_two_gateways(tmp_path: Path) -> None:
    """Both gateways keep every owner's records and heads on one real nats-server
    (JetStream, TLS, per-owner permissions); killing it blocks the call."""
    pytest.importorskip("nats")
    from icore.net import client_context
    from icore.net.nats import (
        ADMIN_IDENTITY,
        NatsCluster,
        NatsServerError,
        connect_nats,
        create_buckets,
        nats_certs,
        nats_server_binary,
    )
    try:
        nats_server_binary()
    except NatsServerError as exc:
        pytest.skip(str(exc))
    owners = ["planner", "trip"]
    certs = nats_certs(tmp_path / "certs", owners, team="gw-team")
    with NatsCluster(tmp_path / "nats", certs, owners, team="gw-team") as cl:
        async def buckets() -> None:
            nc = await connect_nats(cl.urls, certs_dir=certs, identity=ADMIN_IDENTITY,
                                    ssl_context=client_context(certs, ADMIN_IDENTITY),
                                    timeout_s=5.0)
            try:
                await create_buckets(nc, prefix="gw")
            finally:
                await nc.close()
        anyio.run(buckets)
        store = {"backend": "nats", "servers": cl.urls, "certs_dir": str(certs),
                 "prefix": "gw"}
        a = _manifest(tmp_path, "a", store)
        b = _manifest(tmp_path, "b", store)
        with _gateway_http(a) as (url, _):
            anyio.run(_stale_across_gateways, url, b, lambda: cl.kill(0))
    assert _forwarded(tmp_path, "b") == ["ship to Porto"]
    assert not _forwarded(tmp_path, "a")


def test_unreachable_nats_store_refuses_to_start(tmp_path: Path) -> None:
    """A gateway whose NATS engine does not answer does not start (typed, names store)."""
    pytest.importorskip("nats")
    from icore.mcp import Gateway, GatewayError, manifest_from_dict
    from icore.net.nats import nats_certs

    certs = nats_certs(tmp_path / "certs", ["planner", "trip"], team="gw-team")
    m = manifest_from_dict({
        "upstreams": {"trip": stdio_upstream(tmp_path / "up.log", 10)},
        "store": {"backend": "nats", "servers": [f"tls://127.0.0.1:{free_port()}"],
                  "certs_dir": str(certs)},
        "facts": {"owners": {"fact://plan/*": "planner"}}, "gate_timeout_s": 0.5})

    async def main() -> None:
        with pytest.raises(GatewayError, match="cannot open the nats store") as ei:
            async with Gateway(m):
                pass
        assert ei.value.fields["path"] == "store"

    anyio.run(main)


def _audit(trace: Path, out: Path) -> dict[str, Any]:
    """``icore audit TRACE --fail-on invalid --json``: exit 0 and the JSON summary."""
    import subprocess

    from .conftest import env
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(trace), "--fail-on",
                          "invalid", "--out", str(out), "--json", str(out) + ".json"],
                         capture_output=True, text=True, env=env(), timeout=120, check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    return dict(json.loads(Path(str(out) + ".json").read_text(encoding="utf-8")))


def test_sqlite_store_shared_by_two_gateways_each_trace_audits(tmp_path: Path) -> None:
    """Two gateways (two manifests, two traces) on one SQLite owner store: a fact written
    through A makes B's plan stale (refused, never forwarded); B's replan from the new
    version is forwarded. Each trace is audited on its own: no invalid action, B's
    lineage has its two forwarded calls valid and the stale one blocked, A's has the
    write."""
    store = {"backend": "sqlite", "path": str(tmp_path / "owners")}
    a, b = _manifest(tmp_path, "a", store), _manifest(tmp_path, "b", store)

    async def main() -> None:
        async with stdio_gateway(a) as ga, stdio_gateway(b) as gb:
            got = await gb.call_tool("icore_get_fact", {"key": GOAL})
            assert json.loads(text(got)) == "Porto"
            assert not (await gb.call_tool("echo", {"text": "ship to Porto"})).is_error
            put = await ga.call_tool("icore_put_fact", {"key": GOAL, "value": "Lisbon"})
            assert not put.is_error, text(put)
            r = await gb.call_tool("echo", {"text": "ship to Porto"})
            assert r.is_error and "(stale)" in text(r) and "Lisbon" in text(r), text(r)
            got = await gb.call_tool("icore_get_fact", {"key": GOAL})
            assert json.loads(text(got)) == "Lisbon"
            r = await gb.call_tool("echo", {"text": "ship to Lisbon"})
            assert not r.is_error, text(r)

    anyio.run(main)
    assert _forwarded(tmp_path, "b") == ["ship to Porto", "ship to Lisbon"]
    assert _forwarded(tmp_path, "a") == []
    ja = _audit(tmp_path / "a-trace.jsonl", tmp_path / "audit-a")
    jb = _audit(tmp_path / "b-trace.jsonl", tmp_path / "audit-b")
    [rb] = jb["runs"]
    assert [x["status"] for x in rb["lineage"]] == ["valid", "blocked", "valid"], rb
    assert "changed: fact://plan/goal" in rb["lineage"][1]["reason"]
    assert rb["summary"]["replans"] == 1 and rb["summary"]["terminated"]
    [ra] = ja["runs"]
    assert ra["lineage"] == [] and ra["summary"]["terminated"], ra  # A wrote, called nothing
    trace_a = (tmp_path / "a-trace.jsonl").read_text(encoding="utf-8")
    assert "icore_put_fact" in trace_a and "Lisbon" in trace_a
    assert "ship to" not in trace_a  # A's trace holds A's session only
    assert "icore_put_fact" not in (tmp_path / "b-trace.jsonl").read_text(encoding="utf-8")
