"""Import a recorded run into X = (G, Q, Π) and audit it (design.md 2, data flow 3).

:func:`audit_trace` replays a :class:`~icore.adapters.Trace` message by message into an
:class:`icore.state.State` over the family's declaration package, with these mappings
(docs/audit-real-runs.md, "Mapping"):

- task statement -> ``task`` event; required root obligation ``task`` (``pose_task``);
- plan / replan -> ``plan`` event; obligation ``plan<k>`` (``plan``); a replan supersedes
  the previous plan with a ``transported_to`` relation (``replan``);
- routed instruction (``Orchestrator (-> X)``) with the ledger's ``next_speaker`` ->
  ``instruction`` event; obligation ``o<step>`` assigned to X (``assign``);
  CaptainAgent experts self-assign the turn they take (``self_assign``);
- agent output -> ``output`` event; ``status=submitted`` and ``result`` assertions on the
  agent's open obligation (``submit``) with an ``output_evidence`` certificate;
- tool output -> ``tool_output`` event, evidence for the code it ran;
- ledger -> ``ledger`` event; claims ``is_request_satisfied``, ``is_progress_being_made``,
  ``is_in_loop`` on ``task`` (``ledger_update``) citing the outputs since the previous
  ledger, with a ``ledger_evidence`` certificate;
- stall / replan trigger, and a ledger admitting no progress or a loop -> ``stall``
  progress events;
- termination -> ``termination`` event; terminal marker on ``task`` (``terminate``) with
  an ``answer_check`` certificate.

An assertion whose certificate fails is imported anyway (so X records what the run
claimed) and is unsound; the importer raises an ``unsupported_assertion`` hard flag for
it. Work, evidence and assignment defects are diagnosed and routed by iCORE-Audit
(:func:`icore.audit.diagnose` on the hard flag / reassignment trigger,
:func:`icore.audit.responsible_agent`); stalls, replans and terminal failures are
diagnosed here. Each diagnosis cites the events of G it rests on.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icore._files import not_a_regular_file
from icore.adapters._decl import (
    OTEL_IMPORT,
    captain_agent_declaration,
    generic_declaration,
    magentic_one_declaration,
)
from icore.adapters._errors import AdapterError
from icore.adapters._otel_import import ICORE_LIVE, OTEL
from icore.adapters._results import (
    AuditResult,
    Finding,
    MetricPoint,
    RunSummary,
)
from icore.adapters._trace import Trace
from icore.adapters._trace_builder import ROOT, _StepReader
from icore.adapters._valid_text import valid_text_trace
from icore.adapters._values import trace_path
from icore.adapters._whowhen import CAPTAIN_AGENT, MAGENTIC_ONE
from icore.errors import IcoreError
from icore.state import (
    DeclarationPackage,
)


def declaration_for(trace: Trace) -> DeclarationPackage:
    """The declaration package of the trace's family."""
    if trace.family == MAGENTIC_ONE:
        return magentic_one_declaration(trace.agents)
    if trace.family == CAPTAIN_AGENT:
        return captain_agent_declaration(trace.agents)
    if trace.family == OTEL:
        return generic_declaration(trace.agents, orchestrator=trace.orchestrator,
                                   name=OTEL_IMPORT)
    return generic_declaration(trace.agents, orchestrator=trace.orchestrator)


