"""Issue 29 on the gateway: its files checked before any upstream starts, its manifest's
scalars taken only as YAML numbers and bools, and an HTTP body that is no single JSON-RPC
message answered with a short JSON-RPC error (not pydantic's validation dump)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.mcp import GatewayManifestError, manifest_from_dict
from icore.mcp._http_shape import INVALID_REQUEST, PARSE_ERROR, shape_problem

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
UPSTREAM = ROOT / "examples" / "mcp" / "notes_server.py"


def _gateway(tmp: Path, **top: Any) -> Path:
    shutil.copy(UPSTREAM, tmp)
    doc = {"upstreams": {"notes": {"command": sys.executable, "args": ["notes_server.py"]}},
           **top}
    p = tmp / "gw.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


@pytest.mark.parametrize(("path", "value"), [
    (("upstreams", "notes", "timeout_s"), True), (("upstreams", "notes", "timeout_s"), "5"),
    (("gate_timeout_s",), False), (("facts", "tools"), "no"),
    (("upstreams", "notes", "trust_updates"), 1)])
def test_manifest_scalars_are_not_coerced(path: tuple[str, ...], value: Any) -> None:
    doc: dict[str, Any] = {"upstreams": {"notes": {"command": "python"}}}
    node = doc
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value
    with pytest.raises(GatewayManifestError, match=re.escape(".".join(path))) as info:
        manifest_from_dict(doc, file="gw.yaml")
    assert "expected a valid" in str(info.value)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("top", "field"), [
    ({"otel": "file:notes_server.py"}, "otel"), ({"otel": "file:gw.yaml"}, "otel"),
    ({"trace": "notes_server.py"}, "trace"),
    ({"otel": "file:t.jsonl", "trace": "t.jsonl"}, "trace"),
    ({"store": {"backend": "sqlite", "path": "st"}, "otel": "file:st/x.db"}, "otel"),
    ({"store": {"backend": "sqlite", "path": "facts.db"}}, "store.path"),
    ({"otel": "file:"}, "otel")])
def test_gateway_outputs_never_land_on_its_inputs(tmp_path: Path, top: dict[str, Any],
                                                  field: str) -> None:
    (tmp_path / "facts.db").write_text("mine")
    (tmp_path / "st").mkdir()
    man = _gateway(tmp_path, **top)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    r = subprocess.run([sys.executable, "-m", "icore", "mcp", str(man)], env=ENV,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and f"path='{field}'" in r.stderr
    assert "gw.yaml" in r.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(
                        st.text(max_size=5), c, max_size=3), max_leaves=8))
def test_any_non_message_body_gets_a_short_jsonrpc_error(value: Any) -> None:
    problem = shape_problem(json.dumps(value).encode())
    ok = isinstance(value, dict) and value.get("jsonrpc") == "2.0" and (
        "method" in value or "result" in value or "error" in value)
    if not ok:
        assert problem is not None and problem[0] == INVALID_REQUEST
        assert len(problem[1]) < 300 and "pydantic" not in problem[1]


@pytest.mark.parametrize(("msg", "named"), [
    ({"jsonrpc": "2.0", "id": 1, "error": 5}, "error"),
    ({"jsonrpc": "2.0", "result": 1}, "id")])
def test_what_the_sdk_model_refuses_is_one_sentence(msg: dict[str, Any], named: str) -> None:
    problem = shape_problem(json.dumps(msg).encode())
    assert problem is not None and problem[0] == INVALID_REQUEST
    assert named in problem[1] and len(problem[1]) <= 300 and "\n" not in problem[1]


def test_unparsable_body_is_a_parse_error() -> None:
    assert shape_problem(b'{"jsonrpc"')[0] == PARSE_ERROR  # type: ignore[index]
    assert shape_problem(b"[" * 100_000 + b"]" * 100_000) is not None


@pytest.mark.timeout(120)
def test_http_gateway_answers_a_batch_and_bad_bodies_with_jsonrpc_errors(
        tmp_path: Path) -> None:
    man = _gateway(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(man), "--http",
                          "127.0.0.1:0"], env=ENV, stdin=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        port = None
        assert p.stderr is not None
        for line in p.stderr:
            if m := re.search(r"serving http://127.0.0.1:(\d+)/mcp", line):
                port = int(m.group(1))
                break
        assert port is not None
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for body, ctype, status in (
                (json.dumps([ping]).encode(), "application/json", 400),
                (b"5", "application/json", 400), (b"null", "application/json", 400),
                (json.dumps({**ping, "id": {"a": 1}}).encode(), "application/json", 400),
                (json.dumps(ping).encode(), "text/plain", 415),
                # over the limit: read and dropped, then answered (no reset connection)
                (json.dumps({**ping, "params": {"x": "a" * (17 << 20)}}).encode(),
                 "application/json", 413)):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body, headers={
                "Content-Type": ctype, "Accept": "application/json, text/event-stream"},
                method="POST")
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(req, timeout=30)
            assert info.value.code == status
            answer = json.loads(info.value.read())
            assert answer["jsonrpc"] == "2.0" and answer["id"] is None
            assert answer["error"]["code"] == INVALID_REQUEST
            assert len(answer["error"]["message"]) < 300
    finally:
        p.terminate()
        p.wait(20)
        if p.stderr is not None:
            p.stderr.close()


@pytest.mark.timeout(120)
def test_gateway_runtime_error_names_the_manifest(tmp_path: Path) -> None:
    p = tmp_path / "gw.yaml"
    p.write_text(yaml.safe_dump({"upstreams": {"notes": {"command": "no-such-cmd-x"}}}))
    r = subprocess.run([sys.executable, "-m", "icore", "mcp", str(p)], env=ENV,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"gateway manifest {p}" in r.stderr and "no-such-cmd-x" in r.stderr


def test_an_unauthenticated_request_goes_to_the_token_check_unread() -> None:
    """With ``http.clients``, a request without a valid token reaches the SDK's 401
    before any body is read or parsed here; an authenticated bad body is still answered
    with a JSON-RPC error (review #29)."""
    import hashlib

    import anyio

    from icore.mcp._http_shape import MessageShape
    from icore.mcp._transport import StaticTokens

    verifier = StaticTokens({"alice": hashlib.sha256(b"s3cret").digest()})
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append("app")
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def call(auth: bytes | None) -> tuple[int, int]:
        reads: list[int] = []
        sent: list[dict[str, Any]] = []
        headers = [(b"content-type", b"application/json")]
        if auth is not None:
            headers.append((b"authorization", auth))

        async def receive() -> dict[str, Any]:
            reads.append(1)
            return {"type": "http.request", "body": b"[1]", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await MessageShape(app, verifier=verifier)(
            {"type": "http", "method": "POST", "path": "/mcp", "headers": headers},
            receive, send)
        return sent[0]["status"], len(reads)

    async def main() -> None:
        for auth in (None, b"Bearer wrong", b"Basic czNjcmV0", b"Bearer "):
            assert await call(auth) == (401, 0)
        assert seen == ["app"] * 4
        assert await call(b"Bearer s3cret") == (400, 1)
        assert seen == ["app"] * 4

    anyio.run(main)
