"""A model's argument value filling a ``{placeholder}`` of D(a) is literal (QA r8-ag2mcp D5).

``fact://hold/{city}`` with ``city="*"`` used to be matched as a glob against the facts
the gateway knew, so the call was validated against other facts and forwarded. Checked
with a real ``icore mcp`` subprocess and the SDK's client over stdio: such a call is
refused ``not_read`` (typed, the argument named), never reaches the upstream and is
audited blocked; a pattern written in the manifest itself still matches, with the
filled value escaped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from icore.mcp import expand_deps

from .conftest import env, stdio_gateway, stdio_upstream, text, upstream_log, write_manifest

KNOWN = ["fact://hold/porto", "fact://hold/faro", "fact://hold/p*rto"]


def _manifest(folder: Path) -> Path:
    path = write_manifest(folder, {"trip": stdio_upstream(folder / "up.log", 5.0)})
    m = yaml.safe_load(path.read_text(encoding="utf-8"))
    m["facts"] = {"owners": {"fact://hold/*": "keeper"},
                  "initial": {"fact://hold/porto": False, "fact://hold/faro": False}}
    m["tools"] = {"book": {"depends_on": ["fact://hold/{city}"]},
                  "book_lane": {"depends_on": ["fact://hold/{lane}*"]}}
    path.write_text(yaml.safe_dump(m), encoding="utf-8")
    return path


def test_glob_argument_never_forwarded_and_a_manifest_pattern_still_works(
        tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    said: dict[str, str] = {}

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            for k in ("porto", "faro"):
                await s.call_tool("icore_read_resource", {"uri": f"fact://hold/{k}"})
            for city in ("*", "p?rto", "[pf]orto", "porto\x00"):
                r = await s.call_tool("book", {"city": city, "price": 1})
                assert r.is_error, text(r)
                assert r.meta["icore/gate"]["reason"] == "not_read"
                assert r.meta["icore/gate"]["arguments"] == ["city"]
                said[city] = text(r)
            r = await s.call_tool("book_lane", {"city": "x", "lane": "*"})
            assert r.is_error and r.meta["icore/gate"]["reason"] == "not_read", text(r)
            r = await s.call_tool("book", {"city": "nosuch", "price": 1})
            assert r.is_error and "never written" in text(r), text(r)
            r = await s.call_tool("book", {"city": "porto", "price": 2})
            assert not r.is_error, text(r)
            r = await s.call_tool("book_lane", {"city": "porto", "lane": "por"})
            assert not r.is_error, text(r)  # the manifest's own '*' matched porto

    anyio.run(main)
    msg = said["*"]
    assert "(not_read)" in msg and "city='*'" in msg and "not a valid key" in msg
    assert "literal characters, not a pattern" in msg and "not made" in msg
    calls = [(e["tool"], e["args"]) for e in upstream_log(tmp_path / "up.log")]
    assert calls == [("book", {"city": "porto", "price": 2}),
                     ("book_lane", {"city": "porto", "lane": "por", "note": None})]
    out = tmp_path / "audit.json"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(tmp_path / "trace.jsonl"),
                          "--json", str(out)], capture_output=True, text=True, env=env(),
                         timeout=120, check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    run = json.loads(out.read_text(encoding="utf-8"))["runs"][0]
    assert run["actions"]["valid"] == 2 and run["actions"]["blocked"] == 6
    assert run["summary"]["hard_flags"] == 0
    assert "{'city': '*'}" in run["lineage"][0]["reason"]


@pytest.mark.parametrize(("entry", "args", "want"), [
    ("fact://hold/{city}", {"city": "*"}, {"fact://hold/*"}),
    ("fact://hold/{city}", {"city": "porto"}, {"fact://hold/porto"}),
    ("fact://hold/*", {}, {"fact://hold/porto", "fact://hold/faro", "fact://hold/p*rto"}),
    ("fact://hold/{c}*", {"c": "p*"}, {"fact://hold/p*rto"}),
    ("fact://hold/{c}*", {"c": "p?"}, set()),
    ("fact://hold/{c}*", {"c": "[pf]"}, set()),
])
def test_expand_deps_keeps_filled_values_literal(entry: str, args: dict[str, str],
                                                 want: set[str]) -> None:
    assert expand_deps([entry], args, KNOWN) == frozenset(want)


@given(st.text(alphabet="*?[]!abc/", max_size=8))
def test_a_filled_value_never_matches_more_than_its_literal_key(value: str) -> None:
    """Invariant: a placeholder-only entry gives exactly the literal key; an entry with
    the manifest's own ``*`` after the value matches only keys starting with it."""
    known = [f"k/{value}", f"k/{value}x", "k/abc", "k/a", "k/"]
    assert expand_deps(["k/{v}"], {"v": value}, known) == {f"k/{value}"}
    got = expand_deps(["k/{v}*"], {"v": value}, known)
    assert all(k.startswith(f"k/{value}") for k in got)
    assert {f"k/{value}", f"k/{value}x"} <= got
