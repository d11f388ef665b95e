"""Shared write claims that cannot be read refuse the call, typed and recorded (#29, round 10).

A gateway's shared claims (``<store>/icore-writes/claims.sqlite`` and the holders'
``.lock`` files) damaged or another program's: the claims lookup raised
``sqlite3.OperationalError`` (another program's ``claims`` table, the file locked past
10 s), ``RecursionError`` (a 100,000-deep row) or ``IsADirectoryError`` / ``ELOOP`` /
``PermissionError`` (a holder's lock file a folder, a link loop, unreadable) out of the
``tools/call`` handler: the client got the SDK's bare error, the trace recorded nothing
of the call and the log named no file. Now the call is refused ``claims_unavailable``
(fail closed: whether another gateway writes its D(a) cannot be told) naming the file,
and recorded. Real SQLite files, real lock files, a real stdio gateway.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import IcoreError
from icore.mcp._shared_writes import ClaimsUnavailable, SharedWrites, _decode

from .conftest import audited_actions, stdio_gateway, text, upstream_log
from .test_gateway_shared_writes import _manifest

pytestmark = pytest.mark.timeout(120)
LIVE = ("1-000000000000", json.dumps([["k://*", True]]))


def _rows(folder: Path, *rows: tuple[str, str]) -> None:
    with sqlite3.connect(folder / "claims.sqlite") as c:
        c.executemany("INSERT INTO claims (holder, writes) VALUES (?, ?)", rows)
    c.close()


def _enter(s: SharedWrites) -> Any:
    return anyio.run(lambda: s.enter([("k://1", False)], [("k://1", False)]))


@pytest.mark.parametrize("how", ["lock-folder", "lock-loop", "foreign-table"])
def test_a_claims_lookup_that_fails_is_typed_and_names_the_file(tmp_path: Path,
                                                                how: str) -> None:
    s = SharedWrites(tmp_path)
    try:
        lock = tmp_path / f"{LIVE[0]}.lock"
        if how == "foreign-table":
            with sqlite3.connect(tmp_path / "claims.sqlite") as c:
                c.execute("ALTER TABLE claims RENAME TO old")
                c.execute("CREATE TABLE claims (x)")
            c.close()
        else:
            _rows(tmp_path, LIVE)
            lock.mkdir() if how == "lock-folder" else os.symlink(lock.name, lock)
        with pytest.raises(ClaimsUnavailable) as got:
            _enter(s)
        assert isinstance(got.value, IcoreError)
        want = lock if how != "foreign-table" else tmp_path / "claims.sqlite"
        assert got.value.fields["file"] == str(want), got.value
        assert s._con is not None and not s._con.in_transaction  # nothing left open
    finally:
        s.close()


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.text(max_size=30), st.just("[" * 100_000),
                 st.recursive(st.none() | st.integers() | st.text(max_size=5),
                              lambda c: st.lists(c, max_size=3), max_leaves=8).map(
                                  json.dumps)))
def test_a_row_of_any_text_decodes_or_claims_everything(row: str) -> None:
    got = _decode(row)
    assert all(isinstance(t, str) and isinstance(g, bool) for t, g in got)


def test_a_gateway_refuses_a_call_when_its_claims_are_another_programs(
        tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, {"backend": "sqlite", "path": "facts"})
    claims = tmp_path / "facts" / "icore-writes"
    claims.mkdir(parents=True)
    with sqlite3.connect(claims / "claims.sqlite") as c:
        c.execute("CREATE TABLE claims (x)")  # another program's table of that name
    c.close()

    async def main() -> Any:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("wh://stock/R0")
            return await s.call_tool("purge_sku", {"sku": "R0"})

    got = anyio.run(main)
    assert got.is_error and got.meta["icore/gate"]["reason"] == "claims_unavailable", \
        text(got)
    assert str(claims / "claims.sqlite") in text(got)
    assert not [x for x in upstream_log(tmp_path / "up.log") if x["event"] == "start"]
    assert audited_actions(tmp_path / "trace.jsonl").get("blocked") == 1  # recorded
