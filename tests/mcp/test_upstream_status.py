"""An HTTP upstream's error answer names its status; a question's refusal names its kind.

Pure parts (#29): :func:`icore.mcp._upstream_status.error_body` (what a POST's 4xx/5xx
answer becomes for the SDK's client) and :mod:`icore.mcp._client_reach`'s refusal text,
which the call's error reads back. The real-upstream cases are in
tests/mcp/test_gateway_qa10c.py and tests/mcp/test_gateway_asks_reach.py.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.mcp._client_reach import ASKED, NOT_SUPPORTED, not_forwarded, not_receivable
from icore.mcp._upstream_answer import upstream_refused
from icore.mcp._upstream_status import STAND_IN, error_body

_CTYPES = st.sampled_from(["application/json", "application/json; charset=utf-8",
                           "text/html", "text/plain", ""])


_OWN = st.builds(lambda code, msg: json.dumps({"jsonrpc": "2.0", "id": 1, "error": {
    "code": code, "message": msg}}).encode(),
    st.one_of(st.integers(-32768, -32600), st.integers(1, 10**6)),
    st.text(max_size=40).filter(lambda m: not m.startswith(("Server", "Redirect", "SSE",
                                                            "Connection", "Session",
                                                            "Failed", "Unexpected"))))
"""The upstream's own JSON-RPC error (a code and words no SDK stand-in has)."""


@settings(max_examples=200, deadline=None)
@given(status=st.integers(400, 599).filter(lambda s: s != 404),
       body=st.one_of(st.binary(max_size=200), _OWN),
       ctype=_CTYPES, rid=st.one_of(st.integers(0, 2**31), st.text(min_size=1, max_size=8)))
def test_any_error_answer_becomes_a_jsonrpc_error_naming_its_status(
        status: int, body: bytes, ctype: str, rid: object) -> None:
    """Whatever the body, the answer is a JSON-RPC error to the request's id whose message
    names the status; only the upstream's own error object keeps its code and meaning."""
    from mcp.shared.exceptions import MCPError
    out = error_body(body, status, ctype, rid)
    assert out["jsonrpc"] == "2.0" and out["id"] == rid
    err = out["error"]
    assert isinstance(err["code"], int) and f"(HTTP {status}" in err["message"]
    own = ctype.startswith("application/json") and body.startswith(b'{"jsonrpc"')
    assert err["message"].startswith(STAND_IN) is not own
    # the upstream's own error: refused (it did not run); a stand-in: it may have run
    assert upstream_refused(MCPError(err["code"], err["message"])) is own
    json.dumps(out)  # a JSON answer


@pytest.mark.parametrize(("body", "ctype", "want", "refused"), [
    (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no such route"}}',
     "application/json", "no such route (HTTP 500)", True),
    (b"<html>oops</html>", "text/html",
     f"{STAND_IN} (HTTP 500 Internal Server Error, text/html)", False),
    (b'{"error":{"code":true,"message":"x"}}', "application/json",
     f"{STAND_IN} (HTTP 500 Internal Server Error, application/json)", False),
    (b"", "", f"{STAND_IN} (HTTP 500 Internal Server Error, no content type)", False),
])
def test_error_answers(body: bytes, ctype: str, want: str, refused: bool) -> None:
    """The upstream's own error keeps its words and gets the status; anything else is the
    SDK's stand-in with the status, its reason phrase and the content type."""
    from mcp.shared.exceptions import MCPError
    err = error_body(body, 500, ctype, 7)["error"]
    assert err["message"] == want
    assert upstream_refused(MCPError(err["code"], err["message"])) is refused


@pytest.mark.parametrize("kind", sorted(NOT_SUPPORTED))
def test_a_refused_question_is_read_back_as_its_kind(kind: str) -> None:
    """The upstream's error text for a question the client cannot receive is recognized
    in the call's error (what was asked), and no other upstream error is."""
    import mcp_types as types
    e = not_receivable(kind, "it declared no such capability")
    assert e.code == types.METHOD_NOT_FOUND
    assert not_forwarded(e.message) == ASKED[kind]
    assert not_forwarded(f"tool failed: {e.message}") is None
