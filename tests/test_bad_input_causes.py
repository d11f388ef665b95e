"""Issue 29, third sweep round: one test per cause the widened sweep found.

New seeds and families (tools/badinput/api_types.py: wrong types at every argument of the
API's entry points; names_env.py: file names that are no UTF-8 and junk ``ICORE_*``
variables) and the soft cases of the last round: an unbound method wrapped as a tool, an
empty ``depends_on`` found only at call time, ``<root>`` named instead of the field, a
failed span append that could cut another writer's line.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import (
    AdapterError,
    ExportError,
    OtelExporter,
    OtlpJsonFileExporter,
    _otlp_file,
    audit_file,
    load_otlp,
    load_trace,
    load_who_and_when,
    read_prov,
    scan_paths,
    to_prov,
    traces_endpoint,
)
from icore.adapters._json_where import path_at, path_at_depth
from icore.errors import (
    DeclarationError,
    IcoreError,
    IntegrationError,
    MalformedRecord,
    OwnershipError,
)
from icore.fence import ProtectedTool
from icore.integrations import RunRecorder
from icore.live import load_manifest as live_load_manifest
from icore.mcp import load_manifest
from icore.memory import MemoryStore, OwnershipMap, SQLiteStore
from icore.net import TeamManifest, TeamManifestError, init_team_certs
from icore.records import Record
from icore.state import LogError, SQLiteLog, load_declaration
from icore.workspace import Workspace, WorkspaceError

ENV = {**os.environ, "COLUMNS": "200", "ICORE_LLM_BASE_URL": "", "ICORE_LLM_MODEL": "",
       "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
ROW = [{"agent": "u", "kind": "task", "content": "q"},
       {"agent": "a", "kind": "output", "content": "x"}]


def _tool(x: int) -> int:
    """Add."""
    return x


def _ws() -> tuple[Workspace, Any]:
    ws = Workspace({"k/*": "o"})
    ws.put("k/1", 1)
    ag = ws.agent("a")
    ag.read("k/1")
    return ws, ag


# --- wrapping: an unbound method, an empty or dict depends_on ---------------------------
class _Desk:
    def ship(self, city: str) -> str:
        """Ship."""
        return city

    @staticmethod
    def quote(city: str) -> str:
        """Quote."""
        return city


def test_an_unbound_method_is_refused_when_wrapped() -> None:
    """``Cls.method`` would make ``self`` a model argument: refused, saying why and how."""
    pytest.importorskip("langchain_core")
    from icore.integrations.langgraph import fenced_tool

    _, ag = _ws()
    with pytest.raises(IntegrationError, match=r"unbound method \(_Desk\.ship") as info:
        fenced_tool(_Desk.ship, depends_on={"k/1"}, agent=ag)
    assert "_Desk().ship" in str(info.value)
    fenced_tool(_Desk().ship, depends_on={"k/1"}, agent=ag)  # bound: fine
    fenced_tool(_Desk.quote, depends_on={"k/1"}, agent=ag)  # a staticmethod: fine


@pytest.mark.parametrize("deps", [set(), [], (), frozenset()])
def test_an_empty_depends_on_is_refused_where_it_is_declared(deps: Any) -> None:
    """Every call would block ``incomplete_declaration``: the declaration itself is refused."""
    with pytest.raises(DeclarationError, match="depends_on is empty"):
        ProtectedTool(_tool, depends_on=deps)
    _, ag = _ws()
    with pytest.raises(DeclarationError, match="depends_on is empty"):
        ag.execute("book", _tool, {"x": 1}, depends_on=deps)
    # a scope function returning no key is known only at the call: it blocks it
    assert ag.execute("book", _tool, {"x": 1}, depends_on=lambda a: set()).reason == \
        "incomplete_declaration"


def test_a_dict_is_no_depends_on() -> None:
    with pytest.raises(DeclarationError, match="not a dict"):
        ProtectedTool(_tool, depends_on={"k/1": "o"})


# --- the span file: a failed append never cuts another writer's line --------------------
def test_a_failed_append_keeps_another_writers_line(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A short write, then another writer (no lock) appends, then the disk is full."""
    p = tmp_path / "spans.otlp.jsonl"
    p.write_bytes(b'{"first": 1}\n')
    other = b'{"other": 2}\n'
    real_write = os.write
    calls = []

    def short_then_full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            n = real_write(fd, data[:5])
            with open(p, "ab") as f:  # a writer that takes no lock
                f.write(other)
            return n
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_otlp_file.os, "write", short_then_full)
    with pytest.raises(OSError, match="No space"):
        _otlp_file._append_whole(p, b'{"mine": 3, "long": "' + b"x" * 100 + b'"}\n')
    assert other in p.read_bytes()  # the old code cut the file back to before "mine"


