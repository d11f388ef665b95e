"""A one-document file nested too deeply is refused before any parser builds it (issue 29).

ijson's memory grows with the square of the nesting depth (one prefix string per open
level), so :func:`icore.adapters._json_window.check_depth` measures the depth with byte
operations first. Its answer must equal the real depth of the parsed document for any
JSON text, cut into reads of any size (strings holding brackets, quotes and backslashes
are the hard part).
"""

from __future__ import annotations

import io
import json
import resource
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import AdapterError, iter_file_spans
from icore.adapters._json_window import MAX_DEPTH, check_depth

_TEXT = st.text(alphabet=st.sampled_from('ab[]{}"\\\n\u2028é'), max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_TEXT, kids, max_size=3),
    max_leaves=30)


def _depth(v: Any) -> int:
    if isinstance(v, list):
        return 1 + max(map(_depth, v), default=0)
    if isinstance(v, dict):
        return 1 + max(map(_depth, v.values()), default=0)
    return 0


def _refused(text: bytes, limit: int, chunk: int) -> bool:
    try:
        check_depth(io.BytesIO(text), "t.json", limit=limit, chunk=chunk)
    except AdapterError:
        return True
    return False


@settings(max_examples=300, deadline=None)
@given(_JSON, st.integers(1, 9), st.booleans())
def test_the_depth_is_the_parsed_depth_for_any_cut(v: Any, chunk: int, ascii_: bool) -> None:
    text = json.dumps(v, ensure_ascii=ascii_).encode()
    d = _depth(v)
    assert not _refused(text, d, chunk)
    if d:
        assert _refused(text, d - 1, chunk)


def test_a_deep_array_in_an_unknown_member_is_refused_quickly(tmp_path: Path) -> None:
    p = tmp_path / "deep.otlp.json"
    p.write_text('{"resourceSpans": [], "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(AdapterError) as ei:
        list(iter_file_spans(p))
    assert ei.value.file == str(p) and f"deeper than {MAX_DEPTH}" in ei.value.problem
    # the refusal comes before any parser: the peak grows by far less than the 16 GB
    # ijson needed for this file (ru_maxrss is KiB on Linux)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000


def test_deep_but_allowed_documents_still_import(tmp_path: Path) -> None:
    attr = {"key": "deep", "value": {"stringValue": "[" * 5000}}  # brackets in a string
    span = {"traceId": "1" * 32, "spanId": "2" * 16, "name": "agent a",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": [attr]}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}],
           "x": json.loads("[" * 400 + "]" * 400)}
    p = tmp_path / "ok.otlp.json"
    p.write_text(json.dumps(doc, indent=1))
    assert [s.name for s in iter_file_spans(p)] == ["agent a"]
