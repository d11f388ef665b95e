"""Issue 29, seventh sweep round: a request holding an integer past 4300 digits.

``{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {... "price": 99...9}}``
(4301 digits) is JSON, but Python's ``int`` refuses the number: the gateway answered a
parse error with id null, so the client waited for request 7 forever (the sweep's
driver: no answer in 40 s). It is answered under its own id, naming the number's size.
"""

from __future__ import annotations

import json

import pytest

from icore.mcp._stdio_lines import INVALID_PARAMS, PARSE_ERROR, malformed_answers


def _call(number: str, rid: str = "7") -> str:
    return ('{"jsonrpc": "2.0", "id": ' + rid + ', "method": "tools/call", "params": '
            '{"name": "book", "arguments": {"city": "Porto", "price": ' + number + '}}}')


@pytest.mark.parametrize("number", ["9" * 4301, "-" + "1" * 5000, "[1, " + "2" * 9999 + "]"])
def test_a_big_integer_is_answered_under_the_requests_id(number: str) -> None:
    (answer,) = malformed_answers(_call(number))
    msg = json.loads(answer)
    assert msg["id"] == 7 and msg["error"]["code"] == INVALID_PARAMS
    assert "digits (over 4300 are refused" in msg["error"]["message"]
    assert "set_int_max_str_digits" not in answer


def test_a_big_id_or_broken_json_keeps_id_null() -> None:
    (answer,) = malformed_answers(_call("1", rid="9" * 4301))
    assert json.loads(answer)["id"] is None
    (answer,) = malformed_answers(_call("9" * 4301)[:-1])  # cut: no JSON at all
    assert json.loads(answer)["error"]["code"] == PARSE_ERROR
