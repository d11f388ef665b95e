"""A SQLite store whose file is deleted or replaced under it fails closed (#29, QA qa-new12b S1).

SQLite keeps reading the file it opened after the path is unlinked, so an owner process
that deletes and re-makes its folder used to leave a reader authorizing on the old heads.
Real files, real owner subprocesses; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from icore.errors import OwnerUnavailable
from icore.memory import OwnershipMap, SQLiteStore, _store_file
from icore.records import Record
from icore.workspace import Workspace

OM = OwnershipMap.from_mapping({"dock/*": "warehouse"})
FACTS = {"dock/*": "warehouse"}

# An owner process on the folder: "init" (re)makes the fact, "set" writes it, "rmtree"
# first deletes the whole folder, "get" prints the fact.
OWNER = textwrap.dedent("""
    import json, shutil, sys
    from icore.workspace import Workspace
    folder, *steps = sys.argv[1:]
    for step in steps:
        if step == "rmtree":
            shutil.rmtree(folder)
            continue
        with Workspace.sqlite({"dock/*": "warehouse"}, folder) as ws:
            if step.startswith("set="):
                ws.put("dock/d1", json.loads(step[4:]))
            elif step == "get":
                print(json.dumps(ws.value("dock/d1")))
""")


# An owner process that keeps the new file open (and its WAL) until told to read and close.
HOLDER = textwrap.dedent("""
    import sys, json
    from icore.workspace import Workspace
    ws = Workspace.sqlite({"dock/*": "warehouse"}, sys.argv[1])
    ws.put("dock/d1", {"free": ["late"]})
    print("ready", flush=True)
    sys.stdin.readline()
    print(json.dumps(ws.value("dock/d1")), flush=True)
    ws.close()
""")


def _owner(folder: Path, *steps: str) -> str:
    """Run the owner process to the end; its stdout."""
    done = subprocess.run([sys.executable, "-c", OWNER, str(folder), *steps],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rec(store: SQLiteStore, value: Any, prev: Record | None = None) -> Record:
    return Record.create(key="dock/d1", owner="warehouse", seq=store.next_seq(),
                         content=value, parents=() if prev is None else (prev.id,))


def _replace_folder(folder: Path) -> None:
    """Another process deletes the folder and makes a new store there, dock closed."""
    _owner(folder, "rmtree", 'set={"free": []}')


def test_workspace_reader_blocks_after_the_owner_remade_its_folder(tmp_path: Path) -> None:
    """The QA case (b6.py): the owner deletes and re-inits its folder; the reader that
    read 3 free slots must not authorize the booking from the orphaned file."""
    folder = tmp_path / "owners"
    _owner(folder, 'set={"free": ["08:00", "10:00"]}')
    ran: list[str] = []
    with Workspace.sqlite(FACTS, folder) as ws:
        buyer = ws.agent("buyer")
        assert buyer.read("dock/d1") == {"free": ["08:00", "10:00"]}
        _replace_folder(folder)
        assert json.loads(_owner(folder, "get")) == {"free": []}
        call = buyer.execute("book_dock", lambda **a: ran.append(a["slot"]),
                             {"slot": "08:00"}, depends_on=["dock/d1"])
        assert not call.executed and ran == []
        assert call.reason == "owner_unavailable"
        with pytest.raises(OwnerUnavailable) as err:
            ws.value("dock/d1")
        assert err.value.fields["path"] == str(folder / "warehouse.db")
        assert err.value.fields["reason"] == "replaced"
    # a workspace opened afresh reads the new file
    with Workspace.sqlite(FACTS, folder) as ws:
        assert ws.value("dock/d1") == {"free": []}


@pytest.fixture(params=[True, False], ids=["inotify", "stat-only"])
def watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run with the inotify trigger (Linux) and with a stat at every check."""
    monkeypatch.setattr(_store_file, "WATCH", request.param)
    return bool(request.param)


@pytest.mark.parametrize("how", ["delete_db", "delete_all", "move_folder_aside",
                                 "move_grandparent_aside", "swap_symlink", "rename_over"])
@pytest.mark.parametrize("exclusive", [False, True])
def test_every_decision_read_fails_closed(tmp_path: Path, how: str, exclusive: bool,
                                          watch: bool) -> None:
    """Heads, head, head_keys, installed_head, owner_seq and commits all refuse, naming
    the path, whichever way the file went; an exclusive store's in-memory head table
    (the owner service) is not served either."""
    (tmp_path / "v1" / "f").mkdir(parents=True)
    (tmp_path / "cur").symlink_to(tmp_path / "v1")
    folder = tmp_path / "cur" / "f"
    db = folder / "warehouse.db"
    st = SQLiteStore(db, OM, "warehouse", exclusive=exclusive)
    assert (st._guard.quiet is not None) == (watch and sys.platform == "linux")
    first = st.commit(_rec(st, {"free": ["08:00"]}), writer="warehouse").record
    for _ in range(3):  # nothing changed: served (the quiet path with a watch)
        assert st.heads(["dock/d1"])["dock/d1"].record_id == first.id
    if how == "delete_db":
        db.unlink()
    elif how == "delete_all":
        shutil.rmtree(folder)
    elif how == "move_folder_aside":  # the old inode lives on under another name
        folder.rename(tmp_path / "old")
        folder.mkdir()
    elif how == "move_grandparent_aside":
        (tmp_path / "v1").rename(tmp_path / "old")
        (tmp_path / "v1" / "f").mkdir(parents=True)
    elif how == "swap_symlink":  # cur -> v2, a folder of its own
        (tmp_path / "v2" / "f").mkdir(parents=True)
        (tmp_path / "next").symlink_to(tmp_path / "v2")
        os.replace(tmp_path / "next", tmp_path / "cur")
    else:  # a new file renamed over the path (a restore from a copy)
        shutil.copy(db, tmp_path / "copy.db")
        os.replace(tmp_path / "copy.db", db)
    reason = "replaced" if how == "rename_over" else "deleted"
    reads = [lambda: st.heads(["dock/d1"]), lambda: st.head("dock/d1"), st.head_keys,
             lambda: st.installed_head("dock/d1"), lambda: st.owner_seq("warehouse"),
             lambda: st.commit(_rec_after(first), writer="warehouse")]
    for read in reads:
        with pytest.raises(OwnerUnavailable) as err:
            read()
        assert err.value.fields == {"owner": "warehouse", "path": str(db),
                                    "store": str(db), "reason": reason}
        assert err.value.code == "owner_unavailable"
    st.close()


