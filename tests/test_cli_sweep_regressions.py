"""Issue 29, bad-input sweep (tools/badinput_sweep.py): the causes it found, one test each.

Every case ends in a usage error (exit 2) or an input error (exit 1) naming the flag,
file or field, before any work: never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import invoke_cli as _invoke


@pytest.mark.parametrize(("value", "said"), [("bogus", "unknown family 'bogus'"),
                                             (",,", "names no family"),
                                             ("reservation,x", "unknown family 'x'")])
def test_bench_otel_unknown_family_is_a_usage_error(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    value: str, said: str) -> None:
    """It was a ValueError traceback after the 100,000-span import benchmark."""
    monkeypatch.chdir(tmp_path)
    code, out = _invoke("bench", "otel", "--families", value)
    assert code == 2 and "--families" in out and said in out, out
    assert list(tmp_path.iterdir()) == []


def test_no_trace_files_names_the_paths(tmp_path: Path) -> None:
    """An empty folder named ``x.jsonl`` said only "no trace files found"."""
    d = tmp_path / "x.jsonl"
    d.mkdir()
    code, out = _invoke("audit", str(d), "-o", str(tmp_path / "o"))
    assert code == 2 and "no trace files found" in out and str(d) in out, out


def test_demo_empty_out_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    """``demo --out ''`` ran the whole demo into the current folder."""
    monkeypatch.chdir(tmp_path)
    code, out = _invoke("demo", "--out", "", "--no-live")
    assert code == 2 and "--out" in out and "an empty path" in out, out
    assert list(tmp_path.iterdir()) == []


def test_serve_empty_agent_is_a_usage_error(tmp_path: Path) -> None:
    m = tmp_path / "team.yaml"
    m.write_text("version: 1\nteam: t\nagents:\n  - {id: a, role: planner, host: 127.0.0.1, "
                 "port: 0}\nownership: {'k/*': a}\n")
    code, out = _invoke("serve", str(m), "--agent", " ")
    assert code == 2 and "--agent" in out and "empty agent id" in out, out


_BIG = "1" * 5000


@pytest.mark.parametrize("text", [f"name: {_BIG}\n", "name: x\nwhen: 2026-13-45\n"])
@pytest.mark.parametrize("command", [["run", "{m}", "--out", "{o}"],
                                     ["certs", "init", "--manifest", "{m}"], ["mcp", "{m}"]])
def test_a_yaml_value_python_cannot_convert_is_an_input_error(
        tmp_path: Path, text: str, command: list[str]) -> None:
    """An int of 5000 digits (over Python's 4300-digit limit) or a date 2026-13-45 is a
    ValueError inside yaml.safe_load: it escaped every manifest loader as a traceback."""
    m = tmp_path / "m.yaml"
    m.write_text(text)
    code, out = _invoke(*[a.format(m=m, o=tmp_path / "o") for a in command])
    assert code in (1, 2) and "m.yaml" in out and "Traceback" not in out, out
    assert ("4300" in out or "month" in out), out


def test_a_declaration_value_python_cannot_convert_is_typed(tmp_path: Path) -> None:
    from icore.state import DeclarationPackageError, load_declaration

    p = tmp_path / "d.yaml"
    for text in (f"name: {_BIG}\n", "name: 2026-02-30\n"):  # named by line, as manifests
        p.write_text(text)
        with pytest.raises(DeclarationPackageError, match=r"(?s)cannot parse.*line 1"):
            load_declaration(p)


@pytest.mark.parametrize("args", [["planfence"], ["attribution"], ["icore"]])
@pytest.mark.parametrize(("value", "said"), [
    ("", "an empty path"), ("/dev/full", "exists and is not a folder"),
    ("/proc/x/y", "cannot be created")])
def test_bench_out_is_checked_before_the_benchmark(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   args: list[str], value: str,
                                                   said: str) -> None:
    """``bench planfence|attribution|icore --out`` of /proc/x/y or /dev/full ran the whole
    benchmark (minutes) before failing; ``--out ''`` wrote into the current folder."""
    if value and not Path(value.split("/x")[0]).exists():
        pytest.skip(f"no {value} here")
    monkeypatch.chdir(tmp_path)
    code, out = _invoke("bench", *args, "--out", value)
    assert code == 2 and "--out" in out and said in out, out
    assert list(tmp_path.iterdir()) == []


def test_a_huge_span_kind_is_shortened_in_the_warning(tmp_path: Path) -> None:
    """A 100 KB span kind (seed-1 sweep, ``field/jaeger/7``) made the "kept ... span(s) as
    events" warning 100 KB long; rich's automatic highlighting then spent over a minute
    of CPU on it after the audit. The kind is shortened and the CLI prints user text
    without highlighting."""
    kind = "x" * 100_000
    spans = [{"traceId": "ab" * 16, "spanId": f"{i:016x}", "name": f"s{i}",
              "startTimeUnixNano": str(i), "endTimeUnixNano": "9",
              "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": k}}],
              **({"parentSpanId": f"{1:016x}"} if i > 1 else {})}
             for i, k in ((1, "AGENT"), (2, kind))]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}),
                     encoding="utf-8")
    code, out = _invoke("audit", str(trace), "--out", str(tmp_path / "rep"))
    assert code == 0, out
    flat = " ".join(out.split())  # the console wraps long lines
    assert "(100000 characters) span(s) as events (no mapping)" in flat, out
    assert "x" * 100 not in flat and len(out) < 5_000, len(out)


_ROW = '{"agent": "u", "kind": "task", "content": "q", "run_id": "r1"}\n'


@pytest.mark.parametrize("flag", ["--json", "--otlp-endpoint"])
@pytest.mark.parametrize("name", ["s.json", "sub/s.jsonl", "x.otlp.jsonl"])
def test_a_trace_named_output_inside_an_input_folder_is_refused(tmp_path: Path, flag: str,
                                                                 name: str) -> None:
    """``audit runs --json runs/s.json`` wrote the summary among the traces: the next
    ``audit runs`` read it as a broken Who&When trace (exit 1)."""
    runs = tmp_path / "runs"
    (runs / "sub").mkdir(parents=True)
    (runs / "t.jsonl").write_text(_ROW)
    target = runs / name
    value = f"file:{target}" if flag == "--otlp-endpoint" else str(target)
    code, out = _invoke("audit", str(runs), "--no-report", flag, value)
    assert code == 2 and flag in out and "inside the input folder" in out, out
    assert not target.exists() and sorted(p.name for p in runs.rglob("*")) == ["sub", "t.jsonl"]


def test_a_summary_beside_an_input_file_or_not_trace_named_is_written(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "t.jsonl").write_text(_ROW)
    for path, out_name in (([runs], "s.txt"), ([runs / "t.jsonl"], "s.json")):
        code, out = _invoke("audit", *map(str, path), "--no-report", "--json",
                            str(runs / out_name))
        assert code == 0 and (runs / out_name).is_file(), out


def test_certs_init_counts_a_repeated_agent_once(tmp_path: Path) -> None:
    """``--agent a --agent a`` said "2 agent certificates" for the one it wrote."""
    code, out = _invoke("certs", "init", "--dir", str(tmp_path / "k"), "--agent", "a",
                        "--agent", "a", "--days", "1")
    assert code == 0 and "1 agent certificates" in out, out
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == ["a.crt", "a.key", "ca.crt",
                                                                  "ca.key"]


def test_json_dash_is_a_usage_error_not_a_file_named_dash(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """``audit t.jsonl --json -`` wrote a file named ``-`` and said "JSON summary: -"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_text(_ROW)
    code, out = _invoke("audit", "t.jsonl", "--no-report", "--json", "-")
    assert code == 2 and "--json" in out and "stdout" in out, out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]
