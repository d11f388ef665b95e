"""``icore bench import``: streamed import of big traces, in CPU time and memory (issue 29).

Generates the inputs (never committed; :mod:`icore_lab.bench.micro._import_inputs`), then
measures each in a fresh child process so the peak resident set size (``ru_maxrss``) is
that one import's:

- **OTLP one document**: one ``ExportTraceServiceRequest`` of ``--otlp-mb`` MiB (default
  200) of OpenInference/GenAI spans (agents, LLM and tool calls, handoffs), as one
  document (the worst case: nothing but a streaming parser can read it in bounded
  memory); imported with :func:`icore.adapters.iter_otlp_runs` and audited with
  :func:`icore.adapters.audit_trace`. Targets: import + audit <= 60 s, peak RSS <= 2x
  the file size.
- **JSONL**: a generic JSONL run of ``--jsonl-lines`` lines (default 10^6), imported with
  :func:`icore.adapters.load_jsonl` and audited. Target: peak RSS <= 1 GB.
- **Phoenix / Langfuse** (``--phoenix-mb``, ``--langfuse-mb``; default 0: skipped): the
  same spans as a Phoenix span list / a Langfuse trace with observations, one document.
- **throughput**: MB/s of the import alone (parse + mapping to the trace). Target >= 10.

Times are CPU seconds of the child (``time.process_time``): on a shared, loaded machine
the wall time mostly measures the other processes (it is printed too). Each figure is the
median over ``repeats`` child processes.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icore_lab.bench.micro._import_inputs import WRITERS, write_jsonl, write_otlp

if TYPE_CHECKING:
    from icore.adapters import Trace

TARGET_OTLP_S = 60.0
"""Import + audit of the 200 MB OTLP file, seconds (CPU)."""
TARGET_RSS_RATIO = 2.0
"""Peak RSS over file size for the OTLP file."""
TARGET_JSONL_RSS_MB = 1000.0
"""Peak RSS of the 10^6-line JSONL run, MB (10^6 bytes)."""
TARGET_MB_S = 10.0
"""Import throughput, MB/s (of CPU time)."""


# ----------------------------------------------------------------------- child processes
def _rss() -> int:
    """Peak RSS of this process so far, bytes (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child(kind: str, path: str, audit: bool) -> dict[str, Any]:
    """One measured import (and audit) in this process: times and peak RSS.

    An OpenTelemetry file is read with :func:`icore.adapters.iter_otlp_runs`: each run
    is built, audited and dropped before the next (issue 29). ``rss_import`` is the peak
    once the file is read and its first run built (the bench inputs hold one run).
    """
    from icore.adapters import audit_trace, iter_otlp_runs, load_jsonl

    def read() -> Iterator[Trace]:
        if kind == "jsonl":
            yield load_jsonl(path)
        else:
            yield from iter_otlp_runs(path)

    rss0 = _rss()
    c0 = time.process_time()
    t0 = time.perf_counter()
    runs = read()
    imp = cpu_imp = 0.0
    steps = 0
    rss_import = None
    while True:
        a, b = time.perf_counter(), time.process_time()
        t = next(runs, None)
        imp, cpu_imp = imp + time.perf_counter() - a, cpu_imp + time.process_time() - b
        if t is None:
            break
        steps += len(t.steps)
        if rss_import is None:
            rss_import = _rss()
        if audit:
            audit_trace(t)
        del t
    t2 = time.perf_counter()
    c2 = time.process_time()
    return {"import_s": imp, "audit_s": t2 - t0 - imp,
            "total_s": t2 - t0, "steps": steps, "import_cpu_s": cpu_imp,
            "audit_cpu_s": c2 - c0 - cpu_imp, "load": os.getloadavg()[0], "rss_start": rss0,
            "rss_import": rss_import or _rss(), "rss_peak": _rss()}


def _measure(kind: str, path: Path, audit: bool) -> dict[str, Any]:
    code = ("import json, sys; from icore_lab.bench.micro._import_bench import _child; "
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
        """Import throughput, MB (10^6 bytes) per second of import (wall)."""
        return self.file_bytes / 1e6 / max(self.median("import_s"), 1e-9)

    @property
    def cpu_mb_s(self) -> float:
        """Import throughput, MB (10^6 bytes) per CPU second of import."""
        return self.file_bytes / 1e6 / max(self.median("import_cpu_s"), 1e-9)

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON-ready data."""
        cpu = self.median("import_cpu_s") + self.median("audit_cpu_s")
        return {"kind": self.kind, "file_mb": self.file_bytes / 1e6, "items": self.items,
                "import_s": self.median("import_s"), "audit_s": self.median("audit_s"),
                "total_s": self.median("total_s"), "mb_s": self.mb_s,
                "import_cpu_s": self.median("import_cpu_s"),
                "audit_cpu_s": self.median("audit_cpu_s"), "total_cpu_s": cpu,
                "cpu_mb_s": self.cpu_mb_s, "load": self.median("load"),
                "rss_start_mb": self.median("rss_start") / 1e6,
                "rss_import_mb": self.median("rss_import") / 1e6,
                "rss_peak_mb": self.median("rss_peak") / 1e6,
                "rss_import_over_file": self.median("rss_import") / self.file_bytes,
                "rss_over_file": self.median("rss_peak") / self.file_bytes,
                "steps": self.median("steps"), "runs": self.runs}


def run(*, otlp_mb: float = 200.0, jsonl_lines: int = 1_000_000, phoenix_mb: float = 0.0,
        langfuse_mb: float = 0.0, repeats: int = 1, audit: bool = True,
        workdir: Path | None = None,
        echo: Callable[[str], None] = print) -> list[ImportFigures]:
    """Generate the inputs, import (and audit) each ``repeats`` times; print figures.

    Args:
        otlp_mb: size of the one-document OTLP file, MiB (0 skips it).
        jsonl_lines: lines of the JSONL run (0 skips it).
        phoenix_mb: size of the Phoenix span list, MiB (0 skips it).
        langfuse_mb: size of the Langfuse trace, MiB (0 skips it).
        repeats: child processes per input (medians are reported).
        audit: also audit each imported trace (``audit_s``, the peak RSS includes X).
        workdir: where the inputs are written (default: a temporary folder, removed).
        echo: where lines are printed.

    Returns:
        One :class:`ImportFigures` per input.
    """
    out: list[ImportFigures] = []
    docs = (("otlp", otlp_mb, "big.otlp.json"), ("phoenix", phoenix_mb, "big-phoenix.json"),
            ("langfuse", langfuse_mb, "big-langfuse.json"))
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        folder = Path(d)
        for kind, size, name in docs:
            if size <= 0:
                continue
            p = folder / name
            t0 = time.perf_counter()
            n = WRITERS[kind](p, size)
            echo(f"generated {p.stat().st_size / 1e6:.0f} MB {kind} JSON (one document, "
                 f"{n} spans) in {time.perf_counter() - t0:.1f} s")
            fig = ImportFigures(kind, p.stat().st_size, n)
            for _ in range(repeats):
                fig.runs.append(_measure(kind, p, audit=audit))
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


def _verdict(value: float, target: float, *, most: bool = True) -> str:
    met = value <= target if most else value >= target
    return f"{'met' if met else 'MISSED'} ({value / target:.2f}x the target)"


def report(figs: list[ImportFigures], echo: Callable[[str], None] = print, *,
           audited: bool = True) -> None:
    """Print each input's figures and its targets (CPU seconds; wall times alongside)."""
    echo(f"CPU seconds of each child process (load average now {os.getloadavg()[0]:.1f} "
         f"on {os.cpu_count()} cores: a loaded machine stretches wall times, CPU seconds "
         "much less)")
    for f in figs:
        j = f.to_json()
        echo(f"{f.kind:8s} {j['file_mb']:7.1f} MB  {f.items:>9d} items  {j['steps']:>9.0f} "
             f"steps  median of {len(f.runs)}")
        rate = (f"{j['steps'] / j['audit_cpu_s']:.0f} steps/s" if audited
                and j['audit_cpu_s'] > 0 else "not audited")
        echo(f"  CPU: import {j['import_cpu_s']:.1f} s ({j['cpu_mb_s']:.1f} MB/s), audit "
             f"{j['audit_cpu_s']:.1f} s ({rate}), total {j['total_cpu_s']:.1f} s  "
             f"[wall: import {j['import_s']:.1f} s ({j['mb_s']:.1f} MB/s), total "
             f"{j['total_s']:.1f} s, load {j['load']:.1f}]")
        echo(f"  peak RSS: import {j['rss_import_mb']:.0f} MB ({j['rss_import_over_file']:.2f}x "
             f"the file), with the audit {j['rss_peak_mb']:.0f} MB ({j['rss_over_file']:.2f}x"
             f"); the interpreter alone {j['rss_start_mb']:.0f} MB")
        if f.kind == "jsonl":
            echo(f"  target: peak RSS <= {TARGET_JSONL_RSS_MB:.0f} MB: "
                 f"{_verdict(j['rss_peak_mb'], TARGET_JSONL_RSS_MB)}")
        else:
            what = "import + audit" if audited else "import only (--no-audit)"
            echo(f"  target: {what} <= {TARGET_OTLP_S:.0f} s of CPU: "
                 f"{_verdict(j['total_cpu_s'], TARGET_OTLP_S)}; peak RSS <= "
                 f"{TARGET_RSS_RATIO:g}x the file: "
                 f"{_verdict(j['rss_over_file'], TARGET_RSS_RATIO)}"
                 + ("" if f.kind == "otlp" else " (the OTLP file's targets, for reference)"))
        echo(f"  target: import >= {TARGET_MB_S:g} MB/s of CPU: "
             f"{_verdict(j['cpu_mb_s'], TARGET_MB_S, most=False)}")


__all__ = ["ImportFigures", "report", "run", "write_jsonl", "write_otlp"]
