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
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.mcp import expand_deps
from icore.mcp._deps import glob_args
from icore.mcp._facts import bad_args_hint
from icore.records import MAX_KEY_LEN
from icore.workspace import WorkspaceError, arg_fault
from icore.workspace import bad_args_hint as ws_bad_args_hint
from icore.workspace._keys import fact_key

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
            for city in ("*", "p?rto", "[pf]orto", "porto\x00", "p" * 600):
                r = await s.call_tool("book", {"city": city, "price": 1})
                assert r.is_error, text(r)
                assert r.meta["icore/gate"]["reason"] == "not_read"
                assert r.meta["icore/gate"]["arguments"] == ["city"]
                said[city] = text(r)
            r = await s.call_tool("book_lane", {"city": "x", "lane": "*"})
            assert r.is_error and r.meta["icore/gate"]["reason"] == "not_read", text(r)
            r = await s.call_tool("book", {"city": "nosuch", "price": 1})
            # a key made from the model's argument that names no fact: it may correct it
            assert r.is_error and "nothing has been written under this key" in text(r), text(r)
            assert "made from your argument city='nosuch'" in text(r), text(r)
            r = await s.call_tool("book", {"city": "porto", "price": 2})
            assert not r.is_error, text(r)
            r = await s.call_tool("book_lane", {"city": "porto", "lane": "por"})
            assert not r.is_error, text(r)  # the manifest's own '*' matched porto

    anyio.run(main)
    msg = said["*"]
    assert "(not_read)" in msg and "city='*'" in msg and "not a valid key" in msg
    assert "literal characters, not a pattern" in msg and "not made" in msg
    # a value too long for a key: the same refusal (it used to be told "never written")
    assert f"longer than {MAX_KEY_LEN} characters" in said["p" * 600], said["p" * 600]
    calls = [(e["tool"], e["args"]) for e in upstream_log(tmp_path / "up.log")]
    assert calls == [("book", {"city": "porto", "price": 2}),
                     ("book_lane", {"city": "porto", "lane": "por", "note": None})]
    out = tmp_path / "audit.json"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(tmp_path / "trace.jsonl"),
                          "--json", str(out)], capture_output=True, text=True, env=env(),
                         timeout=120, check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    run = json.loads(out.read_text(encoding="utf-8"))["runs"][0]
    assert run["actions"]["valid"] == 2 and run["actions"]["blocked"] == 7
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


def test_the_manifests_own_glob_counts_as_its_shortest_match_for_length() -> None:
    """``fact://[ab]/{sku}`` with a 503-character sku matches the 512-character fact
    ``fact://a/<sku>``: no argument's fault; two characters more are (review #25)."""
    fits = "s" * (MAX_KEY_LEN - len("fact://a/"))
    assert glob_args(["fact://[ab]/{sku}"], {"sku": fits}) == {}
    assert glob_args(["fact://?/{sku}*"], {"sku": fits}) == {}
    assert glob_args(["fact://[ab]/{sku}"], {"sku": fits + "ss"}) == {"sku": fits + "ss"}


# -- one rule for the gateway and the workspace (#25) ---------------------------------
_ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, codec=None,
                          exclude_categories=())
"""Any code point, lone surrogates and NUL included."""
_VALUE = st.one_of(st.text(_ANY_CHAR, max_size=12),
                   st.text(_ANY_CHAR, min_size=MAX_KEY_LEN - 40, max_size=MAX_KEY_LEN + 40),
                   st.integers(), st.floats(allow_nan=False))
_NAME = st.text(_ANY_CHAR.filter(lambda c: c not in "{}[].:!"), min_size=1, max_size=6)


@settings(max_examples=400, deadline=None)
@given(_NAME, _VALUE, st.sampled_from(["fact://hold/{}", "memo://{}/rate",
                                       "fact://x/{}*", "fact://" + "p" * 400 + "/{}"]))
def test_glob_args_and_arg_fault_agree_on_arbitrary_keys(name: str, value: object,
                                                         entry: str) -> None:
    """The gateway's check (:func:`glob_args`) and the workspace's
    (:func:`icore.workspace.arg_fault`) refuse exactly the same values, and exactly those
    that make a key no fact can have (:func:`fact_key` refuses it) when the manifest's
    own text is a valid key: a glob character, a NUL, a lone surrogate or a key too
    long (they used to disagree on surrogates and length)."""
    pattern = entry.replace("{}", "{" + name + "}")
    key = entry.replace("{}", str(value))
    key = key[:-1] if entry.endswith("*") else key  # the shortest match: `*` is none
    args = {name: value}
    gateway = glob_args([pattern], args)
    workspace = arg_fault(key, {name: str(value)})
    assert bool(gateway) is (workspace is not None), (pattern, value, gateway, workspace)
    if gateway:
        assert gateway == {name: value} and workspace == (name, str(value))
    if "*" not in entry:  # a literal entry: refused exactly when no fact can be named so
        try:
            fact_key(key)
            nameable = True
        except WorkspaceError:
            nameable = False
        assert bool(gateway) is not nameable, (key, gateway)


def test_every_fault_gets_the_one_hint() -> None:
    """The gateway's text is the workspace's (one definition), naming why per fault."""
    long_v = "x" * (MAX_KEY_LEN + 1)
    for value, why in [("*", "literal characters, not a pattern"),
                       ("a\ud800", "lone surrogate"), ("a\x00", "a NUL"),
                       (long_v, f"longer than {MAX_KEY_LEN} characters")]:
        bad = glob_args(["fact://hold/{city}"], {"city": value})
        assert bad == {"city": value}
        said = bad_args_hint(bad, "book")
        assert said == ws_bad_args_hint({"city": value}, "book")
        assert why in said and "Call book again" in said
        said.encode("utf-8")  # a surrogate is shown escaped: the answer stays UTF-8
