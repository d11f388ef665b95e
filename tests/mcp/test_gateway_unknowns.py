"""The gateway's note of a session's calls with an unknown outcome (QA qa-new18b #5).

Pure parts: :class:`~icore.mcp._gateway_abandon.Unknowns` and
:func:`~icore.mcp._gateway_big_args.recorded_args` (the owner_unavailable text and the
trace's stand-in are checked end to end in test_gateway_cancel_retry.py and
test_gateway_big_args.py).
"""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from icore.mcp._gateway_abandon import Unknowns
from icore.mcp._gateway_big_args import PREFIX_CHARS, recorded_args


def test_an_unknown_outcome_is_said_for_overlapping_facts_of_its_session_only() -> None:
    u = Unknowns()
    u.note("s1", ["acct://payee", "acct://limit"], "pay")
    said = u.said("s1", ["acct://payee"], {})
    assert "pay (on acct://payee)" in said and "outcome is unknown" in said, said
    assert u.said("s2", ["acct://payee"], {}) == ""  # another session: nothing
    assert u.said("s1", ["acct://other"], {}) == ""  # other facts: nothing
    assert "pay" in u.said("s1", ["acct://{who}"], {})  # an unfilled entry: its prefix
    u.clear("s1", ["acct://payee", "acct://limit"])  # a later call was authorized
    assert u.said("s1", ["acct://payee"], {}) == ""


def test_the_unknowns_are_bounded() -> None:
    u = Unknowns(limit=3)
    for i in range(10):
        u.note("s", [f"k://{i}"], "t")
    assert u.said("s", ["k://0"], {}) == "" and "t" in u.said("s", ["k://9"], {})


@given(st.dictionaries(st.text(max_size=5), st.text(max_size=3000), max_size=4))
def test_recorded_args_are_bounded_and_name_the_arguments(args: dict[str, str]) -> None:
    got = recorded_args(args)
    said = json.dumps(args, ensure_ascii=False, sort_keys=True)
    data = said.encode("utf-8", "surrogatepass")
    assert got["icore/args_bytes"] == len(data)
    assert got["icore/args_sha256"] == hashlib.sha256(data).hexdigest()
    assert got["icore/args_prefix"] == said[:PREFIX_CHARS]
