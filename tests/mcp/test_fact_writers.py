"""Only a session that speaks for a fact's owner writes the fact (QA r6-oa D2).

The acting agent used to rewrite the facts that gate its own calls with
``icore_put_fact``. Checked with the SDK's real clients: over stdio (the manifest's
``facts.stdio_speaks_for``) and over streamable HTTP (the token-named client, or one
``facts.writers`` lists); a refused write is a typed tool error, recorded as blocked
(the audit shows it), and no new version. The manifest is checked at start.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from icore.mcp import GatewayManifestError, load_manifest

from .conftest import (
    env,
    free_port,
    http_client,
    process,
    stdio_gateway,
    stdio_upstream,
    text,
    wait_port,
    write_manifest,
)

GOAL = "fact://plan/goal"
TOKENS = {"planner": "planner-tok-1", "concierge": "concierge-tok-2", "helper": "helper-tok-3"}


def _facts(folder: Path, **facts: Any) -> Path:
    path = write_manifest(folder, {"trip": stdio_upstream(folder / "up.log", 5.0)})
    m = yaml.safe_load(path.read_text(encoding="utf-8"))
    m["facts"] = {"owners": {"fact://plan/*": "planner"}, "initial": {GOAL: "Porto"}, **facts}
    m["tools"] = {"book": {"depends_on": [GOAL]}}
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def _audit(trace: Path, folder: Path) -> dict[str, Any]:
    out = folder / "audit.json"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(trace), "--json",
                          str(out)], capture_output=True, text=True, env=env(), timeout=120,
                         check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    return dict(json.loads(out.read_text(encoding="utf-8")))


def _refused_write(r: Any, owner: str, allow: str) -> None:
    assert r.is_error, text(r)
    assert r.meta["icore/gate"]["reason"] == "not_owner"
    assert r.meta["icore/gate"]["owner"] == owner
    said = text(r)
    assert "not_owner" in said and repr(owner) in said and allow in said, said


def test_stdio_client_writes_only_for_the_owner_it_speaks_for(tmp_path: Path) -> None:
    manifest = _facts(tmp_path)  # no stdio_speaks_for: the stdio client is the agent

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            r = await s.call_tool("icore_put_fact", {"key": GOAL, "value": "Faro"})
            _refused_write(r, "planner", "facts.stdio_speaks_for: [planner]")
            got = await s.read_resource(GOAL)
            assert got.contents[0].text == '"Porto"'  # no new version

    anyio.run(main)
    trace = tmp_path / "trace.jsonl"
    raw = trace.read_text(encoding="utf-8")
    assert "not_owner" in raw and "Faro" in raw  # the attempt is recorded
    assert "(seq 2)" not in raw  # only the initial version (seq 1, from the manifest)
    out = [json.loads(x) for x in raw.splitlines() if "BLOCKED: not_owner" in x]
    assert [(x["kind"], x["blocked"], x["reason"]) for x in out] == [
        ("tool_output", True, "not_owner")]
    # a put is no protected action, refused or accepted (QA r7 D6): not counted
    assert "not_owner" not in json.dumps(_audit(trace, tmp_path)["runs"][0]["lineage"])
    assert _audit(trace, tmp_path)["runs"][0]["actions"]["total"] == 0

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    manifest = _facts(allowed, stdio_speaks_for=["planner"])

    async def owner() -> None:
        async with stdio_gateway(manifest) as s:
            r = await s.call_tool("icore_put_fact", {"key": GOAL, "value": "Faro"})
            assert not r.is_error, text(r)
            got = await s.read_resource(GOAL)
            assert got.contents[0].text == '"Faro"'

    anyio.run(owner)
    assert _audit(allowed / "trace.jsonl", allowed)["runs"][0]["actions"]["total"] == 0


def test_http_writes_by_the_owner_or_a_listed_writer_only(tmp_path: Path) -> None:
    manifest = _facts(tmp_path, writers={"planner": ["helper"]})
    m = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    m["http"] = {"clients": {n: {"token_sha256": hashlib.sha256(t.encode()).hexdigest()}
                             for n, t in TOKENS.items()}}
    manifest.write_text(yaml.safe_dump(m), encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for who, value in (("concierge", "999"), ("planner", "Lisbon"), ("helper", "Faro")):
            async with http_client(url, who, token=TOKENS[who]) as s:
                out[who] = await s.call_tool("icore_put_fact", {"key": GOAL, "value": value})
                got = await s.read_resource(GOAL)
                out[who + "_sees"] = got.contents[0].text
        return out

    with process([sys.executable, "-m", "icore", "mcp", str(manifest), "--http",
                  f"127.0.0.1:{port}"]) as gw:
        wait_port(port, gw, timeout_s=60)
        out = anyio.run(main)
    _refused_write(out["concierge"], "planner", "facts.writers")
    assert "client 'concierge'" in text(out["concierge"])
    assert out["concierge_sees"] == '"Porto"'
    assert not out["planner"].is_error and out["planner_sees"] == '"Lisbon"'
    assert not out["helper"].is_error and out["helper_sees"] == '"Faro"'
    raw = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    assert "not_owner" in raw and '"999"' in raw


@pytest.mark.parametrize(("facts", "http", "where"), [
    ({"writers": {"revenue": ["a"]}}, {"a": "x" * 64}, "facts.writers.revenue"),
    ({"writers": {"planner": ["ghost"]}}, {"a": "x" * 64}, "facts.writers.planner.0"),
    ({"stdio_speaks_for": ["planner", "revenue"]}, {}, "facts.stdio_speaks_for.1"),
])
def test_writers_are_checked_at_start(tmp_path: Path, facts: dict[str, Any],
                                      http: dict[str, str], where: str) -> None:
    path = _facts(tmp_path, **facts)
    if http:
        m = yaml.safe_load(path.read_text(encoding="utf-8"))
        m["http"] = {"clients": {n: {"token_sha256": "ab" * 32} for n in http}}
        path.write_text(yaml.safe_dump(m), encoding="utf-8")
    with pytest.raises(GatewayManifestError) as err:
        load_manifest(path)
    assert err.value.fields["path"] == where
    assert err.value.fields["line"] is not None and f"at line {err.value.fields['line']}" \
        in str(err.value)


def test_every_bad_writer_entry_is_named_in_one_error(tmp_path: Path) -> None:
    """Several bad ``facts.writers`` / ``stdio_speaks_for`` entries: one error names all,
    each with its line (the first's path and line are the error's fields)."""
    path = _facts(tmp_path, writers={"revenue": ["a"], "planner": ["ghost"]},
                  stdio_speaks_for=["planner", "sales"])
    m = yaml.safe_load(path.read_text(encoding="utf-8"))
    m["http"] = {"clients": {"a": {"token_sha256": "ab" * 32}}}
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    with pytest.raises(GatewayManifestError) as err:
        load_manifest(path)
    said = str(err.value)
    for where in ("facts.writers.revenue: owner 'revenue' owns no fact",
                  "facts.writers.planner.0: client 'ghost' is not declared",
                  "facts.stdio_speaks_for.1: owner 'sales' owns no fact"):
        assert where in said, said
    assert said.count("line ") == 3, said
    first = "facts.writers.planner.0"  # the manifest's order (safe_dump sorts keys)
    assert err.value.fields["path"] == first
    assert f"at line {err.value.fields['line']}: {first}" in said, said
