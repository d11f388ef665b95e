"""Phoenix, Langfuse and Jaeger one-document exports are streamed (issue 29 item 4).

The streamed reader (:func:`icore.adapters.iter_file_spans`) must give exactly the spans
of the whole-document parser (:func:`icore.adapters.parse_spans`) for every shape of
document, read the file a window at a time (bounded memory), and refuse what the whole
parser refuses with an :class:`AdapterError` naming the file.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import AdapterError, audit_file, iter_file_spans, parse_spans
from icore.adapters import _json_window as jw
from icore.adapters._otel_stream import _stream_document

_T0 = "2026-01-01T00:00:{:02d}+00:00"


def _phoenix(i: int, parent: int | None, kind: str) -> dict[str, Any]:
    sp: dict[str, Any] = {
        "name": f"{kind.lower()} {i}", "context": {"trace_id": "1" * 32, "span_id": f"{i:016x}"},
        "span_kind": kind, "start_time": _T0.format(i % 60), "end_time": _T0.format(i % 60),
        "status_code": "ERROR" if i % 7 == 0 else "OK",
        "attributes": {"output": {"value": f"out {i} é\u2028"}, "agent": {"name": f"a{i % 3}"}}}
    if parent is not None:
        sp["parent_id"] = f"{parent:016x}"
    return sp


def _langfuse(i: int, parent: int | None, kind: str, *, trace: bool) -> dict[str, Any]:
    typ = {"AGENT": "AGENT", "LLM": "GENERATION", "TOOL": "TOOL"}[kind]
    o: dict[str, Any] = {"id": f"o{i}", "type": typ, "name": f"a{i % 3}",
                         "startTime": _T0.format(i % 60), "endTime": _T0.format(i % 60),
                         "output": {"text": f"out {i}"}, "level": "ERROR" if i % 7 else "DEFAULT"}
    if trace:
        o["traceId"] = "tr1"
    if parent is not None:
        o["parentObservationId"] = f"o{parent}"
    return o


def _jaeger(i: int, parent: int | None, kind: str) -> dict[str, Any]:
    return {"traceID": "ab" * 16, "spanID": f"{i:016x}", "operationName": f"{kind} {i}",
            "startTime": 1_700_000_000_000_000 + i, "duration": 5,
            "tags": [{"key": "openinference.span.kind", "value": kind},
                     {"key": "output.value", "value": f"out {i}"}],
            "references": [] if parent is None else [{"refType": "CHILD_OF",
                                                      "spanID": f"{parent:016x}"}]}


def _items(n: int, make: Any) -> list[dict[str, Any]]:
    kinds = ("AGENT", "LLM", "TOOL")
    return [make(i, None if i == 1 else 1 + (i > 3) * (i % 3), kinds[i % 3])
            for i in range(1, n + 1)]


def _document(shape: str, n: int, rnd: random.Random) -> Any:
    """A document of ``shape`` with ``n`` spans; members in a random order."""
    if shape == "phoenix-list":
        return _items(n, _phoenix)
    if shape == "langfuse-list":
        return _items(n, lambda i, p, k: _langfuse(i, p, k, trace=True))
    members: list[tuple[str, Any]]
    if shape == "phoenix-data":
        members = [("data", _items(n, _phoenix)), ("next_cursor", None)]
    elif shape == "jaeger":
        members = [("data", [{"traceID": "ab" * 16, "spans": _items(n, _jaeger),
                              "processes": {}}]), ("total", 1)]
    else:  # a Langfuse trace; its observations name no trace: the trace's id is theirs
        members = [("id", "tr9"), ("name", "run"), ("input", {"q": "x" * 50}),
                   ("observations", _items(n, lambda i, p, k: _langfuse(i, p, k,
                                                                         trace=False))),
                   ("scores", [])]
    rnd.shuffle(members)
    return dict(members)


def _text(doc: Any, rnd: random.Random) -> str:
    indent = rnd.choice([None, 0, 1, 2])
    text = json.dumps(doc, indent=indent, ensure_ascii=rnd.random() < 0.5)
    return "\n" * rnd.randint(0, 2) + text + " \n" * rnd.randint(0, 2)


_SHAPES = ["phoenix-list", "phoenix-data", "langfuse-list", "langfuse-trace", "jaeger"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(_SHAPES), st.integers(1, 40), st.randoms(use_true_random=False),
       st.sampled_from([7, 64, 1 << 20]), st.booleans())
def test_streamed_documents_equal_the_whole_document_parser(
        shape: str, n: int, rnd: random.Random, window: int, bom: bool) -> None:
    """Any shape, member order, indentation, window size (items cut anywhere), a BOM."""
    import tempfile

    text = _text(_document(shape, n, rnd), rnd)
    whole = parse_spans(text, file="f.json")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "f.json"
        p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
        with mock.patch.object(jw, "WINDOW", window):
            assert list(iter_file_spans(p)) == whole
    assert len(whole) == n


def _stream(text: str) -> list[Any]:
    return list(_stream_document(io.BytesIO(text.encode()), "f.json"))


def test_the_last_of_duplicate_members_counts_as_in_json_loads() -> None:
    a, b = _items(2, _phoenix), _items(3, _phoenix)
    text = f'{{"data": {json.dumps(a)}, "next_cursor": 1, "data": {json.dumps(b)}}}'
    assert _stream(text) == parse_spans(text) and len(_stream(text)) == 3
    text = f'{{"data": 5, "data": {json.dumps(b)}}}'
    assert _stream(text) == parse_spans(text)
    obs = _items(2, lambda i, p, k: _langfuse(i, p, k, trace=False))
    text = json.dumps({"observations": obs, "id": "late"})
    assert {s.trace_id for s in _stream(text)} == {"late"} == {
        s.trace_id for s in parse_spans(text)}


@pytest.mark.parametrize(("doc", "field"), [
    ({"id": "t", "observations": ["o1", "o2"]}, "observations"),
    ({"data": [{"x": 1}]}, "data[0].context"),
    ({"data": {}}, "resourceSpans"),
    ({"observations": [{"id": "o1"}, 7]}, "observations[1]"),
    ([{"context": {}, "name": "a"}, 5], "[0].context.trace_id"),
    ([{"nothing": 1}], "[0].context"),
    ({"resourceSpans": {}}, "resourceSpans"),
    ({"spans": []}, "resourceSpans"),
])
def test_refusals_name_the_same_field(doc: Any, field: str) -> None:
    text = json.dumps(doc, indent=1)
    with pytest.raises(AdapterError) as whole:
        parse_spans(text, file="f.json")
    with pytest.raises(AdapterError) as streamed:
        _stream(text)
    assert whole.value.field == streamed.value.field == field
    assert streamed.value.file == "f.json"


_OK = json.dumps(_phoenix(1, None, "AGENT"))


@pytest.mark.parametrize("text", [
    f'[{_OK} {{"x": 1}}]', f'[{_OK}', f'[{_OK},', '{"data": [1, 2}', f'[{_OK}, NaN]',
    '{"data": [], "x": NaN}', '{"data": []} []', f'[{_OK}] x', '{"a" 1}', '{1: 2}',
    '{"observations": [{"id": "o"}], "id": "x"', '[' * 5000, '{"data": [' * 3000,
    '{"observations": [{"id": "o"}], "id": "\xff"',
])
def test_malformed_documents_are_typed_errors(text: str) -> None:
    """After the items read so far (a span list is read in one pass), the JSON error.

    ``NaN`` is no JSON: refused, as on the OTLP stream (``json.loads`` would take it).
    """
    with pytest.raises(AdapterError) as e:
        _stream(text)
    assert e.value.file == "f.json" and e.value.field == "<root>"


def test_bytes_that_are_not_utf8_are_a_typed_error() -> None:
    with pytest.raises(AdapterError) as e:
        list(_stream_document(io.BytesIO(b'{"data": [], "id": "\xff"}'), "f.json"))
    assert e.value.field == "<root>" and "malformed JSON" in e.value.problem


def test_empty_lists_hold_no_spans() -> None:
    for text in ("[]", '{"data": []}', '{"observations": [], "id": "t"}'):
        assert _stream(text) == parse_spans(text) == []


class _Recorder(io.BytesIO):
    """A file that records the size of every read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sizes: list[int] = []

    def read(self, n: int | None = -1) -> bytes:
        out = super().read(n)
        self.sizes.append(len(out))
        return out


