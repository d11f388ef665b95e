"""Arguments checked against the tool's input schema, formats included (QA r7-mcp D5).

The SDK's real client calls, over stdio, an SDK upstream tool whose parameters are a
``datetime.date`` (schema ``format: date``), an optional ``datetime.datetime`` and an
optional ``uuid.UUID``: a bad value is refused by the gateway naming the argument and the
format expected, never reaches the upstream, and a protected call so refused is a blocked
action in the audit (it used to be forwarded and counted valid).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
from hypothesis import given
from hypothesis import strategies as st

from icore.integrations import read_refusal
from icore.mcp._gateway_args import FORMATS, ArgChecks

from .conftest import env, stdio_gateway, stdio_upstream, text, upstream_log, write_manifest

GOAL = "fact://plan/goal"


def _audit(trace: Path, folder: Path) -> dict[str, Any]:
    out = folder / "audit.json"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(trace), "--json",
                          str(out), "--fail-on", "invalid"], capture_output=True, text=True,
                         env=env(), timeout=120, check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    return dict(json.loads(out.read_text(encoding="utf-8")))


def test_a_bad_date_is_refused_naming_the_argument_and_never_forwarded(
        tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(log, 10)})
    import yaml
    m = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    m["tools"] = {"book_day": {"depends_on": [GOAL]}}
    manifest.write_text(yaml.safe_dump(m), encoding="utf-8")
    bad = [({"day": "2026-13-45"}, "day", "date", "YYYY-MM-DD"),
           ({"day": "06/12/2026"}, "day", "date", "YYYY-MM-DD"),
           ({"day": "2026-12-06", "at": "tomorrow"}, "at", "date-time", "ISO 8601"),
           ({"day": "2026-12-06", "ref": "42"}, "ref", "uuid", "a UUID")]
    good = [{"day": "2026-12-06"},
            {"day": "2026-12-06", "at": "2026-12-06T10:30"},  # no offset: servers take it
            {"day": "2026-12-06", "ref": str(uuid.UUID(int=7))}]

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource(GOAL)
            for extra, arg, fmt, expected in bad:
                r = await s.call_tool("book_day", {"city": "Porto", **extra})
                said = text(r)
                assert r.is_error, said
                # a gate refusal like every other (#25): its head, _meta, and the
                # schema's complaint as its detail; an in-process recorder reads it so
                assert said.startswith("PlanFence blocked book_day (invalid_arguments): "), said
                assert "\nDetail: Invalid arguments for tool book_day: " in said, said
                gate = r.meta["icore/gate"]
                assert gate["reason"] == "invalid_arguments", gate
                assert gate["deps"] == [GOAL] and gate["problem"].startswith(f"{arg}: ")
                seen = read_refusal(said, "book_day")
                assert seen is not None and seen.reason == "invalid_arguments", said
                assert f"{arg}: {extra[arg]!r} is not a valid {fmt}" in said, said
                assert expected in said, said
            for args in good:
                r = await s.call_tool("book_day", {"city": "Porto", **args})
                assert not r.is_error, text(r)

    anyio.run(main)
    got = [x["args"]["day"] for x in upstream_log(log) if x["tool"] == "book_day"]
    assert got == ["2026-12-06"] * len(good)  # no bad value reached the upstream
    run = _audit(tmp_path / "trace.jsonl", tmp_path)["runs"][0]
    assert run["actions"]["total"] == len(bad) + len(good), run["actions"]
    assert run["actions"]["valid"] == len(good), run["actions"]
    assert run["actions"]["blocked"] == len(bad), run["actions"]
    reasons = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    blocked = [x["planfence"]["decision"] for x in reasons
               if "decision" in x.get("planfence", {})
               and x["planfence"]["decision"]["outcome"] == "blocked"]
    assert [d["reason"] for d in blocked] == ["invalid_arguments"] * len(bad)


def _checks(props: dict[str, Any]) -> ArgChecks:
    tool = SimpleNamespace(input_schema={"type": "object", "properties": props})
    return ArgChecks(lambda: {"t": tool})


@given(st.dates(), st.datetimes(), st.uuids(), st.times())
def test_every_value_python_writes_passes(day: dt.date, at: dt.datetime, ref: uuid.UUID,
                                          tod: dt.time) -> None:
    checks = _checks({k: {"type": "string", "format": k} for k in FORMATS})
    args = {"date": day.isoformat(), "date-time": at.isoformat(), "uuid": str(ref),
            "time": tod.isoformat()}
    assert checks.problem("t", args) is None
    assert checks.problem("t", {"uuid": ref.hex}) is None  # no dashes: servers take it


@given(st.one_of(st.text(max_size=12), st.from_regex(r"\A\d{4}-\d{2}-\d{2}\Z")))
def test_a_date_passes_only_if_it_is_a_real_day_written_yyyy_mm_dd(value: str) -> None:
    try:
        real = re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value) is not None \
            and dt.date.fromisoformat(value) is not None
    except ValueError:
        real = False
    problem = _checks({"d": {"type": "string", "format": "date"}}).problem("t", {"d": value})
    assert (problem is None) == real, (value, problem)


def test_unchecked_formats_and_non_strings_are_left_to_the_schema() -> None:
    checks = _checks({"m": {"type": "string", "format": "email"},
                      "d": {"type": ["string", "integer"], "format": "date"}})
    assert checks.problem("t", {"m": "not an address"}) is None  # left to the upstream
    assert checks.problem("t", {"d": 20261206}) is None  # a format checks strings only
    said = checks.problem("t", {"d": 1.5})
    assert said is not None and said.startswith("d: ")
