"""``icore bench import``: streamed import of big traces, in time and memory (issue 29).

Generates the inputs (never committed), then measures each in a fresh child process so
the peak resident set size (``ru_maxrss``) is that one import's:

- **OTLP one document**: one ``ExportTraceServiceRequest`` of ``--otlp-mb`` MiB (default
  200) of OpenInference/GenAI spans (agents, LLM and tool calls, handoffs), as one
  document (the worst case: nothing but a streaming parser can read it in bounded
  memory); imported with :func:`icore.adapters.load_otlp_runs` and audited with
  :func:`icore.adapters.audit_trace`. Targets: import + audit <= 60 s, peak RSS <= 2x
  the file size.
- **JSONL**: a generic JSONL run of ``--jsonl-lines`` lines (default 10^6), imported with
  :func:`icore.adapters.load_jsonl` and audited. Target: peak RSS <= 1 GB.
- **throughput**: MB/s of the import alone (parse + mapping to the trace). Target >= 10.

Each figure is the median over ``repeats`` child processes.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MB = 1024 * 1024
_KINDS = ("AGENT", "LLM", "TOOL", "TOOL", "LLM", "RETRIEVER")
TARGET_OTLP_S = 60.0
"""Import + audit of the 200 MB OTLP file, seconds."""
TARGET_RSS_RATIO = 2.0
"""Peak RSS over file size for the OTLP file."""
TARGET_JSONL_RSS_MB = 1000.0
"""Peak RSS of the 10^6-line JSONL run, MB (10^6 bytes)."""
TARGET_MB_S = 10.0
"""Import throughput, MB/s."""


def _kv(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else
             {"stringValue": str(v)}} for k, v in d.items()]


def _spans(seed: int, agents: int = 8) -> Iterator[dict[str, Any]]:
    """An endless OpenInference/GenAI span stream of one trace (agent turns, calls)."""
    rng = random.Random(seed)
    names = [f"agent-{i}" for i in range(agents)]
    trace_id = f"{rng.getrandbits(128):032x}"
    t = 1_700_000_000_000_000_000
    agent_span = 1
    i = 0
    while True:
        i += 1
        parent: int | None
        attrs: dict[str, Any]
        if i == 1:
            kind, parent, attrs = "CHAIN", None, {"openinference.span.kind": "CHAIN",
                                                  "input.value": "synthetic task"}
        else:
            kind = _KINDS[rng.randrange(len(_KINDS))] if i % 50 else "HANDOFF"
            who = names[rng.randrange(agents)]
            if kind == "AGENT":
                agent_span, parent = i, 1
                attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": who,
                         "openinference.span.kind": "AGENT",
                         "output.value": f"turn {i}: " + "x" * rng.randrange(40, 200)}
            elif kind == "HANDOFF":
                parent = agent_span
                attrs = {"openinference.span.kind": "TOOL", "handoff.to": who}
            else:
                parent = agent_span
                attrs = {"openinference.span.kind": kind,
                         "output.value": f"out {i}: " + "y" * rng.randrange(20, 160),
                         "llm.model_name": "m", "llm.token_count.total": 100 + i % 900}
        span: dict[str, Any] = {
            "traceId": trace_id, "spanId": f"{i:016x}", "name": f"{kind.lower()} {i}",
            "kind": 1, "startTimeUnixNano": str(t + i * 1000),
            "endTimeUnixNano": str(t + i * 1000 + 500), "attributes": _kv(attrs),
            "status": {"code": 2 if kind == "TOOL" and rng.random() < 0.1 else 0}}
        if parent is not None:
            span["parentSpanId"] = f"{parent:016x}"
        yield span


def write_otlp(path: Path, size_mb: float, *, seed: int = 0) -> int:
    """Write one OTLP JSON document of about ``size_mb`` MiB; return its span count."""
    limit = int(size_mb * MB)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        f.write('{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", '
                '"value": {"stringValue": "bench"}}]}, "scopeSpans": [{"scope": {"name": '
                '"bench"}, "spans": [\n')
        written = 0
        for sp in _spans(seed):
            line = json.dumps(sp, separators=(",", ":"))
            if n:
                f.write(",\n")
            f.write(line)
            written += len(line) + 2
            n += 1
            if written >= limit:
                break
        f.write("\n]}]}]}\n")
    return n


def write_jsonl(path: Path, lines: int, *, seed: int = 0) -> None:
    """Write a generic JSONL run of ``lines`` lines (header, task, agent turns, tools)."""
    rng = random.Random(seed)
    agents = [f"agent-{i}" for i in range(8)]
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"run": {"id": "bench", "question": "synthetic task",
                                    "succeeded": False}}) + "\n")
        f.write(json.dumps({"agent": "user", "kind": "task", "content": "synthetic task"})
                + "\n")
        for i in range(2, lines):
            who = agents[rng.randrange(len(agents))]
            r = rng.random()
            if r < 0.1:
                obj: dict[str, Any] = {"agent": "orchestrator", "kind": "instruction",
                                       "to": who, "content": f"do part {i}"}
            elif r < 0.3:
                obj = {"agent": who, "kind": "tool_output", "content": f"ran {i}",
                       "exitcode": int(rng.random() < 0.1)}
            else:
                obj = {"agent": who, "kind": "output",
                       "content": f"turn {i}: " + "z" * rng.randrange(10, 60)}
            f.write(json.dumps(obj) + "\n")


# ----------------------------------------------------------------------- child processes
def _child(kind: str, path: str, audit: bool) -> dict[str, Any]:
    """One measured import (and audit) in this process: times and peak RSS."""
    from icore.adapters import audit_trace, load_jsonl, load_otlp_runs

    c0 = time.process_time()
    t0 = time.perf_counter()
    traces = load_otlp_runs(path) if kind == "otlp" else [load_jsonl(path)]
    t1 = time.perf_counter()
    c1 = time.process_time()
    steps = sum(len(t.steps) for t in traces)
    rss_import = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if audit:
        for t in traces:
            audit_trace(t)
    t2 = time.perf_counter()
    c2 = time.process_time()
    return {"import_s": t1 - t0, "audit_s": t2 - t1, "total_s": t2 - t0, "steps": steps,
            "import_cpu_s": c1 - c0, "audit_cpu_s": c2 - c1,
            "load": os.getloadavg()[0],
            "rss_import": rss_import,
            "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _measure(kind: str, path: Path, audit: bool) -> dict[str, Any]:
    code = ("import json, sys; from icore_lab.bench.micro._import import _child; "
            "print(json.dumps(_child(sys.argv[1], sys.argv[2], sys.argv[3] == '1')))")
    out = subprocess.run([sys.executable, "-c", code, kind, str(path), "1" if audit else "0"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the {kind} import child failed: {out.stderr[-2000:]}")
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


@dataclass
class ImportFigures:
    """Medians of one input's runs (bytes, seconds)."""

    kind: str
    file_bytes: int
    items: int
    runs: list[dict[str, Any]] = field(default_factory=list)

    def median(self, key: str) -> float:
        """The median of ``key`` over the runs."""
        return float(statistics.median(r[key] for r in self.runs))

    @property
    def mb_s(self) -> float:
        """Import throughput, MB (10^6 bytes) per second of import."""
        return self.file_bytes / 1e6 / max(self.median("import_s"), 1e-9)

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON-ready data."""
        return {"kind": self.kind, "file_mb": self.file_bytes / 1e6, "items": self.items,
                "import_s": self.median("import_s"), "audit_s": self.median("audit_s"),
                "total_s": self.median("total_s"), "mb_s": self.mb_s,
                "import_cpu_s": self.median("import_cpu_s"),
                "audit_cpu_s": self.median("audit_cpu_s"),
                "cpu_mb_s": self.file_bytes / 1e6 / max(self.median("import_cpu_s"), 1e-9),
                "load": self.median("load"),
                "rss_import_mb": self.median("rss_import") / 1e6,
                "rss_peak_mb": self.median("rss_peak") / 1e6,
                "rss_over_file": self.median("rss_peak") / self.file_bytes,
                "steps": self.median("steps"), "runs": self.runs}


def run(*, otlp_mb: float = 200.0, jsonl_lines: int = 1_000_000, repeats: int = 1,
        audit: bool = True, workdir: Path | None = None,
        echo: Callable[[str], None] = print) -> list[ImportFigures]:
    """Generate the inputs, import (and audit) each ``repeats`` times; print figures.

    Args:
        otlp_mb: size of the one-document OTLP file, MiB (0 skips it).
        jsonl_lines: lines of the JSONL run (0 skips it).
        repeats: child processes per input (medians are reported).
        audit: also audit each imported trace (``audit_s``, the peak RSS includes X).
        workdir: where the inputs are written (default: a temporary folder, removed).
        echo: where lines are printed.

    Returns:
        One :class:`ImportFigures` per input.
    """
    out: list[ImportFigures] = []
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        folder = Path(d)
        if otlp_mb > 0:
            p = folder / "big.otlp.json"
            t0 = time.perf_counter()
            n = write_otlp(p, otlp_mb)
            echo(f"generated {p.stat().st_size / 1e6:.0f} MB OTLP JSON (one document, "
                 f"{n} spans) in {time.perf_counter() - t0:.1f} s")
            fig = ImportFigures("otlp", p.stat().st_size, n)
            for _ in range(repeats):
                fig.runs.append(_measure("otlp", p, audit=audit))
            out.append(fig)
            p.unlink()
        if jsonl_lines > 0:
            p = folder / "big.jsonl"
            write_jsonl(p, jsonl_lines)
            echo(f"generated {p.stat().st_size / 1e6:.0f} MB JSONL ({jsonl_lines} lines)")
            fig = ImportFigures("jsonl", p.stat().st_size, jsonl_lines)
            for _ in range(repeats):
                fig.runs.append(_measure("jsonl", p, audit=audit))
            out.append(fig)
    report(out, echo, audited=audit)
    return out


def report(figs: list[ImportFigures], echo: Callable[[str], None] = print, *,
           audited: bool = True) -> None:
    """Print one line per input and the targets (met or not; time targets need audit)."""
    for f in figs:
        j = f.to_json()
        echo(f"{f.kind:5s} {j['file_mb']:7.1f} MB  {f.items:>9d} items  import "
             f"{j['import_s']:6.1f} s ({j['mb_s']:5.1f} MB/s)  audit {j['audit_s']:6.1f} s  "
             f"total {j['total_s']:6.1f} s  peak RSS {j['rss_peak_mb']:7.0f} MB "
             f"(import {j['rss_import_mb']:.0f} MB; {j['rss_over_file']:.2f}x the file)  "
             f"median of {len(f.runs)}")
        rate = (f"{j['steps'] / j['audit_cpu_s']:.0f} steps/s" if audited
                and j['audit_cpu_s'] > 0 else "not audited")
        echo(f"  CPU: import {j['import_cpu_s']:.1f} s ({j['cpu_mb_s']:.1f} MB/s of CPU), "
             f"audit {j['audit_cpu_s']:.1f} s, {rate}; load average {j['load']:.1f} on "
             f"{os.cpu_count()} cores (a loaded "
             f"machine stretches wall times; CPU seconds are less affected)")
        if f.kind == "otlp":
            what = "import + audit" if audited else "import only (--no-audit)"
            echo(f"  target: {what} <= {TARGET_OTLP_S:.0f} s: "
                 f"{'met' if j['total_s'] <= TARGET_OTLP_S else 'MISSED'} "
                 f"({j['total_s'] / TARGET_OTLP_S:.2f}x the target; CPU "
                 f"{(j['import_cpu_s'] + j['audit_cpu_s']) / TARGET_OTLP_S:.2f}x); peak RSS <= "
                 f"{TARGET_RSS_RATIO:g}x file: "
                 f"{'met' if j['rss_over_file'] <= TARGET_RSS_RATIO else 'MISSED'} "
                 f"({j['rss_over_file'] / TARGET_RSS_RATIO:.2f}x the target)")
        else:
            echo(f"  target: peak RSS <= {TARGET_JSONL_RSS_MB:.0f} MB: "
                 f"{'met' if j['rss_peak_mb'] <= TARGET_JSONL_RSS_MB else 'MISSED'}")
        echo(f"  target: import >= {TARGET_MB_S:g} MB/s: "
             f"{'met' if j['mb_s'] >= TARGET_MB_S else 'MISSED'} "
             f"({j['mb_s'] / TARGET_MB_S:.2f}x the target)")


__all__ = ["ImportFigures", "report", "run", "write_jsonl", "write_otlp"]
