"""Issue 29 at the command line: no traceback from any input, nothing the user has is
destroyed, and failures are said (exit 1 input, 2 usage, a message naming what)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tests._cli import invoke as _invoke

_RUN = ['{"run": {"id": "%s", "succeeded": false}}',
        '{"agent": "user", "kind": "task", "content": "add 2 and 2"}',
        '{"agent": "coder", "kind": "output", "content": "5"}',
        '{"agent": "coder", "kind": "termination", "content": "done", "final_answer": "5"}']


def _trace(tmp_path: Path, run_id: str = "t", name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(_RUN).replace("%s", run_id) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize("flag", ["--json", "--otlp-endpoint"])
def test_an_output_that_is_an_input_is_refused(tmp_path: Path, flag: str) -> None:
    t = _trace(tmp_path)
    before = t.read_bytes()
    value = str(t) if flag == "--json" else f"file:{t}"
    code, out = _invoke("audit", str(t), "-o", str(tmp_path / "o"), flag, value)
    assert code == 2 and "is the input" in out and str(t) in out
    assert t.read_bytes() == before and not (tmp_path / "o").exists()
    link = tmp_path / "link.jsonl"  # the same file by another name
    link.symlink_to(t)
    code, _ = _invoke("audit", str(t), "--no-report", "--json", str(link))
    assert code == 2 and t.read_bytes() == before


def test_report_names_never_replace_the_index_or_each_other(tmp_path: Path) -> None:
    a = _trace(tmp_path, "index", "a.jsonl")
    b = _trace(tmp_path, "INDEX", "b.jsonl")
    long_id = "r" * 300
    c = _trace(tmp_path, long_id, "c.jsonl")
    d = _trace(tmp_path, "é" * 26, "d.jsonl")
    out = tmp_path / "o"
    code, text = _invoke("audit", str(a), str(b), str(c), str(d), "-o", str(out), "--prov",
                         "--json", str(tmp_path / "s.json"))
    assert code == 0, text
    names = sorted(p.name for p in out.glob("*.html"))
    assert "index.html" in names and len(names) == 5, names
    assert "index" in (out / "index.html").read_text() and all(len(n) < 120 for n in names)
    runs = json.loads((tmp_path / "s.json").read_text())["runs"]
    assert len({r["report"] for r in runs}) == 4


def test_an_undeliverable_otlp_export_fails_unless_best_effort(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    t = _trace(tmp_path)
    t0 = time.monotonic()
    code, out = _invoke("audit", str(t), "--no-report", "--otlp-endpoint",
                        "http://127.0.0.1:1/v1/traces")
    assert code == 1 and "could not be delivered" in out, out
    code, out = _invoke("audit", str(t), "--no-report", "--otlp-endpoint",
                        "http://127.0.0.1:1/v1/traces", "--otlp-best-effort")
    assert code == 0 and "warning" in out
    assert time.monotonic() - t0 < 100


def test_llm_attribution_unreachable_is_a_typed_error(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    t = _trace(tmp_path)
    code, out = _invoke("audit", str(t), "--no-report", "--attribution", "--llm-base-url",
                        "http://127.0.0.1:1/v1")
    assert code == 1 and "http://127.0.0.1:1/v1" in out and "Traceback" not in out
    code, out = _invoke("audit", str(t), "--llm-base-url", "http://127.0.0.1:1/v1")
    assert code == 2 and "--attribution" in out


def test_max_input_size_option(tmp_path: Path) -> None:
    t = _trace(tmp_path)
    code, out = _invoke("audit", str(t), "--no-report", "--max-input-mb", "0.0001")
    assert code == 1 and "input limit" in out and "t.jsonl" in out
    for bad in ("nan", "0", "-1", "inf"):
        code, out = _invoke("audit", str(t), "--no-report", "--max-input-mb", bad)
        assert code == 2, (bad, out)


@pytest.mark.parametrize("args", [["audit", ""], ["audit", "t.jsonl", "", "-o", "o"],
                                  ["audit", "t.jsonl", "-o", ""],
                                  ["audit", "t.jsonl", "-o", "o", "--json", " "],
                                  ["run", ""], ["run", "--out", ""],
                                  ["certs", "init", "--dir", "", "--agent", "a"],
                                  ["serve", ""]])
def test_an_empty_path_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        args: list[str]) -> None:
    """``Path("")`` is the current folder: an empty PATH, --out, --json or MANIFEST (an
    unset shell variable) is refused naming it (exit 2), nothing read or written."""
    monkeypatch.chdir(tmp_path)
    _trace(tmp_path)
    code, out = _invoke(*args)
    assert code == 2, out
    assert "an empty path" in out and "Traceback" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


@pytest.mark.timeout(60)
def test_a_folder_holding_a_fifo_is_audited_and_the_fifo_named(tmp_path: Path) -> None:
    """A FIFO (whatever its name) or a broken link inside a
    folder is never opened (the audit would block on a FIFO) and is named in a warning
    line; the folder's traces are audited as usual."""
    import os

    from icore.adapters import scan_paths

    runs = tmp_path / "runs"
    (runs / "sub").mkdir(parents=True)
    _trace(runs)
    os.mkfifo(runs / "pipe.jsonl")
    os.mkfifo(runs / "sub" / "fifo")
    (runs / "dead.json").symlink_to(tmp_path / "nowhere")
    (runs / "sub" / "self.json").symlink_to("self.json")  # a link loop
    scan = scan_paths([runs])
    assert scan.files == (runs / "t.jsonl",)
    assert [(p.name, why[:21]) for p, why in scan.skipped] == [
        ("dead.json", "is a symbolic link to"), ("pipe.jsonl", "is a FIFO (named pipe"),
        ("fifo", "is a FIFO (named pipe"), ("self.json", "is a symbolic link to")]
    code, out = _invoke("audit", str(runs), "--no-report")
    assert code == 0, out
    for name in ("pipe.jsonl", "fifo", "dead.json"):
        assert f"warning skipped {runs}" in out and f"{name}: is a" in out, out
    (runs / "t.jsonl").unlink()
    code, out = _invoke("audit", str(runs), "--no-report")
    assert code == 2 and "pipe.jsonl: is a FIFO" in out and "no trace files found" in out


