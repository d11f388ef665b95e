"""A new user's gateway (QA r6-lgmcp): schema defaults fill D(a), the resource-read tool,
setup messages. Real parts: the SDK's client launching ``icore mcp`` over stdio, the
SDK upstream (``upstream_server.py``) behind it."""

from __future__ import annotations

from pathlib import Path

import anyio
import yaml

from .conftest import stdio_gateway, stdio_upstream, text, upstream_log


def _manifest(tmp: Path, log: Path, **extra: object) -> Path:
    m = {"name": "user-gateway", "upstreams": {"trip": stdio_upstream(log, 10)},
         "facts": {"owners": {"fact://lane/*": "planner"},
                   "initial": {"fact://lane/Porto/north": "open",
                               "fact://lane/Porto/south": "open"}},
         "tools": {"book_lane": {"depends_on": ["fact://lane/{city}/{lane}"],
                                 "writes": ["memo://{lane}"]}},
         "trace": str(tmp / "trace.jsonl"), **extra}
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def test_placeholder_of_an_omitted_argument_takes_the_schema_default(tmp_path: Path) -> None:
    """D2: ``{lane}`` names an argument with a schema default; the model omits it. D(a) is
    filled from the default and the call is judged (stale, then valid), not refused
    ``incomplete_declaration``; an optional argument with a null default is refused with
    a detail telling the model to pass it."""
    log = tmp_path / "up.log"
    path = _manifest(tmp_path, log)

    async def main() -> None:
        async with stdio_gateway(path) as s:
            await s.read_resource("fact://lane/Porto/north")
            r = await s.call_tool("book_lane", {"city": "Porto"})
            assert not r.is_error, text(r)
            assert text(r) == "booked Porto via north"
            await s.call_tool("icore_put_fact", {"key": "fact://lane/Porto/north",
                                                 "value": "closed"})
            await s.read_resource("fact://lane/Porto/north")
            r = await s.call_tool("book_lane", {"city": "Porto"})
            assert not r.is_error, text(r)  # its own write, read back: valid
            r = await s.call_tool("book_lane", {"city": "Porto", "lane": "south"})
            assert r.is_error and "(not_read)" in text(r)

    anyio.run(main)
    calls = [x["args"] for x in upstream_log(log)]
    # the upstream applied its own defaults to the arguments the client sent
    assert calls == [{"city": "Porto", "lane": "north", "note": None}] * 2
    trace = (tmp_path / "trace.jsonl").read_text()
    assert "re-read of memo://north" in trace  # writes: {lane} from the default too
    assert "skipped" not in trace


