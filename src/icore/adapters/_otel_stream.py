"""The OpenTelemetry importer's streaming reader (:func:`iter_file_spans`).

The spans of a file of any size, read with bounded memory. Part of
:mod:`icore.adapters._otel_import` (split for size, issue 26).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from icore._files import not_a_regular_file
from icore.adapters._errors import AdapterError
from icore.adapters._json_where import located
from icore.adapters._json_window import MAX_DEPTH, JsonWindow, check_depth
from icore.adapters._otel_readers import (
    _document,
    _jaeger_spans,
    _langfuse_span,
    _loads,
    _otlp_span,
    _otlp_span_fast,
    list_reader,
)
from icore.adapters._otel_values import OtelSpan, _kvs
from icore.adapters._values import (
    check_size,
    long_int_in_file,
    trace_path,
)

# ----------------------------------------------------------------------- streaming reader
_SPANS_PREFIXES = ("resourceSpans.item", "resource_spans.item", "result.resourceSpans.item")


def iter_file_spans(path: str | Path) -> Iterator[OtelSpan]:
    """Stream the spans of an export file in bounded memory (issue 29).

    JSON lines are read one line at a time; a one-document OTLP JSON file (also Jaeger's
    ``/api/v3`` ``{"result": ...}``) is parsed incrementally with ijson, span by span, and
    a Jaeger ``{"data": [...]}`` file trace by trace. Only Phoenix and Langfuse
    one-document exports are read whole. The file size is checked first
    (:func:`icore.adapters.max_input_bytes`).

    Raises:
        AdapterError: not a regular file, over the size limit, unreadable, malformed JSON
            (naming the line of a JSON-lines file), or a document in none of the formats.
    """
    p = trace_path(path)
    file = str(p)
    if (problem := not_a_regular_file(p)) is not None:
        raise AdapterError(f"{problem}; refusing to read it", file=file, field="<root>")
    check_size(p)
    try:
        f = p.open("rb")
    except OSError as exc:
        raise AdapterError(f"cannot read: {exc.strerror or exc}", file=file,
                           field="<root>") from None
    with f:
        try:
            yield from _stream(f, file)
        except OSError as exc:
            raise AdapterError(f"cannot read: {exc.strerror or exc}", file=file,
                               field="<root>") from None
        except AdapterError as exc:  # a byte or a nesting: name its field, not <root>
            if (named := located(exc, f, depth=MAX_DEPTH)) is exc:
                raise
            raise named from None


def _stream(f: IO[bytes], file: str) -> Iterator[OtelSpan]:
    head = f.read(65536)
    if not head.strip():
        raise AdapterError("empty file", file=file, field="<root>")
    if head.startswith(b"\x1f\x8b"):
        raise AdapterError("the file is gzip-compressed: decompress it first (gunzip)",
                           file=file, field="<root>")
    first = head.split(b"\n", 1)[0]
    one_line_doc = False
    if first.strip() and (b"\n" in head or len(head) < 65536):
        try:
            json.loads(first)
            one_line_doc = True
        except (ValueError, RecursionError):
            pass
    f.seek(0)
    if one_line_doc:  # JSON lines (or a one-line document): one line at a time
        n = 0
        any_line = False
        for n, raw in enumerate(_lines(f), start=1):
            if raw.strip():
                any_line = True
                yield from _document(_loads(raw, file, f"line {n}"), file, f"line {n}.")
        if not any_line:
            raise AdapterError("empty file", file=file, field="<root>")
        return
    check_depth(f, file)  # before ijson, whose memory is quadratic in the depth
    f.seek(0)
    text_head = head.decode("utf-8", errors="replace")
    if re.search(r'"(resourceSpans|resource_spans)"\s*:', text_head):
        fast = _one_scope_prefix(f, text_head)
        f.seek(0)
        yield from (_stream_otlp_fast(f, file, fast) if fast else _stream_otlp(f, file))
        return
    yield from _stream_document(f, file)


def _lines(f: IO[bytes]) -> Iterator[bytes]:
    """Lines split on a newline (LF) only (bytes: U+2028 and CR never split a line)."""
    yield from f  # binary iteration splits on b"\n" only


def _ijson_errors(file: str) -> tuple[type[BaseException], ...]:
    import ijson

    return (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError, RecursionError)


def _ijson_error(exc: BaseException, f: IO[bytes], file: str) -> AdapterError:
    """The streaming parser's error as an AdapterError; a number over 4300 digits is named."""
    said = str(exc)
    if ("digits" in said or "integer" in said) and \
            (big := long_int_in_file(f, file=file, field="<root>")) is not None:
        return big
    return AdapterError(f"malformed JSON: {exc}", file=file, field="<root>")


