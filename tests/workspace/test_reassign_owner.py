"""Re-assigning a pattern of a ``Workspace.sqlite`` folder (``icore owners reassign``, #28).

The folder's ownership record only grows and refuses a map naming another owner for a
recorded entry, so moving ``campaign/*`` from ``mkt`` to ``sales`` had no way on. Real
SQLite files, a real second process holding the folder open, the real CLI.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from icore.memory import OwnershipMap, SQLiteStore
from icore.workspace import Workspace, WorkspaceError, ownership_record, reassign_owner

SRC = str(Path(__file__).resolve().parents[2] / "src")
OLD = {"campaign/*": "mkt", "slot/*": "ops"}
NEW = {"campaign/*": "sales", "slot/*": "ops"}


def _seed(folder: Path) -> list[str]:
    with Workspace.sqlite(OLD, folder) as ws:
        a = ws.put("campaign/spring", {"budget": 500})
        b = ws.update("campaign/spring", lambda c: {**c, "budget": 800})
        ws.put("campaign/fall", [1, 2.5, None])
        ws.put("slot/xmas", {"free": True})
    return [a.id, b.id]


def _records(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {r[0] for r in db.execute("SELECT id FROM records")}
    finally:
        db.close()


def test_reassign_moves_the_facts_and_keeps_every_record(tmp_path: Path) -> None:
    """The new owner reads the old owner's facts; the old file is unchanged; the record
    keeps the old map's row and adds the re-assignment; the old map is refused after."""
    ids = _seed(tmp_path)
    before = _records(tmp_path / "mkt.db")
    done = reassign_owner(tmp_path, "campaign/*", to="sales")
    assert (done.patterns, done.old_owners, done.new_owner) == (
        ("campaign/*",), {"campaign/*": "mkt"}, "sales")
    assert sorted(done.moved) == ["campaign/fall", "campaign/spring"]
    assert done.moved["campaign/spring"][0] == ids[1]  # from the old head
    assert _records(tmp_path / "mkt.db") == before  # every old record is still there
    with Workspace.sqlite(NEW, tmp_path) as ws:
        assert ws.value("campaign/spring") == {"budget": 800}
        assert ws.value("campaign/fall") == [1, 2.5, None]
        assert ws.value("slot/xmas") == {"free": True}  # another owner: untouched
        rec = ws.head("campaign/spring")
        assert rec is not None and rec.owner == "sales"
        assert rec.id == done.moved["campaign/spring"][1]
        ws.update("campaign/spring", lambda c: {**c, "budget": 900})  # sales writes on
    with pytest.raises(WorkspaceError, match="different owners") as ei:
        Workspace.sqlite(OLD, tmp_path)  # a process still configured with mkt
    assert ei.value.fields["other_owner"] == "sales"
    assert "icore owners reassign" in ei.value.fields["fix"]
    got = ownership_record(tmp_path)
    assert OLD in got["maps"] and NEW in got["maps"]  # rows never changed
    assert got["effective"] == [NEW]
    assert [(r["pattern"], r["old_owner"], r["new_owner"]) for r in got["reassigned"]] \
        == [("campaign/*", "mkt", "sales")]
    with pytest.raises(WorkspaceError, match="this owner's already"):
        reassign_owner(tmp_path, "campaign/*", to="sales")
    back = reassign_owner(tmp_path, "campaign/*", to="mkt")  # and back again
    assert (back.old_owners, sorted(back.moved)) == ({"campaign/*": "sales"},
                                                     ["campaign/fall", "campaign/spring"])
    with Workspace.sqlite(OLD, tmp_path) as ws:
        assert ws.value("campaign/spring") == {"budget": 900}  # mkt's new version
        head = ws.head("campaign/spring")
        assert head is not None and head.supersedes == ids[1]  # on mkt's own chain


def test_refused_while_the_folder_is_open(tmp_path: Path) -> None:
    """An open workspace in this process, or in another process, refuses it; nothing
    is recorded."""
    _seed(tmp_path)
    with Workspace.sqlite(OLD, tmp_path), pytest.raises(WorkspaceError,
                                                        match="open in a workspace") as ei:
        reassign_owner(tmp_path, "campaign/*", to="sales")
    assert ei.value.fields["lock"].endswith("ownership.lock")
    code = ("import sys; from icore.workspace import Workspace\n"
            f"ws = Workspace.sqlite({OLD!r}, sys.argv[1])\n"
            "print('open', flush=True); sys.stdin.readline(); ws.close()\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": SRC})
    try:
        assert child.stdout is not None and child.stdout.readline() == "open\n"
        with pytest.raises(WorkspaceError, match="open in a workspace"):
            reassign_owner(tmp_path, "campaign/*", to="sales")
        store = SQLiteStore(tmp_path / "ops.db", OwnershipMap.from_mapping(OLD), "ops")
        try:  # a store opened directly (no folder lock): its owner file's lock
            child.communicate("\n", timeout=60)
            with pytest.raises(WorkspaceError, match="owner file of the folder") as ei:
                reassign_owner(tmp_path, "campaign/*", to="sales")
            assert ei.value.fields["file"].endswith("ops.db")
        finally:
            store.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=30)
    assert ownership_record(tmp_path)["reassigned"] == []
    assert not (tmp_path / "sales.db").exists()
    assert reassign_owner(tmp_path, "campaign/*", to="sales").moved  # all closed now


