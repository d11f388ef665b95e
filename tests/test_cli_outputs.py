"""Issue 29, second bad-input report (badinput D2, D3, D7, D8, D9): what a command writes.

- D2: an output that is one of the inputs is refused by the one shared check
  (``icore.cli.inputs.refuse_input_as_output``) in every command that writes, also
  through a symlink, a hard link or ``x/../``; two outputs on one file too.
- D3: a report or PROV file never replaces a file icore did not write (``.icore-files``).
- D7: one bad file never stops the others; its error names it.
- D8/D9: ``--otlp-endpoint`` credentials are never printed, undelivered spans end
  ``icore run`` with exit 1, ``--otlp-best-effort`` alone is a usage error.

Everything is written under ``tmp_path``; no device or system path is an output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from tests._cli import invoke as _invoke

from icore._files import WRITTEN, mark_folder

_RUN: list[dict[str, Any]] = [{"run": {"id": "r1", "orchestrator": "a"}},
        {"agent": "u", "kind": "task", "content": "q"},
        {"agent": "a", "kind": "output", "content": "42"}]


def _jsonl(path: Path, lines: list[dict[str, Any]] = _RUN) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _manifest(tmp_path: Path) -> Path:
    text = resources.files("icore.live").joinpath("manifests", "reservation.yaml").read_text(
        encoding="utf-8")
    m = tmp_path / "man" / "ok.yaml"
    m.parent.mkdir()
    m.write_text(text, encoding="utf-8")
    return m


# ------------------------------------------------------------------------------ D2
@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "dotdot"])
def test_run_otlp_file_naming_the_manifest_is_refused(tmp_path: Path, how: str) -> None:
    """The reporter's ``icore run MANIFEST --otlp-endpoint file:MANIFEST`` and variants:
    exit 2 before any agent starts, the manifest byte for byte unchanged."""
    m = _manifest(tmp_path)
    before = m.read_bytes()
    target = {"same": m, "symlink": tmp_path / "link.yaml", "hardlink": tmp_path / "hard",
              "dotdot": m.parent / "sub" / ".." / m.name}[how]
    (m.parent / "sub").mkdir()
    if how == "symlink":
        target.symlink_to(m)
    elif how == "hardlink":
        os.link(m, target)
    code, out = _invoke("run", str(m), "-o", str(tmp_path / "run"), "--otlp-endpoint",
                        f"file:{target}")
    assert code == 2, out
    assert "is the input" in out and "--otlp-endpoint" in out
    assert m.read_bytes() == before and not (tmp_path / "run").exists()


def test_run_out_holding_the_manifest_is_not_moved_aside(tmp_path: Path) -> None:
    """An earlier icore run folder that holds the manifest would be moved with it."""
    m = _manifest(tmp_path)
    mark_folder(m.parent)
    code, out = _invoke("run", str(m), "-o", str(m.parent))
    assert code == 2 and "holds the input" in out, out
    assert m.is_file() and not (tmp_path / "man.1").exists()


def test_two_outputs_on_one_file_are_refused(tmp_path: Path) -> None:
    t = _jsonl(tmp_path / "t.jsonl")
    out = tmp_path / "o.json"
    code, text = _invoke("audit", str(t), "-o", str(tmp_path / "r"), "--json", str(out),
                         "--otlp-endpoint", f"file:{out}")
    assert code == 2 and "are the same file" in text, text
    assert not out.exists()


def test_json_on_a_report_path_is_refused(tmp_path: Path) -> None:
    """``--json OUT/index.html`` would be overwritten by the index (or overwrite it)."""
    t = _jsonl(tmp_path / "t.jsonl")
    out = tmp_path / "o"
    out.mkdir()
    code, text = _invoke("audit", str(t), "-o", str(out), "--json", str(out / "r1.html"))
    assert code == 2 and "are the same file" in text, text
    assert not (out / "r1.html").exists()


@pytest.mark.parametrize("value", ["file:", "file:DIR", "file:DIR/none/x.jsonl"])
def test_unusable_otlp_file_is_a_usage_error_up_front(tmp_path: Path, value: str) -> None:
    t = _jsonl(tmp_path / "t.jsonl")
    code, out = _invoke("audit", str(t), "-o", str(tmp_path / "r"), "--otlp-endpoint",
                        value.replace("DIR", str(tmp_path)))
    assert code == 2 and "--otlp-endpoint" in out, out
    assert not (tmp_path / "r").exists()


def test_certs_and_bench_outputs_never_replace_an_input(tmp_path: Path) -> None:
    """``icore certs init`` with a manifest named like a key it would write."""
    d = tmp_path / "certs"
    d.mkdir()
    m = d / "planner.key"
    m.write_text("version: 1\nagents: [{id: planner}]\ncerts_dir: .\n", encoding="utf-8")
    code, out = _invoke("certs", "init", "--manifest", str(m))
    assert code == 2 and "is the input" in out, out
    assert m.read_text(encoding="utf-8").startswith("version: 1")


# ------------------------------------------------------------------------------ D3
def test_prov_never_overwrites_a_users_file_in_the_folder(tmp_path: Path) -> None:
    """The reporter's case: ``provdir`` holds run.jsonl (run r1) and the user's own
    ``r1.prov.json``; ``icore audit provdir --out provdir --prov`` refuses (exit 2)."""
    d = tmp_path / "provdir"
    d.mkdir()
    _jsonl(d / "run.jsonl")
    mine = d / "r1.prov.json"
    mine.write_text('{"resourceSpans": []}', encoding="utf-8")
    (d / "r1.html").write_text("an older report", encoding="utf-8")  # every one is named
    code, out = _invoke("audit", str(d), "--out", str(d), "--prov")
    assert code == 2, out
    assert "r1.prov.json" in out and "r1.html" in out and "not written by icore" in out
    assert mine.read_text(encoding="utf-8") == '{"resourceSpans": []}'
    assert not (d / "index.html").exists()  # refused before anything was written


def test_rerun_replaces_own_reports_but_not_an_edited_one(tmp_path: Path) -> None:
    t = _jsonl(tmp_path / "t.jsonl")
    out = tmp_path / "site"
    for _ in range(2):  # a rerun into the same folder replaces icore's own files
        code, text = _invoke("audit", str(t), "-o", str(out), "--prov", "--no-single-file")
        assert code == 0, text
    assert (out / WRITTEN).is_file() and (out / "assets" / WRITTEN).is_file()
    (out / "index.html").write_text("my edits", encoding="utf-8")
    code, text = _invoke("audit", str(t), "-o", str(out))
    assert code == 2 and "changed since icore wrote it" in text, text
    assert (out / "index.html").read_text(encoding="utf-8") == "my edits"


def test_run_refuses_a_user_folder_holding_a_name_it_writes(tmp_path: Path) -> None:
    """``icore run --out`` on a folder of the user's with a ``report.html``: refused, a
    usage error before any agent starts (QA r8-bad D18)."""
    user = tmp_path / "mine"
    user.mkdir()
    (user / "report.html").write_text("my report", encoding="utf-8")
    code, out = _invoke("run", "--out", str(user))
    assert code == 2 and "not created by icore" in out, out
    assert (user / "report.html").read_text(encoding="utf-8") == "my report"


# ------------------------------------------------------------------------------ D7
def test_one_bad_file_never_stops_the_others(tmp_path: Path) -> None:
    """The reporter's repro: a good run and a JSONL whose orchestrator is no agent (and
    one with an integer orchestrator, a huge step, a gate point of -5): the good run is
    audited and reported, each bad file named with its field, exit 1."""
    d = tmp_path / "in"
    d.mkdir()
    good = _jsonl(d / "good.jsonl")
    bad = {
        "orch_unknown.jsonl": [{"run": {"orchestrator": "boss"}}, *_RUN[1:]],
        "orch_int.jsonl": [{"run": {"orchestrator": 3}}, *_RUN[1:]],
        "step_huge.jsonl": [_RUN[1], {**_RUN[2], "step": 10**30}],
    }
    for name, lines in bad.items():
        _jsonl(d / name, lines)
    out = tmp_path / "o"
    code, text = _invoke("audit", str(good), *(str(d / n) for n in bad), "-o", str(out),
                         "--json", str(tmp_path / "s.json"))
    assert code == 1, text
    doc = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in doc["runs"]] == ["r1"]
    errs = {Path(e["file"]).name: e["error"] for e in doc["errors"]}
    assert errs.keys() == set(bad)
    assert errs["orch_unknown.jsonl"].startswith("run.orchestrator:")
    assert errs["orch_int.jsonl"].startswith("run.orchestrator:")
    assert errs["step_huge.jsonl"].startswith("line 2.step:")
    assert (out / "r1.html").is_file() and "Traceback" not in text


def test_an_unexpected_exception_names_the_file(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The last-resort guard: a bug while auditing one file is reported with the file
    and a request for a bug report; the other file is still audited."""
    from icore.adapters import audit_file as real

    def buggy(p: Any) -> Any:
        if Path(p).name == "boom.jsonl":
            raise KeyError("boom")
        return real(p)

    monkeypatch.setattr("icore.cli._audit.audit_file", buggy)
    a, b = _jsonl(tmp_path / "a.jsonl"), _jsonl(tmp_path / "boom.jsonl")
    code, out = _invoke("audit", str(a), str(b), "-o", str(tmp_path / "o"))
    assert code == 1 and "boom.jsonl" in out and "internal error KeyError" in out, out
    assert "please report" in out and (tmp_path / "o" / "r1.html").is_file()


