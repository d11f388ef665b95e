"""Which failures of a forwarded call leave its effect open, and what the model reads.

Pure parts of :mod:`icore.mcp._gateway_unanswered` (the end-to-end behaviour with real
upstreams: tests/mcp/test_gateway_no_answer.py).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from icore.mcp._gateway_delivery import Delivery
from icore.mcp._gateway_unanswered import (
    effect_open,
    not_delivered,
    spent_error,
    unknown_text,
)
from icore.mcp._upstream_failed import MAY_HAVE_RUN, UpstreamError, unanswered

_names = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)


@given(method=st.sampled_from(["tools/call", "prompts/get", "resources/read", "ping"]),
       sent=st.booleans(), reached=st.booleans(), asked=st.booleans())
def test_an_upstream_error_is_open_exactly_when_it_may_have_run(
        method: str, sent: bool, reached: bool, asked: bool) -> None:
    """An :class:`UpstreamError` leaves the effect open iff it was sent and may write,
    whatever else is known (never a clean refusal once sent, #25)."""
    exc = unanswered("upstream u did not answer", upstream="u", method=method, sent=sent)
    assert effect_open(exc, reached=reached, asked=asked) is exc.may_have_run
    assert exc.may_have_run is (sent and method in ("tools/call", "prompts/get"))


@given(asked=st.booleans())
def test_a_failure_before_the_call_was_handed_over_is_not_open(asked: bool) -> None:
    """Not handed to the upstream connection (the gate path failed): nothing ran."""
    assert effect_open(RuntimeError("gate broke"), reached=False, asked=asked) is False


def test_a_json_rpc_error_answer_is_open_only_after_a_question() -> None:
    """The upstream's own JSON-RPC error: refused (no effect), unless it had asked the
    client something during the call (its body ran); a garbage answer is open."""
    from mcp.shared.exceptions import MCPError
    refused = MCPError(-32602, "no such route")
    assert effect_open(refused, reached=True, asked=False) is False
    assert effect_open(refused, reached=True, asked=True) is True
    assert effect_open(ValueError("not JSON"), reached=True, asked=False) is True


@given(tool=_names, deps=st.lists(st.from_regex(r"[a-z]{1,6}://[a-z]{1,8}",
                                                fullmatch=True), min_size=1, max_size=3))
def test_the_model_is_told_the_outcome_is_unknown_and_what_to_read(
        tool: str, deps: list[str]) -> None:
    """The text: the failure, the outcome-unknown wording, each declared resource; the
    gateway's older advice is not said twice."""
    said = unknown_text(tool, f"upstream u did not answer tools/call; {MAY_HAVE_RUN}",
                        deps, {})
    assert said.startswith("upstream u did not answer tools/call; the call was sent")
    assert (f"its outcome is unknown: check its effect before calling {tool} again"
            in said)
    assert all(d in said for d in deps)
    assert MAY_HAVE_RUN not in said


def test_placeholders_are_filled_from_the_arguments() -> None:
    """A declared ``{arg}`` names the resource the call depended on."""
    said = unknown_text("charge", "x", ["bill://card/{card}"], {"card": "visa"})
    assert "read bill://card/visa again first" in said


@given(text=st.text(max_size=800))
def test_the_spent_error_is_short_and_without_the_advice(text: str) -> None:
    """What a refusal of the repeat quotes: at most 300 characters, no advice."""
    got = spent_error(UpstreamError(f"{text}; {MAY_HAVE_RUN}", upstream="u"))
    assert len(got) <= 300 and MAY_HAVE_RUN not in got


def test_an_undelivered_result_is_open() -> None:
    """A client's cancel, or a client gone: its result never reached the agent."""
    d = Delivery()
    assert not_delivered(d) is None
    d.abandoned = True
    assert "went away" in (not_delivered(d) or "")
    d.cancelled = True
    assert "cancelled" in (not_delivered(d) or "")