def _rec_after(prev: Record) -> Record:
    return Record.create(key="dock/d1", owner="warehouse", seq=prev.seq + 1,
                         content={"free": []}, parents=(prev.id,))


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_commit_into_a_replaced_file_is_not_acknowledged(tmp_path: Path,
                                                           exclusive: bool) -> None:
    """The file is replaced after the last read: the next commit lands in the orphan, so
    it raises after COMMIT; the in-memory head table does not move, and the live file
    never holds the record."""
    folder = tmp_path / "f"
    st = SQLiteStore(folder / "warehouse.db", OM, "warehouse", exclusive=exclusive)
    first = st.commit(_rec(st, {"free": ["08:00"]}), writer="warehouse").record
    _replace_folder(folder)
    second = _rec_after(first)
    with pytest.raises(OwnerUnavailable, match="replaced"):
        st.commit(second, writer="warehouse")
    if exclusive:
        assert st._heads["dock/d1"].record_id == first.id
    st.close()
    with SQLiteStore(folder / "warehouse.db", OM, "warehouse") as fresh:
        assert fresh.get(second.id) is None and fresh.get(first.id) is None
        head = fresh.head("dock/d1")
        assert head is not None and fresh.get(head.record_id).content == {  # type: ignore[union-attr]
            "free": []}


@pytest.mark.parametrize("companion", ["-wal", "-shm", ".lock"])
def test_a_companion_replaced_alone_stops_the_next_commit(tmp_path: Path,
                                                          companion: str) -> None:
    """A ``-wal``, ``-shm`` or ``.lock`` replaced with the database left in place splits
    the file's users; the next write transaction refuses, naming that file."""
    db = tmp_path / "warehouse.db"
    st = SQLiteStore(db, OM, "warehouse")
    first = st.commit(_rec(st, {"free": ["08:00"]}), writer="warehouse").record
    side = Path(str(db) + companion)
    assert side.exists()
    side.unlink()
    side.write_bytes(b"")
    with pytest.raises(OwnerUnavailable) as err:
        st.commit(_rec_after(first), writer="warehouse")
    assert err.value.fields["path"] == str(side)
    with pytest.raises(OwnerUnavailable):
        st.head("dock/d1")  # lost for good: every later call refuses
    st.close()


def test_other_processes_opening_and_closing_the_file_are_no_replacement(
        tmp_path: Path) -> None:
    """No false alarm: owner processes open, write and close the shared file (SQLite
    keeps ``-wal`` and ``-shm`` while this store is open), and this store keeps reading
    and committing."""
    folder = tmp_path / "owners"
    st = SQLiteStore(folder / "warehouse.db", OM, "warehouse")
    for i in range(3):
        _owner(folder, f'set={{"free": [{i}]}}')
        head = st.head("dock/d1")
        assert head is not None
        assert st.get(head.record_id).content == {"free": [i]}  # type: ignore[union-attr]
    prev = st.get(st.head("dock/d1").record_id)  # type: ignore[union-attr]
    assert prev is not None
    st.commit(_rec_after(prev), writer="warehouse")
    assert json.loads(_owner(folder, "get")) == {"free": []}
    st.close()


def test_closing_a_lost_store_leaves_the_new_file_intact(tmp_path: Path) -> None:
    """Closing the orphaned connection must not checkpoint into, or delete the ``-wal`` of,
    the file now at the path (SQLite removes a WAL by name on the last close)."""
    folder = tmp_path / "owners"
    st = SQLiteStore(folder / "warehouse.db", OM, "warehouse")
    st.commit(_rec(st, {"free": ["08:00"]}), writer="warehouse")
    _replace_folder(folder)
    with subprocess.Popen(  # keeps the new file open, with its WAL
            [sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "ready"
            with pytest.raises(OwnerUnavailable):
                st.head("dock/d1")
            st.close()
            assert Path(str(folder / "warehouse.db") + "-wal").exists()
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert json.loads(holder.stdout.readline()) == {"free": ["late"]}
        finally:
            if holder.poll() is None:
                holder.kill()
    assert json.loads(_owner(folder, "get")) == {"free": ["late"]}
