"""QA r8-bad defects: a gate that cannot be turned off by an empty value, duplicate
manifest keys, credentials and terminal escapes in what icore prints, and outputs that
never overwrite or move what the user has (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests._cli import CLI_ENV as _ENV
from tests._cli import one_run_folder as _runs
from typer.testing import CliRunner

from icore.cli import app


@pytest.mark.parametrize("command", ["audit", "run"])
@pytest.mark.parametrize("value", ["", ",", " ", " , "])
def test_fail_on_naming_no_condition_is_a_usage_error(
        tmp_path: Path, magentic: dict[str, Any], command: str, value: str) -> None:
    """``--fail-on "$UNSET"`` would turn the CI gate off: exit 2 naming the flag and the
    valid conditions, before any work."""
    runs = _runs(tmp_path, magentic)
    args = (["audit", str(runs), "--no-report"] if command == "audit"
            else ["run", str(tmp_path / "none.yaml")])
    res = CliRunner().invoke(app, [*args, "--fail-on", value], env=_ENV)
    assert res.exit_code == 2, res.output
    assert "--fail-on" in res.output and "names no condition" in res.output
    assert "invalid" in res.output


def test_redact_hides_userinfo_and_credential_query_values() -> None:
    from icore.errors import redact

    assert redact("http://alice:pw@h:1/mcp?token=T1&x=1") == "http://***@h:1/mcp?token=***&x=1"
    assert redact("url: /v1/traces?api_key=K2") == "url: /v1/traces?api_key=***"
    assert redact("https://h/p?a=1&X-Amz-Signature=S&Password=P#f") == \
        "https://h/p?a=1&X-Amz-Signature=***&Password=***#f"
    assert redact("a=b, key=c, ?page=2") == "a=b, key=c, ?page=2"
    ordinary = "https://h/issues?author=al&keyword=t&signal=TERM&design=x&monkey=1"
    assert redact(ordinary) == ordinary  # the word as a part of the name, not inside one
    assert redact("?access_token=A&client_secret=B&sessionid=C") == \
        "?access_token=***&client_secret=***&sessionid=***"


@pytest.mark.parametrize("url", ["http://alice:s3cr3tPW@127.0.0.1:1/mcp",
                                 "http://127.0.0.1:1/mcp?token=s3cr3tPW",
                                 "http://127.0.0.1:1/mcp?a=1&api_key=s3cr3tPW"])
def test_mcp_never_logs_an_upstream_url_credential(tmp_path: Path, url: str) -> None:
    """QA r8-bad D12: ``icore mcp``'s stderr (kept by MCP clients in their log files)
    printed an HTTP upstream's password and ``?token=`` in its warning lines."""
    import os
    import subprocess
    import sys

    m = tmp_path / "gw.yaml"
    m.write_text(f"upstreams:\n  b: {{url: '{url}', timeout_s: 2}}\n", encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "icore", "mcp", str(m), "--log-level", "DEBUG"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "200"}, timeout=110, check=False)
    assert p.returncode == 1, p.stderr
    assert "unreachable" in p.stderr and "127.0.0.1:1" in p.stderr
    assert "s3cr3tPW" not in p.stdout + p.stderr and "***" in p.stderr


def test_run_id_with_terminal_codes_and_markup_is_printed_as_text(tmp_path: Path) -> None:
    """QA r8-bad D1: a run id holding an OSC title, CSI colours, NUL and rich markup was
    written raw to the console (window title set, text red, line erased)."""
    rid = "ev\x1b]0;PWNED\x07\x1b[31mRED\x1b[2K[bold]B\x00\u202e"
    lines = [{"run": {"id": rid, "question": "q"}},
             {"agent": "user", "kind": "task", "content": "q"},
             {"agent": "a\x1b[8m", "kind": "output", "content": "x"}]
    t = tmp_path / "esc.jsonl"
    t.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    res = CliRunner().invoke(app, ["audit", str(t), "--no-report"], env=_ENV)
    assert res.exit_code == 0, res.output
    assert not {"\x1b", "\x07", "\x00", "\u202e"} & set(res.output), repr(res.output)
    assert "ev\\x1b]0;PWNED\\x07\\x1b[31mRED" in res.output and "[bold]B" in res.output


def test_entry_point_streams_neutralize_codes_icore_never_writes() -> None:
    """The second layer: any line the ``icore`` command writes (a ``typer.echo`` of an
    error message) loses OSC/DCS introducers, BEL, NUL, C1 and bidi controls; rich's
    own colours pass."""
    from icore.cli._text import neutral, printable, shown

    assert neutral("\x1b[31mred\x1b[0m t\x1b]0;X\x07 \x1bP \u202e é\n") == \
        "\x1b[31mred\x1b[0m t\\x1b]0;X\\x07 \\x1bP \\u202e é\n"
    assert printable("a\x1b[2Kb\tc\n\u2028") == "a\\x1b[2Kb\tc\n\\u2028"
    assert shown("[bold]x\x9b") == "\\[bold]x\\x9b"


