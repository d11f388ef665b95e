"""Manifest checks from QA qa-new8 (#29): NUL bytes in paths and commands, placeholders
bound to object arguments, duplicate client tokens, oversized manifests.

Each bad manifest is refused by :func:`icore.mcp.load_manifest` (or ``icore mcp``, a
real subprocess, exit 2) naming the file, the field and its line; never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from icore.mcp import GatewayManifestError, load_manifest

from .conftest import env

_UP = 'upstreams: {h: {command: python, args: [s.py]}}\n'
_NUL = {
    "trace": _UP + 'trace: "t\\0.jsonl"\n',
    "store.path": _UP + 'store: {backend: sqlite, path: "s\\0x"}\n',
    "otel": _UP + 'otel: "file:o\\0.jsonl"\n',
    "upstreams.h.command": 'upstreams: {h: {command: "python\\0"}}\n',
    "upstreams.h.cwd": 'upstreams: {h: {command: python, cwd: "d\\0"}}\n',
    "upstreams.h.args": 'upstreams: {h: {command: python, args: ["a\\0"]}}\n',
    "upstreams.h.env": 'upstreams: {h: {command: python, env: {A: "x\\0"}}}\n',
    "upstreams.h.url": 'upstreams: {h: {url: "http://127.0.0.1:9/m\\0"}}\n',
    "upstreams.h.headers": 'upstreams: {h: {url: "http://127.0.0.1:9/mcp", '
                           'headers: {X: "a\\0"}}}\n',
    "store.certs_dir": _UP + 'store: {backend: nats, servers: ["nats://127.0.0.1:4222"], '
                       'certs_dir: "c\\0"}\n',
}


@pytest.mark.parametrize("field", sorted(_NUL))
def test_nul_in_a_path_or_command_is_a_manifest_error(tmp_path: Path, field: str) -> None:
    m = tmp_path / "gw.yaml"
    m.write_text(_NUL[field], encoding="utf-8")
    with pytest.raises(GatewayManifestError, match="NUL byte") as err:
        load_manifest(m)
    assert err.value.fields["path"] == field
    assert err.value.fields["line"] is not None and err.value.fields["file"].endswith("gw.yaml")


@pytest.mark.parametrize("field", ["trace", "store.path", "upstreams.h.command"])
def test_gateway_exits_2_naming_the_field(tmp_path: Path, field: str) -> None:
    m = tmp_path / "gw.yaml"
    m.write_text(_NUL[field], encoding="utf-8")
    got = subprocess.run([sys.executable, "-m", "icore", "mcp", str(m)],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         env=env(), timeout=120, check=False, cwd=tmp_path)
    assert got.returncode == 2, got.stderr
    assert "Traceback" not in got.stderr and field in got.stderr and "gw.yaml" in got.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gw.yaml"]  # nothing written


_OBJECT_UPSTREAM = '''
from mcp.server import MCPServer
from pydantic import BaseModel

mcp = MCPServer("hotels")


class Guest(BaseModel):
    name: str


@mcp.tool()
def book(hotel: str, guest: Guest, rooms: list[int], night: int | None = None) -> str:
    """Book."""
    return "ok"


@mcp.resource("hotel://{hotel}/rate")
def rate(hotel: str) -> str:
    return "120"


mcp.run()
'''


@pytest.mark.parametrize(("entry", "arg", "kind"), [
    ("hotel://{guest}/rate", "guest", "object"), ("hotel://{rooms}/rate", "rooms", "array"),
    ("hotel://{hotel}/{night}", None, None)])
def test_placeholder_on_an_object_argument_is_a_manifest_error(
        tmp_path: Path, entry: str, arg: str | None, kind: str | None) -> None:
    """A ``{placeholder}`` bound to an object or array argument is refused at start
    naming the tool, the placeholder and the argument (every call was refused with a
    detail telling the model to give the argument it gave). Scalars start."""
    (tmp_path / "hotels.py").write_text(_OBJECT_UPSTREAM, encoding="utf-8")
    m = tmp_path / "gw.yaml"
    m.write_text(f"upstreams: {{hotels: {{command: python, args: [hotels.py]}}}}\n"
                 f"tools:\n  book: {{depends_on: ['{entry}']}}\n", encoding="utf-8")
    got = subprocess.run([sys.executable, "-m", "icore", "mcp", str(m)],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         env=env(), timeout=120, check=False, cwd=tmp_path)
    if arg is None:
        assert got.returncode == 0, got.stderr
        return
    assert got.returncode == 2, got.stderr
    err = got.stderr
    assert "tools.book.depends_on.0" in err and f"{{{arg}}}" in err and "line 3" in err
    assert f"argument {arg!r}, of type {kind}" in err and "string, number or boolean" in err
    assert "Traceback" not in err


_SHA = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"  # sha256("a")


@pytest.mark.parametrize("second", ["{token_env: T_ONE}", "{token_env: T_TWO}",
                                    f"{{token_sha256: {_SHA}}}"], ids=["env", "value", "sha"])
def test_two_clients_with_one_token_are_refused(tmp_path: Path, second: str) -> None:
    m = tmp_path / "gw.yaml"
    m.write_text(_UP + "http:\n  clients:\n    alice: {token_env: T_ONE}\n"
                 f"    bob: {second}\n", encoding="utf-8")
    got = subprocess.run([sys.executable, "-m", "icore", "mcp", str(m), "--http",
                          "127.0.0.1:0"], stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, env={**env(), "T_ONE": "a", "T_TWO": "a"}, timeout=120,
                         check=False, cwd=tmp_path)
    assert got.returncode == 2, got.stderr
    assert "'alice' (line 4) and 'bob' (line 5) have the same token" in got.stderr
    assert "http.clients.bob" in got.stderr and "Traceback" not in got.stderr


def test_a_client_name_given_twice_names_both_lines(tmp_path: Path) -> None:
    m = tmp_path / "gw.yaml"
    m.write_text(_UP + "http:\n  clients:\n    alice: {token_env: A}\n"
                 "    alice: {token_env: B}\n", encoding="utf-8")
    with pytest.raises(GatewayManifestError, match="alice") as err:
        load_manifest(m)
    assert err.value.fields["lines"] == [4, 5]
