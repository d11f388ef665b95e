"""An owner's ``put`` of the head's own value is a no-op (QA r8-ag2mcp D7).

A periodic sync re-putting unchanged values used to make a new version each time, so
every plan derived from the head went stale and the agent could never act. ``put`` now
returns the head when the canonical JSON, the type and the inputs are the same;
:meth:`Workspace.commit` still forces a new version, and a stale refusal then does not
call the value "changed".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import MalformedRecord
from icore.workspace import Workspace

KEY = "stock/lyon/bolt"
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5)
                     | st.floats(allow_nan=False, allow_infinity=False),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(
                         st.text(max_size=3), c, max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(a=_json, b=_json)
def test_put_makes_a_version_exactly_when_the_json_differs(a: Any, b: Any) -> None:
    """Invariant: a second put makes a new version iff the canonical JSON differs
    (``1``, ``1.0`` and ``true`` are different values)."""
    ws = Workspace({"stock/*": "keeper"})
    first = ws.put(KEY, a)
    second = ws.put(KEY, b)
    from icore.records import canonical_json
    assert (second == first) == (canonical_json(a) == canonical_json(b))
    assert ws.head(KEY) == second


@pytest.mark.parametrize("sqlite", [False, True])
def test_same_value_put_returns_the_head_and_other_writes_still_version(
        tmp_path: Path, sqlite: bool) -> None:
    facts = {"stock/*": "keeper", "count/*": "keeper"}
    ws = Workspace.sqlite(facts, tmp_path) if sqlite else Workspace(facts)
    head = ws.put(KEY, {"qty": 100}, by="keeper")
    assert ws.put(KEY, {"qty": 100}, by="keeper") == head
    assert ws.put(KEY, {"qty": 100.0}).seq > head.seq  # 100.0 is another JSON value
    head = ws.head(KEY)
    assert head is not None
    assert ws.put(KEY, {"qty": 100.0}, type="recount").seq > head.seq  # another type
    src = ws.put("count/lyon", 7)
    head = ws.head(KEY)
    assert head is not None
    derived = ws.put(KEY, {"qty": 100.0}, type="recount", inputs=[src])  # new lineage
    assert derived.seq > head.seq and derived.parents == (src.id,)
    assert ws.put(KEY, {"qty": 100.0}, type="recount", inputs=[src]) == derived
    forced = ws.commit(KEY, {"qty": 100.0}, expected=derived.id, type="recount")
    assert forced.seq > derived.seq and forced.supersedes == derived.id
    with pytest.raises(MalformedRecord, match="no JSON form"):
        ws.put(KEY, {"qty": object()})
    ws.close()


def test_a_forced_same_value_version_is_not_called_changed() -> None:
    """The head rewritten with the same value by ``commit`` between read and call: the
    refusal says "written again ... with the same value", never "changed"."""
    ws = Workspace({"stock/*": "keeper"})
    ws.put(KEY, {"qty": 100})
    ws.put("stock/lyon/nut", {"qty": 5})
    d = ws.agent("dispatcher")
    d.read(KEY)
    d.read("stock/lyon/nut")
    head = ws.head(KEY)
    assert head is not None
    ws.commit(KEY, {"qty": 100}, expected=head.id)
    call = d.execute("transfer", lambda: "moved", {}, depends_on={KEY})
    assert call.reason == "stale" and call.same_value == (KEY,)
    assert "written again after you read it, with the same value" in call.message
    assert "changed" not in call.message
    ws.put("stock/lyon/nut", {"qty": 4})
    head = ws.head(KEY)
    assert head is not None
    ws.commit(KEY, {"qty": 100}, expected=head.id)
    call = d.execute("move", lambda: "moved", {}, depends_on={KEY, "stock/lyon/nut"})
    assert "stock/lyon/nut changed after you read it" in call.message
    assert f"{KEY} was written again" in call.message


def test_a_value_json_would_change_is_refused_not_taken_for_the_head() -> None:
    """``{1: "a"}`` has the head's canonical JSON (``{"1": "a"}``) but is no JSON value:
    refused as by ``commit`` (``MalformedRecord``), never answered with the head."""
    ws = Workspace({"k/*": "o"})
    head = ws.put("k/1", {"1": "a"})
    with pytest.raises(MalformedRecord):
        ws.put("k/1", {1: "a"})  # type: ignore[dict-item]
    assert ws.head("k/1") == head
