"""Two real SDK upstreams serving the same resource template, static URI, tool and prompt
(QA r5-mcp D5): each shown ``<upstream>.<name>``, reads and calls routed, the bare form a
typed error naming the choices, a manifest naming it refused at start with its line."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
import yaml

from icore.mcp import Gateway, GatewayManifestError, load_manifest

from .conftest import HERE, stdio_gateway, text, upstream_log

OVEN = HERE / "upstream_oven.py"


def oven(site: str, log: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(OVEN)], "timeout_s": 10,
            "env": {"OVEN_SITE": site, "UPSTREAM_LOG": str(log)}}


def manifest(tmp: Path, tools: dict[str, Any]) -> Path:
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump({
        "name": "ovens", "upstreams": {"north": oven("north", tmp / "north.log"),
                                       "south": oven("south", tmp / "south.log")},
        "tools": tools, "trace": str(tmp / "trace.jsonl")}, sort_keys=False),
        encoding="utf-8")
    return path


PROTECTED = {"north.bake": {"depends_on": ["north.oven://{oven}/slot"],
                            "writes": ["north.oven://{oven}/slot"]}}


def test_the_same_template_of_two_upstreams_is_namespaced_and_routed(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError
    from mcp_types import (
        CallToolRequestParams,
        GetPromptRequestParams,
        ReadResourceRequestParams,
    )

    m = load_manifest(manifest(tmp_path, PROTECTED))

    async def read(gw: Gateway, ctx: Any, uri: str) -> Any:
        return await gw._read_resource(ctx, ReadResourceRequestParams(uri=uri))

    async def main() -> None:
        async with Gateway(m) as gw:
            gw.single_client = True
            ctx = SimpleNamespace(session=None, meta=None)
            shown = {t.uri_template for t in
                     (await gw._list_templates(ctx, None)).resource_templates}
            assert shown == {"north.oven://{oven}/slot", "south.oven://{oven}/slot"}
            assert {"north.oven://menu", "south.oven://menu"} <= set(gw.resources)
            assert {"north.bake", "south.bake"} <= set(gw.tools)
            got = await read(gw, ctx, "south.oven://a/slot")
            assert got.contents[0].text == "south:a:09:00"
            assert got.contents[0].uri == "south.oven://a/slot"  # as the client asked
            assert (await read(gw, ctx, "north.oven://menu")).contents[0].text == \
                "north menu"
            for bare in ("oven://a/slot", "oven://menu"):  # ambiguous: a typed error
                with pytest.raises(MCPError) as err:
                    await read(gw, ctx, bare)
                assert f"read north.{bare} or south.{bare}" in str(err.value)
            p = await gw._get_prompt(ctx, GetPromptRequestParams(
                name="south.plan_bake", arguments={"oven": "a"}))
            assert "south's oven a" in p.messages[0].content.text
            assert gw.facts is not None and gw.facts.owner_of("north.oven://a/slot") == \
                "north"
            # the protected tool of one upstream, on that upstream's templated resource
            call = CallToolRequestParams(name="north.bake",
                                         arguments={"oven": "a", "slot": "09:00"})
            r = await gw._call_tool(ctx, call)
            assert r.is_error and "(not_read)" in text(r)  # now read: north's, not south's
            assert "north:a:09:00" in text(r)
            assert text(await gw._call_tool(ctx, call)) == "north baked in a at 09:00"
            r = await gw._call_tool(ctx, call)  # its write re-read: a new version
            assert r.is_error and "(stale)" in text(r) and "north:a:10:00" in text(r)
            assert (await read(gw, ctx, "south.oven://a/slot")).contents[0].text == \
                "south:a:09:00"  # the other upstream's same URI is another fact

    anyio.run(main)
    assert [x["site"] for x in upstream_log(tmp_path / "north.log")] == ["north"]
    assert not upstream_log(tmp_path / "south.log")


@pytest.mark.parametrize(("part", "entry"), [("depends_on", "oven://{oven}/slot"),
                                             ("depends_on", "oven://menu"),
                                             ("writes", "oven://{oven}/slot")])
def test_a_manifest_naming_the_bare_form_is_refused_at_start(
        tmp_path: Path, part: str, entry: str) -> None:
    spec = {"depends_on": ["north.oven://menu"], part: [entry]}
    m = load_manifest(manifest(tmp_path, {"north.bake": spec}))

    async def main() -> None:
        async with Gateway(m):
            pass

    with pytest.raises(GatewayManifestError) as err:
        anyio.run(main)
    e = err.value
    assert e.fields["path"] == f"tools.north.bake.{part}.0"
    assert e.fields["line"] is not None and f"line {e.fields['line']}:" in e.message
    assert "ambiguous: upstreams north, south" in e.message
    assert f"'north.{entry}' or 'south.{entry}'" in e.message


def test_a_real_client_reads_both_through_the_stdio_gateway(tmp_path: Path) -> None:
    path = manifest(tmp_path, PROTECTED)

    async def main() -> None:
        async with stdio_gateway(path) as s:
            ts = await s.list_resource_templates()
            assert sorted(t.uri_template for t in ts.resource_templates) == [
                "north.oven://{oven}/slot", "south.oven://{oven}/slot"]
            for site in ("north", "south"):
                got = await s.read_resource(f"{site}.oven://b/slot")
                assert got.contents[0].text == f"{site}:b:09:00"
            r = await s.call_tool("north.bake", {"oven": "b", "slot": "09:00"})
            assert not r.is_error, text(r)

    anyio.run(main)
    assert len(upstream_log(tmp_path / "north.log")) == 1