def audit_trace(trace: Trace, *, decl: DeclarationPackage | None = None) -> AuditResult:
    """Import ``trace`` into X and audit it.

    Text holding a lone UTF-16 surrogate (a JSON escape of U+D800..U+DFFF alone, e.g. half
    an emoji) is audited with U+FFFD in its place, and a warning names the fields
    (:func:`icore.adapters._valid_text.valid_text_trace`), so every report and export can
    encode it.

    Args:
        trace: a parsed run (:func:`load_who_and_when`, :func:`load_jsonl`, ...).
        decl: the declaration package (default: :func:`declaration_for` the family).

    Returns:
        The audited run (X, timeline, diagnoses, unsupported assertions, counts).

    Raises:
        AdapterError: ``trace`` is not a :class:`Trace` or ``decl`` not a
            :class:`DeclarationPackage` (field ``trace`` / ``decl``, file ``<memory>``);
            the run references something the declaration cannot express.
    """
    if not isinstance(trace, Trace):
        raise AdapterError(f"trace must be a Trace (load_trace, parse_jsonl, ...), got "
                           f"{type(trace).__name__}", file="<memory>", field="trace")
    if decl is not None and not isinstance(decl, DeclarationPackage):
        raise AdapterError(f"decl must be a DeclarationPackage or None, got "
                           f"{type(decl).__name__}", file=trace.file or "<memory>",
                           field="decl")
    trace = valid_text_trace(trace)
    if trace.family == ICORE_LIVE and decl is None:
        from icore.adapters._otel_live import audit_live_trace

        return audit_live_trace(trace)
    t0 = time.perf_counter()
    b = _StepReader(trace, decl or declaration_for(trace))
    with _no_cyclic_gc():
        b.run()
    return AuditResult(
        trace=trace,
        state=b.state,
        step_events=b.step_events,  # the builder is dropped: no copy (issue 29)
        timeline=b.timeline,
        diagnoses=tuple(b.diagnoses),
        unsupported=tuple(b.unsupported),
        stalls=b.stalls,
        replans=b.replans,
        final=b.state.metrics(),
        elapsed_ms=(time.perf_counter() - t0) * 1000.0,
        terminated=b.terminated,
        answer_checked=b.answer_checked,
        paused=b.paused,
        notes=b.log.notes,
        flag_places=dict(b.log.places.at),
    )


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while a run is imported.

    The import allocates millions of long-lived, acyclic objects (events, assertions,
    certificates); each full collection walks all of them, about a fifth of a long
    run's audit time (docs/audit.md "Cost"). Reference counting still frees everything
    as usual; the collector is re-enabled (if it was on) however the block ends.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def load_trace(path: str | Path) -> Trace:
    """Load any supported trace file.

    Supported: ``.jsonl`` (generic format), Who&When ``.json``, or OpenTelemetry spans
    (``*.otlp.json`` / ``*.otlp.jsonl``, or a ``.json`` whose start reads as OTLP JSON, a
    Phoenix span list or a Langfuse trace: :func:`load_otlp`).
    """
    from icore.adapters._jsonl import load_jsonl
    from icore.adapters._otel_import import load_otlp
    from icore.adapters._whowhen import load_who_and_when

    p = trace_path(path)
    if _is_otel_file(p):
        return load_otlp(p)
    if p.suffix.lower() == ".jsonl":
        return load_jsonl(p)
    return load_who_and_when(p)


def audit_path(path: str | Path) -> AuditResult:
    """Load and audit one file (see :func:`load_trace`).

    Raises:
        AdapterError: ``path`` is not a ``str`` or ``os.PathLike`` (field ``path``); as
            :func:`audit_file`.
    """
    return _one_file(path, lambda p: [audit_trace(load_trace(p))])[0]


def audit_file(path: str | Path) -> list[AuditResult]:
    """Audit every run of one file.

    One run per trace of an OpenTelemetry export (:func:`icore.adapters.load_otlp_runs`),
    else the file's one run (:func:`audit_path`).

    Every failure names the file: a typed error raised below the importer (a
    declaration, decision or state error on a value the importer let through) becomes
    an :class:`AdapterError` of this file, with the field the error names, if any.

    Raises:
        AdapterError: ``path`` is not a ``str`` or ``os.PathLike`` (field ``path``); as
            :func:`load_trace`; any other :class:`~icore.errors.IcoreError` of the import
            or the audit, wrapped.
    """
    def runs(p: Path) -> list[AuditResult]:
        if _is_otel_file(p):
            from icore.adapters._otel_import import load_otlp_runs

            return [audit_trace(t) for t in load_otlp_runs(p)]
        return [audit_trace(load_trace(p))]

    return _one_file(path, runs)


def _one_file(path: Any, audit: Callable[[Path], list[AuditResult]]) -> list[AuditResult]:
    """Run ``audit`` on one user-given path; every typed error names the file."""
    p = trace_path(path)
    with _no_cyclic_gc():
        try:
            return audit(p)
        except AdapterError:
            raise
        except IcoreError as exc:
            where = exc.fields.get("field") or exc.fields.get("path") or "<audit>"
            raise AdapterError(f"{type(exc).__name__}: {exc.message}", file=str(p),
                               field=str(where)) from exc


def _is_otel_file(p: Path) -> bool:
    from icore.adapters._otel_import import is_otel_path, sniff_otel

    if is_otel_path(p):
        return True
    if p.suffix.lower() == ".json" and p.is_file():
        with contextlib.suppress(OSError, UnicodeDecodeError), p.open(encoding="utf-8") as f:
            return sniff_otel(f.read(8192))
    return False


@dataclass(frozen=True, slots=True)
class PathScan:
    """What :func:`scan_paths` found: the trace files, and what it passed over.

    Attributes:
        files: the files to import, in a stable order.
        skipped: ``(path, why)`` of every entry of a given folder that is neither a
            folder nor a regular file (a FIFO, a socket, a device, a broken symlink): never
            opened (a FIFO would block the audit forever), said to the user.
    """

    files: tuple[Path, ...]
    skipped: tuple[tuple[Path, str], ...] = ()


