"""A framework's private wrapper around a tool's timeout still leaves the outcome open (#29).

CrewAI hands the fence its own ``_``-named exception carrying the tool's exception as
``error``; the decision's recorded ``may_have_run`` must come from the tool's own
exception (a timeout: the call may have run), as its recorded text does.
"""

from __future__ import annotations

import pytest

from icore.integrations import NoEffect
from icore.integrations._failed import Failed, own_exception

pytestmark = pytest.mark.timeout(10)


class _Wrapper(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__("tool failed")
        self.error = error


class Public(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__("tool failed")
        self.error = error


def test_a_wrapped_timeout_may_have_run() -> None:
    inner = TimeoutError("gateway did not answer in 30 s")
    assert own_exception(_Wrapper(inner)) is inner
    assert Failed(None, "TimeoutError: gateway did not answer", _Wrapper(inner)).may_have_run


def test_a_wrapped_plain_error_stays_open_a_wrapped_no_effect_does_not() -> None:
    """Any exception from a started body may follow its effect (QA qa-new12b S2); the
    tool's own ``NoEffect`` says it did nothing, found inside the wrapper too."""
    assert Failed(None, "ValueError: bad card", _Wrapper(ValueError("bad card"))).may_have_run
    assert not Failed(None, "NoEffect: declined", _Wrapper(NoEffect("declined"))).may_have_run
    # a body that never ran: never open, whatever it raised
    assert not Failed(None, "ValueError: bad", ValueError("bad"), ran=False).may_have_run
    # a failure known only as text: open unless it says NoEffect
    assert Failed("text", "RuntimeError: x").may_have_run
    assert not Failed("text", "NoEffect: declined").may_have_run


def test_only_private_wrappers_are_unwrapped() -> None:
    outer = Public(NoEffect("late"))
    assert own_exception(outer) is outer
    assert Failed(None, "Public: tool failed", outer).may_have_run
