"""The executed-call ledger of ApprovalBook (#28): an approved call runs at most once."""

from __future__ import annotations

from icore.workspace import ApprovalBook


def test_ledger_records_and_forgets() -> None:
    book = ApprovalBook(max_calls=2)
    assert book.executed("c1") is None
    book.ran("c1", "req-1", "shipped 1")
    assert book.executed("c1") == ("req-1", "shipped 1")
    book.forget("c1")
    assert book.executed("c1") is None


def test_ledger_is_bounded() -> None:
    book = ApprovalBook(max_calls=2)
    for i in range(3):
        book.ran(f"c{i}", f"r{i}", i)
    assert book.executed("c0") is None
    assert book.executed("c2") == ("r2", 2)