_RS_KEYS = (b'"resourceSpans"', b'"resource_spans"')


_SS_KEYS = (b'"scopeSpans"', b'"scope_spans"', b'"instrumentationLibrarySpans"')


_SCAN_CHUNK = 1 << 22
"""Bytes read at a time by :func:`_one_scope_prefix`."""


def _one_scope_prefix(f: IO[bytes], text_head: str) -> str | None:
    """The ijson prefix of a document holding one resource with one scope, else None.

    Counted on the raw bytes (a key's closing quote is never escaped, so a key name
    inside a string value does not match): the usual shape of a big export, whose spans
    can then be built by ijson's C backend one at a time.
    """
    counts = dict.fromkeys((*_RS_KEYS, *_SS_KEYS, b'"spans"'), 0)
    tail = b""
    while chunk := f.read(_SCAN_CHUNK):
        buf = tail + chunk
        # every key ends in 'pans"': a chunk adding none adds no key (one scan, not 12)
        if buf.count(b'pans"') != tail.count(b'pans"'):
            for k in counts:
                counts[k] += buf.count(k) - tail.count(k)
        tail = buf[-40:]
    rs = [k for k in _RS_KEYS if counts[k]]
    ss = [k for k in _SS_KEYS if counts[k]]
    if (len(rs) != 1 or counts[rs[0]] != 1 or len(ss) != 1 or counts[ss[0]] != 1
            or counts[b'"spans"'] != 1):  # one resource, one scope, one spans list
        return None
    base = rs[0].decode().strip('"')
    if re.search(r'"result"\s*:\s*\{\s*"resourceSpans"', text_head):
        base = "result." + base
    return f"{base}.item.{ss[0].decode().strip(chr(34))}.item"


def _stream_otlp_fast(f: IO[bytes], file: str, scope_prefix: str) -> Iterator[OtelSpan]:
    """One resource, one scope: spans built by ijson's C backend, one at a time."""
    import ijson

    res_prefix = scope_prefix.rsplit(".", 2)[0] + ".resource"
    try:
        res = next(ijson.items(f, res_prefix, use_float=True), None)
        f.seek(0)
        scope = next(ijson.items(f, scope_prefix + ".scope", use_float=True), None)
        f.seek(0)
        if res is not None and not isinstance(res, dict):
            raise AdapterError("resource must be an object", file=file,
                               field="resourceSpans[0].resource")
        rattrs = _kvs((res or {}).get("attributes"), file,
                      "resourceSpans[0].resource.attributes")
        sname = str(scope.get("name", "")) if isinstance(scope, dict) else ""
        at = _spans_array_at(f)
        f.seek(0)
        items = (_array_items(f, file, at, scope_prefix + ".spans") if at is not None else
                 ijson.items(f, scope_prefix + ".spans.item", use_float=True))
        for k, sp in enumerate(items):
            yield _otlp_span_fast(sp, rattrs, sname) or _otlp_span(
                sp, file, f"resourceSpans[0].scopeSpans[0].spans[{k}]", rattrs, sname)
    except _ijson_errors(file) as exc:
        raise _ijson_error(exc, f, file) from None


