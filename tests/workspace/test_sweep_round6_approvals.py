"""Issue 29, sixth sweep round: hostile answers to a human approval never run a call.

``read_answer`` raised the answer object's own exception (a mapping whose lookups raise,
a ``reason`` whose ``str`` raises: RuntimeError out of ``Agent.execute`` and
``ApprovalBook.resolve``), and took an answer naming an id that is no str
(``{"planfence.approval": 7, "approved": True}``, ``[id]``) for a bare "yes": the call
ran although the answer named no request of it (fail open).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from icore.workspace import (
    ApprovalBook,
    ApprovalRequest,
    Workspace,
    WorkspaceError,
    read_answer,
)


class _RaisingStr:
    def __str__(self) -> str:
        raise RuntimeError("str")

    __repr__ = __str__


class _RaisingMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("getitem")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("iter")

    def __len__(self) -> int:
        return 1

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("get")


_HOSTILE: list[Any] = [
    _RaisingMapping(),
    {"planfence.approval": "f" * 64, "approved": False, "reason": _RaisingStr()},
    {"approved": True, "reason": _RaisingStr()},
    {"type": _RaisingStr()},
]


@pytest.mark.parametrize("answer", _HOSTILE)
def test_an_unreadable_answer_is_a_rejection_not_an_exception(answer: Any) -> None:
    verdict = read_answer(answer)
    assert verdict.approved is False or verdict.reason != ""  # never raises
    if isinstance(answer, _RaisingMapping):
        assert verdict.approved is False and "unreadable" in verdict.reason


@pytest.mark.parametrize("rid", [7, ["f" * 64], {"id": "x"}, 1.5, b"f" * 64, None])
def test_an_answer_naming_an_id_that_is_no_str_approves_nothing(rid: Any) -> None:
    verdict = read_answer({"planfence.approval": rid, "approved": True})
    assert verdict.approved is False and verdict.id is None
    assert "no request id" in verdict.reason


def _agent() -> tuple[Workspace, Any, list[str]]:
    ws = Workspace({"k/*": "o"})
    ws.put("k/1", {"v": 1})
    ag = ws.agent("a")
    ag.read("k/1")
    return ws, ag, []


@pytest.mark.parametrize("answer", [
    {"planfence.approval": 7, "approved": True},
    {"planfence.approval": ["x"], "approved": True},
    _RaisingMapping(),
    {"planfence.approval": None, "approved": True, "reason": _RaisingStr()},
    {"approved": True, "reason": _RaisingStr()},
])
def test_execute_under_a_hostile_answer_never_runs(answer: Any) -> None:
    """A present ``null`` id rejects too (QA qa-new17c #7: it approved as a bare yes)."""
    _, ag, ran = _agent()
    call = ag.execute("t", lambda x: ran.append(x), {"x": "Porto"}, depends_on={"k/1"},
                      approve=lambda r: answer)
    if isinstance(answer, Mapping) and not isinstance(answer, _RaisingMapping) and \
            "planfence.approval" not in answer:
        # a bare approval whose reason cannot be shown: still an approval, shown briefly
        assert call.executed and ran == ["Porto"]
    else:
        assert not call.executed and ran == []


@pytest.mark.parametrize("answer", [_RaisingMapping(),
                                    {"planfence.approval": 7, "approved": True}])
def test_the_book_never_approves_on_an_unreadable_answer(answer: Any) -> None:
    req = ApprovalRequest.of("t", {"x": "Porto"}, {"k/1": "a" * 64})
    verdict = ApprovalBook().resolve("c1", req, lambda payload: answer, fresh_answers=True)
    assert verdict.approved is False


def test_a_genuine_approval_still_runs() -> None:
    _, ag, ran = _agent()
    call = ag.execute("t", lambda x: ran.append(x) or "ok", {"x": "Porto"},
                      depends_on={"k/1"}, approve=lambda r: r.approve())
    assert call.executed and ran == ["Porto"]


@pytest.mark.parametrize("value", [0, -1, "5", None, True, 1.5, float("nan")])
def test_an_approval_book_size_that_is_no_positive_int_is_refused(value: Any) -> None:
    with pytest.raises(WorkspaceError, match="max_calls"):
        ApprovalBook(max_calls=value)


def test_a_book_of_one_call_forgets_the_older_one() -> None:
    book = ApprovalBook(max_calls=1)
    for i in range(3):
        req = ApprovalRequest.of("t", {"x": str(i)}, {"k/1": "a" * 64})
        assert book.resolve(f"c{i}", req, lambda p, r=req: r.approve()).approved
    assert book.asked("c0") == [] and len(book.asked("c2")) == 1


class _StrSaysNo(str):
    __slots__ = ()

    def strip(self, chars: str | None = None) -> str:
        raise RuntimeError("strip")


@pytest.mark.parametrize(("text", "approved"), [("yes", True), (" no ", False)])
def test_a_str_subclass_is_read_as_its_text(text: str, approved: bool) -> None:
    assert read_answer(_StrSaysNo(text)).approved is approved
