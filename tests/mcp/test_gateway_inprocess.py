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
