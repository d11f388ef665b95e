"""Issue 29 leftover: a bad JSON line names the field inside the line, not only ``line N``.

Bytes that are no UTF-8, a nesting too deep and malformed JSON were reported as
``line 7`` alone; the field path within the line (``line 7.planfence.decision.at_ms``)
is found from the error's offset (:mod:`icore.adapters._json_where`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icore.adapters import AdapterError, load_jsonl, parse_jsonl

HEAD = '{"agent": "u", "kind": "task", "content": "q"}\n'


def test_bytes_that_are_no_utf8_name_their_field(tmp_path: Path) -> None:
    p = tmp_path / "run.jsonl"
    p.write_bytes(HEAD.encode() + b'{"agent": "a", "kind": "output", "content": "x\xed\xa0"}\n')
    with pytest.raises(AdapterError) as info:
        load_jsonl(p)
    assert info.value.field == "line 2.content", info.value


def test_a_nesting_too_deep_names_the_member_it_starts_in() -> None:
    line = json.dumps({"agent": "a", "kind": "output", "content": "x",
                       "planfence": {"decision": {"roots": "DEEP"}}})
    line = line.replace('"DEEP"', "[" * 50_000 + "]" * 50_000)
    with pytest.raises(AdapterError) as info:
        parse_jsonl(HEAD + line + "\n")
    assert info.value.field.startswith("line 2.planfence.decision.roots[0]"), info.value


def test_malformed_json_names_the_place_in_the_line() -> None:
    with pytest.raises(AdapterError) as info:
        parse_jsonl(HEAD + '{"agent": "a", "kind": "output", "content": tru}\n')
    assert info.value.field == "line 2.content", info.value


def test_a_line_broken_at_its_top_level_still_names_the_line() -> None:
    with pytest.raises(AdapterError) as info:
        parse_jsonl(HEAD + "{,}\n")
    assert info.value.field == "line 2", info.value
