"""The event-sourced log of X: in memory or SQLite (design.md 4.2). The only I/O module.

:class:`SQLiteLog` writes each change (all entries of one audit, revocation, ...) in one
``BEGIN IMMEDIATE`` transaction, so the log is never half-written: after a crash or an
error the log holds every entry of a change or none. :func:`rebuild` replays a log into a
fresh :class:`~icore.state.State`.

Encoding: one row per entry; the body is canonical JSON (sorted keys) of the frozen
dataclass, decoded with pydantic, so entries round-trip exactly.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core

from icore._clock import Clock
from icore._files import path_problem
from icore.state._apply import Log
from icore.state._entries import (
    BODY_TYPES,
    LOG_SCHEMA_VERSION,
    EntryKind,
    EventAdded,
    LogEntry,
)
from icore.state._errors import InterfaceError, LogError, StateError
from icore.state._package import DeclarationPackage
from icore.state._state import State

_ADAPTERS: dict[EntryKind, pydantic.TypeAdapter[Any]] = {
    k: pydantic.TypeAdapter(t) for k, t in BODY_TYPES.items()
}


def encode_entry(entry: LogEntry) -> tuple[int, float, str, str]:
    """Encode an entry as a row (seq, t_ms, kind, body JSON).

    Raises:
        LogError: the body is not encodable, or would not decode back (a row that
            :func:`decode_entry` refuses would make the whole log unreplayable).
    """
    adapter = _ADAPTERS[entry.kind]
    body_obj = entry.body
    if isinstance(body_obj, EventAdded) and type(body_obj.event.fields) is not dict:
        # an imported event's compact fields (icore.state._share.Fields) encode as a dict
        ev = body_obj.event
        body_obj = EventAdded(dataclasses.replace(ev, fields=dict(ev.fields)))
    try:
        data = adapter.dump_python(body_obj, mode="python", warnings="error")
        body = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
        adapter.validate_json(body)
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError) as exc:
        raise LogError(f"cannot encode entry: {exc}", seq=entry.seq,
                       kind=str(entry.kind)) from exc
    return (entry.seq, entry.t_ms, str(entry.kind), body)


def decode_entry(seq: int, t_ms: float, kind: str, body: str) -> LogEntry:
    """Decode a row back into a :class:`LogEntry`.

    Raises:
        LogError: unknown kind or a malformed body.
    """
    try:
        k = EntryKind(kind)
        obj = _ADAPTERS[k].validate_json(body)
    except (ValueError, pydantic.ValidationError) as exc:
        raise LogError(f"malformed log entry: {exc}", seq=seq, kind=kind) from exc
    return LogEntry(int(seq), float(t_ms), k, obj)


class MemoryLog:
    """An in-memory log (tests, previews). Entries are kept encoded, as SQLite would."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, float, str, str]] = []

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Append atomically: every entry is encoded before any is stored."""
        rows = [encode_entry(e) for e in entries]
        _check_seq(self._rows[-1][0] if self._rows else 0, rows)
        self._rows.extend(rows)

    def entries(self) -> Iterator[LogEntry]:
        """Iterate decoded entries in order."""
        for r in list(self._rows):
            yield decode_entry(*r)

    def __len__(self) -> int:
        return len(self._rows)

    def close(self) -> None:
        """No-op (for symmetry with :class:`SQLiteLog`)."""


def _rollback(c: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any, keeping the original error."""
    try:
        c.execute("ROLLBACK")
    except sqlite3.Error:  # none open (SQLite already rolled back), or a broken connection
        pass


def _check_seq(last: int, rows: Sequence[tuple[int, float, str, str]]) -> None:
    for i, r in enumerate(rows):
        if r[0] != last + i + 1:
            raise LogError("entry out of sequence", expected=last + i + 1, got=r[0])