def test_a_failed_append_alone_is_cut_back(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "spans.otlp.jsonl"
    p.write_bytes(b'{"first": 1}\n')
    real_write = os.write
    calls = []

    def short_then_full(fd: int, data: bytes) -> int:
        calls.append(1)
        if len(calls) == 1:
            return real_write(fd, data[:5])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_otlp_file.os, "write", short_then_full)
    with pytest.raises(OSError, match="No space"):
        _otlp_file._append_whole(p, b'{"mine": 3}\n')
    assert p.read_bytes() == b'{"first": 1}\n'


# --- the field, not <root> -------------------------------------------------------------
def test_path_at_names_the_field_of_a_byte() -> None:
    doc = b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"a": 1}, {"attributes": ' \
          b'[{"key": "x", "value": {"intValue": 12'
    assert path_at(doc, len(doc) - 1) == \
        "resourceSpans[0].scopeSpans[0].spans[1].attributes[0].value.intValue"
    assert path_at(b'{"x": 1}\n{"y": [1, {"z": "\\"q', 30) == "line 2.y[1].z"
    assert path_at('{"k": "\u00e9\u00e9", "n": 5', 24) == "n"  # text: a character index
    assert path_at(b"[1, 2", 4) == "[1]"
    assert path_at(b'{"a": 1}', 1) is None  # the top level: nothing to name


def test_path_at_depth_names_where_a_nesting_starts() -> None:
    deep = b'{"a": [1, 2, {"b": ' + b"[" * 1000
    got = path_at_depth(deep, 512)
    assert got is not None and got.startswith("a[2].b[0][0]") and "levels" in got
    assert path_at_depth(b"[" * 1000, 512) is None  # brackets from the top: no name


@pytest.mark.parametrize(("damage", "field"), [
    ("bad-utf8", "history[1].content"), ("deep", "history[1].content"),
    ("long-int", "history[1].content"), ("cut", "history[1]")])
def test_who_and_when_errors_name_the_field(tmp_path: Path, damage: str, field: str) -> None:
    text = json.dumps({"question": "q", "history": [
        {"role": "user", "content": "q"}, {"role": "a", "content": "HERE"}]})
    raw = {"bad-utf8": text.encode().replace(b"HERE", b"\xff\xfe"),
           "deep": text.replace('"HERE"', "[" * 5000 + "]" * 5000).encode(),
           "long-int": text.replace('"HERE"', "1" * 5000).encode(),
           "cut": text.encode()[:text.index("HERE")]}[damage]
    p = tmp_path / "run.json"
    p.write_bytes(raw)
    with pytest.raises(AdapterError) as info:
        load_who_and_when(p)
    assert info.value.field.startswith(field), info.value


@pytest.mark.parametrize("damage", ["deep", "long-int"])
def test_otlp_errors_name_the_field(tmp_path: Path, damage: str) -> None:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "s", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2", "attributes": [{"key": "k", "value": {"intValue": "HERE"}}]}
    text = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}, indent=1)
    bad = "[" * 2000 + "]" * 2000 if damage == "deep" else "1" * 5000
    p = tmp_path / "t.otlp.json"
    p.write_text(text.replace('"HERE"', bad))
    with pytest.raises(AdapterError) as info:
        load_otlp(p)
    assert info.value.field.startswith(
        "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue"), info.value


# --- a path that names no file ---------------------------------------------------------
_BAD_PATHS = [None, 5, b"x.jsonl", "", "a\x00b", "x\ud800", "n" * 300]


@pytest.mark.parametrize("path", _BAD_PATHS, ids=repr)
@pytest.mark.parametrize("load", [
    audit_file, load_trace, load_otlp, read_prov, OtlpJsonFileExporter, load_manifest,
    load_declaration, SQLiteLog, lambda p: RunRecorder().write(p), TeamManifest.load,
    lambda p: SQLiteStore(p, OwnershipMap({"k": "o"}), "o"),
    lambda p: init_team_certs(p, ["a"], days=2), live_load_manifest],
    ids=["audit_file", "load_trace", "load_otlp", "read_prov", "OtlpJsonFileExporter",
         "mcp.load_manifest", "load_declaration", "SQLiteLog", "RunRecorder.write",
         "TeamManifest.load", "SQLiteStore", "init_team_certs", "live.load_manifest"])
def test_a_path_that_names_no_file_is_a_typed_error(tmp_path: Path, monkeypatch:
                                                    pytest.MonkeyPatch, load: Any,
                                                    path: Any) -> None:
    monkeypatch.chdir(tmp_path)  # nothing is created next to the tests
    with pytest.raises(IcoreError):
        load(path)
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize(("kw", "field"), [
    ({"agents": "a"}, "agents"), ({"agents": [None]}, "agents"),
    ({"days": float("nan")}, "days"), ({"days": True}, "days"),
    ({"out_dir": "/dev/null"}, "out_dir")])
def test_certs_arguments_of_the_wrong_type(tmp_path: Path, kw: dict[str, Any],
                                           field: str) -> None:
    args: dict[str, Any] = {"out_dir": tmp_path / "c", "agents": ["a"], "days": 2, **kw}
    with pytest.raises(TeamManifestError) as info:
        init_team_certs(args.pop("out_dir"), args.pop("agents"), **args)
    assert info.value.fields["field"] == field and isinstance(info.value, ValueError)


@pytest.mark.parametrize("data", [None, [1], "x", 5])
def test_a_gateway_manifest_that_is_no_mapping(data: Any) -> None:
    from icore.mcp import GatewayManifestError, manifest_from_dict

    with pytest.raises(GatewayManifestError, match="is a mapping"):
        manifest_from_dict(data)


def test_a_prov_export_of_no_state_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="state must be"):
        to_prov(None)  # type: ignore[arg-type]
    with pytest.raises(LogError, match="log path"):
        SQLiteLog(None)  # type: ignore[arg-type]


def test_scan_paths_takes_one_path_and_skips_what_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in ROW) + "\n")
    # a str is one path, never the letters of its name ("/" was the root folder)
    assert scan_paths(str(tmp_path / "t.jsonl")).files == (tmp_path / "t.jsonl",)
    with pytest.raises(AdapterError, match="paths"):
        scan_paths(5)  # type: ignore[arg-type]
    (tmp_path / "locked").symlink_to("/proc/1/cwd")
    if os.access(tmp_path / "locked", os.R_OK):
        pytest.skip("this process may read /proc/1/cwd")
    got = scan_paths([tmp_path])
    assert got.files == (tmp_path / "t.jsonl",)
    assert [(p.name, "cannot be" in why) for p, why in got.skipped] == [("locked", True)]


