"""The stand-in for a client's malformed response (pure; #29)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from icore.mcp._client_answers import INTERNAL_ERROR, UNREADABLE, problem, stand_in

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@given(rid=st.integers() | st.text(max_size=8), result=_JSON)
def test_a_response_with_a_usable_id_stands_in_under_that_id(rid: Any, result: Any) -> None:
    """A response (no method, a result) with a string or integer id that fails
    validation gets a -32603 under that very id; one that validates has no problem."""
    msg = {"jsonrpc": "2.0", "id": rid, "result": result}
    error = stand_in(msg)
    assert error is not None and error["id"] == rid
    assert error["error"]["code"] == INTERNAL_ERROR
    assert error["error"]["message"].startswith(UNREADABLE)
    assert (problem(msg) is None) == isinstance(result, dict)


@given(msg=st.dictionaries(st.sampled_from(["jsonrpc", "id", "method", "result", "error"]),
                           _JSON, max_size=5))
def test_no_stand_in_without_a_response_and_a_usable_id(msg: dict[str, Any]) -> None:
    """Requests, notifications and responses with no usable id name no request: None."""
    rid = msg.get("id")
    usable = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    names_one = "method" not in msg and ("result" in msg or "error" in msg) and usable
    assert (stand_in(msg) is not None) == names_one


def test_named_problems() -> None:
    assert problem({"jsonrpc": "2.0", "id": 1, "result": "x"}) == \
        "result: Input should be a valid dictionary"
    assert problem({"jsonrpc": "2.0", "id": 1, "error": {"message": "m"}}) == \
        "error.code: Field required"
    assert problem({"jsonrpc": "1.0", "id": 1, "result": {}}) == \
        "jsonrpc must be \"2.0\", not '1.0'"
    assert stand_in([{"jsonrpc": "2.0", "id": 1, "result": "x"}]) is None  # a batch
