"""Wrong output paths and an incomplete LLM backend are usage errors (exit 2, ``error:``
naming the input), found before any work is done and without touching what exists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests._cli import CLI_ENV as _ENV
from tests._cli import one_run_folder as _runs
from typer.testing import CliRunner

from icore.cli import app


@pytest.mark.parametrize("command", [["audit", "RUNS", "-o", "OUT"],
                                     ["bench", "state", "--quick"]])
def test_json_to_a_folder_or_below_a_file_is_refused_up_front(
        tmp_path: Path, magentic: dict[str, Any], command: list[str]) -> None:
    """``--json`` naming a folder, or a file below a file (its folder cannot be
    created): exit 2 before the command runs (no reports written)."""
    runs, out = _runs(tmp_path, magentic), tmp_path / "out"
    (tmp_path / "notes.txt").write_text("keep me", encoding="utf-8")
    args = [{"RUNS": str(runs), "OUT": str(out)}.get(a, a) for a in command]
    for target, words in ((tmp_path, "is a folder"),
                          (tmp_path / "notes.txt" / "x.json", "is a file, not a folder")):
        res = CliRunner().invoke(app, [*args, "--json", str(target)], env=_ENV)
        assert res.exit_code == 2, res.output
        assert "error:" in res.output and words in res.output and str(target) in res.output
        assert not out.exists()


def test_json_in_a_missing_folder_is_written_there_as_out_is(
        tmp_path: Path, magentic: dict[str, Any]) -> None:
    """``--out reports/x --json reports/x.json`` with no ``reports/`` yet (QA r4-ag2 D8):
    both are written, the JSON's missing folders created as ``--out``'s are; the JSON
    naming the input is still refused."""
    runs = _runs(tmp_path, magentic)
    reports = tmp_path / "reports"
    res = CliRunner().invoke(app, ["audit", str(runs), "--out", str(reports / "x"),
                                   "--json", str(reports / "deep" / "x.json")], env=_ENV)
    assert res.exit_code == 0, res.output
    assert json.loads((reports / "deep" / "x.json").read_text(encoding="utf-8"))
    assert (reports / "x").is_dir()
    res = CliRunner().invoke(app, ["audit", str(runs / "1.json"), "--no-report",
                                   "--json", str(runs / "1.json")], env=_ENV)
    assert res.exit_code == 2 and "is the input" in res.output


@pytest.mark.parametrize("command", [["audit", "RUNS"], ["run"]])
def test_out_naming_a_file_is_refused_and_the_file_kept(
        tmp_path: Path, magentic: dict[str, Any], command: list[str]) -> None:
    """``--out`` naming an existing file: exit 2 naming it; the file is left as it was."""
    runs = _runs(tmp_path, magentic)
    target = tmp_path / "notes.txt"
    target.write_text("keep me", encoding="utf-8")
    args = [str(runs) if a == "RUNS" else a for a in command]
    res = CliRunner().invoke(app, [*args, "--out", str(target)], env=_ENV)
    assert res.exit_code == 2, res.output
    assert "error: --out" in res.output and "not a folder" in res.output
    assert target.read_text(encoding="utf-8") == "keep me"


def test_llm_backend_without_a_model_is_a_usage_error(tmp_path: Path) -> None:
    """``--backend llm`` with a base URL but no model (flag, manifest or environment):
    exit 2 naming what is missing, no traceback, no run folder."""
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--backend", "llm", "--llm-base-url",
                                   "http://127.0.0.1:9/v1", "--out", str(out)], env=_ENV)
    assert res.exit_code == 2, res.output
    assert "needs a model" in res.output and "--llm-model" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert not out.exists()


@pytest.mark.parametrize(("text", "words"), [
    ("garbage, not json", "not JSON"), ("", "empty file"),
    ('{"history": [', "truncated JSON"), ('{"a": 1,, "b": 2}', "malformed JSON"),
    ('{"hello": 1}', "history: missing field (a .json file is read as a Who&When trace")])
def test_unreadable_trace_says_what_it_is(tmp_path: Path, text: str, words: str) -> None:
    """A .json that is prose, empty, cut short, broken or of no known format: exit 1,
    ``error`` naming the file and what is wrong with it; nothing written."""
    bad = tmp_path / "x.json"
    bad.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["audit", str(bad), "--out", str(out)], env=_ENV)
    assert res.exit_code == 1, res.output
    assert f"error {bad}" in res.output and words in " ".join(res.output.split())
    assert not out.exists()


def test_earlier_run_in_the_current_folder_is_kept(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A second run with ``--out .`` (or a folder that contains the current one) cannot
    move the first aside: an ``error:`` naming the folder (was a ValueError traceback),
    and the first run's files are left as they were; a subfolder is still numbered."""
    from icore._files import MARKER, move_aside

    run = tmp_path / "here"
    (run / "sub").mkdir(parents=True)
    (run / "run.json").write_text("first", encoding="utf-8")
    (run / MARKER).write_text("", encoding="utf-8")  # icore's own earlier run (#29)
    monkeypatch.chdir(run)
    res = CliRunner().invoke(app, ["run", "--out", "."], env=_ENV)
    assert res.exit_code == 1, res.output
    assert "error:" in res.output and "current folder" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert (run / "run.json").read_text(encoding="utf-8") == "first"
    monkeypatch.chdir(run / "sub")
    with pytest.raises(OSError, match="current folder or contains it"):
        move_aside(Path(".."))
    (run / "sub" / "x").mkdir()
    assert move_aside(Path("x/")) == run / "sub" / "x.1"
    assert (run / "sub" / "x.1").is_dir() and not (run / "sub" / "x").exists()


