"""The Gateway object in process (its upstreams real SDK servers over stdio): namespacing
on a clash, routing, the example manifest."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import anyio

from icore.mcp import Gateway, load_manifest, manifest_from_dict

from .conftest import stdio_upstream, text, upstream_log

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mcp"


def test_clashing_upstreams_are_namespaced_and_routed(tmp_path: Path) -> None:
    from mcp_types import CallToolRequestParams

    m = manifest_from_dict({"upstreams": {"a": stdio_upstream(tmp_path / "a.log", 10),
                                          "b": stdio_upstream(tmp_path / "b.log", 10)}})

    async def main() -> None:
        async with Gateway(m) as gw:
            gw.single_client = True
            names = set(gw.tools)
            assert {"a.echo", "b.echo", "a.book", "b.book"} <= names
            assert "echo" not in names  # every clashing name is namespaced
            assert gw.tool_defs["b.echo"].input_schema == gw.tool_defs["a.echo"].input_schema
            assert {"a.memo://price", "b.memo://price"} <= set(gw.resources)
            ctx = SimpleNamespace(session=None, meta=None)
            r = await gw._call_tool(ctx, CallToolRequestParams(name="b.echo",
                                                               arguments={"text": "to b"}))
            assert text(r) == "to b"

    anyio.run(main)
    assert not upstream_log(tmp_path / "a.log")
    assert [x["tool"] for x in upstream_log(tmp_path / "b.log")] == ["echo"]


def test_example_manifest_is_valid() -> None:
    m = load_manifest(EXAMPLES / "gateway.yaml")
    assert m.tools["book"].depends_on == ("memo://price", "memo://city",
                                          "fact://plan/budget")
    assert (EXAMPLES / "notes_server.py").is_file()


def test_owner_service_backend_validates_against_a_team_agent(tmp_path: Path) -> None:
    """store: owner-service - a fact owned by a team agent serving its own store over TCP
    with mutual TLS: the gateway reads it there, gates on its head, cannot write it."""
    from mcp_types import CallToolRequestParams, ReadResourceRequestParams

    from icore.net import ServerThread, init_team_certs, server_context
    from icore.workspace import Workspace

    key = "fact://order/42"
    certs = init_team_certs(tmp_path / "certs", ["sales", "gateway"], team="t")
    sales = Workspace({key: "sales"})
    sales.put(key, {"city": "Berlin"})
    log = tmp_path / "up.log"
    with ServerThread(sales.stores["sales"], agent="sales",
                      ssl_context=server_context(certs, "sales")) as srv:
        m = manifest_from_dict({
            "upstreams": {"trip": stdio_upstream(log, 10)},
            "store": {"backend": "owner-service", "identity": "gateway",
                      "certs_dir": str(certs), "addresses": {"sales": f"127.0.0.1:{srv.port}"}},
            "facts": {"owners": {"fact://order/*": "sales"}},
            "tools": {"echo": {"depends_on": [key]}}})

        async def main() -> None:
            async with Gateway(m) as gw:
                gw.single_client = True
                ctx = SimpleNamespace(session=None, meta=None)
                got = await gw._read_resource(ctx, ReadResourceRequestParams(uri=key))
                assert "Berlin" in got.contents[0].text
                call = CallToolRequestParams(name="echo", arguments={"text": "ship"})
                assert text(await gw._call_tool(ctx, call)) == "ship"
                sales.put(key, {"city": "Munich"})  # the owner revises it in its process
                r = await gw._call_tool(ctx, call)
                assert r.is_error and "(stale)" in text(r) and "Munich" in text(r)
                assert text(await gw._call_tool(ctx, call)) == "ship"  # the one replan
                put = CallToolRequestParams(name="icore_put_fact",
                                            arguments={"key": key, "value": 1})
                r = await gw._call_tool(ctx, put)
                assert r.is_error and "sales" in text(r)

        anyio.run(main)
    assert [x["tool"] for x in upstream_log(log)] == ["echo", "echo"]
    sales.close()


def test_second_change_after_a_reread_of_the_same_versions_says_what_to_read(
        tmp_path: Path) -> None:
    """U5: after a stale refusal the session reads the handed-over versions again (no new
    plan); a later change blocks second_change, whose text names the resource and says
    that reading it now (a newer version) is what starts a new plan."""
    from mcp_types import CallToolRequestParams, ReadResourceRequestParams

    key = "fact://plan/goal"
    log = tmp_path / "up.log"
    m = manifest_from_dict({"upstreams": {"trip": stdio_upstream(log, 10)},
                            "facts": {"owners": {"fact://plan/*": "planner"},
                                      "initial": {key: "Porto"}},
                            "tools": {"echo": {"depends_on": [key]}}})

    async def main() -> None:
        async with Gateway(m) as gw:
            gw.single_client = True
            assert gw.facts is not None
            ctx = SimpleNamespace(session=None, meta=None)
            read = ReadResourceRequestParams(uri=key)
            call = CallToolRequestParams(name="echo", arguments={"text": "go"})
            await gw._read_resource(ctx, read)
            gw.facts.observe(key, "Faro")  # another writer
            r = await gw._call_tool(ctx, call)
            assert r.is_error and "(stale)" in text(r) and "Faro" in text(r)
            await gw._read_resource(ctx, read)  # the handed-over version, read again
            gw.facts.observe(key, "Lisbon")
            r = await gw._call_tool(ctx, call)
            said = text(r)
            assert r.is_error and "(second_change)" in said, said
            assert "reading those same versions again does not start a new plan" in said
            assert "read the resources named below again now" in said
            assert f"Changed: {key}" in said
            await gw._read_resource(ctx, read)  # a newer version: a new plan
            assert text(await gw._call_tool(ctx, call)) == "go"

    anyio.run(main)
    assert [x["tool"] for x in upstream_log(log)] == ["echo"]
