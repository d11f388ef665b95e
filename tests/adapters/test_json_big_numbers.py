"""A JSON integer over Python's 4300-digit limit is an error naming where it is (#29).

``json.loads`` refuses it with a ValueError that names no place and tells the user to
change the interpreter (``sys.set_int_max_str_digits``); every importer (one-document
files read whole or streamed, JSON lines, Who&When) now says how long the number is and
where: the line and column, or the text just before it when the file is streamed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icore.adapters import AdapterError, audit_file

_BIG = "9" * 5000


def _refusal(p: Path) -> str:
    with pytest.raises(AdapterError) as e:
        audit_file(p)
    text = str(e.value)
    assert "set_int_max_str_digits" not in text and "an integer of 5000 digits" in text
    return text


def test_jsonl_names_the_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"agent": "u", "kind": "task", "content": "q"}\n'
                 f'{{"agent": "u", "kind": "task", "step": {_BIG}}}\n')
    assert "line 2, column 40" in _refusal(p)


def test_whowhen_names_the_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "w.json"
    p.write_text('{"question": "q",\n "history": [' + _BIG + "]}")
    assert "line 2, column 14" in _refusal(p)


@pytest.mark.parametrize("name", ["t.otlp.json", "langfuse.json"])
def test_a_one_document_file_names_the_place(tmp_path: Path,
                                             name: str) -> None:
    doc = (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "ab" * 16, "spanId": "1" * 16, "name": "a", "kind": "@"}]}]}]})
           if name.startswith("t.") else json.dumps(
        {"id": "t", "observations": [{"id": "o1", "type": "SPAN", "name": "@"}]}))
    p = tmp_path / name
    p.write_text(doc.replace('"@"', _BIG), encoding="utf-8")
    said = _refusal(p)
    # the line and column, the byte (streamed by ijson), or the text just before it
    assert any(w in said for w in ("line 1, column", "at byte", '"name": ')), said


def test_a_streamed_window_shows_the_text_before_the_number() -> None:
    import io

    from icore.adapters._json_window import JsonWindow

    w = JsonWindow(io.BytesIO(f'{{"kind": {_BIG}}}'.encode()), "f.json")
    w.take("{", "an object")
    assert w.value() == "kind"
    w.take(":", "a colon")
    with pytest.raises(AdapterError) as e:
        w.value()
    assert "an integer of 5000 digits (after '{\"kind\": '" in str(e.value), e.value


def test_a_string_of_digits_before_the_number_is_not_taken_for_it(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(f'{{"agent": "u", "kind": "task", "content": "{_BIG}", "step": {_BIG}}}\n')
    said = _refusal(p)
    assert f"column {len(_BIG) + 55}" in said and "\"step\": " in said, said