def test_json_never_replaces_the_ledger_or_a_users_file(tmp_path: Path,
                                                        magentic: dict[str, Any]) -> None:
    """QA r8-bad D2/D3: ``--json OUT/.icore-files`` replaced icore's ledger (every later
    audit into OUT refused), and ``--json my.json`` silently replaced the user's file.
    Now both are refused (exit 2, nothing written); a JSON file icore wrote (listed in
    its folder's ledger) is replaced on the next run, as reports are."""
    runs, out = _runs(tmp_path, magentic), tmp_path / "o"
    assert CliRunner().invoke(app, ["audit", str(runs), "-o", str(out)], env=_ENV
                              ).exit_code == 0
    ledger = (out / ".icore-files").read_bytes()
    for target in (out / ".icore-files", out / ".icore-output"):
        res = CliRunner().invoke(app, ["audit", str(runs), "-o", str(out), "--json",
                                       str(target)], env=_ENV)
        assert res.exit_code == 2 and "bookkeeping" in res.output, res.output
    assert (out / ".icore-files").read_bytes() == ledger
    mine = tmp_path / "my.json"
    mine.write_text("precious", encoding="utf-8")
    res = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--json", str(mine)],
                             env=_ENV)
    assert res.exit_code == 2 and "was not written by icore" in res.output, res.output
    assert mine.read_text(encoding="utf-8") == "precious"
    ours = tmp_path / "sub" / "a.json"
    for _ in range(2):  # written, then replaced: icore wrote it
        res = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--json",
                                       str(ours)], env=_ENV)
        assert res.exit_code == 0, res.output
        assert json.loads(ours.read_text(encoding="utf-8"))["runs"]
    ours.write_text("edited by the user", encoding="utf-8")
    res = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--json", str(ours)],
                             env=_ENV)
    assert res.exit_code == 2 and "changed since" in res.output, res.output


def test_otlp_file_appends_only_to_an_empty_file_or_one_icore_wrote(
        tmp_path: Path, magentic: dict[str, Any]) -> None:
    """QA r8-bad D3: ``--otlp-endpoint file:NOTES`` appended spans to the user's file."""
    pytest.importorskip("opentelemetry.sdk")
    runs = _runs(tmp_path, magentic)
    notes = tmp_path / "my.otlp.jsonl"
    notes.write_text("precious\n", encoding="utf-8")
    args = ["audit", str(runs), "--no-report", "--otlp-endpoint"]
    res = CliRunner().invoke(app, [*args, f"file:{notes}"], env=_ENV)
    assert res.exit_code == 2 and "--otlp-endpoint" in res.output, res.output
    assert notes.read_text(encoding="utf-8") == "precious\n"
    res = CliRunner().invoke(app, [*args, f"file:{tmp_path / '.icore-files'}"], env=_ENV)
    assert res.exit_code == 2 and "bookkeeping" in res.output, res.output
    spans = tmp_path / "empty.otlp.jsonl"
    spans.touch()
    sizes = []
    for _ in range(2):  # an empty file, then the file icore appended to
        res = CliRunner().invoke(app, [*args, f"file:{spans}"], env=_ENV)
        assert res.exit_code == 0, res.output
        sizes.append(spans.stat().st_size)
    assert 0 < sizes[0] < sizes[1]


def test_run_never_marks_or_moves_a_users_folder(tmp_path: Path) -> None:
    """QA r8-bad D18: ``icore run --out DIR`` on a user's folder of unrelated files marked
    it as icore's, and the next run moved the whole folder to ``DIR.1``. Refused (exit 2,
    before any agent starts), in the library too; an empty folder is used."""
    from icore.live._runner import _fresh_run_folder

    user = tmp_path / "userout"
    user.mkdir()
    (user / "notes.txt").write_text("mine", encoding="utf-8")
    res = CliRunner().invoke(app, ["run", "--out", str(user)], env=_ENV)
    assert res.exit_code == 2, res.output
    assert "notes.txt" in res.output and "not created by icore" in res.output
    assert sorted(p.name for p in user.iterdir()) == ["notes.txt"]
    with pytest.raises(FileExistsError, match="not created by icore"):
        _fresh_run_folder(user)
    assert sorted(p.name for p in user.iterdir()) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _fresh_run_folder(empty) == empty and (empty / ".icore-output").is_file()