def test_rich_markup_in_ids_and_errors_is_printed_as_text(tmp_path: Path) -> None:
    """A run id or a field value like ``[/x]`` must not be read as console markup."""
    t = _jsonl(tmp_path / "t.jsonl", [{"run": {"id": "[/x]"}}, *_RUN[1:]])
    bad = _jsonl(tmp_path / "b.jsonl", [{"agent": "[/y]", "kind": "nope[/z]"}])
    code, out = _invoke("audit", str(t), str(bad), "-o", str(tmp_path / "o"))
    assert code == 1 and "[/x]" in out and "nope[/z]" in out, out


# --------------------------------------------------------------------------- D8/D9
def test_best_effort_without_an_endpoint_is_a_usage_error(tmp_path: Path) -> None:
    t = _jsonl(tmp_path / "t.jsonl")
    for args in (["audit", str(t), "-o", str(tmp_path / "o")], ["run", "-o",
                                                                  str(tmp_path / "r")]):
        code, out = _invoke(*args, "--otlp-best-effort")
        assert code == 2 and "--otlp-best-effort" in out, out
    assert not (tmp_path / "o").exists() and not (tmp_path / "r").exists()


class _Down:
    """An exporter whose every span was lost, with a password in its last error."""

    def __init__(self, *, endpoint: str) -> None:
        from icore.adapters import DeliveryCheck

        self.endpoint = endpoint
        self.delivery = DeliveryCheck.__new__(DeliveryCheck)
        self.delivery.failed, self.delivery.delivered = 7, 0
        self.delivery.last_error = f"ConnectionError: {endpoint} refused"
        self.closed = 0

    def shutdown(self) -> None:
        self.closed += 1

    def __getattr__(self, name: str) -> Any:  # the observer calls: ignore them
        return lambda *a, **k: None


