"""Issue 29, QA r8-bad at the command line (D9, D25): a bad environment variable or a
flag that cannot apply is a usage error (exit 2) naming it, said once, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._cli import invoke as _invoke

_RUN = ['{"run": {"id": "t"}}', '{"agent": "user", "kind": "task", "content": "q"}',
        '{"agent": "coder", "kind": "output", "content": "5"}']


@pytest.mark.parametrize("value", ["nan", "abc", "-1", "0"])
def test_a_bad_max_input_variable_is_one_usage_error(tmp_path: Path, value: str) -> None:
    """D9: it was an input error (exit 1) repeated for every file."""
    files = []
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text("\n".join(_RUN) + "\n", encoding="utf-8")
        files.append(str(tmp_path / name))
    code, out = _invoke("audit", *files, "--no-report", ICORE_MAX_INPUT_MB=value)
    assert code == 2 and out.count("$ICORE_MAX_INPUT_MB") == 1, out
    code, out = _invoke("audit", *files, "--no-report", "--max-input-mb", "5",
                        ICORE_MAX_INPUT_MB=value)
    assert code == 0, out  # the option wins over the variable


def test_a_tiny_input_limit_is_said_in_bytes(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("\n".join(_RUN) + "\n", encoding="utf-8")
    code, out = _invoke("audit", str(tmp_path / "a.jsonl"), "--no-report",
                        "--max-input-mb", "0.000001")
    assert code == 1 and "over the 1-byte input limit" in out, out


@pytest.mark.parametrize(("args", "flag", "words"), [
    (["run", "--policy", ""], "--policy", "use one of"),
    (["run", "--seeds", "-1"], "--seeds", ">= 0"),
    (["run", "--seeds", "0,-2"], "--seeds", ">= 0"),
    (["bench", "import", "--otlp-mb", "nan", "--no-audit"], "--otlp-mb", "finite"),
    (["bench", "import", "--phoenix-mb", "inf", "--no-audit"], "--phoenix-mb", "finite"),
])
def test_flags_that_cannot_apply_are_usage_errors(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  args: list[str], flag: str,
                                                  words: str) -> None:
    """D25: ``--policy ''`` ran the manifest's policy, ``--seeds -1`` a negative seed,
    ``--otlp-mb nan`` said "should be >= 0"."""
    monkeypatch.chdir(tmp_path)
    code, out = _invoke(*args)
    assert code == 2 and flag in out and words in out, out
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_loading_is_one_line_and_exit_130(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """D22: Ctrl-C in the first second of ``icore run`` (modules loading) printed a
    KeyboardInterrupt traceback."""
    import sys

    import icore.cli as cli

    def interrupted(**_kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_register_all", interrupted)
    monkeypatch.setattr(sys, "argv", ["icore", "run", "run.yaml"])
    with pytest.raises(SystemExit) as e:
        cli.main()
    assert e.value.code == 130
    assert capsys.readouterr().err == "interrupted\n"