@pytest.mark.parametrize("shape", _SHAPES)
def test_a_document_is_read_a_window_at_a_time(shape: str) -> None:
    """Bounded memory: no read is bigger than a window, however big the document.

    A Jaeger document is read a trace at a time (here: traces of 10 spans).
    """
    doc = _document(shape, 3000, random.Random(1))
    if shape == "jaeger":
        spans = doc["data"][0]["spans"]
        doc["data"] = [{"traceID": "ab" * 16, "spans": spans[i:i + 10]}
                       for i in range(0, len(spans), 10)]
    text = json.dumps(doc, indent=1)
    f = _Recorder(text.encode())
    with mock.patch.object(jw, "WINDOW", 4096):
        got = list(_stream_document(f, "f.json"))
    assert got == parse_spans(text) and len(text) > 100 * 4096
    assert max(f.sizes) <= 2 * 4096


@pytest.mark.parametrize("shape", ["phoenix-list", "langfuse-trace", "phoenix-data"])
def test_size_limit_and_audit_of_phoenix_and_langfuse_files(
        shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "export.json"
    p.write_text(json.dumps(_document(shape, 900, random.Random(2)), indent=1))
    runs = audit_file(p)
    assert len(runs) == 1 and len(runs[0].trace.steps) >= 900
    monkeypatch.setenv("ICORE_MAX_INPUT_MB", "0.05")
    with pytest.raises(AdapterError, match="input limit") as e:
        audit_file(p)
    assert e.value.field == "<root>" and "ICORE_MAX_INPUT_MB" in e.value.problem



_KEYS = (b'"resourceSpans"', b'"resource_spans"', b'"scopeSpans"', b'"scope_spans"',
         b'"instrumentationLibrarySpans"', b'"spans"')


def _every_key_counted(data: bytes, chunk: int) -> dict[bytes, int]:
    """Each key counted in every chunk (``_one_scope_prefix`` before its one-scan skip)."""
    counts = dict.fromkeys(_KEYS, 0)
    tail = b""
    for at in range(0, len(data), chunk):
        buf = tail + data[at:at + chunk]
        for k in counts:
            counts[k] += buf.count(k) - tail.count(k)
        tail = buf[-40:]
    return counts


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([*_KEYS, b'pans"', b'spans"', b'"', b"x", b"Spans", b'"s']),
                max_size=40), st.integers(1, 9))
def test_one_scope_scan_skips_only_chunks_without_a_key(parts: list[bytes],
                                                         chunk: int) -> None:
    """The key count that skips chunks with no 'pans"' decides as counting every chunk."""
    from icore.adapters import _otel_stream as ost

    data = b"".join(parts)
    c = _every_key_counted(data, chunk)
    one = (sum(c[k] > 0 for k in _KEYS[:2]) == 1 and sum(c[k] for k in _KEYS[:2]) == 1
           and sum(c[k] > 0 for k in _KEYS[2:5]) == 1 and sum(c[k] for k in _KEYS[2:5]) == 1
           and c[b'"spans"'] == 1)
    with mock.patch.object(ost, "_SCAN_CHUNK", chunk):
        got = ost._one_scope_prefix(io.BytesIO(data), "")
    assert (got is not None) == one
