"""A folder's ownership record with odd rows, and odd ``over_tcp`` arguments (#29, round 10).

``ownership.sqlite`` rows that are no JSON object of str -> str (a list, a number, NULL,
a 100,000-deep array, 5000 digits, ``NaN``, another program's view) raised
``AttributeError``, ``TypeError`` or ``RecursionError`` at ``Workspace.sqlite``: now a
:class:`~icore.errors.WorkspaceError` naming the record (fail closed: the maps recorded
cannot be compared), and every committed fact reads back once the record is restored.
``Workspace.over_tcp`` with ``addresses`` that are no map of owner -> (host, port) raised
``TypeError`` / ``IndexError`` / ``OverflowError`` (some at the first write), a
``certs_dir`` of the wrong type ``TypeError``: now ``TeamManifestError`` before any
connection. Real SQLite files, real certificates.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import TeamManifestError
from icore.net import init_team_certs
from icore.workspace import Workspace, WorkspaceError

pytestmark = pytest.mark.timeout(120)
FACTS = {"k/*": "o"}


def _plant(record: Path, entries: Any) -> None:
    with closing(sqlite3.connect(record)) as c:
        c.execute("CREATE TABLE m2 (id TEXT PRIMARY KEY, entries) WITHOUT ROWID")
        c.execute("INSERT INTO m2 SELECT * FROM maps")
        c.execute("DROP TABLE maps")
        c.execute("ALTER TABLE m2 RENAME TO maps")
        c.execute("INSERT INTO maps VALUES ('x', ?)", (entries,))
        c.commit()


@pytest.mark.parametrize("entries", ["[1, 2]", 5, None, '"x"', "[" * 100_000, "NaN",
                                     "1" + "0" * 5000, b"\xff", '{"k/*": null}',
                                     '{"k/*": 5}'])
def test_an_odd_row_of_the_record_is_refused_naming_it(tmp_path: Path,
                                                       entries: Any) -> None:
    d = tmp_path / "facts"
    with Workspace.sqlite(FACTS, d) as ws:
        for i in range(5):
            ws.put(f"k/{i}", {"v": i})
    record = d / "ownership.sqlite"
    shutil.copy(record, tmp_path / "keep")
    _plant(record, entries)
    with pytest.raises(WorkspaceError) as got:
        Workspace.sqlite(FACTS, d)
    assert got.value.fields["record"] == str(record), got.value
    shutil.copy(tmp_path / "keep", record)
    with Workspace.sqlite(FACTS, d) as ws:  # nothing committed was lost
        assert [ws.value(f"k/{i}") for i in range(5)] == [{"v": i} for i in range(5)]


@settings(max_examples=40, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                    | st.text(max_size=6), lambda c: st.lists(c, max_size=3)
                    | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=10))
def test_any_recorded_json_opens_or_is_refused_typed(tmp_path_factory: pytest.TempPathFactory,
                                                     doc: Any) -> None:
    d = tmp_path_factory.mktemp("own")
    Workspace.sqlite(FACTS, d).close()
    _plant(d / "ownership.sqlite", json.dumps(doc))
    try:
        Workspace.sqlite(FACTS, d).close()
    except WorkspaceError:
        pass


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs") / "c"
    init_team_certs(d, ["o", "me"])
    return d


@pytest.mark.parametrize("addresses", [None, [("o", 1)], {"o": "x"}, {"o": ("h",)},
                                       {"o": ("127.0.0.1", 70000)}, {"o": ("127.0.0.1", -1)},
                                       {"o": ("127.0.0.1", True)}, {"o": ("", 1)},
                                       {"o": (None, 1)}, {"o": ("127.0.0.1", 1.5)},
                                       {1: ("127.0.0.1", 1)}, {"o": ("a\x00b", 1)}])
def test_over_tcp_refuses_addresses_that_are_no_owner_host_port_map(
        certs: Path, addresses: Any) -> None:
    with pytest.raises(TeamManifestError, match="addresses") as got:
        Workspace.over_tcp(FACTS, identity="me", addresses=addresses, certs_dir=certs)
    assert got.value.fields["field"] == "addresses"


@pytest.mark.parametrize("certs_dir", [5, None, b"c", "a\x00b", ["c"]])
def test_over_tcp_refuses_a_certs_dir_that_names_no_folder(certs_dir: Any) -> None:
    with pytest.raises(TeamManifestError, match="certs_dir"):
        Workspace.over_tcp(FACTS, identity="me", addresses={"o": ("127.0.0.1", 1)},
                           certs_dir=certs_dir)


def test_over_tcp_takes_a_list_pair_as_an_address(certs: Path) -> None:
    """A (host, port) read from JSON or YAML is a list: taken as the pair it is."""
    ws = Workspace.over_tcp(FACTS, identity="me", addresses={"o": ["127.0.0.1", 1]},
                            certs_dir=certs, timeout_s=0.5)
    ws.close()
