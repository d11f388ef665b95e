"""A protected call whose arguments are too large to record (QA qa-mcp7 S4, #25).

An 8 MB argument was refused as ``args_not_json`` with the action record's internal key
and field in the detail. It is refused as ``args_too_large``, saying the size and the
limit, naming no internal key. Real processes: the SDK's client, ``icore mcp`` and the
test upstream (tests/mcp/upstream_server.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import stdio_gateway, stdio_upstream, text, upstream_log, write_manifest

pytestmark = pytest.mark.timeout(120)


def test_too_large_arguments_are_refused_as_such(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log", 10)})

    async def main() -> Any:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("memo://price")
            await s.read_resource("memo://city")
            return await s.call_tool("book", {"city": "P" * 8_000_000, "price": 100})

    r = anyio.run(main)
    said = text(r)
    assert r.is_error and r.meta["icore/gate"]["reason"] == "args_too_large", said[:500]
    assert "too large to record" in said and "4 MiB limit" in said, said[:500]
    for internal in ("planfence", "key=", "field=", "args_not_json"):
        assert internal not in said, said[:500]
    assert [x for x in upstream_log(tmp_path / "up.log") if x["tool"] == "book"] == []
    trace = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    assert "args_too_large" in trace and "key='planfence" not in trace
    # the trace keeps a bounded stand-in, not the 8 MB argument (QA qa-new18b #7)
    assert len(trace) < 200_000, len(trace)
    assert "icore/args_sha256" in trace and "icore/args_prefix" in trace
    assert "the trace keeps only their size, SHA-256" in said, said[:800]