@pytest.mark.parametrize("best_effort", [False, True])
def test_run_exits_1_when_spans_are_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         best_effort: bool) -> None:
    """``icore run --otlp-endpoint URL`` whose spans could not be delivered: exit 1
    naming the endpoint with its password redacted (0 and a warning with
    --otlp-best-effort)."""
    pytest.importorskip("opentelemetry.sdk")
    import icore.adapters as adapters

    monkeypatch.setattr(adapters, "OtelExporter", _Down, raising=False)
    url = "http://qa:s3cr3tPW@127.0.0.1:1"
    code, out = _invoke("run", "-o", str(tmp_path / "r"), "--otlp-endpoint", url,
                        *(["--otlp-best-effort"] if best_effort else []))
    assert code == (0 if best_effort else 1), out
    assert "7 span(s) could not be delivered" in out and "s3cr3tPW" not in out
    assert ("warning" if best_effort else "error") + " --otlp-endpoint http://***@" in out


def test_no_command_prints_a_url_password(tmp_path: Path) -> None:
    """Through the real entry point (its redacting streams): the reporter's audit with
    an unreachable endpoint, and a usage error quoting the URL."""
    pytest.importorskip("opentelemetry.sdk")
    t = _jsonl(tmp_path / "t.jsonl")
    env = {**os.environ, "COLUMNS": "200", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    for args, want in (
            (["audit", str(t), "-o", str(tmp_path / "o"), "--otlp-endpoint",
              "http://qa:s3cr3tPW@127.0.0.1:1"], 1),
            (["audit", str(t), "--otlp-endpoint", "ftp://qa:s3cr3tPW@h/x"], 2)):
        p = subprocess.run([sys.executable, "-m", "icore", *args], capture_output=True,
                           text=True, env=env, timeout=110, check=False)
        assert p.returncode == want, p.stderr
        assert "s3cr3tPW" not in p.stdout + p.stderr and "***@" in p.stdout + p.stderr


def test_json_to_dev_stdout_redirected_to_a_file_follows_the_console(tmp_path: Path) -> None:
    """``--json /dev/stdout > out.txt``: the stream leads to a regular file the ledger
    does not know; it is written after the console's text, never refused or replaced."""
    t = _jsonl(tmp_path / "t.jsonl")
    out = tmp_path / "out.txt"
    for _ in range(2):  # the second run: the shell truncated the file icore wrote to
        with out.open("wb") as f:
            p = subprocess.run([sys.executable, "-m", "icore", "audit", str(t), "--no-report",
                                "--json", "/dev/stdout"], stdout=f, stderr=subprocess.PIPE,
                               env={**os.environ, "COLUMNS": "200"}, timeout=110,
                               check=False)
        assert p.returncode == 0, p.stderr
        text = out.read_text(encoding="utf-8")
        assert "iCORE audit" in text  # the console's table is kept
        start = text.index("\n{\n") + 1
        end = text.index("\n}\n", start) + 2
        assert json.loads(text[start:end])["runs"]
        assert "JSON summary: /dev/stdout" in text[end:]  # the console's next line after