_SKELETON_MAX = 1 << 24
"""Most bytes outside the spans array for :func:`_array_items` (else ijson reads it all)."""


def _spans_array_at(f: IO[bytes]) -> int | None:
    """Byte offset just past the ``[`` of the one ``"spans": [`` key, else None."""
    head = b""
    while len(head) <= _SKELETON_MAX and (chunk := f.read(1 << 20)):
        head += chunk
        m = re.search(rb'"spans"[ \t\n\r]*:[ \t\n\r]*\[', head)
        if m is not None:
            return m.end()
    return None


class _Skeleton:
    """The document with its spans array emptied, as a byte stream (for ijson to check)."""

    def __init__(self, f: IO[bytes], head: bytes, tail_at: int) -> None:
        self._parts = [head, b"]"]
        self._f, self._tail_at, self._tail = f, tail_at, False

    def read(self, n: int = -1) -> bytes:
        """The next bytes of the skeleton (head, an empty spans array, then the tail)."""
        if n == 0:  # ijson probes the stream's type with read(0)
            return b""
        while self._parts:
            part = self._parts.pop(0)
            if part:
                return part
        if not self._tail:
            self._tail = True
            self._f.seek(self._tail_at)
        return self._f.read(n)


def _array_items(f: IO[bytes], file: str, at: int, prefix: str) -> Iterator[Any]:
    """The items of the JSON array opening at byte ``at``, parsed by the stdlib's C scanner.

    Read with a :class:`JsonWindow` (memory bounded by the largest span). Once the array
    ends, the rest of the document (with the array emptied) is checked with ijson, so a
    malformed document is refused as on the ijson path, and the emptied array must be the
    one at ``prefix``.

    Raises:
        AdapterError: malformed JSON or not UTF-8 text.
    """
    import ijson

    head = f.read(at)
    win = JsonWindow(f, file, at=at)
    yield from win.items("a span")
    tail_at = win.byte_offset()
    here = False
    for p, event, _v in ijson.parse(_Skeleton(f, head, tail_at), use_float=True):
        here = here or (p == prefix and event == "start_array")
    if not here:
        raise AdapterError("the spans array is not at resourceSpans[0].scopeSpans[0].spans",
                           file=file, field="resourceSpans[0].scopeSpans[0].spans")


def _stream_otlp(f: IO[bytes], file: str) -> Iterator[OtelSpan]:
    """Walk ijson events of one OTLP document; build one span (and resource) at a time."""
    import ijson

    r_i = s_i = k_i = -1
    rattrs: dict[str, Any] = {}
    scope_name = ""
    pending: list[OtelSpan] = []  # spans of the current scope (the scope may come later)
    seen_rs = False
    base = ""
    try:
        events = ijson.parse(f, use_float=True, multiple_values=True)
        for prefix, event, _value in events:
            if event == "start_array" and prefix in ("resourceSpans", "resource_spans",
                                                     "result.resourceSpans"):
                seen_rs, base = True, prefix
                continue
            if not prefix.startswith(base + ".item") or not seen_rs:
                continue
            rest = prefix[len(base) + 5:]
            if rest == "":
                if event == "start_map":
                    r_i, s_i = r_i + 1, -1
                    rattrs = {}
                elif event not in ("end_map", "map_key"):
                    raise AdapterError("must be an object", file=file,
                                       field=f"resourceSpans[{r_i + 1}]")
                continue
            if rest == ".resource" and event == "start_map":
                res = _build(events, "start_map")
                rattrs.update(_kvs(res.get("attributes"), file,
                                   f"resourceSpans[{r_i}].resource.attributes"))
                continue
            scope_key = next((k for k in (".scopeSpans.item", ".scope_spans.item",
                                          ".instrumentationLibrarySpans.item")
                              if rest.startswith(k)), None)
            if scope_key is None:
                continue
            tail = rest[len(scope_key):]
            if tail == "" and event == "start_map":
                s_i, k_i = s_i + 1, -1
                scope_name, pending = "", []
            elif tail == "" and event == "end_map":
                for sp in pending:
                    sp.scope = scope_name
                yield from pending
                pending = []
            elif tail in (".scope", ".instrumentationLibrary") and event == "start_map":
                sc = _build(events, "start_map")
                scope_name = str(sc.get("name", ""))
            elif tail == ".spans.item" and event in ("start_map", "start_array", "string",
                                                      "number", "null", "boolean"):
                k_i += 1
                sp = _build(events, event, _value)
                w = f"resourceSpans[{r_i}].scopeSpans[{s_i}].spans[{k_i}]"
                pending.append(_otlp_span_fast(sp, rattrs, "") or _otlp_span(sp, file, w,
                                                                               rattrs, ""))
    except _ijson_errors(file) as exc:
        raise _ijson_error(exc, f, file) from None
    if not seen_rs:  # "resourceSpans" was only text inside another format
        f.seek(0)
        yield from _stream_document(f, file, otlp=False)


