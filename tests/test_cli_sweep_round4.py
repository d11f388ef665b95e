"""Issue 29, fourth sweep round (tools/badinput/round4.py): the causes it found.

``OTEL_BSP_*`` variables the SDK read itself (a traceback, or a bare ValueError once the
spans were made), ``icore bench`` flags refused only after the benchmark ran or without
the flag's name, and a public helper that raised AttributeError on a wrong type.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icore.adapters import AdapterError, ExportError, check_size, otel_env_settings

from ._cli import invoke

RUN = [{"run": {"id": "r1", "succeeded": False, "family": "demo", "ground_truth": "4"}},
       {"agent": "user", "kind": "task", "content": "add 2 and 2", "step": 0},
       {"agent": "coder", "kind": "output", "content": "4", "step": 1}]


def _trace(tmp_path: Path) -> Path:
    t = tmp_path / "t.jsonl"
    t.write_text("\n".join(json.dumps(x) for x in RUN) + "\n")
    return t


@pytest.mark.parametrize(("var", "value", "said"), [
    ("OTEL_BSP_SCHEDULE_DELAY", "abc", "whole number >= 1"),
    ("OTEL_BSP_SCHEDULE_DELAY", "nan", "whole number >= 1"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "0", "whole number >= 1"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "-5", "whole number >= 1"),
    ("OTEL_BSP_EXPORT_TIMEOUT", "-1", "whole number >= 0"),
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "5000", "<= $OTEL_BSP_MAX_QUEUE_SIZE"),
    ("OTEL_RESOURCE_ATTRIBUTES", "\udcff=x", "not UTF-8"),
])
def test_a_bad_otel_variable_is_a_usage_error_before_the_audit(
        tmp_path: Path, var: str, value: str, said: str) -> None:
    t = _trace(tmp_path)
    js = tmp_path / "s.json"
    code, out = invoke("audit", str(t), "--no-report", "--json", str(js),
                       "--otlp-endpoint", "http://127.0.0.1:1", **{var: value})
    assert code == 2 and f"${var}" in out and said in out, out
    assert not js.exists()  # before the audit


def test_otel_env_settings_are_passed_as_read() -> None:
    got = otel_env_settings({"OTEL_BSP_SCHEDULE_DELAY": " 250 ",
                             "OTEL_BSP_EXPORT_TIMEOUT": "0"})
    assert got == {"max_queue_size": 2048, "schedule_delay_millis": 250,
                   "max_export_batch_size": 512, "export_timeout_millis": 0}
    with pytest.raises(ExportError) as info:
        otel_env_settings({"OTEL_BSP_MAX_QUEUE_SIZE": "1.5"})
    assert info.value.field == "OTEL_BSP_MAX_QUEUE_SIZE"


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--transport", "bogus", "unknown transport 'bogus'"),
    ("--link", "", "unknown link ''"),
    ("--base-delay-ms", "inf", "a finite number"),
])
def test_bench_planfence_flags_are_usage_errors_naming_the_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str, value: str,
        said: str) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke("bench", "planfence", flag, value)
    assert code == 2 and flag in out and said in out, out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["bogus", "", "http://[::1", "http://127.0.0.1:99999",
                                   "http://:80"])
def test_bench_otel_receiver_is_checked_before_the_import_benchmark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """It ran the 100,000-span import first, then failed as ``<otlp>: endpoint``."""
    monkeypatch.chdir(tmp_path)
    code, out = invoke("bench", "otel", "--receiver", value)
    assert code == 2 and "--receiver" in out and "import:" not in out, out


@pytest.mark.parametrize(("args", "flag"), [
    (("--preset", "bogus"), "--preset"), (("--llm-timeout-s", "inf"), "--llm-timeout-s")])
def test_bench_icore_flags_name_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         args: tuple[str, str], flag: str) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke("bench", "icore", *args)
    assert code == 2 and flag in out, out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "flag"), [
    (("--write-model", "/proc/x/y"), "--write-model"),
    (("--write-model", "/dev/full"), "--write-model"),
    (("--write-model", "DIR"), "--write-model"),
    (("--llm-mode", "bogus"), "--llm-mode")])
def test_bench_attribution_outputs_and_mode_are_checked_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, str],
        flag: str) -> None:
    """Each was found bad only after the cross-validation (minutes)."""
    monkeypatch.chdir(tmp_path)
    t = _trace(tmp_path)
    code, out = invoke("bench", "attribution", str(t), "--out", str(tmp_path / "o"),
                       args[0], args[1].replace("DIR", str(tmp_path)))
    assert code == 2 and flag in out, out
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("bad", [1.5, None, b"x", "a\x00b"])
def test_check_size_refuses_what_is_no_path(bad: object) -> None:
    with pytest.raises(AdapterError) as info:
        check_size(bad)  # type: ignore[arg-type]
    assert info.value.field == "path"


@pytest.mark.timeout(120)
def test_bench_attribution_probes_the_model_server_before_the_cross_validation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that is down was found only after the cross-validation (minutes)."""
    monkeypatch.chdir(tmp_path)
    t = _trace(tmp_path)
    code, out = invoke("bench", "attribution", str(t), "--out", str(tmp_path / "o"),
                       "--llm-base-url", "http://u:s3cr3tPW9@127.0.0.1:1/v1")
    assert code == 1 and "--llm-base-url" in out and "unusable" in out, out
    assert "s3cr3tPW9" not in out
    assert not (tmp_path / "o").exists()
