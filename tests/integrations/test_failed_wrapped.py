"""A framework's private wrapper around a tool's timeout still leaves the outcome open (#29).

CrewAI hands the fence its own ``_``-named exception carrying the tool's exception as
``error``; the decision's recorded ``may_have_run`` must come from the tool's own
exception (a timeout: the call may have run), as its recorded text does.
"""

from __future__ import annotations

import pytest

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


def test_a_wrapped_plain_error_did_not_stay_open() -> None:
    wrapped = _Wrapper(ValueError("bad card"))
    assert not Failed(None, "ValueError: bad card", wrapped).may_have_run


def test_only_private_wrappers_are_unwrapped() -> None:
    outer = Public(TimeoutError("late"))
    assert own_exception(outer) is outer
    assert not Failed(None, "Public: tool failed", outer).may_have_run