def test_placeholder_of_an_optional_argument_without_default_is_refused_clearly(
        tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    path = _manifest(tmp_path, log)
    path.write_text(path.read_text().replace("fact://lane/{city}/{lane}",
                                             "fact://lane/{city}/{note}"))

    async def main() -> None:
        async with stdio_gateway(path) as s:
            r = await s.call_tool("book_lane", {"city": "Porto"})
            said = text(r)
            assert r.is_error and "(incomplete_declaration)" in said, said
            assert "'note' is optional in book_lane's input schema" in said
            assert "Call book_lane again with 'note' given" in said

    anyio.run(main)
    assert not upstream_log(log)


def test_pinned_minimum_is_the_pyproject_pin() -> None:
    """D3: the version the message requires is the ``icore[mcp]`` pin of pyproject."""
    import re
    import tomllib

    from icore.mcp._sdk import MCP_MINIMUM

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    pin = next(re.fullmatch(r"mcp>=([\d.]+)", r) for r in extras["mcp"] if r.startswith("mcp"))
    assert pin is not None and MCP_MINIMUM == pin.group(1)


def test_icore_mcp_with_mcp_1x_is_one_typed_line(tmp_path: Path) -> None:
    """D3: ``icore mcp`` where the installed mcp is 1.x (an adapters venv): exit 2, one
    line naming the installed and required versions and the fix, no traceback. The
    installed version is faked in the child process (mcp 2.x is what this venv has)."""
    import subprocess
    import sys

    from icore.mcp._sdk import MCP_MINIMUM

    from .conftest import env

    path = _manifest(tmp_path, tmp_path / "up.log")
    code = ("import importlib.metadata as m, sys; real = m.version; "
            "m.version = lambda d: '1.30.0' if d == 'mcp' else real(d); "
            "from icore.cli import main; sys.argv = ['icore', 'mcp', sys.argv[1]]; main()")
    p = subprocess.run([sys.executable, "-c", code, str(path)], env=env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"icore mcp needs mcp>={MCP_MINIMUM}; mcp 1.30.0 is installed" in lines[0]
    assert "run the gateway from its own venv" in lines[0]
    assert "pip install 'icore[mcp]'" in lines[0]


def test_read_resource_tool_is_the_sessions_versioned_read(tmp_path: Path) -> None:
    """D4: a tools-only client (the adapters' ``load_mcp_tools``) reads the resources of
    D(a) through ``icore_read_resource``; the read is the session's, so the first
    protected call is judged (valid), and a change after it is refused stale."""
    import json

    from .conftest import write_manifest

    log = tmp_path / "up.log"
    path = write_manifest(tmp_path, {"trip": stdio_upstream(log, 10)})

    async def main() -> None:
        async with stdio_gateway(path) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert "icore_read_resource" in names
            for uri in ("memo://price", "memo://city"):
                r = await s.call_tool("icore_read_resource", {"uri": uri})
                assert not r.is_error, text(r)
            # the text is the structured content's JSON (MCP), the value in both
            assert r.structured_content is not None
            assert json.loads(text(r)) == r.structured_content
            assert r.structured_content["text"] == "Porto"
            assert r.structured_content["version"]["record"]
            r = await s.call_tool("book", {"city": "Porto", "price": 100})
            assert not r.is_error, text(r)  # judged valid, not refused not_read
            r = await s.call_tool("icore_read_resource", {"uri": "fact://plan/goal"})
            assert json.loads(text(r))["text"] == '"Porto"'
            r = await s.call_tool("icore_read_resource", {"uri": "memo://secret"})
            assert r.is_error and "no resource a protected tool" in text(r)
            assert "memo://price" in text(r)
            await s.call_tool("set_price", {"value": "120"})  # the upstream changes it
            r = await s.call_tool("book", {"city": "Porto", "price": 100})
            assert r.is_error and "(stale)" in text(r)

    anyio.run(main)
    assert [x["tool"] for x in upstream_log(log)] == ["book", "set_price"]
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    reads = [x for x in lines if x.get("tool") == "resources/read"]
    assert {x["read"]["key"] for x in reads} >= {"memo://price", "memo://city",
                                                 "fact://plan/goal"}


def test_manifest_key_typos_name_the_key_meant(tmp_path: Path) -> None:
    """D6: top-level ``tool:`` and ``depends-on:`` are unknown keys with a did-you-mean
    (not ``Extra inputs are not permitted`` / ``depends_on: Field required``)."""
    import pytest

    from icore.mcp import GatewayManifestError, load_manifest

    up = "upstreams:\n  a: {command: python}\n"
    for body, path, line, meant in [
            ("tool:\n  book: {depends_on: ['memo://x']}\n", "tool", 3, "tools"),
            ("tools:\n  book:\n    depends-on: ['memo://x']\n", "tools.book.depends-on", 5,
             "depends_on")]:
        f = tmp_path / "m.yaml"
        f.write_text(up + body)
        with pytest.raises(GatewayManifestError) as ei:
            load_manifest(f)
        err = ei.value
        assert err.fields["path"] == path and err.fields["line"] == line, err
        assert f"did you mean `{meant}`?" in str(err), err


def test_missing_upstream_command_is_named(tmp_path: Path) -> None:
    """D6: an upstream command that does not exist: exit 1 naming the command."""
    import subprocess
    import sys

    from .conftest import env

    f = tmp_path / "m.yaml"
    f.write_text("upstreams:\n  wh: {command: pythonn-not-here, args: [x.py]}\n")
    p = subprocess.run([sys.executable, "-m", "icore", "mcp", str(f)], env=env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    assert "its command 'pythonn-not-here' was not found" in p.stderr.splitlines()[-1]


def test_put_fact_with_a_pattern_key_says_it_is_a_pattern(tmp_path: Path) -> None:
    """D6: ``icore_put_fact`` with ``fact://plan/*``: a pattern, not a fact (not "has no
    owner": the glob is the owner declaration)."""
    from .conftest import write_manifest

    log = tmp_path / "up.log"
    path = write_manifest(tmp_path, {"trip": stdio_upstream(log, 10)})

    async def main() -> None:
        async with stdio_gateway(path) as s:
            r = await s.call_tool("icore_put_fact", {"key": "fact://plan/*", "value": 1})
            said = text(r)
            assert r.is_error and "fact://plan/* is a pattern, not a fact" in said, said
            assert "e.g. fact://plan/NAME" in said

    anyio.run(main)



def test_versions_cite_what_they_replace_and_are_numbered_per_key(tmp_path: Path) -> None:
    """D7: each new version of a key names the version it replaces (``supersedes`` in the
    trace's record line), and the model-facing text numbers versions per key
    ("version 2" after one change, though the owner's record sequence is at 3)."""
    import json

    from .conftest import write_manifest

    log = tmp_path / "up.log"
    path = write_manifest(tmp_path, {"trip": stdio_upstream(log, 10)})

    async def main() -> None:
        async with stdio_gateway(path) as s:
            await s.read_resource("memo://price")
            await s.read_resource("memo://city")
            await s.call_tool("set_price", {"value": "120"})  # the upstream changes it
            r = await s.call_tool("book", {"city": "Porto", "price": 100})
            said = text(r)
            assert r.is_error and "(stale)" in said, said
            assert "memo://price = 120 (version 2)" in said, said
            r = await s.call_tool("icore_put_fact", {"key": "fact://plan/goal",
                                                     "value": "Faro"})
            assert "its head is version 2 (record seq" in text(r), text(r)

    anyio.run(main)
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    recs = [x["planfence"]["record"] for x in lines if "record" in x.get("planfence", {})]
    price = [r for r in recs if r["key"] == "memo://price"]
    assert [r["seq"] for r in price] == [1, 3]  # the owner's sequence spans its keys
    assert "supersedes" not in price[0]
    assert price[1]["supersedes"] == price[0]["id"] and price[1]["parents"] == []
    import subprocess
    import sys

    from .conftest import env
    p = subprocess.run([sys.executable, "-m", "icore", "audit", str(tmp_path / "trace.jsonl"),
                        "--fail-on", "invalid"], env=env(), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr  # the audit reads the supersedes links
