"""Issue 29, QA r8-bad (D4-D8, D11, D20, D23): hostile inputs the importers let through
or named wrongly now end in an AdapterError naming the file, the line or span and the
field, and what was expected."""

from __future__ import annotations

import json
from typing import Any

import pytest

from icore.adapters import AdapterError, parse_jsonl

R1, R2 = "1" * 64, "2" * 64
_HEAD = {"run": {"id": "r1", "question": "q"}}
_BODY = [{"agent": "user", "kind": "task", "content": "q"},
         {"agent": "a", "kind": "output", "content": "x"}]


def _jsonl(*rows: dict[str, Any]) -> str:
    return "\n".join(json.dumps(x) for x in [_HEAD, *rows, *_BODY])


def _rec(rid: str, *parents: str, key: str = "k") -> dict[str, Any]:
    return {"planfence": {"record": {"id": rid, "key": key, "owner": "o", "seq": 1,
                                     "parents": list(parents)}}}


@pytest.mark.parametrize(("rows", "field", "words"), [
    ([_rec(R1, R1)], "line 2.planfence.record.parents", "cycle"),
    ([_rec(R1, R2), _rec(R2, R1)], "line 2.planfence.record.parents", "line 3"),
    ([_rec(R1), _rec(R1, key="other")], "line 3.planfence.record.id", "line 2"),
])
def test_cyclic_or_clashing_records_are_refused(rows: list[dict[str, Any]], field: str,
                                                 words: str) -> None:
    """D5: a record id is its content's digest: a cycle or one id with two contents."""
    with pytest.raises(AdapterError) as e:
        parse_jsonl(_jsonl(*rows), file="p.jsonl")
    assert e.value.field == field and words in str(e.value), e.value


def test_a_repeated_record_line_and_an_outside_parent_still_read() -> None:
    t = parse_jsonl(_jsonl(_rec(R1, R2), _rec(R1, R2)), file="p.jsonl")
    assert t.planfence is not None and len(t.planfence.records) == 1
