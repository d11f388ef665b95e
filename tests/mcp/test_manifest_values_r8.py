"""Gateway manifest values found only at run time (QA r8-bad D13): an upstream URL's
port out of range, a stdio upstream's ``cwd`` that is no folder and an ``otel:`` that is
no URL are manifest errors naming the field and its line (exit 2), not "unreachable"."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore.mcp import GatewayManifestError, load_manifest


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "gw.yaml"
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/mcp", "http://127.0.0.1:-1/mcp",
                                 "http://127.0.0.1:0/mcp", "http://:8000/mcp"])
def test_an_upstream_url_port_out_of_range_is_a_manifest_error(tmp_path: Path,
                                                               url: str) -> None:
    with pytest.raises(GatewayManifestError) as ei:
        load_manifest(_write(tmp_path, f"upstreams:\n  b:\n    url: '{url}'\n"))
    assert ei.value.fields["path"] == "upstreams.b" and ei.value.fields["line"] == 2
    assert "url" in str(ei.value)


@pytest.mark.parametrize(("text", "path", "words"), [
    ("upstreams:\n  n: {command: python, cwd: /nonexistent/x}\n", "upstreams.n.cwd",
     "not found"),
    ("upstreams:\n  n: {command: python, cwd: gw.yaml}\n", "upstreams.n.cwd", "is a file"),
    ("upstreams:\n  n: {command: python}\notel: notaurl\n", "otel", "OTLP collector URL"),
    ("upstreams:\n  n: {command: python}\notel: 'http://x:99999'\n", "otel", "1-65535"),
])
def test_cwd_and_otel_are_checked_before_the_upstreams_start(
        tmp_path: Path, text: str, path: str, words: str) -> None:
    res = CliRunner().invoke(app, ["mcp", str(_write(tmp_path, text))], input="")
    assert res.exit_code == 2, res.output
    assert path in res.output and words in res.output and "line " in res.output, res.output


@pytest.mark.parametrize(("text", "fix"), [("1e300", "1.0e+300"), ("2.5E3", "2.5e+3"),
                                           ("-3e2", "-3.0e+2")])
def test_a_yaml11_exponent_read_as_a_string_says_how_to_write_it(tmp_path: Path, text: str,
                                                                  fix: str) -> None:
    """YAML 1.1 reads ``1e300`` (no dot, no exponent sign) as a string (QA qa-new18b #6):
    refused as before, now saying how to write it as a number."""
    with pytest.raises(GatewayManifestError) as e:
        load_manifest(_write(tmp_path, f"upstreams:\n  b:\n    command: x\n    timeout_s: "
                             f"{text}\n"))
    assert f"not the string '{text}'" in str(e.value) and f"write {fix}" in str(e.value)