class SQLiteLog:
    """A durable SQLite log (WAL). One transaction per :meth:`append`.

    Args:
        path: database file (created if missing).
        declaration: if given, its fingerprint is stored on first use and checked
            afterwards, so a log is never replayed under another D.

    Raises:
        LogError: ``path`` names no file (None, empty, a NUL byte, a lone surrogate), the
            file is not a log of this schema, or belongs to another D.
    """

    def __init__(self, path: str | Path, *, declaration: DeclarationPackage | None = None) -> None:
        if (bad := path_problem(path)) is not None:
            raise LogError(f"the log path {bad}", path=str(path)[:200])
        self.path = Path(path)
        try:
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False
            )
            c = self._conn
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=NORMAL")
            if (
                c.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone()
                and c.execute("SELECT 1 FROM meta").fetchone()
                and not c.execute("SELECT 1 FROM meta WHERE name='schema'").fetchone()
            ):
                # another icore file (e.g. a PlanFence store): never write into it
                c.close()
                raise LogError("not an icore state log: a file of another kind",
                               path=str(self.path))
            c.execute(
                "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            c.execute(
                "CREATE TABLE IF NOT EXISTS entries (seq INTEGER PRIMARY KEY, t_ms REAL NOT NULL,"
                " kind TEXT NOT NULL, body TEXT NOT NULL)"
            )
            c.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(LOG_SCHEMA_VERSION),))
            schema = c.execute("SELECT value FROM meta WHERE name='schema'").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise LogError(f"not an icore state log: {exc}", path=str(self.path)) from exc
        if schema != str(LOG_SCHEMA_VERSION):
            raise LogError("unsupported log schema", path=str(self.path), schema=schema)
        if declaration is not None:
            fp = declaration.fingerprint()
            c.execute("INSERT OR IGNORE INTO meta VALUES ('declaration', ?)", (fp,))
            have = c.execute("SELECT value FROM meta WHERE name='declaration'").fetchone()[0]
            if have != fp:
                raise LogError(
                    "log was written under another declaration package",
                    path=str(self.path),
                    declaration=declaration.name,
                )

    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LogError("log is closed", path=str(self.path))
        return self._conn

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Append ``entries`` in one transaction (all or nothing).

        Raises:
            LogError: encoding failed, a sequence gap, or SQLite failed (rolled back).
        """
        rows = [encode_entry(e) for e in entries]
        c = self._c()
        try:
            c.execute("BEGIN IMMEDIATE")
            try:
                last = c.execute("SELECT COALESCE(MAX(seq), 0) FROM entries").fetchone()[0]
                _check_seq(int(last), rows)
                c.executemany("INSERT INTO entries VALUES (?, ?, ?, ?)", rows)
                c.execute("COMMIT")
            except BaseException:
                # also when COMMIT itself failed: SQLite may keep the transaction open,
                # and a later COMMIT would then write these rows after all
                _rollback(c)
                raise
        except sqlite3.Error as exc:
            raise LogError(
                f"append failed and was rolled back: {exc}", path=str(self.path)
            ) from exc

    def entries(self) -> Iterator[LogEntry]:
        """Iterate decoded entries in sequence order."""
        cur = self._c().execute("SELECT seq, t_ms, kind, body FROM entries ORDER BY seq")
        for row in cur:
            yield decode_entry(*row)

    def __len__(self) -> int:
        return int(self._c().execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        """Close the database (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> SQLiteLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rebuild(
    log: Log | Iterable[LogEntry],
    decl: DeclarationPackage,
    *,
    attach: bool = False,
    clock: Clock | None = None,
    keep_entries: bool = True,
) -> State:
    """Reconstruct X by replaying a log (design.md 4.2). Validators are not re-run.

    Args:
        log: a log (``MemoryLog``/``SQLiteLog``) or an iterable of entries.
        decl: the declaration package the log was written under.
        attach: continue appending new changes to ``log``.
        clock: clock for the rebuilt state.
        keep_entries: keep entries in memory (needed by ``State.copy``).

    Raises:
        LogError: malformed or out-of-sequence entries.
        InterfaceError: an interface of ``decl`` misbehaved while the replayed
            obligations were evaluated (the log is fine; D is not).
    """
    state = State(decl, clock=clock, keep_entries=keep_entries)
    source = log.entries() if hasattr(log, "entries") else log
    try:
        state._replay(source)
    except (LogError, InterfaceError):
        raise
    except (KeyError, ValueError, StateError) as exc:
        raise LogError(f"log does not replay: {exc}", seq=state.seq + 1) from exc
    if attach:
        if not (hasattr(log, "append") and hasattr(log, "entries")):
            raise LogError("cannot attach to a plain iterable of entries")
        state.log = log  # type: ignore[assignment]
    return state