# --- file names that are no UTF-8 ------------------------------------------------------
def test_outputs_named_with_bytes_that_are_no_utf8(tmp_path: Path) -> None:
    """The ledger of icore's files wrote the name as UTF-8: a traceback at ``--json``.

    Since #29 (h32seam) such an output name is refused up front (exit 2, no traceback,
    nothing written), as RunRecorder.write and the gateway's ``trace`` refuse it: icore
    names its files in JSON, where bytes that are not UTF-8 have no form.
    """
    t = tmp_path / "t.jsonl"
    t.write_text("\n".join(json.dumps(r) for r in ROW) + "\n")
    js, out = os.fsdecode(b"j\xfe.json"), os.fsdecode(b"o\xfe")
    for args in (["--json", js, "--out", "o"], ["--out", out]):
        r = subprocess.run([sys.executable, "-m", "icore", "audit", str(t), *args],
                           cwd=tmp_path, env=ENV, capture_output=True, timeout=120)
        assert r.returncode == 2 and b"Traceback" not in r.stderr, r.stderr[-800:]
        assert b"surrogate" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["t.jsonl"]


def test_a_file_name_that_is_no_utf8_is_no_trace_text(tmp_path: Path) -> None:
    p = tmp_path / os.fsdecode(b"r\xff.jsonl")
    p.write_text("\n".join(json.dumps(r) for r in ROW) + "\n")
    tr = load_trace(p)
    assert not any("surrogate" in w for w in tr.warnings)