@pytest.mark.parametrize("args", [["run", "--seeds", ""], ["run", "--seeds", ","],
                                  ["bench", "otel", "--seeds", ""],
                                  ["bench", "otel", "--seeds", " , "]])
def test_an_empty_seeds_list_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              args: list[str]) -> None:
    """``--seeds ''`` names no seed: exit 2 naming ``--seeds`` before any work (it was
    read as "not given": the manifest's seeds, or every seed)."""
    monkeypatch.chdir(tmp_path)
    code, out = _invoke(*args)
    assert code == 2 and "--seeds" in out and "names no value" in out, out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target", ["/proc/version", "/dev/full"])
def test_an_unwritable_json_target_is_refused_before_the_audit(tmp_path: Path,
                                                              target: str) -> None:
    """``/proc/version`` opens for writing and fails at the first write (EIO), so does
    ``/dev/full`` (ENOSPC): refused up front (exit 2, naming --json and why), not after
    the whole audit."""
    if not Path(target).exists():
        pytest.skip(f"no {target} here")
    t = _trace(tmp_path)
    code, out = _invoke("audit", str(t), "-o", str(tmp_path / "o"), "--json", target)
    assert code == 2 and "--json" in out and target in out, out
    assert "imported and audited" not in out and not (tmp_path / "o").exists()


def test_an_existing_json_file_is_probed_without_a_change(tmp_path: Path) -> None:
    from icore.cli._writable import write_probe

    p = tmp_path / "s.json"
    p.write_text("keep")
    before = p.stat()
    assert write_probe(p) is None
    assert p.read_text() == "keep" and p.stat().st_mtime_ns == before.st_mtime_ns
    assert write_probe(Path("/dev/null")) is None


def test_skipped_entries_are_in_the_json_summary(tmp_path: Path) -> None:
    """The ``warning skipped`` lines (a FIFO, a broken link in an audited folder) are in
    --json too, as ``skipped``: ``{"path", "why"}``."""
    import os

    runs = tmp_path / "runs"
    runs.mkdir()
    _trace(runs)
    os.mkfifo(runs / "pipe.jsonl")
    (runs / "dead.json").symlink_to(tmp_path / "nowhere")
    code, out = _invoke("audit", str(runs), "--no-report", "--json", str(tmp_path / "s.json"))
    assert code == 0, out
    skipped = json.loads((tmp_path / "s.json").read_text())["skipped"]
    assert sorted(Path(s["path"]).name for s in skipped) == ["dead.json", "pipe.jsonl"]
    assert all(s["why"].startswith("is a") for s in skipped)
