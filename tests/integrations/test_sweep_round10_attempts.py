"""A LangGraph attempts file that cannot serve fails typed and closed (#29, round 10).

``icore-attempts.sqlite`` (the fenced calls' attempts, kept beside the app's SQLite
state) damaged, a folder, another program's ``attempts`` table or view, read-only: the
``sqlite3`` error escaped the fenced tool untyped. A row that cannot be read back (a
value that is no JSON, 100,000 deep, 5000 digits, a blob) raised ``JSONDecodeError``,
``RecursionError`` or ``ValueError``. Now the file's failures are a
:class:`~icore.errors.StoreError` naming it, raised before the tool's body runs, and a
damaged row is an attempt whose outcome is unknown (refused, never run again). Real
SQLite files; the graph test runs a real LangGraph app.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import StoreError
from icore.integrations._call_ledger import RAN, REFUSED, STARTED, UNKNOWN, Earlier
from icore.integrations.langgraph._attempts_db import FILE_NAME, AttemptsFile

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("how", ["garbage", "folder", "foreign", "view"])
def test_a_file_that_cannot_serve_is_a_store_error_naming_it(tmp_path: Path,
                                                              how: str) -> None:
    p = tmp_path / FILE_NAME
    if how == "garbage":
        p.write_bytes(b"no database here " * 300)
    elif how == "folder":
        p.mkdir()
    else:
        with closing(sqlite3.connect(p)) as c:
            c.execute("CREATE TABLE attempts (a, b)" if how == "foreign" else
                      "CREATE VIEW attempts AS SELECT 1 AS key")
            c.commit()
    with pytest.raises(StoreError) as got:
        AttemptsFile(p)
    assert got.value.fields["path"] == str(p)


def test_a_read_only_file_refuses_the_start(tmp_path: Path) -> None:
    p = tmp_path / FILE_NAME
    AttemptsFile(p).close()
    for extra in ("-wal", "-shm"):
        (tmp_path / (FILE_NAME + extra)).unlink(missing_ok=True)
    p.chmod(0o444)
    f = AttemptsFile(p) if os.geteuid() != 0 else None
    if f is None:  # root writes a 0444 file: open it read-only instead
        f = AttemptsFile.__new__(AttemptsFile)
        AttemptsFile.__init__(f, p)
        f._db.close()
        f._db = sqlite3.connect(f"{p.as_uri()}?mode=ro", uri=True, check_same_thread=False,
                                isolation_level=None)
    with pytest.raises(StoreError, match="cannot write") as got:
        f.start("k", "t", None, "c")
    assert got.value.fields["path"] == str(p)
    f.settle("k", Earlier(RAN, "done"))  # logged, never raised (the body already ran)
    f.close()


@settings(max_examples=60, deadline=None)
@given(how=st.sampled_from([RAN, REFUSED, UNKNOWN, STARTED, "x", 5]),
       kind=st.sampled_from([None, "opaque", "x"]),
       value=st.one_of(st.none(), st.text(max_size=20), st.binary(max_size=8),
                       st.integers(-(2**63), 2**63 - 1), st.just("[" * 100_000),
                       st.just("1" + "0" * 5000), st.just("{bad")))
def test_any_row_reads_back_or_is_an_outcome_unknown(tmp_path_factory: pytest.TempPathFactory,
                                                     how: object, kind: object,
                                                     value: object) -> None:
    p = tmp_path_factory.mktemp("att") / FILE_NAME
    f = AttemptsFile(p)
    try:
        f.start("k", "t", None, "c")
        f._db.execute("UPDATE attempts SET how = ?, kind = ?, value = ? WHERE key = 'k'",
                      (how, kind, value))
        got = f.get("k")
        assert got is not None and got.how in (RAN, REFUSED, UNKNOWN, STARTED)
        if got.how == UNKNOWN:  # damaged or unknown: refused as such, its text is a str
            assert got.value is None or isinstance(got.value, str)
        if how not in (RAN, REFUSED):
            assert got.how in (UNKNOWN, STARTED)  # never an answer it did not record
    finally:
        f.close()


@pytest.mark.parametrize("how", ["garbage", "row-deep"])
def test_a_fenced_graph_tool_never_runs_on_a_damaged_attempts_file(tmp_path: Path,
                                                                   how: str) -> None:
    """The sweep's app: a typed refusal, the body never ran (a damaged row: refused
    ``earlier_outcome_unknown``)."""
    sys.path.insert(0, str(ROOT))
    try:
        from tools.badinput.round10 import _ATT_APP
    finally:
        sys.path.remove(str(ROOT))
    app = tmp_path / "app.py"
    app.write_text(_ATT_APP)
    r = subprocess.run([sys.executable, str(app), str(tmp_path / "db"), how],
                       capture_output=True, text=True, timeout=100, check=False,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "ACCEPTED" not in r.stdout, r.stdout
    want = "TYPED StoreError" if how == "garbage" else "earlier_outcome_unknown"
    assert want in r.stdout, r.stdout