def _build(events: Iterator[tuple[str, str, Any]], event: str, value: Any = None) -> Any:
    """The JSON value whose first event was ``event`` (ijson's ObjectBuilder)."""
    import ijson

    if event not in ("start_map", "start_array"):
        return value
    b = ijson.ObjectBuilder()
    b.event(event, value)
    depth = 1
    for _prefix, ev, val in events:
        b.event(ev, val)
        if ev in ("start_map", "start_array"):
            depth += 1
        elif ev in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return b.value
    raise AdapterError("truncated JSON", file="<stream>", field="<root>")


# ------------------------------------------------- Phoenix, Langfuse and Jaeger documents
_ARRAYS = ("data", "observations")
"""Top-level members holding a Phoenix / Jaeger / Langfuse span list (in this order)."""


_SUMMARIZED = (*_ARRAYS, "resourceSpans", "resource_spans")
"""Top-level arrays :func:`_outline` reads item by item (big: never kept whole)."""


def _stream_document(f: IO[bytes], file: str, *, otlp: bool = True) -> Iterator[OtelSpan]:
    """A one-document export other than OTLP, streamed (issue 29).

    A span list (Phoenix spans, Langfuse observations, OTLP documents) is read item by
    item. An object (Phoenix's ``{"data": [...]}``, Jaeger's ``{"data": [{"traceID",
    "spans"}]}``, a Langfuse trace with ``observations``) is read twice with the C scanner
    in bounded memory: first its outline (member names, the first item of ``data`` /
    ``observations``, the other members' values), which decides the format exactly as
    the whole-document reader does (the last of duplicate names counts, as in
    ``json.loads``); then the chosen list's items, converted one at a time. An OTLP
    document found this way goes to the OTLP stream (``otlp=False``: it came from there).

    Raises:
        AdapterError: malformed JSON, or a document in none of the formats.
    """
    win = JsonWindow(f, file, encoding="utf-8-sig")
    c = win.peek()
    if c == "[":
        win.pos += 1
        yield from _read_list(win.items("a span"), file, "")
        win.end()
        return
    if c != "{":  # a scalar: small, or malformed
        f.seek(0)
        yield from _document(_loads(f.read(), file, "<root>"), file, "")
        return
    m = _outline(win)
    kind, value, nth = m.get("resourceSpans") or m.get("resource_spans") or ("", None, 0)
    if kind == "list" and otlp:  # an OTLP document whose resourceSpans the head did not show
        f.seek(0)
        yield from _stream_otlp(f, file)
        return
    if kind:
        raise AdapterError("resourceSpans must be a list", file=file, field="resourceSpans")
    kind, value, _ = m.get("result", ("", None, 0))
    if kind == "value" and isinstance(value, dict):  # Jaeger's OTLP API (api_v3)
        yield from _document(value, file, "result.")
        return
    for key in _ARRAYS:
        kind, value, nth = m.get(key, ("", None, 0))
        if kind != "list":
            continue
        if value[2] == 0:  # an empty list: no spans
            return
        read = _item_reader(key, value, m, file)
        f.seek(0)
        for i, item in enumerate(_member_items(JsonWindow(f, file, encoding="utf-8-sig"),
                                               key, nth)):
            yield from read(item, i)
        return
    raise AdapterError("not OTLP JSON: no resourceSpans (nor a Phoenix span list or a "
                       "Langfuse trace with observations)", file=file, field="resourceSpans")