def scan_paths(paths: Sequence[str | Path]) -> PathScan:
    """Expand files and folders (recursively: ``*.json``, ``*.jsonl``) in a stable order.

    ``*.otlp.jsonl`` files are included; ``*.prov.json`` exports are not. Inside a folder
    each entry is only ``stat``-ed: regular files with a trace suffix are collected,
    other regular files ignored, and anything that is not a folder or a regular file
    (whatever its name) is skipped and listed in :attr:`PathScan.skipped`. A path given
    by name is returned as it is (the loader refuses a special file by kind), but for an
    ``icore audit --json`` report, skipped as in a folder; a str or path alone is one
    path. An entry that cannot be read (no permission) is skipped.

    Raises:
        AdapterError: ``paths`` is no collection of paths, or an item is no path.
    """
    if isinstance(paths, str | os.PathLike):  # one path, not the letters of its name
        paths = [paths]
    elif not isinstance(paths, Iterable):
        raise AdapterError(f"paths must be a list of files or folders, not "
                           f"{type(paths).__name__}", file="<argument>", field="paths")
    out: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for p in map(trace_path, paths):
        try:
            folder = p.is_dir()
        except OSError:  # no permission, a loop: the loader says so, naming the file
            folder = False
        if not folder:
            if _own_report(p) is not None:  # given by name too (QA qa-new14 S4)
                skipped.append((p, OWN_REPORT))
            else:
                out.append(p)
            continue
        found: list[Path] = []
        for q, why in _walk(p):
            if why is None:
                found.append(q)
            else:
                skipped.append((q, why))
        out.extend(sorted(found, key=_natural))
    return PathScan(tuple(out), tuple(sorted(skipped, key=lambda x: str(x[0]))))


def _walk(top: Path) -> Iterator[tuple[Path, str | None]]:
    """Trace files under ``top`` (why None) and entries skipped with why (see scan_paths).

    Symbolic links to folders are not followed (as ``Path.rglob``); an entry that cannot
    be ``stat``-ed or a folder that cannot be listed (no permission, a link to a folder
    of another user's process) is skipped with the reason, never raised.
    """
    errors: list[OSError] = []
    for root, dirs, files in os.walk(top, onerror=errors.append):
        for name in (*dirs, *files):
            q = Path(root) / name
            try:
                is_file, is_dir = q.is_file(), q.is_dir()
            except OSError as exc:
                yield q, f"cannot be read ({exc.strerror or exc})"
                continue
            if is_file:
                if q.suffix.lower() in (".json", ".jsonl") and \
                        not q.name.endswith(".prov.json"):
                    yield q, _own_report(q)
            elif not is_dir:
                yield q, not_a_regular_file(q) or (
                    "is a symbolic link to nothing (broken, or a loop)" if q.is_symlink()
                    else "cannot be read (stat failed)")
        yield from _listing_errors(errors)
    yield from _listing_errors(errors)  # the last folder's, or the top's own


OWN_REPORT = "is an icore audit report (--json), not a trace"
"""Why :func:`scan_paths` skipped a ``.json`` file of a folder: icore's own report."""
_REPORT_HEAD = re.compile(rb'\A\s*\{\s*"icore"\s*:\s*"[^"]*"\s*,\s*"runs"\s*:')


def _own_report(path: Path) -> str | None:
    """Why a ``.json`` file found in a folder is not a trace, or None.

    An ``icore audit --json`` report (its first keys are ``"icore"`` and ``"runs"``) is
    not (QA qa-new12b S4: auditing a folder that holds its own reports read them as
    Who&When traces).
    """
    if path.suffix.lower() != ".json":
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None  # the loader names the file and why it cannot be read
    if _REPORT_HEAD.match(head):
        return OWN_REPORT
    return None


def _listing_errors(errors: list[OSError]) -> Iterator[tuple[Path, str]]:
    """Drain ``os.walk``'s errors: each folder that could not be listed, with why."""
    while errors:
        err = errors.pop(0)
        yield Path(err.filename or "?"), f"cannot be listed ({err.strerror or err})"


def collect_paths(paths: Sequence[str | Path]) -> list[Path]:
    """The files of :func:`scan_paths` (what it skipped is dropped: see there)."""
    return list(scan_paths(paths).files)


def _natural(p: Path) -> tuple[str, int, str]:
    stem = p.stem
    return (str(p.parent), int(stem) if stem.isdigit() else -1, stem)


__all__ = [
    "OWN_REPORT",
    "ROOT",
    "AuditResult",
    "Finding",
    "MetricPoint",
    "PathScan",
    "RunSummary",
    "audit_file",
    "audit_path",
    "audit_trace",
    "collect_paths",
    "declaration_for",
    "load_trace",
    "scan_paths",
]
