"""The marker checks of :mod:`icore.adapters._evidence` skip text that cannot match and
give the full pattern search's answer on every text (issue 29: a 50 MB output took
27.5 s, three case-insensitive patterns tried at every position)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters._evidence import (
    _ANCHORS,
    _ASSUMPTION,
    _CLAIM,
    _ERROR,
    _marked,
    assumes,
    output_facts,
    tool_facts,
)

PIECES = ["Traceback (most recent call last)", "exitcode: 1", "exitcode: 0", "unable to",
          "NOT ABLE TO", "couldn't find", "Could not open", "no results found",
          "no relevant results were found", "I'm sorry", "I am Sorry", "I cannot",
          "i can't", "verified", "The final answer is", "is correct", "in summary",
          "TERMINATE", "assumed", "for the sake of example", "made-up", "let's say",
          "sample data", "Error 404", "file not found", "execution failed",
          "\u0130 cannot", "\u017forry", "I'm \u017forry", "I \u212aNOW", "\u0131 can't",
          "x", " ", "\n", "a", "able", "fou", "nd", "é", "_", "-", "'"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=25), st.text(max_size=12),
       st.integers(0, 300))
def test_marked_is_the_full_search(parts: list[str], extra: str, pad: int) -> None:
    """Same answer as ``rx.search(text)`` for every text: anchors, case, the Unicode
    letters case folding matches to ASCII ones, a match far from the start."""
    text = "y" * pad + "".join(parts) + extra
    for rx in _ANCHORS:
        assert _marked(rx, text) == (rx.search(text) is not None), (rx.pattern[:40], text)


def test_the_facts_of_big_texts() -> None:
    """A big text without a marker is clean; one marker at its end is found."""
    plain = "x" * 2_000_000
    facts = output_facts(plain)
    assert not facts["error"] and not facts["claims"] and not assumes(plain)
    assert output_facts(plain + " I am sorry")["error"]
    assert output_facts(plain + " therefore")["claims"]
    assert assumes(plain + " Hypothetically")
    assert tool_facts(plain + "\nTraceback (most recent call last):", 0)["error"]
    assert {_ERROR, _CLAIM, _ASSUMPTION} == set(_ANCHORS)