def _item_reader(key: str, summary: tuple[Any, bool, int],
                 m: dict[str, tuple[str, Any, int]],
                 file: str) -> Callable[[Any, int], list[OtelSpan]]:
    """How the items of the top-level list ``key`` are read (as the whole-document reader).

    Raises:
        AdapterError: Langfuse observations that are ids only, or a ``data`` list in no
            known format.
    """
    first, all_str, _ = summary
    if key == "data" and isinstance(first, dict) and "spans" in first and (
            "traceID" in first or "processes" in first):
        return lambda tr, i: _jaeger_spans([tr], file, "data", start=i)
    if key == "data":
        return list_reader(first, file, "data")
    if all_str:
        raise AdapterError("observations are ids only: export the trace with its "
                           "observations", file=file, field="observations")
    tid = str(m["id"][1]) if "id" in m else ""
    return lambda o, i: [_langfuse_span(o, file, f"observations[{i}]", tid)]


def _read_list(items: Iterator[Any], file: str, where: str) -> Iterator[OtelSpan]:
    """The spans of a span list's items, read as its first item decides (``list_reader``)."""
    read = None
    for i, item in enumerate(items):
        if read is None:
            read = list_reader(item, file, where)
        yield from read(item, i)


def _members(win: JsonWindow) -> Iterator[str]:
    """The member names of the object at ``win``, each left for the caller to read."""
    win.take("{", "expected an object")
    if win.peek() == "}":
        win.pos += 1
        return
    while True:
        key = win.value()
        if type(key) is not str:
            raise win.error("member names must be strings")
        win.take(":", "expected ':' after a member name")
        yield key
        c = win.peek()
        if c == ",":
            win.pos += 1
        elif c == "}":
            win.pos += 1
            return
        else:
            raise win.error("expected ',' or '}' after a member")


def _outline(win: JsonWindow) -> dict[str, tuple[str, Any, int]]:
    """Name -> (``"list"`` or ``"value"``, summary or value, occurrence) of the top object.

    A ``data`` / ``observations`` / ``resourceSpans`` array is summarized as (first item,
    all items strings, item count), read item by item; other members are kept whole
    (they are small in these formats). A repeated name keeps its last occurrence
    (1-based), as ``json.loads`` does.
    """
    out: dict[str, tuple[str, Any, int]] = {}
    seen: dict[str, int] = {}
    for key in _members(win):
        nth = seen[key] = seen.get(key, 0) + 1
        if key in _SUMMARIZED and win.peek() == "[":
            win.pos += 1
            first: Any = None
            all_str, count = True, 0
            for item in win.items():
                if not count:
                    first = item
                all_str = all_str and isinstance(item, str)
                count += 1
            out[key] = ("list", (first, all_str, count), nth)
        else:
            out[key] = ("value", win.value(), nth)
    win.end()
    return out


def _member_items(win: JsonWindow, name: str, nth: int) -> Iterator[Any]:
    """The items of the ``nth`` array named ``name`` of the top object (the rest skipped)."""
    seen = 0
    for key in _members(win):
        seen += key == name
        if win.peek() != "[":
            win.value()
            continue
        win.pos += 1
        if key == name and seen == nth:
            yield from win.items()
        else:
            for _ in win.items():
                pass
