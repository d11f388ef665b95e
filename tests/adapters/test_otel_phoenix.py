"""A real OTLP receiver (#16): a live run exported over OTLP/HTTP to Arize Phoenix on
127.0.0.1, read back through Phoenix's own client, checked, and audited from Phoenix's
export to the same snd/astab/cq as the run's native audit.

Phoenix lives in its own virtualenv (``make phoenix``, run by ``make test``:
``.venv-phoenix``, or ``ICORE_PHOENIX_VENV``) because its dependency tree is large and
pinned; the test starts ``phoenix serve`` as a subprocess and stops it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from icore.adapters import ICORE_LIVE, OtelExporter, audit_path, make_provider
from icore.live import default_manifest, run_live

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "phoenix"
VENV = Path(os.environ.get("ICORE_PHOENIX_VENV", ROOT / ".venv-phoenix"))
PY = VENV / "bin" / "python"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[str]:
    """A running Phoenix server; yields its base URL (HTTP and OTLP/HTTP)."""
    if not PY.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"Phoenix venv missing at {VENV}: `make phoenix` must run in CI")
        pytest.skip(f"Phoenix not installed ({VENV}); run `make phoenix`")
    port, grpc_port = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = (tmp_path / "phoenix.log").open("wb")
    proc = subprocess.Popen([str(PY), str(HERE / "launch.py")], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("Phoenix did not start: "
                            + (tmp_path / "phoenix.log").read_text(errors="replace")[-2000:])
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Phoenix may return attributes nested (``{"gen_ai": {"tool": ...}}``) or dotted."""
    out: dict[str, Any] = {}
    for k, v in (obj or {}).items():
        key = f"{prefix}.{k}" if prefix else k
        out.update(_flat(v, key) if isinstance(v, dict) else {key: v})
    return out


def _get_spans(url: str, out: Path, want: int) -> list[dict[str, Any]]:
    """Spans through Phoenix's client, once ingestion caught up (bounded wait)."""
    subprocess.run([str(PY), str(HERE / "get_spans.py"), url, str(out), str(want)],
                   check=True, capture_output=True, timeout=120)
    spans: list[dict[str, Any]] = json.loads(out.read_text(encoding="utf-8"))
    return spans


def test_live_run_in_phoenix(phoenix: str, tmp_path: Path) -> None:
    """Export over OTLP/HTTP, read back via Phoenix's client, re-audit Phoenix's export."""
    provider = make_provider(endpoint=phoenix)  # batch processor, OTLP/HTTP protobuf
    sent = InMemorySpanExporter()  # what was sent, to compare with what Phoenix holds
    provider.add_span_processor(SimpleSpanProcessor(sent))
    ex = OtelExporter(tracer_provider=provider)
    m = default_manifest("reservation").with_(seeds=[0, 1], concurrency=2)
    res = run_live(m, tmp_path / "run", policy="owner_head_freshness", observer=ex)
    provider.shutdown()  # flush the batch processor
    want = sorted(s.name for s in sent.get_finished_spans())
    out = tmp_path / "phoenix-spans.json"
    spans = _get_spans(phoenix, out, len(want))
    names = sorted(str(s["name"]) for s in spans)
    assert names == want
    assert names.count("execute_tool book") == 2
    assert {"plan planner-1", "invoke_agent reviser-1", "invoke_agent retriever-1",
            "invoke_agent auditor-1", "invoke_workflow reservation-live"} <= set(names)
    by_kind: dict[str, set[str]] = {}
    for s in spans:
        by_kind.setdefault(str(s["span_kind"]), set()).add(str(s["name"]).split(" ")[0])
    # Phoenix read openinference.span.kind: agents, tools, gate guardrails, chains
    assert by_kind["AGENT"] == {"invoke_agent", "plan"} and by_kind["TOOL"] == {"execute_tool"}
    assert by_kind["GUARDRAIL"] == {"apply_guardrail"}
    tool = next(s for s in spans if s["name"] == "execute_tool book")
    attrs = _flat(tool["attributes"])
    assert attrs["gen_ai.tool.name"] == "book", sorted(attrs)
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["icore.decision"] == "authorized" and attrs["gen_ai.tool.call.id"]
    gate = _flat(next(s for s in spans if s["name"] == "apply_guardrail PlanFence")[
        "attributes"])
    assert gate["icore.gate.deps"] == ["req/reservation-00"] or gate["icore.gate.deps"] == [
        "req/reservation-01"]
    assert gate["icore.gate.reason"] == "not_validated"  # owner-head freshness
    # Phoenix's own export audits to the run's native snd, astab and cq
    r = audit_path(out)
    assert r.trace.family == ICORE_LIVE
    assert (r.final.snd, r.final.astab, r.final.cq) == pytest.approx(
        (res.icore["snd"], res.icore["astab"], res.icore["cq"]))
    assert res.icore["cq"] < 1.0
    assert sys.executable  # the test itself ran in icore's venv, Phoenix in its own
