"""``icore bench otel``: the cost of OpenTelemetry export and import (#16).

Two figures (docs/observability.md, "Performance"):

- **import**: a synthetic OpenInference/GenAI trace of N spans (default 100,000: agent
  turns, LLM calls, tool calls with some errors, handoffs, retrievers) written as OTLP JSON
  lines, then read into the source-neutral trace with :func:`icore.adapters.load_otlp`.
  Target: <= 10 s for 100,000 spans.
- **export**: ``icore run --matched`` (planfence App. A.5) wall time without and with the
  exporter (batch span processor, OTLP/HTTP protobuf) sending to a local receiver — an
  OTLP/HTTP sink in its own process on 127.0.0.1 (or ``receiver``, e.g. a running Phoenix).
  Runs alternate (off, on, on, off, ...) so drift on a shared machine hits both. Target:
  <= 5 % added wall time. Since wall time on a loaded shared machine varies by more than
  5 % between identical runs, the CPU the export adds to the coordinating process is also
  given, as a fraction of the run's whole CPU (coordinator plus agent processes).
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from icore.adapters import load_otlp
from icore_lab.bench.micro._loopback import free_port

_KINDS = ("AGENT", "LLM", "TOOL", "TOOL", "LLM", "RETRIEVER")


def _kv(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else
             {"stringValue": str(v)}} for k, v in d.items()]


def synthetic_otlp(n_spans: int, *, seed: int = 0, spans_per_line: int = 512,
                   agents: int = 8) -> str:
    """OTLP JSON lines holding ``n_spans`` OpenInference/GenAI spans (one trace)."""
    rng = random.Random(seed)
    names = [f"agent-{i}" for i in range(agents)]
    trace_id = f"{rng.getrandbits(128):032x}"
    lines: list[str] = []
    batch: list[dict[str, Any]] = []
    t = 1_700_000_000_000_000_000
    agent_span = 1
    for i in range(1, n_spans + 1):
        if i == 1:
            kind, parent, attrs = "CHAIN", None, {"openinference.span.kind": "CHAIN",
                                                  "input.value": "synthetic task"}
        else:
            kind = _KINDS[rng.randrange(len(_KINDS))] if i % 50 else "HANDOFF"
            who = names[rng.randrange(agents)]
            if kind == "AGENT":
                agent_span, parent = i, 1
                attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": who,
                         "openinference.span.kind": "AGENT", "output.value": f"turn {i}"}
            elif kind == "HANDOFF":
                parent = agent_span
                attrs = {"openinference.span.kind": "TOOL", "handoff.to": who}
            else:
                parent = agent_span
                attrs = {"openinference.span.kind": kind, "output.value": f"out {i}",
                         "gen_ai.tool.name": "python"} if kind == "TOOL" else {
                    "openinference.span.kind": kind, "output.value": f"out {i}",
                    "llm.model_name": "m"}
        span: dict[str, Any] = {
            "traceId": trace_id, "spanId": f"{i:016x}", "name": f"{kind.lower()} {i}",
            "kind": 1, "startTimeUnixNano": str(t + i * 1000),
            "endTimeUnixNano": str(t + i * 1000 + 500), "attributes": _kv(attrs),
            "status": {"code": 2 if kind == "TOOL" and rng.random() < 0.1 else 0}}
        if parent is not None:
            span["parentSpanId"] = f"{parent:016x}"
        batch.append(span)
        if len(batch) == spans_per_line or i == n_spans:
            lines.append(json.dumps({"resourceSpans": [{"resource": {"attributes": _kv(
                {"service.name": "bench"})}, "scopeSpans": [{"scope": {"name": "bench"},
                                                            "spans": batch}]}]}))
            batch = []
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------- the local receiver
class _Sink(BaseHTTPRequestHandler):
    spans_bytes = 0

    def log_message(self, *args: Any) -> None:
        """Log nothing: the sink is quiet."""
        pass

    def do_POST(self) -> None:
        """Read and drop an OTLP/HTTP export; answer 200 with an empty protobuf body."""
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        """Answer 200 with an empty body (the readiness probe)."""
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def serve_sink(port: int) -> None:
    """Run an OTLP/HTTP sink on 127.0.0.1:``port`` until killed (answers 200 to POSTs)."""
    ThreadingHTTPServer(("127.0.0.1", port), _Sink).serve_forever(0.2)


class _Receiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-c",
             f"from icore_lab.bench.micro._otel import serve_sink; serve_sink({self.port})"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/", timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("the local OTLP sink did not start") from None
                time.sleep(0.1)

    def close(self) -> None:
        """Terminate the sink process (killed after 10 s)."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


# ------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class OtelBench:
    """Figures of ``icore bench otel`` (seconds; ``export_overhead`` as a fraction)."""

    import_spans: int
    import_s: float
    import_mb: float
    import_steps: int
    export_runs: int = 0
    export_off_s: Sequence[float] = field(default_factory=tuple)
    export_on_s: Sequence[float] = field(default_factory=tuple)
    export_spans: int = 0
    receiver: str = ""
    export_off_cpu_s: Sequence[float] = field(default_factory=tuple)
    export_on_cpu_s: Sequence[float] = field(default_factory=tuple)
    export_import_s: float = 0.0
    export_off_total_cpu_s: Sequence[float] = field(default_factory=tuple)
    load: float = 0.0

    @property
    def export_overhead(self) -> float | None:
        """(median on - median off) / median off wall time; None when not measured."""
        return _overhead(self.export_off_s, self.export_on_s)

    @property
    def export_cpu_overhead(self) -> float | None:
        """CPU the export adds to the coordinator, as a fraction of the whole run's CPU.

        The whole run is the coordinator plus agent processes, export off: robust to machine load.
        """
        if not self.export_off_cpu_s or not self.export_on_cpu_s:
            return None
        added = _median(self.export_on_cpu_s) - _median(self.export_off_cpu_s)
        return added / _median(self.export_off_total_cpu_s)


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _overhead(off: Sequence[float], on: Sequence[float]) -> float | None:
    if not off or not on:
        return None
    return (_median(on) - _median(off)) / _median(off)


