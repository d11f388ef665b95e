"""One rule for the names of files icore writes: no surrogate in the path (issue 29).

``'run\\udc80.jsonl'`` (a name of bytes that are not UTF-8, as ``os.listdir`` or a shell's
``$'\\x80'`` gives it) is a name the file system takes, but icore writes the names of its
files into JSON (a ``--json`` report's ``file``, a trace's notes, the ``.icore-files``
ledger), where it came out as U+FFFD: a name no file has. Every writer refuses it before
anything is written, with a typed error naming the path: RunRecorder.write, the MCP
gateway's ``trace`` and ``otel: file:``, ``icore audit --out/--json/--otlp-endpoint
file:``, the span file and PROV-JSON exporters. Readers keep reading such files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests._cli import invoke

from icore.errors import IcoreError, IntegrationError
from icore.integrations import RunRecorder

BAD = ["run\udc80.jsonl", "r\udcffun.jsonl", "run\ud800.jsonl"]


def _recorder() -> RunRecorder:
    rec = RunRecorder()
    rec.task("book a trip")
    rec.finish("planner", "booked")
    return rec


@pytest.mark.parametrize("name", BAD, ids=ascii)
def test_run_recorder_refuses_a_surrogate_before_writing(tmp_path: Path, name: str) -> None:
    with pytest.raises(IntegrationError) as info:
        _recorder().write(tmp_path / "runs" / name)
    err = info.value
    assert isinstance(err, IcoreError)
    assert err.fields["argument"] == "path" and name in err.fields["path"]
    assert "surrogate" in str(err)
    assert os.listdir(tmp_path) == []  # no folder made, no ledger, no file


def test_a_utf8_name_is_still_written(tmp_path: Path) -> None:
    p = _recorder().write(tmp_path / "run-é.jsonl")
    assert p.is_file() and p.name == "run-é.jsonl"


@pytest.mark.parametrize("field", ["trace", "otel"])
def test_gateway_refuses_the_same_names(tmp_path: Path, field: str) -> None:
    pytest.importorskip("mcp")
    from icore.mcp import GatewayManifestError, load_manifest
    value = "run\\udc80.jsonl" if field == "trace" else "file:spans\\udc80.jsonl"
    m = tmp_path / "gw.yaml"
    m.write_text(f'upstreams:\n  a: {{command: python}}\n{field}: "{value}"\n',
                 encoding="utf-8")
    with pytest.raises(GatewayManifestError) as info:
        load_manifest(m)
    assert info.value.fields["path"] == field and "surrogate" in str(info.value)


def test_gateway_trace_resolved_in_a_folder_named_in_bytes(tmp_path: Path) -> None:
    """A relative ``trace`` in a manifest whose folder name is not UTF-8: refused at the
    check before any upstream starts (the folder is where the trace goes)."""
    pytest.importorskip("mcp")
    from icore.mcp import Gateway, GatewayManifestError, load_manifest
    folder = tmp_path / "gw\udc80"
    folder.mkdir()
    m = folder / "gw.yaml"
    m.write_text("upstreams:\n  a: {command: python, args: [nowhere.py]}\n"
                 "trace: t.jsonl\n", encoding="utf-8")
    with pytest.raises(GatewayManifestError) as info:
        Gateway(load_manifest(m))
    assert info.value.fields["path"] == "trace" and "surrogate" in str(info.value)
    assert sorted(os.listdir(folder)) == ["gw.yaml"]


@pytest.mark.parametrize("option", ["--json", "--out", "--otlp-endpoint"])
def test_audit_outputs_refuse_the_same_names(tmp_path: Path, option: str) -> None:
    runs = tmp_path / "runs"
    _recorder().write(runs / "run.jsonl")
    target = tmp_path / "o\udc80"
    value = f"file:{target}" if option == "--otlp-endpoint" else str(target)
    code, out = invoke("audit", str(runs), "--no-report" if option != "--out" else
                       "--report", option, value)
    assert code == 2, out
    assert "surrogate" in out
    assert sorted(os.listdir(tmp_path)) == ["runs"]


def test_audit_still_reads_a_trace_named_in_bytes(tmp_path: Path) -> None:
    """Readers are unchanged: a trace whose name is not UTF-8 is audited."""
    runs = tmp_path / "runs"
    _recorder().write(runs / "run.jsonl")
    os.rename(runs / "run.jsonl", runs / "run\udc80.jsonl")
    code, out = invoke("audit", str(runs), "--no-report", "--json", str(tmp_path / "s.json"))
    assert code == 0, out
    assert len(json.loads((tmp_path / "s.json").read_text())["runs"]) == 1


def test_team_certs_folder_refuses_the_same_names(tmp_path: Path) -> None:
    """``init_team_certs`` (the API behind ``icore certs --dir``) as the command does."""
    from icore.net import TeamManifestError, init_team_certs
    with pytest.raises(TeamManifestError) as info:
        init_team_certs(tmp_path / "certs\udc80", ["a"], days=2)
    assert info.value.fields["field"] == "out_dir" and "surrogate" in str(info.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("make", ["OtlpJsonFileExporter", "write_prov"])
def test_exporters_refuse_the_same_names(tmp_path: Path, make: str) -> None:
    from icore.adapters import ExportError
    path = tmp_path / "x\udc80.json"
    from icore.adapters import OtlpJsonFileExporter, write_prov
    state: Any = _recorder().audit().state
    call = (lambda: OtlpJsonFileExporter(path)) if make == "OtlpJsonFileExporter" else \
        (lambda: write_prov(state, path, run_id="r"))
    with pytest.raises(ExportError) as info:
        call()
    assert info.value.fields["field"] == "path" and "surrogate" in str(info.value)
    assert os.listdir(tmp_path) == []
