"""``icore bench otel``: OpenTelemetry import and export cost.

Thin; see :mod:`icore_lab.bench.micro._otel`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from icore.cli.inputs import (
    int_list,
    nonempty_path,
    output_file,
    refuse_non_folder,
    size_or_zero,
)


def _ints(text: str | None, what: str) -> tuple[int, ...] | None:
    """A given comma-separated integer option (``''`` is refused), else None."""
    return None if text is None else int_list(text, what)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore bench otel`` and ``icore bench import``."""

    @bench.command("import")
    def import_cmd(
        otlp_mb: float = typer.Option(200.0, callback=size_or_zero, help="Size of the "
                                      "one-document OTLP JSON file, MiB (0 skips it)."),
        jsonl_lines: int = typer.Option(1_000_000, min=0, help="Lines of the JSONL run "
                                        "(0 skips it)."),
        phoenix_mb: float = typer.Option(0.0, callback=size_or_zero, help="Size of a "
                                         "Phoenix span list (one document), MiB (0 skips "
                                         "it)."),
        langfuse_mb: float = typer.Option(0.0, callback=size_or_zero, help="Size of a "
                                          "Langfuse trace with its observations, MiB (0 "
                                          "skips it)."),
        repeats: int = typer.Option(1, min=1, help="Child processes per input (medians)."),
        audit: bool = typer.Option(True, "--audit/--no-audit", help="Also audit each "
                                   "trace (time and peak RSS then include X)."),
        workdir: Path | None = typer.Option(None, parser=nonempty_path,
                                            help="Folder for the generated inputs "
                                            "(default: a temporary folder; removed)."),
        json_out: Annotated[Path | None, typer.Option(
            "--json", help="Write figures as JSON.")] = None,
    ) -> None:
        """Benchmark streamed import of big traces: CPU s, MB/s, peak RSS / file size.

        Targets (issue 29): a 200 MB OTLP file imported and audited in <= 60 s with peak
        RSS <= 2x the file; a 10^6-line JSONL run in <= 1 GB; import >= 10 MB/s. Times
        are CPU seconds of each child process (wall times are printed too).
        """
        from icore_lab.bench.micro import run_import_bench

        if workdir is not None:
            refuse_non_folder(workdir, what="--workdir")
        with output_file(json_out, what="--json output") as out:
            figs = run_import_bench(otlp_mb=otlp_mb, jsonl_lines=jsonl_lines,
                                    phoenix_mb=phoenix_mb, langfuse_mb=langfuse_mb,
                                    repeats=repeats, audit=audit, workdir=workdir,
                                    echo=typer.echo)
            if out is not None:
                out.write(json.dumps([f.to_json() for f in figs], indent=2))

    @bench.command("otel")
    def otel_cmd(
        spans: int = typer.Option(100_000, min=2, help="Spans in the synthetic import trace."),
        export_runs: int = typer.Option(
            3, min=0, help="icore run --matched runs per arm (off/on, alternating); 0 skips "
            "export."),
        families: str | None = typer.Option(
            None, help="Matched families (comma-separated; default all three)."),
        seeds: str | None = typer.Option(
            None, help="Matched seeds (comma-separated; default 0..9)."),
        receiver: str | None = typer.Option(
            None, help="OTLP/HTTP URL to export to (default: a local sink process)."),
        json_out: Annotated[Path | None, typer.Option(
            "--json", help="Write figures as JSON.")] = None,
    ) -> None:
        """Benchmark OTLP import (100,000 spans) and export overhead on the matched study."""
        from icore.live import FAMILIES
        from icore_lab.bench.micro import run_otel_bench as run

        fams = tuple(f.strip() for f in families.split(",") if f.strip()) if families else None
        unknown = [f for f in fams or () if f not in FAMILIES]
        if unknown or (families is not None and not fams):  # before the import benchmark
            raise typer.BadParameter(
                f"unknown family {unknown[0]!r}; use one of {', '.join(FAMILIES)}" if unknown
                else "names no family", param_hint="--families")
        if receiver is not None:  # before the import benchmark, naming the flag
            _check_receiver(receiver)
        with output_file(json_out, what="--json output") as out:
            res = run(spans=spans, export_runs=export_runs, families=fams,
                      seeds=_ints(seeds, "--seeds"), receiver=receiver, echo=typer.echo)
            if out is not None:
                out.write(json.dumps({
                    "import_spans": res.import_spans, "import_s": res.import_s,
                    "import_mb": res.import_mb, "import_steps": res.import_steps,
                    "export_off_s": list(res.export_off_s),
                    "export_on_s": list(res.export_on_s), "export_spans": res.export_spans,
                    "export_off_cpu_s": list(res.export_off_cpu_s),
                    "export_on_cpu_s": list(res.export_on_cpu_s),
                    "export_import_s": res.export_import_s,
                    "export_overhead": res.export_overhead,
                    "export_off_total_cpu_s": list(res.export_off_total_cpu_s),
                    "export_cpu_overhead": res.export_cpu_overhead, "receiver": res.receiver,
                    "load_average": res.load},
                    indent=2))


def _check_receiver(url: str) -> None:
    """Refuse a ``--receiver`` that is no http(s) URL with a host (exit 2, issue 29).

    It was refused only after the import benchmark ran, as ``<otlp>: endpoint``.
    """
    from urllib.parse import urlsplit

    from icore.adapters import ExportError, traces_endpoint
    from icore.errors import redact

    try:
        traces_endpoint(url)
        parts = urlsplit(url.strip())
        _ = parts.port  # ValueError: a port that is no number in 0-65535
        if not parts.hostname:
            raise ValueError("no host")
    except ExportError as exc:
        raise typer.BadParameter(exc.problem, param_hint="--receiver") from None
    except ValueError as exc:
        raise typer.BadParameter(f"{redact(url)!r} is no OTLP/HTTP URL ({exc})",
                                 param_hint="--receiver") from None