# --- wrong types at the Workspace, the recorder, the stores, the exporter --------------
@pytest.mark.parametrize("call", [
    lambda ws, ag: ag.execute("b", _tool, {"x": 1}, depends_on={"k/1"}, approve=b"x"),
    lambda ws, ag: ag.execute("b", _tool, {"x": 1}, depends_on={"k/1"}, check=5),
    lambda ws, ag: ag.action_record("b", None, ["k/1"]),
    lambda ws, ag: ag.action_record("b", {"x": 1}, None),
    lambda ws, ag: ag.action_record("b", {"x": 1}, "k/1"),
    lambda ws, ag: ag.request_for("b", {"x": 1}, ["k/1"], turn={}),
    lambda ws, ag: ag.record({}),
    lambda ws, ag: ag.forget("k/1"),
    lambda ws, ag: ws.put("k/2", 1, inputs=float("nan")),
    lambda ws, ag: ws.commit("k/2", 1, expected=None, inputs=None),
    lambda ws, ag: ws.update("k/1", lambda v: 2, inputs=["x"]),
    lambda ws, ag: ws.commit("k/2", 1, expected=None, type={}),
    lambda ws, ag: ws.put("k/2", 1, by=-1),
], ids=["approve", "check", "args", "keys", "keys-str", "turn", "rid", "forget-str",
        "inputs-nan", "inputs-none", "inputs-str", "type", "by"])
def test_workspace_calls_refuse_wrong_types(call: Any) -> None:
    ws, ag = _ws()
    with pytest.raises(WorkspaceError):
        call(ws, ag)


@pytest.mark.parametrize(("call", "arg"), [
    (lambda r: r.add("a", "thought", "x", at=b"1"), "at"),
    (lambda r: r.add("a", "thought", "x", at=float("nan")), "at"),
    (lambda r: r.add("a", {}, "x"), "kind"),
    (lambda r: r.tool_call("a", {}, {"x": 1}, 2), "tool"),
    (lambda r: r.tool_call({}, "t", {"x": 1}, 2), "agent"),
    (lambda r: r.tool_call("a", "t", b"x", 2), "args")])
def test_recorder_refuses_wrong_types(call: Any, arg: str) -> None:
    with pytest.raises(IntegrationError) as info:
        call(RunRecorder())
    assert info.value.fields.get("argument") == arg


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_store_reads_refuse_wrong_types(tmp_path: Path, kind: str) -> None:
    own = OwnershipMap({"k": "o"})
    s = MemoryStore(own, "o") if kind == "memory" else SQLiteStore(tmp_path / "s.db", own, "o")
    for call in (lambda: s.head({}), lambda: s.get(None), lambda: s.heads(None),  # type: ignore[arg-type]
                 lambda: s.heads("k"), lambda: s.fetch([{}]), lambda: s.owner_seq([]),  # type: ignore[list-item,arg-type]
                 lambda: s.is_complete(b"x"), lambda: s.installed_head(5)):  # type: ignore[arg-type]
        with pytest.raises(OwnershipError):
            call()
    with pytest.raises(MalformedRecord):
        s.install(None)  # type: ignore[arg-type]
    # a key no store can hold (a lone surrogate) has no head: None, not a codec error
    assert s.head("k\ud800") is None and s.get("a\ud800") is None
    assert s.installed_head("k\ud800") is None and s.owner_seq("o\ud800") == 0
    assert own.owner_of({}) is None  # type: ignore[arg-type]
    s.close()


def test_exporter_arguments_of_the_wrong_type() -> None:
    for kw in ({"endpoint": 10**100}, {"endpoint": b"file:x"}, {"headers": ["a"]},
               {"headers": {"a": 1}}, {"capture_content": "yes"}):
        with pytest.raises(ExportError):
            OtelExporter(**kw)  # type: ignore[arg-type]
    with pytest.raises(ExportError, match="endpoint"):
        traces_endpoint(None)  # type: ignore[arg-type]


def test_record_create_is_untouched_by_the_store_checks() -> None:
    """The checks refuse types only: a store still commits and reads a plain record."""
    s = MemoryStore(OwnershipMap({"k": "o"}), "o")
    r = Record.create(key="k", owner="o", seq=1, content={})
    s.commit(r, writer="o")
    assert s.head("k") is not None and s.get(r.id) == r and s.fetch([r.id]) == [r]


def test_the_icore_command_loads_the_cli_behind_the_ctrl_c_guard() -> None:
    """``[project.scripts] icore`` and ``python -m icore`` both enter through
    :func:`icore._entry.main`, which loads the CLI's modules inside its Ctrl-C guard (the
    console script imported ``icore.cli`` before any guard; review of h29bad2)."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scripts = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]["scripts"]
    assert scripts["icore"] == "icore._entry:main"
    entry = (root / "src" / "icore" / "_entry.py").read_text("utf-8")
    head = entry.split("def main", 1)[0]
    assert "icore.cli" not in head.replace('"', "")  # nothing of the CLI before the guard