def test_a_reassignment_leaving_two_maps_apart_is_refused(tmp_path: Path) -> None:
    """A second recorded map keeps ``campaign/launch`` with mkt: re-assigning only the
    pattern (or only the key) would split the key between the maps. Refused naming it;
    re-assigning both together goes through."""
    _seed(tmp_path)
    Workspace.sqlite({**OLD, "campaign/launch": "mkt"}, tmp_path).close()
    with pytest.raises(WorkspaceError, match="different owners") as ei:
        reassign_owner(tmp_path, "campaign/*", to="sales")
    assert ei.value.fields["key"] == "campaign/launch"
    assert ownership_record(tmp_path)["reassigned"] == []
    assert not (tmp_path / "sales.db").exists()
    with pytest.raises(WorkspaceError, match="different owners"):
        reassign_owner(tmp_path, "campaign/launch", to="sales")
    done = reassign_owner(tmp_path, ["campaign/*", "campaign/launch"], to="sales")
    assert sorted(done.moved) == ["campaign/fall", "campaign/spring"]
    rows = ownership_record(tmp_path)["reassigned"]
    assert [r["pattern"] for r in rows] == ["campaign/*", "campaign/launch"]  # one each
    with Workspace.sqlite({**NEW, "campaign/launch": "sales"}, tmp_path) as ws:
        assert ws.value("campaign/spring") == {"budget": 800}


@pytest.mark.parametrize(("args", "field"), [
    ((None, "campaign/*", "sales"), "argument"),
    (("MISSING", "campaign/*", "sales"), "record"),
    (("HERE", "", "sales"), "argument"),
    (("HERE", "campaign/*", "../x"), "argument"),
    (("HERE", "nothing/*", "sales"), "entries"),
])
def test_bad_arguments_are_named(tmp_path: Path, args: tuple[object, ...], field: str
                                 ) -> None:
    """A typed error naming what is wrong; nothing is written."""
    _seed(tmp_path)
    where = {"HERE": tmp_path, "MISSING": tmp_path / "none"}
    d, p, to = (where.get(a, a) if isinstance(a, str) else a for a in args)
    with pytest.raises(WorkspaceError) as ei:
        reassign_owner(d, p, to=to)  # type: ignore[arg-type]
    assert field in ei.value.fields
    assert ownership_record(tmp_path)["reassigned"] == []


def test_a_rerun_after_a_cut_short_move_finishes_it(tmp_path: Path) -> None:
    """The facts were written to the new owner's file but the record not (a crash in
    between): running again skips them (no second version) and records it."""
    _seed(tmp_path)
    from icore.workspace._reassign import _move  # the first half, on its own

    first = _move(tmp_path, "mkt", "sales", [OwnershipMap.from_mapping(NEW)])
    assert ownership_record(tmp_path)["reassigned"] == []
    done = reassign_owner(tmp_path, "campaign/*", to="sales")
    assert done.moved == first
    with Workspace.sqlite(NEW, tmp_path) as ws:
        head = ws.head("campaign/spring")
        assert head is not None and head.id == first["campaign/spring"][1]
        assert head.supersedes is None  # one version at sales: no second write


def test_cli_show_and_reassign(tmp_path: Path) -> None:
    """``icore owners reassign`` prints what moved; ``icore owners show`` the record; a
    refusal is exit 1 naming it."""
    _seed(tmp_path)
    env = {**os.environ, "PYTHONPATH": SRC}

    def icore(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "icore", "owners", *args],
                              capture_output=True, text=True, env=env, timeout=120)

    with Workspace.sqlite(OLD, tmp_path):
        busy = icore("reassign", str(tmp_path), "campaign/*", "--to", "sales")
    assert busy.returncode == 1 and "open in a workspace" in busy.stderr
    ok = icore("reassign", str(tmp_path), "campaign/*", "--to", "sales")
    assert ok.returncode == 0, ok.stderr
    assert sorted(json.loads(ok.stdout)["moved"]) == ["campaign/fall", "campaign/spring"]
    shown = icore("show", str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["effective"] == [NEW]
