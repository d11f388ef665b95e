"""Write claims shared by the gateways of one host: the ``writes:`` rule across processes.

Each desktop client launches its own stdio gateway, so two clients on one manifest are two
gateway processes. The in-flight rule (:mod:`icore.mcp._gateway_inflight`: a protected
call whose D(a) overlaps the ``writes:`` of a call in flight waits for it, then is
validated against the new head) held inside one process only: two gateways sharing one
store both authorized ``assign_ticket(T2)`` from the same read and both forwarded it (QA
qa-new13c S1). :class:`SharedWrites` holds the same claims in one SQLite file that every
gateway of the folder opens:

* the folder is the SQLite store's (``store.path``: ``<path>/icore-writes/``), so every
  gateway sharing the store shares the claims; for the other backends it is the
  manifest's folder (``<folder>/.icore-writes/``): gateways started from manifests of one
  folder on one host. The claims are never shared across hosts (gateways on a NATS engine
  or owner services elsewhere: docs/mcp.md says so and the gateway warns at start);
* a call checks the claims and adds its own in one ``BEGIN IMMEDIATE`` transaction
  (SQLite serializes them across processes), so two calls never both claim keys the other
  depends on; a call that finds its D(a) claimed polls (5 ms, doubling to 100 ms) until
  the claim is gone: its own gate check then reads the facts again from their upstream and
  refuses it ``stale`` when the other call changed them, as a call sent after it;
* a gateway is alive while it holds an ``flock`` on its ``<holder>.lock`` file there (the
  kernel releases it however the process ends). A claim whose gateway died is deleted by
  the next call that finds it, and a call whose D(a) it overlapped is refused
  ``write_unknown`` (that write's outcome is unknown: fail closed, read again).

Keys are compared as in one process (:func:`~icore.mcp._gateway_inflight.overlap`), so two
gateways that use one URI for two things only wait for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

from icore.mcp._gateway_inflight import InFlight, Pattern, overlap
from icore.mcp._gateway_manifest import GatewayError, GatewayManifest
from icore.mcp._session_log import GatewayTrace

log = logging.getLogger("icore.mcp")

FOLDER = "icore-writes"
"""The claims' folder inside a SQLite store's folder (``.icore-writes`` beside a manifest)."""
_DB = "claims.sqlite"
_HOLDER = re.compile(r"[0-9]{1,10}-[0-9a-f]{12}")
_POLL_S = (0.005, 0.1)
_BUSY_S = 10.0
"""How long one look waits for another gateway's transaction on the claims (seconds)."""


class WriterGone(Exception):
    """A claim on the call's D(a) was held by a gateway that died: its outcome is unknown.

    Attributes:
        keys: the ``writes:`` entries of the dead call that overlap D(a) (filled, as text).
    """

    def __init__(self, keys: Sequence[str]) -> None:
        super().__init__(", ".join(keys))
        self.keys = list(keys)


class ClaimsUnavailable(GatewayError):
    """The shared write claims cannot be looked at (#29, round 10): the call is refused.

    The claims file damaged or another program's, locked past 10 s, a lock file that is
    a folder, a link loop or unreadable: whether another gateway writes the call's D(a)
    cannot be told, so the call is not made (fail closed). Fields: ``file``, ``error``.
    """


