"""The one text of a ``not_read`` refusal for a fact never written (QA qa-new15a S3).

A key made from the model's argument (``flight="lh100"`` for ``fare/LH100``) names the
argument and lets the model call again; a key the application names says retrying does
not help. Property: :func:`key_args` names only arguments whose text is in a key.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.workspace import Workspace, WorkspaceError, key_args, unwritten_hint

_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="/"), max_size=12)


@settings(max_examples=200, deadline=None)
@given(args=st.dictionaries(st.sampled_from(["flight", "day", "n", "x"]),
                            st.one_of(_TEXT, st.integers(-10**6, 10**6), st.booleans()),
                            max_size=4),
       keys=st.lists(st.lists(_TEXT, min_size=1, max_size=3).map("/".join), max_size=3))
def test_key_args_names_only_arguments_found_in_a_key(args: dict[str, object],
                                                      keys: list[str]) -> None:
    found = key_args(keys, args)
    for path, val in found.items():
        assert val and any(val in k for k in keys)
        assert not isinstance(args[path], bool) and str(args[path]) == val
    hint = unwritten_hint(keys or ["k/1"], "book", found)
    assert ("Do not retry" in hint) is not bool(found)


def test_a_dynamic_key_from_the_argument_may_be_corrected_a_static_one_not() -> None:
    ws = Workspace({"fare/*": "pricing"})
    ws.put("fare/LH100", {"eur": 210}, by="pricing")
    desk = ws.agent("desk")
    desk.read("fare/LH100")
    call = desk.execute("book", lambda flight: "ok", {"flight": "lh100"},
                        depends_on=lambda a: {f"fare/{a['flight']}"})
    assert not call.executed and call.key_args == {"flight": "lh100"}
    assert "made from your argument flight='lh100'" in call.message
    assert "call book again with corrected arguments" in call.message
    call = desk.execute("book", lambda flight: "ok", {"flight": "XX1"},
                        depends_on={"fare/XX1"})
    assert call.key_args == {} and "report it" in call.message


def test_bad_input_is_a_typed_error() -> None:
    with pytest.raises(WorkspaceError, match="keys must be an iterable"):
        key_args("fare/x", {})
    with pytest.raises(WorkspaceError, match="args must be a mapping"):
        key_args(["fare/x"], [])  # type: ignore[arg-type]
