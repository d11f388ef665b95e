"""Answers to malformed JSON-RPC lines (pure part of the gateway's stdio transport)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from icore.mcp._stdio_lines import INVALID_REQUEST, PARSE_ERROR, malformed_answers

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]),
        kids, max_size=5),
    max_leaves=12)


def _shape(lines: list[str]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        assert line.endswith("\n") and "\n" not in line[:-1]
        msg = json.loads(line)
        assert msg["jsonrpc"] == "2.0" and set(msg) == {"jsonrpc", "id", "error"}
        assert msg["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST)
        assert msg["id"] is None or isinstance(msg["id"], str | int)
        out.append(msg)
    return out


@given(st.text(max_size=300))
def test_any_text_gets_well_formed_answers(line: str) -> None:
    _shape(malformed_answers(line))


@given(_json)
def test_any_json_value_gets_well_formed_answers(value: Any) -> None:
    msgs = _shape(malformed_answers(json.dumps(value)))
    if isinstance(value, dict) and "method" not in value and (
            "result" in value or "error" in value):
        assert msgs == []  # a response is never answered
    else:
        assert len(msgs) >= 1


def test_cases() -> None:
    assert malformed_answers("   \n") == []
    [m] = _shape(malformed_answers("nope"))
    assert (m["id"], m["error"]["code"]) == (None, PARSE_ERROR)
    [m] = _shape(malformed_answers('{"jsonrpc":"2.0","id":"a"}'))
    assert (m["id"], m["error"]["code"]) == ("a", INVALID_REQUEST)
    assert "no method" in m["error"]["message"]
    ms = _shape(malformed_answers('[{"id":1,"method":"x"},{"id":2,"method":"y"},3]'))
    assert [m["id"] for m in ms] == [1, 2]
    [m] = _shape(malformed_answers("[]"))
    assert m["id"] is None and "empty" in m["error"]["message"]
    [m] = _shape(malformed_answers('{"jsonrpc":"2.0","id":true,"method":"ping"}'))
    assert m["id"] is None and "string or an integer" in m["error"]["message"]
    deep = "[" * 100_000 + "]" * 100_000
    [m] = _shape(malformed_answers(deep))
    assert m["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST)
    big = '{"jsonrpc":"2.0","id":7,"method":' + '"' + "A" * 100_000 + '",' + '"params":[1]}'
    [m] = _shape(malformed_answers(big))
    assert m["id"] == 7 and len(m["error"]["message"]) < 400


def test_lone_surrogate_is_a_parse_error_with_the_id() -> None:
    import mcp_types as types
    line = '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"x":"\\ud800"}}}'
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        [m] = _shape(malformed_answers(line, exc))
    else:
        raise AssertionError("the SDK's validator accepted a lone surrogate")
    assert (m["id"], m["error"]["code"]) == (3, PARSE_ERROR)


@given(st.binary(max_size=400).map(lambda b: b.replace(b"\r", b"\n")),
       st.lists(st.integers(0, 60), max_size=20), st.integers(1, 40))
def test_split_lines_as_one_split_of_the_whole_input(data: bytes, cuts: list[int],
                                                     limit: int) -> None:
    """However the input is cut into chunks, the lines are those of ``data.split``; a
    line over ``limit`` comes out as its size and two ends only (#29)."""
    from icore.mcp import _stdio_lines
    from icore.mcp._stdio_lines import LineSplitter, Oversized
    kept = _stdio_lines.KEPT
    _stdio_lines.KEPT = 5  # small ends, so that both are tested against the line
    try:
        split, got, at = LineSplitter(limit), [], 0
        for c in [*cuts, len(data)]:
            got += split.feed(data[at:at + c])
            at += c
        got += [x for x in [split.end()] if x is not None]
    finally:
        _stdio_lines.KEPT = kept
    want = data.split(b"\n")
    if not want[-1]:
        want.pop()  # ends with a newline: no last partial line
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want, strict=True):
        if len(w) > limit:
            assert isinstance(g, Oversized) and g.size == len(w)
            assert (g.head, g.tail) == (w[:5].decode("utf-8", errors="replace"),
                                        w[-5:].decode("utf-8", errors="replace"))
        else:
            assert g == w


@given(st.sampled_from(["head", "tail", "none"]), st.integers(-10**6, 10**6) | st.text(
    st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=20), st.booleans())
def test_the_id_of_a_dropped_line_is_found_only_at_the_top(where: str, rid: Any,
                                                          escaped: bool) -> None:
    """The id is found at either end, written plainly or with JSON escapes (#29: an id
    written ``"\\u0031"`` was not found), never a nested one."""
    from icore.mcp._stdio_lines import Oversized, line_id
    i = json.dumps(rid)
    if escaped and isinstance(rid, str):  # every character as a \\uXXXX escape
        i = '"' + "".join(f"\\u{ord(c):04x}" for c in rid) + '"'
    head = {"head": f'{{"jsonrpc": "2.0", "id": {i}, "result": {{"id": 7, "x": "xx',
            "tail": '{"result": {"id": 7, "x": "xx', "none": '{"result": {"id": 7, "x": "'}
    tail = {"head": 'xx"}}', "tail": f'xx"}}, "id": {i}, "jsonrpc": "2.0"}}',
            "none": 'xx", "id": 7}}'}
    got = line_id(Oversized(head[where], tail[where], 10**8))
    assert got == (None if where == "none" else rid)


def test_escaped_keys_and_a_method_in_a_dropped_line() -> None:
    """The ``id`` key written with escapes is the id; a nested one never is; a line whose
    head shows ``method`` (the upstream's own request) is said to name one, wherever
    the member stands among those the head holds whole (#29)."""
    from icore.mcp._stdio_lines import Oversized, line_id, names_a_method

    def line(head: str, tail: str = "") -> Oversized:
        return Oversized(head, tail, 10**8)

    assert line_id(line('{"\\u0069d": 7, "result": {"id": 3, "x": "')) == 7
    assert line_id(line('{"result": {"id": 3}, "x": "aaa')) is None
    assert line_id(line('{"result": {"x": "', 'x"}, "\\u0069d": "\\u0032"}')) == "2"
    assert line_id(line('{"result": {"x": "', 'x, \\"id\\": 9}"}')) is None
    assert line_id(line(' \t{ "id" : true, "x": "')) is None  # no JSON-RPC id
    assert names_a_method(line('{"jsonrpc": "2.0", "id": 4, "method": "x", "params": {"'))
    assert not names_a_method(line('{"id": 4, "result": {"method": "x", "y": "'))