class SharedWrites:
    """The write claims of the gateways whose claims live in ``folder`` (see module).

    Args:
        folder: the claims' folder (created when missing).

    Raises:
        OSError: the folder or its files cannot be created, or ``flock`` is refused.
        sqlite3.Error: the claims database cannot be opened.
    """

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.db = folder / _DB
        self.holder = f"{os.getpid()}-{secrets.token_hex(6)}"
        self._lock = folder / f"{self.holder}.lock"
        self._fd = os.open(self._lock, os.O_RDWR | os.O_CREAT, 0o644)
        self._con: sqlite3.Connection | None = None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._con = con = sqlite3.connect(self.db, timeout=_BUSY_S, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")  # no durability needed past a crash
            con.execute("CREATE TABLE IF NOT EXISTS claims (id INTEGER PRIMARY KEY "
                        "AUTOINCREMENT, holder TEXT NOT NULL, writes TEXT NOT NULL)")
        except BaseException:
            self.close()
            raise

    async def enter(self, deps: Sequence[Pattern], writes: Sequence[Pattern], *,
                    waiting: Callable[[list[str]], None] | None = None) -> int | None:
        """Wait until no gateway's call in flight may write a key of ``deps``; claim ``writes``.

        Cancelled while it waits: nothing is claimed (each look is one transaction with
        no await inside it).

        Args:
            deps: D(a) of the call, filled (:func:`~icore.mcp._gateway_inflight.patterns`).
            writes: its ``writes:`` entries, filled.
            waiting: called once, with the claimed entries, when the call has to wait.

        Returns:
            the claim's id for :meth:`leave`, or None when the call writes nothing.

        Raises:
            WriterGone: a claim on ``deps`` was held by a gateway that died.
            ClaimsUnavailable: the claims cannot be read or written (nothing claimed).
        """
        delay, told = _POLL_S[0], False
        while True:
            # inline, as the SQLite store answers the gate: one short transaction (no await
            # inside it, so a claim made is always returned)
            try:
                got = self._try(list(deps), list(writes))
            except (sqlite3.Error, OSError, RecursionError) as exc:
                where = getattr(exc, "filename", None) or self.db
                raise ClaimsUnavailable(f"cannot look at the gateways' write claims: {exc}",
                                        file=str(where), error=type(exc).__name__) from None
            if not isinstance(got, list):
                return got
            if not told and waiting is not None:
                told = True
                waiting(got)
            await anyio.sleep(delay)
            delay = min(delay * 2, _POLL_S[1])

    def _try(self, deps: list[Pattern], writes: list[Pattern]) -> int | list[str] | None:
        """One look: the claim's id (None: nothing to claim), or the entries it waits on."""
        con = self._con
        assert con is not None, "closed"
        con.execute("BEGIN IMMEDIATE")
        try:
            busy: list[str] = []
            gone: list[str] = []
            dead: set[str] = set()
            alive: dict[str, bool] = {}
            for holder, text in con.execute("SELECT holder, writes FROM claims"):
                if holder not in alive:
                    alive[holder] = holder == self.holder or self._alive(holder)
                hits = [w for w in _decode(text) if any(overlap(w, d) for d in deps)]
                if not alive[holder]:
                    dead.add(holder)
                    gone.extend(w[0] for w in hits)
                else:
                    busy.extend(w[0] for w in hits)
            for holder in dead:
                con.execute("DELETE FROM claims WHERE holder = ?", (holder,))
                log.warning("write claims of gateway %s removed: it is gone", holder)
            if gone:
                con.execute("COMMIT")
                raise WriterGone(sorted(set(gone)))
            if busy:
                con.execute("COMMIT")
                return sorted(set(busy))
            claim = None
            if writes:
                claim = con.execute("INSERT INTO claims (holder, writes) VALUES (?, ?)",
                                    (self.holder, json.dumps(writes))).lastrowid
            con.execute("COMMIT")
            return claim
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise

    def _alive(self, holder: str) -> bool:
        """Whether ``holder``'s gateway still holds its lock file (else: remove the file)."""
        if not _HOLDER.fullmatch(holder):
            return False  # not a name this module writes: never a live gateway's
        path = self.folder / f"{holder}.lock"
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            with contextlib.suppress(OSError):
                path.unlink()
            return False
        finally:
            os.close(fd)

    async def leave(self, claim: int | None) -> None:
        """End a claim of :meth:`enter` (call it shielded from cancellation).

        A failure (the claims busy past 10 s, three times) is logged: the claim then stays
        until this gateway ends, and the overlapping calls wait until then.
        """
        for attempt in range(3):
            if claim is None or self._con is None:
                return
            try:
                self._con.execute("DELETE FROM claims WHERE id = ?", (claim,))
                return
            except sqlite3.Error as exc:
                log.error("write claim %s of %s not released (attempt %d): %s", claim,
                          self.db, attempt + 1, exc)
            await anyio.sleep(_POLL_S[1])

    def close(self) -> None:
        """Remove this gateway's claims and its lock file (idempotent)."""
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("DELETE FROM claims WHERE holder = ?", (self.holder,))
            self._con.close()
            self._con = None
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                self._lock.unlink()
            os.close(self._fd)
            self._fd = -1


def _decode(text: str) -> list[Pattern]:
    """A row's ``writes`` (JSON ``[[text, glob], ...]``); anything else claims everything."""
    try:
        got = json.loads(text)
        return [(str(t), bool(g)) for t, g in got]
    except (ValueError, TypeError, RecursionError):
        return [("*", True)]  # unreadable: errs towards waiting


class Claims:
    """A gateway's claims: its own calls (:class:`InFlight`), then other gateways'.

    Args:
        shared: the claims shared with other gateways, or None (this process only).
    """

    def __init__(self, shared: SharedWrites | None) -> None:
        self.local = InFlight()
        self.shared = shared

    async def enter(self, deps: Sequence[Pattern], writes: Sequence[Pattern], *,
                    waiting: Callable[[list[str]], None] | None = None
                    ) -> tuple[int | None, int | None]:
        """Wait for this gateway's calls, then other gateways', on ``deps``; claim ``writes``.

        Returns:
            the pair to give :meth:`leave`.

        Raises:
            WriterGone: see :meth:`SharedWrites.enter` (nothing is claimed then).
        """
        mine = await self.local.enter(deps, writes)
        if self.shared is None:
            return mine, None
        try:
            return mine, await self.shared.enter(deps, writes, waiting=waiting)
        except BaseException:
            self.local.leave(mine)
            raise

    def close(self) -> None:
        """Close the shared claims (this gateway's removed). Idempotent."""
        if self.shared is not None:
            self.shared.close()

    async def leave(self, claim: tuple[int | None, int | None] | None) -> None:
        """End a claim of :meth:`enter` (None: nothing was claimed).

        The shared one first: this gateway's waiters then find the shared table free of it.
        """
        if claim is None:
            return
        if self.shared is not None:
            await self.shared.leave(claim[1])
        self.local.leave(claim[0])


def claims_folder(backend: str, store_path: Path | None, manifest_file: str) -> Path | None:
    """Where a gateway's write claims are shared (see module), or None (this process only).

    ``manifest_file``: the manifest's path (``"<dict>"``: built in Python, no folder).
    """
    if backend == "sqlite" and store_path is not None:
        return store_path / FOLDER
    if manifest_file == "<dict>":
        return None
    return Path(manifest_file).resolve().parent / f".{FOLDER}"


def share_claims(m: GatewayManifest, trace: GatewayTrace) -> SharedWrites | None:
    """Open the write claims ``m``'s gateway shares (see module), or None.

    None when the manifest protects no tool, or (built in Python, or a folder that cannot
    be written, beside a manifest) the claims cannot be shared: then said in the log and
    the trace when a tool declares ``writes:``, as for a NATS engine or an owner service
    (other hosts never see these claims).

    Raises:
        GatewayError: the claims cannot be opened in a SQLite store's folder.
    """
    if not m.tools:
        return None
    backend = m.store.backend
    folder = claims_folder(backend, m.resolve(m.store.path) if m.store.path else None,
                           m.file)
    writes = sorted(n for n, t in m.tools.items() if t.writes)
    shared = None
    why = ""
    if folder is not None:
        try:
            shared = SharedWrites(folder)
        except (OSError, sqlite3.Error) as exc:
            if backend == "sqlite":
                raise GatewayError(f"cannot open the write claims in {folder}: {exc}",
                                   path="store.path") from None
            why = f"the claims folder {folder} cannot be used ({exc})"
    else:
        why = "the manifest was built in Python (no folder to share claims in)"
    if backend in ("nats", "owner-service") and folder is not None and shared is not None:
        why = (f"the {backend} store is shared across hosts, but the claims are shared only "
               f"by gateways on this host whose manifests sit in {folder.parent}")
    if why and writes:
        msg = (f"{why}: a call of {', '.join(writes)} through another gateway can run at "
               "the same time as one planned here from the same read (docs/mcp.md, "
               "gateways sharing a store)")
        log.warning("%s", msg)
        trace.note("gateway", msg, tools=writes)
    return shared