def run(*, spans: int = 100_000, export_runs: int = 1, families: Sequence[str] | None = None,
        seeds: Sequence[int] | None = None, receiver: str | None = None, seed: int = 0,
        echo: Callable[[str], None] = print) -> OtelBench:
    """Measure import of ``spans`` spans and (``export_runs`` > 0) export overhead.

    Args:
        spans: spans in the synthetic trace (>= 2).
        export_runs: matched-study runs per arm (0 skips the export figure).
        families: the matched grid's families (default all three of App. A.5).
        seeds: the matched grid's seeds (default the ten of App. A.5).
        receiver: an OTLP/HTTP URL to export to (default: a local sink process).
        seed: seed of the synthetic trace.
        echo: prints one line per figure.
    """
    with tempfile.TemporaryDirectory(prefix="icore-bench-otel-") as tmp:
        f = Path(tmp) / "synthetic.otlp.json"
        f.write_text(synthetic_otlp(spans, seed=seed), encoding="utf-8")
        mb = f.stat().st_size / 1e6
        t0, c0 = time.perf_counter(), time.process_time()
        tr = load_otlp(f)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        echo(f"import: {spans} spans ({mb:.1f} MB OTLP JSON) -> {len(tr.steps)} steps in "
             f"{dt:.2f} s wall, {cpu:.2f} s CPU ({spans / dt:,.0f} spans/s; target <= 10 s "
             f"for 100,000)")
        res = OtelBench(spans, dt, mb, len(tr.steps))
        if export_runs <= 0:
            return res
        t1 = time.perf_counter()
        from icore.adapters import OtelExporter  # noqa: F401  (SDK + OTLP/HTTP exporter)

        imp = time.perf_counter() - t1
        m = _export(Path(tmp), export_runs, families, seeds, receiver)
        res = OtelBench(spans, dt, mb, len(tr.steps), export_runs, tuple(m["off"]),
                        tuple(m["on"]), int(m["spans"]),
                        receiver or "local OTLP/HTTP sink (own process)",
                        tuple(m["off_cpu"]), tuple(m["on_cpu"]), imp,
                        tuple(m["off_total"]), os.getloadavg()[0])
        ov, cov = res.export_overhead or 0.0, res.export_cpu_overhead or 0.0
        echo(f"export: icore run --matched, median of {export_runs} alternating runs: off "
             f"{_median(res.export_off_s):.2f} s / on {_median(res.export_on_s):.2f} s wall "
             f"({ov * 100:+.1f}%; target <= 5%; load average {res.load:.1f}); CPU added "
             f"{_median(res.export_on_cpu_s) - _median(res.export_off_cpu_s):.2f} s to the "
             f"coordinator = {cov * 100:+.1f}% of the run's CPU "
             f"({_median(res.export_off_total_cpu_s):.2f} s, agents included); "
             f"{res.export_spans} spans per study, batch processor, OTLP/HTTP to "
             f"{res.receiver}; one-time import of the exporter {imp:.2f} s")
        return res


def _export(tmp: Path, runs: int, families: Sequence[str] | None, seeds: Sequence[int] | None,
            receiver: str | None) -> dict[str, Any]:
    from icore.adapters import OtelExporter, SpanCounter, make_provider
    from icore.live import run_matched
    from icore_lab.workloads import FAMILIES, SEEDS_PER_FAMILY

    fams = tuple(families or FAMILIES)
    sds = tuple(seeds if seeds is not None else range(SEEDS_PER_FAMILY))
    sink = None if receiver else _Receiver()
    url = receiver or (sink.url if sink else "")
    m: dict[str, Any] = {"off": [], "on": [], "off_cpu": [], "on_cpu": [], "off_total": [],
                         "on_total": [], "spans": 0}
    try:
        for i in range(runs):
            for arm in ("off", "on") if i % 2 == 0 else ("on", "off"):
                out = tmp / f"m-{arm}-{i}"
                t0, c0 = time.perf_counter(), time.process_time()
                k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                if arm == "off":
                    run_matched(out, families=fams, seeds=sds)
                else:
                    provider = make_provider(endpoint=url)
                    count = SpanCounter()
                    provider.add_span_processor(count)
                    ex = OtelExporter(tracer_provider=provider)
                    run_matched(out, families=fams, seeds=sds, observer=ex)
                    provider.shutdown()  # flushes: export time counts
                    m["spans"] = count.ended
                m[arm].append(time.perf_counter() - t0)
                cpu = time.process_time() - c0
                k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                m[f"{arm}_cpu"].append(cpu)
                m[f"{arm}_total"].append(cpu + (k1.ru_utime - k0.ru_utime)
                                         + (k1.ru_stime - k0.ru_stime))
    finally:
        if sink is not None:
            sink.close()
    return m


__all__ = ["OtelBench", "run", "serve_sink", "synthetic_otlp"]
