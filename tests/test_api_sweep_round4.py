"""Issue 29, fourth sweep round (``api-more``): public helpers refuse wrong types typed.

Each raised a TypeError, AttributeError or bare ValueError from inside icore; now an
:class:`~icore.errors.IcoreError` naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from icore.adapters import AdapterError, parse_who_and_when_data
from icore.errors import IcoreError, MalformedRecord, TeamManifestError
from icore.integrations import normalize_args
from icore.live import LiveManifestError, default_manifest, make_task
from icore.mcp import expand_deps
from icore.net import check_agent_id
from icore.records import Record, ancestors, content_address, frontier
from icore.workspace import WorkspaceError, arg_fault, bad_args_hint

R0 = Record.create(key="k", owner="o", seq=1, content={})
LOOKUP = {R0.id: R0}.get

CALLS: list[tuple[str, Callable[[], Any], type[IcoreError], str]] = [
    ("default_manifest-list", lambda: default_manifest(["x"]),  # type: ignore[arg-type]
     LiveManifestError, "family"),
    ("make_task-bytes", lambda: make_task(b"reservation", 0),  # type: ignore[arg-type]
     LiveManifestError, "family"),
    ("make_task-seed", lambda: make_task("reservation", "/tmp"),  # type: ignore[arg-type]
     LiveManifestError, "seed"),
    ("check_agent_id-none", lambda: check_agent_id(None),  # type: ignore[arg-type]
     TeamManifestError, "agent"),
    ("check_agent_id-newline", lambda: check_agent_id("a\n"), TeamManifestError, "agent"),
    ("content_address-tuple", lambda: content_address(("k", 2)),  # type: ignore[arg-type]
     MalformedRecord, "content_bytes"),
    ("ancestors-lookup", lambda: ancestors(R0.id, "x"),  # type: ignore[arg-type]
     MalformedRecord, "lookup"),
    ("ancestors-root", lambda: ancestors(5, LOOKUP),  # type: ignore[arg-type]
     MalformedRecord, "root"),
    ("ancestors-root-long", lambda: ancestors("x" * 100_000, LOOKUP), MalformedRecord,
     "root"),
    ("frontier-roots", lambda: frontier(object(), ["k"], LOOKUP),  # type: ignore[arg-type]
     MalformedRecord, "roots"),
    ("frontier-deps", lambda: frontier([R0.id], float("-inf"), LOOKUP),  # type: ignore[arg-type]
     MalformedRecord, "deps"),
    ("frontier-deps-str", lambda: frontier([R0.id], "k", LOOKUP), MalformedRecord, "deps"),
    ("expand_deps-patterns", lambda: expand_deps(1.5, {}, []),  # type: ignore[arg-type]
     IcoreError, "patterns"),
    ("expand_deps-known", lambda: expand_deps(["k"], {}, object()),  # type: ignore[arg-type]
     IcoreError, "known"),
    ("expand_deps-args", lambda: expand_deps(["k/{x}"], "x" * 10, []),  # type: ignore[arg-type]
     IcoreError, "args"),
    ("arg_fault-key", lambda: arg_fault(["k"], {}),  # type: ignore[arg-type]
     WorkspaceError, "key"),
    ("bad_args_hint-keys", lambda: bad_args_hint({"x": "*"}, "book", 10**100),  # type: ignore[arg-type]
     WorkspaceError, "keys"),
    ("normalize_args-schema", lambda: normalize_args(float("inf"), {}),  # type: ignore[arg-type]
     IcoreError, "schema"),
    ("whowhen-file", lambda: parse_who_and_when_data({}, file=None),  # type: ignore[arg-type]
     AdapterError, "file"),
]


@pytest.mark.parametrize(("name", "call", "err", "field"), CALLS, ids=[c[0] for c in CALLS])
def test_a_wrong_type_is_a_typed_error_naming_the_argument(
        name: str, call: Callable[[], Any], err: type[IcoreError], field: str) -> None:
    with pytest.raises(err) as info:
        call()
    assert field in str(info.value), info.value
    assert isinstance(info.value, ValueError) or name.startswith(("expand_deps",
                                                                  "normalize_args"))


def test_the_good_calls_still_work() -> None:
    assert make_task("reservation", 0).family == "reservation"
    assert check_agent_id("planner.1") == "planner.1"
    assert set(ancestors(R0.id, LOOKUP)) == {R0.id}
    assert frontier([R0.id], ["k"], LOOKUP).versions == {"k": R0.id}
    assert content_address(b"{}") == content_address(bytearray(b"{}"))
    assert expand_deps(("k/{x}",), {"x": "a"}, ()) == frozenset({"k/a"})
    assert arg_fault("k/*", {"x": "*"}) == ("x", "*")
    assert "x='*'" in bad_args_hint({"x": "*"}, "book", ("k/*",))


@pytest.mark.timeout(30)
def test_a_span_file_that_is_a_fifo_nobody_reads_is_refused_not_waited_on(
        tmp_path: Any) -> None:
    """``OtlpJsonFileExporter(fifo)`` blocked forever opening it (seed 2027)."""
    import os

    from icore.adapters import ExportError, OtlpJsonFileExporter
    fifo = tmp_path / "spans.otlp.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ExportError, match="FIFO"):
        OtlpJsonFileExporter(fifo)


@pytest.mark.parametrize("action", ["k/\ud800", "bo\x00ok"])
def test_an_action_name_no_record_can_hold_is_refused_naming_action(action: str) -> None:
    """It was refused as the record's ``content``, naming no argument (seed 90001)."""
    from icore.workspace import Workspace
    ws = Workspace({"k/*": "o"})
    ws.put("k/1", 1)
    ag = ws.agent("a")
    ag.read("k/1")
    with pytest.raises(WorkspaceError, match="action is the tool's name"):
        ag.action_record(action, {"x": 1}, ["k/1"])

