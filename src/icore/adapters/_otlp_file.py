"""OTLP JSON out: spans as OTLP/JSON documents, the file exporter, the delivery check.

Part of :mod:`icore.adapters._otel_export` (split for size, issue 26); the file exporter
writes the OpenTelemetry Collector file exporter's format, which ``icore audit`` reads.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import StatusCode

from icore._files import written_path_problem
from icore._flock import close_lock, open_lock
from icore._strict_json import strict_dumps
from icore.adapters import _otel_names as N
from icore.adapters._errors import ExportError

ERROR_ATTR = N.ERROR_TYPE


# --------------------------------------------------------------- OTLP JSON file exporter
def _any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, Sequence):
        return {"arrayValue": {"values": [_any_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _kv(attrs: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any_value(v)} for k, v in (attrs or {}).items()]


_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An OTLP ``ExportTraceServiceRequest`` (protobuf JSON mapping) for ``spans``.

    Ids are lowercase hex, times decimal-string nanoseconds, enums integers — the format
    the OpenTelemetry Collector's file exporter writes and every OTLP/HTTP JSON receiver
    reads.
    """
    by_res: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for s in spans:
        res = s.resource
        entry = by_res.setdefault(id(res), (res, {}))
        scope = s.instrumentation_scope
        skey = (scope.name if scope else "", (scope.version or "") if scope else "")
        ctx = s.context
        assert ctx is not None
        d: dict[str, Any] = {
            "traceId": format(ctx.trace_id, "032x"), "spanId": format(ctx.span_id, "016x"),
            "name": s.name, "kind": s.kind.value + 1,
            "startTimeUnixNano": str(s.start_time or 0),
            "endTimeUnixNano": str(s.end_time or 0), "attributes": _kv(s.attributes),
            "events": [{"timeUnixNano": str(e.timestamp), "name": e.name,
                        "attributes": _kv(e.attributes)} for e in s.events],
            "status": {"code": _STATUS[s.status.status_code],
                       **({"message": s.status.description} if s.status.description else {})},
        }
        if s.parent is not None:
            d["parentSpanId"] = format(s.parent.span_id, "016x")
        if s.links:
            d["links"] = [{"traceId": format(lk.context.trace_id, "032x"),
                           "spanId": format(lk.context.span_id, "016x"),
                           "attributes": _kv(lk.attributes)} for lk in s.links]
        entry[1].setdefault(skey, []).append(d)
    return {"resourceSpans": [
        {"resource": {"attributes": _kv(res.attributes)},
         "scopeSpans": [{"scope": {"name": n, **({"version": v} if v else {})}, "spans": ss}
                        for (n, v), ss in scopes.items()]}
        for res, scopes in by_res.values()]}


class DeliveryCheck(SpanExporter):
    """Wraps an exporter and counts the spans it failed to deliver (issue 29).

    An OTLP exporter reports a failed batch only to the SDK's log; this wrapper keeps the
    count so a command can end with a non-zero exit when its spans were lost.

    Attributes:
        inner: the wrapped exporter.
        failed: spans in batches that returned FAILURE or raised.
        delivered: spans in batches that returned SUCCESS.
        last_error: the last exception raised by ``inner.export`` (its text).
    """

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.failed = 0
        self.delivered = 0
        self.last_error = ""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Delegate, counting the batch as delivered or failed; never raises."""
        try:
            res = self.inner.export(spans)
        except Exception as exc:  # an exporter must not raise; count it as lost
            self.last_error = f"{type(exc).__name__}: {exc}"
            res = SpanExportResult.FAILURE
        if res == SpanExportResult.SUCCESS:
            self.delivered += len(spans)
        else:
            self.failed += len(spans)
        return res

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the wrapped exporter."""
        return bool(self.inner.force_flush(timeout_millis))


def _append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` (one JSON line) in one ``write`` on an ``O_APPEND`` descriptor.

    A buffered text file wrote a long line in several system calls: a Ctrl-C between two
    of them (the exporter runs in the audit's thread) left half a line, and the file no
    longer imported (issue 29). One ``write`` of a regular file is not split by a signal;
    a short write (a full disk) is cut back to the length before, so the file holds whole
    lines only. Writers take an exclusive ``flock`` on the file for the append, and the
    cut is made only when the file ends with this writer's bytes: another writer's lines
    (two exporters into one file, or a writer that takes no lock) are never cut.

    Raises:
        OSError: the file cannot be opened or written (its length is restored when no
            other writer appended since).
    """
    import fcntl

    # listed and O_CLOEXEC: a child forked meanwhile never keeps the lock (icore._flock)
    fd = open_lock(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        start = os.fstat(fd).st_size
        done = 0
        try:
            done = os.write(fd, data)
            while done < len(data):
                done += os.write(fd, data[done:])
        except BaseException:
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_size == start + done:  # only this writer's bytes
                    os.ftruncate(fd, start)
            raise
    finally:
        close_lock(fd)  # releases the lock


class OtlpJsonFileExporter(SpanExporter):
    """Appends each export batch as one JSON line of ``ExportTraceServiceRequest``.

    That is the Collector file exporter's format (e.g. ``run.otlp.json``), which
    ``icore audit`` reads back.

    Args:
        path: the file (created; appended to).

    Raises:
        ExportError: ``path`` names no file (None, empty, a NUL byte, a lone surrogate;
            field ``path``), or the file cannot be created or appended to (checked up
            front, so a run never loses its spans silently; a FIFO no process reads is
            refused, not waited on).
    """

    def __init__(self, path: str | Path) -> None:
        if (bad := written_path_problem(path)) is not None:
            raise ExportError(f"the span file path {bad}", file="<argument>", field="path")
        self.path = Path(path)
        self._lock = threading.Lock()
        try:  # non-blocking: a FIFO no process reads would block here forever
            os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                             | os.O_NONBLOCK | os.O_CLOEXEC, 0o644))
        except OSError as exc:
            why = ("it is a FIFO (named pipe) that no process reads"
                   if exc.errno == errno.ENXIO else str(exc))
            raise ExportError(f"cannot write OTLP JSON: {why}", file=str(self.path),
                              field="<root>") from None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write one line; FAILURE when the file cannot be written."""
        data = (strict_dumps(otlp_json(spans), separators=(",", ":")) + "\n").encode("utf-8")
        try:
            with self._lock:
                _append_whole(self.path, data)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release (the file is closed after every batch)."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Every batch is written synchronously."""
        return True
