"""Event-sourced SQLite log: round trip, rebuild, transactions, bad logs (design.md 4.2)."""

from __future__ import annotations

import sqlite3

import pytest

from icore._clock import ManualClock
from icore.records import Record
from icore.state import (
    Effect,
    EntryKind,
    FlagKind,
    LogEntry,
    LogError,
    MemoryLog,
    Note,
    SQLiteLog,
    State,
    decode_entry,
    encode_entry,
    equivalent,
    export_json,
    normalize,
    rebuild,
)


def _run(flow) -> None:
    """A run touching every entry kind."""
    x = flow.x
    flow.introduce("o1", "o2")
    flow.assign("o1", "alice")
    flow.start("o1", "alice")
    r1 = Record.create(key="spec/x", owner="lead", seq=1, content={"v": 1})
    flow.heads["spec/x"] = r1.id
    flow.submit("o1", "alice", record=r1)
    x.submit(flow.submit_proposal("o2", "alice"))  # rejected: o2 not active
    x.on_head_change("spec/x", "3" * 64)
    ev = x.add_event(flow.submit_proposal("o1", "alice").events[0])
    c = x.import_certificate("approved", verdict=False, events=(ev.id,))
    x.import_assertion(
        _claim("o2"), events=(ev.id,), operation="approve", certificates=(c.id,), proposer="bob"
    )
    f = x.raise_flag(FlagKind.UNSUPPORTED_ASSERTION, obligations=("o2",))
    x.record_note("diagnosis", {"obligations": ["o2"], "defect": "evidence"}, ref=f.id)
    x.resolve_flag(f.id, by="lead", note="recovered")


def _claim(oid: str) -> Effect:
    return Effect.claim(oid, "reviewed", True)