@pytest.mark.parametrize("command", [["audit", "RUNS", "-o", "OUT"], ["run", "-o", "OUT"]])
def test_otlp_endpoint_that_is_no_url_is_a_usage_error(
        tmp_path: Path, magentic: dict[str, Any], command: list[str]) -> None:
    """``--otlp-endpoint notaurl``: exit 2 naming the option before any work (the audit
    used to run, print its table and then fail with exit 1)."""
    runs, out = _runs(tmp_path, magentic), tmp_path / "out"
    args = [{"RUNS": str(runs), "OUT": str(out)}.get(a, a) for a in command]
    res = CliRunner().invoke(app, [*args, "--otlp-endpoint", "notaurl"], env=_ENV)
    assert res.exit_code == 2, res.output
    assert "--otlp-endpoint" in res.output and "notaurl" in res.output
    assert not out.exists()


def test_policy_with_matched_is_a_usage_error(tmp_path: Path) -> None:
    """``--matched`` runs its own three policies, so a ``--policy`` beside it would be
    silently ignored: exit 2 naming --policy, before any agent starts (no run folder)."""
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--matched", "--policy", "planfence", "-o",
                                   str(out)], env=_ENV)
    assert res.exit_code == 2, res.output
    assert "--policy" in res.output and "--matched" in res.output
    assert not out.exists()


@pytest.mark.parametrize(("flags", "option", "words"), [
    (["--otlp-endpoint", "http://[::1"], "--otlp-endpoint", "not a URL"),
    (["--otlp-endpoint", "http://127.0.0.1:99999"], "--otlp-endpoint", "Port out of range"),
    (["--otlp-endpoint", "http://user:pw@:80/"], "--otlp-endpoint", "names no host"),
    (["--attribution", "--llm-base-url", "not a url"], "--llm-base-url", "http"),
    (["--attribution", "--llm-base-url", "file:///etc/passwd"], "--llm-base-url", "http"),
    (["--attribution", "--llm-mode", "bogus"], "--llm-mode", "hybrid"),
])
def test_flag_values_that_cannot_work_are_usage_errors_before_any_work(
        tmp_path: Path, magentic: dict[str, Any], flags: list[str], option: str,
        words: str) -> None:
    """An endpoint, base URL or mode that cannot work: exit 2 naming the option, before
    the audit runs or anything connects (it used to fail after the work with exit 1)."""
    runs, out = _runs(tmp_path, magentic), tmp_path / "out"
    res = CliRunner().invoke(app, ["audit", str(runs), "-o", str(out), *flags], env=_ENV)
    assert res.exit_code == 2, res.output
    assert option in res.output and words in res.output and "pw" not in res.output
    assert not out.exists()


_LONG = "a" * 5000


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize(("args", "flag", "why"), [
    (["audit", "RUNS", "--out", "/proc/icore-out"], "--out", "cannot create anything in /proc"),
    (["audit", "RUNS", "--out", "TMP/" + _LONG], "--out", "5000 bytes long"),
    (["audit", "RUNS", "--out", "TMP/" + "/".join(["d" * 10] * 460)], "--out",
     "over the system's limit"),
    (["audit", "RUNS", "--out", "TMP/runs/1.json/sub"], "--out", "is a file, not a folder"),
    (["audit", "RUNS", "--no-report", "--json", "/proc/icore.json"], "--json",
     "cannot create anything in /proc"),
    (["audit", "RUNS", "--no-report", "--json", "TMP/" + _LONG], "--json", "5000 bytes"),
    (["audit", "RUNS", "--no-report", "--otlp-endpoint", "file:/proc/x.jsonl"],
     "--otlp-endpoint", "cannot create anything in /proc"),
    (["audit", "RUNS", "--no-report", "--otlp-endpoint", "file:TMP/" + _LONG],
     "--otlp-endpoint", "5000 bytes"),
    (["run", "--out", "/proc/icore-run"], "--out", "cannot create anything in /proc"),
    (["run", "--out", "TMP/" + _LONG], "--out", "5000 bytes long"),
    (["certs", "init", "--dir", "/proc/icore-certs", "--agent", "a"], "--dir",
     "cannot create anything in /proc"),
    (["certs", "init", "--dir", "TMP/" + _LONG, "--agent", "a"], "--dir", "5000 bytes"),
])
def test_an_output_that_cannot_be_written_is_named_with_the_reason(
        tmp_path: Path, magentic: dict[str, Any], args: list[str], flag: str,
        why: str) -> None:
    """``--out /proc/...``, a 5000-character name or path, a folder on the way that is a
    file: exit 2 before any work, naming the option and the reason (not an ``[Errno]``
    after the audit or the run)."""
    runs = _runs(tmp_path, magentic)
    argv = [str(runs) if a == "RUNS" else a.replace("TMP", str(tmp_path)) for a in args]
    res = CliRunner().invoke(app, argv, env=_ENV)
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.replace("│", " ").split())
    assert flag in out and why in out and "Traceback" not in out and "Errno" not in out
    assert "characters)" in out or len(max(argv, key=len)) < 200  # long paths are cut
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