class TestSQLiteLog:
    """A real SQLite file under tmp_path."""

    def test_rebuild_is_equivalent(self, tmp_path, code_review, make_flow):
        log = SQLiteLog(tmp_path / "x.db", declaration=code_review)
        x = State(code_review, log=log, clock=ManualClock(5.0))
        _run(make_flow(x))
        kinds = {e.kind for e in x.entries}
        assert kinds == set(EntryKind)
        assert len(log) == x.seq
        log.close()
        with SQLiteLog(tmp_path / "x.db", declaration=code_review) as log2:
            y = rebuild(log2, code_review)
            assert equivalent(x, y)
            assert export_json(x) == export_json(y)
            assert y.metrics() == x.metrics() == y.recompute_metrics()
            assert [f.id for f in y.open_flags()] == [f.id for f in x.open_flags()]

    def test_attach_continues_the_log(self, tmp_path, code_review, make_flow):
        path = tmp_path / "x.db"
        with SQLiteLog(path) as log:
            flow = make_flow(State(code_review, log=log))
            flow.introduce("o1")
        with SQLiteLog(path) as log:
            y = rebuild(log, code_review, attach=True)
            make_flow(y).assign("o1", "alice")
            assert len(log) == y.seq
        with SQLiteLog(path) as log:
            z = rebuild(log, code_review)
            assert equivalent(y, z)

    def test_other_declaration_is_refused(self, tmp_path, code_review, research):
        SQLiteLog(tmp_path / "x.db", declaration=code_review).close()
        with pytest.raises(LogError, match="another declaration"):
            SQLiteLog(tmp_path / "x.db", declaration=research)

    def test_not_a_database(self, tmp_path):
        p = tmp_path / "junk.db"
        p.write_bytes(b"this is not sqlite" * 100)
        with pytest.raises(LogError, match="not an icore state log"):
            SQLiteLog(p)

    def test_closed_log(self, tmp_path):
        log = SQLiteLog(tmp_path / "x.db")
        log.close()
        log.close()  # idempotent
        with pytest.raises(LogError, match="closed"):
            list(log.entries())

    def test_failed_append_leaves_nothing(self, tmp_path, code_review, make_flow):
        """A failure inside the transaction rolls it back: the log is never half-written."""
        log = SQLiteLog(tmp_path / "x.db")
        x = State(code_review, log=log)
        flow = make_flow(x)
        flow.introduce("o1")
        before_rows, before = len(log), normalize(x)

        class Failing:
            def __init__(self, conn: sqlite3.Connection) -> None:
                self.conn = conn

            def execute(self, *a):
                return self.conn.execute(*a)

            def executemany(self, sql, rows):
                rows = list(rows)
                self.conn.execute(sql, rows[0])  # first row written, then failure
                raise sqlite3.OperationalError("disk I/O error")

        real = log._conn
        log._conn = Failing(real)  # type: ignore[assignment]
        with pytest.raises(LogError, match="rolled back"):
            flow.x.submit(flow.submit_proposal("o1", "alice"))
        log._conn = real
        assert len(log) == before_rows
        assert normalize(x) == before and x.seq == before_rows
        rebuilt = rebuild(log, code_review)
        assert equivalent(rebuilt, x)

    def test_failed_commit_is_rolled_back(self, tmp_path, code_review, make_flow):
        """COMMIT itself failing (here denied by an authorizer) leaves no open
        transaction: the rows are gone, the next change commits, the file replays."""
        path = tmp_path / "x.db"
        log = SQLiteLog(path, declaration=code_review)
        x = State(code_review, log=log)
        flow = make_flow(x)
        flow.introduce("o1")
        before_rows, before = len(log), normalize(x)

        def deny_commit(action, arg1, *rest):
            if action == sqlite3.SQLITE_TRANSACTION and arg1 == "COMMIT":
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK

        conn = log._conn
        assert conn is not None
        conn.set_authorizer(deny_commit)
        with pytest.raises(LogError, match="rolled back"):
            flow.assign("o1", "alice")
        conn.set_authorizer(None)
        assert not conn.in_transaction
        assert len(log) == before_rows
        assert normalize(x) == before and x.seq == before_rows
        flow.assign("o1", "alice")  # the log is usable again
        log.close()
        with SQLiteLog(path, declaration=code_review) as again:
            assert len(again) == x.seq
            assert equivalent(rebuild(again, code_review), x)

    def test_unencodable_entry_writes_nothing(self, tmp_path):
        log = SQLiteLog(tmp_path / "x.db")
        good = LogEntry(1, 0.0, EntryKind.NOTE, Note("diagnosis", {"a": 1}))
        bad = LogEntry(2, 0.0, EntryKind.NOTE, Note("diagnosis", {"a": float("nan")}))
        with pytest.raises(LogError):
            log.append([good, bad])
        assert len(log) == 0

    def test_entry_that_would_not_decode_writes_nothing(self, tmp_path, code_review):
        """A body that serialises but would not decode back (here a non-str note kind) is
        refused at append: written, it would make the whole log unreplayable."""
        log = SQLiteLog(tmp_path / "x.db", declaration=code_review)
        x = State(code_review, log=log)
        x.record_note("diagnosis", {"a": 1})
        with pytest.raises(LogError, match="cannot encode"):
            x.record_note(5, {})  # type: ignore[arg-type]
        assert len(log) == 1 and x.seq == 1
        assert equivalent(rebuild(SQLiteLog(tmp_path / "x.db"), code_review), x)

    def test_store_file_is_not_a_log(self, tmp_path):
        """A PlanFence store file is refused as a log, and left untouched."""
        from icore.memory import OwnershipMap, SQLiteStore

        path = tmp_path / "store.sqlite"
        store = SQLiteStore(path, OwnershipMap({"k": "a"}), "a")
        store.commit(Record.create(key="k", owner="a", seq=1, content=1), writer="a")
        store.close()
        with pytest.raises(LogError, match="another kind"):
            SQLiteLog(path)
        conn = sqlite3.connect(path)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        conn.close()
        assert "entries" not in tables
        reopened = SQLiteStore(path, OwnershipMap({"k": "a"}), "a")
        assert reopened.head("k").seq == 1
        reopened.close()

    def test_log_file_is_not_a_store(self, tmp_path, code_review):
        """An iCORE log file is refused as a PlanFence store, and its entries are kept."""
        from icore.errors import StoreError
        from icore.memory import OwnershipMap, SQLiteStore

        path = tmp_path / "log.sqlite"
        with SQLiteLog(path, declaration=code_review) as log:
            log.append([LogEntry(1, 0.0, EntryKind.NOTE, Note("x"))])
        with pytest.raises(StoreError, match="not an icore store"):
            SQLiteStore(path, OwnershipMap({"k": "a"}), "a")
        with SQLiteLog(path, declaration=code_review) as log:
            assert len(log) == 1

    def test_sequence_gap_is_refused(self, tmp_path):
        log = SQLiteLog(tmp_path / "x.db")
        with pytest.raises(LogError, match="out of sequence"):
            log.append([LogEntry(2, 0.0, EntryKind.NOTE, Note("x"))])
        assert len(log) == 0

    def test_corrupted_row(self, tmp_path, code_review):
        path = tmp_path / "x.db"
        with SQLiteLog(path) as log:
            log.append([LogEntry(1, 0.0, EntryKind.NOTE, Note("x"))])
        conn = sqlite3.connect(path)
        conn.execute("UPDATE entries SET body='{\"nope\": 1}' WHERE seq=1")
        conn.commit()
        conn.close()
        with SQLiteLog(path) as log, pytest.raises(LogError, match="malformed"):
            rebuild(log, code_review)

    def test_wrong_schema_version(self, tmp_path):
        path = tmp_path / "x.db"
        SQLiteLog(path).close()
        conn = sqlite3.connect(path)
        conn.execute("UPDATE meta SET value='99' WHERE name='schema'")
        conn.commit()
        conn.close()
        with pytest.raises(LogError, match="schema"):
            SQLiteLog(path)


class TestReplay:
    """Replay from memory logs and entry lists."""

    def test_memory_log_and_entry_list(self, code_review, make_flow):
        log = MemoryLog()
        x = State(code_review, log=log)
        _run(make_flow(x))
        assert equivalent(rebuild(log, code_review), x)
        assert equivalent(rebuild(x.entries, code_review), x)
        assert equivalent(x.copy(), x)

    def test_entry_codec_round_trip(self, code_review, make_flow):
        x = State(code_review)
        _run(make_flow(x))
        for e in x.entries:
            assert decode_entry(*encode_entry(e)) == e

    def test_out_of_sequence_replay(self, code_review):
        entries = [LogEntry(2, 0.0, EntryKind.NOTE, Note("x"))]
        with pytest.raises(LogError, match="out of sequence"):
            rebuild(entries, code_review)

    def test_attach_needs_a_log(self, code_review):
        with pytest.raises(LogError, match="attach"):
            rebuild([], code_review, attach=True)

    def test_unknown_kind(self):
        with pytest.raises(LogError, match="malformed"):
            decode_entry(1, 0.0, "gossip", "{}")

    def test_copy_needs_entries(self, code_review, make_flow):
        x = State(code_review, keep_entries=False)
        make_flow(x).introduce("o1")
        with pytest.raises(LogError.__mro__[1], match="keep_entries"):
            x.copy()
