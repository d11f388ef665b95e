"""A recorded run written as it goes: ``kill -9`` leaves every line made so far (#25).

``RunRecorder("run-1", path="run.jsonl")`` opens the file at once and appends each line
the moment it is made, in the form :meth:`~icore.integrations.RunRecorder.write` gives it
(event lines with their digest, every digested line with its link in the recorder's
chain, :mod:`icore._line_chain`), one ``write`` system call per batch of lines, so a
process killed with SIGKILL, by the OOM killer or by a crash in native code leaves a
file ``icore audit`` reads: the run is reported not ended (``--fail-on not-ended``),
every call that ran is there with its decision, and the prefix's chain verifies. A line
cut by the kill (no newline) is reported as a torn tail, never as an edit.

What waits: an end line (``termination``) is appended only when the run is closed
(:meth:`RunJournal.finish`), sealed with the chain's totals as
:func:`~icore._line_chain.chain_lines` seals it; a line that follows an end line would
break the seal, and a framework may still turn an end into a pause (LangGraph's
``interrupt``) or drop it (an echoed end). At the close the file is then replaced,
atomically, by :meth:`~icore.integrations.RunRecorder.jsonl`: after a normal end it is
byte for byte what ``write()`` gives (the header with every agent and the run's
verdict, the lines in the order ``write()`` puts them). While the run goes on, and
after a kill, the file holds the lines in the order they were made (CrewAI's late
events after the lines made before they arrived; a plan line placed before its
refused call's gate line in ``write()``), audited as the same run up to its end.

Durability (``fsync=``): every batch is handed to the operating system at once (it
survives the process: SIGKILL, OOM, a segfault). ``"decisions"`` (the default)
also ``fsync``s the decision lines of a protected call before its tool body runs, so a
decision that authorized an action that ran is on the disk even after a power loss or a
kernel crash; ``"lines"`` ``fsync``s every batch; ``"off"`` never does (the page cache
only). If those lines cannot be written, the body does not run (fail closed: recorded
``ran: false``).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from icore._files import earlier_name, file_identity, folder_turn, foreign_file, write_owned
from icore._line_chain import CHAIN_END, ChainWriter, is_end
from icore._line_seal import sealed
from icore._strict_json import strict_dumps
from icore.errors import IntegrationError
from icore.integrations._run_file import _gateway_trace, checked_path

Fsync = Literal["decisions", "lines", "off"]
"""When the recorder's file is ``fsync``-ed (see the module)."""
FSYNC_MODES: tuple[str, ...] = ("decisions", "lines", "off")

_log = logging.getLogger("icore.integrations")


def _dump(line: Mapping[str, Any]) -> str:
    return strict_dumps(line, sort_keys=True)


def _unclosed(p: Path) -> bool:
    """Whether ``p`` opens with an icore writer's header (a recorded run's trace)."""
    try:
        with open(p, "rb") as f:
            head = json.loads(f.readline(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(head, dict) and isinstance(head.get("run"), dict) \
        and "icore" in head["run"]


def open_new(path: object) -> tuple[Path, int]:
    """Create the run's file at ``path`` for appending; return it and its descriptor.

    An earlier trace icore wrote there and nobody changed (the folder's ``.icore-files``
    ledger: a run that was closed) is moved aside to the first free ``<stem>-1<suffix>``
    (as :meth:`~icore.integrations.RunRecorder.write`); anything else is refused.

    Raises:
        IntegrationError: ``path`` as ``write()`` refuses it; a file there icore did not
            write, or changed since (the trace of a run that was killed or still runs:
            never written over, never appended to), or a running MCP gateway's trace;
            the file cannot be created (the message names the path and the reason).
    """
    p = checked_path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with folder_turn(p.parent):
            if os.path.lexists(p):
                why = _gateway_trace(p) or foreign_file(p)
                if why is not None:
                    if _unclosed(p):
                        why = ("holds the trace of a recorded run that was not closed "
                               "(killed, or still running)")
                    raise IntegrationError(
                        f"cannot record the run to {p}: the file there {why}; icore never "
                        "writes over or appends to it", path=str(p),
                        fix=f"audit it (icore audit {p}) and move it away, or give "
                            "another path")
                aside = earlier_name(p)
                os.rename(p, aside)
                _log.warning("moved the earlier run at %s to %s (kept, never overwritten)",
                             p, aside)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
            fd = os.open(p, flags | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise IntegrationError(f"cannot record the run to {p}: {exc.strerror or exc}",
                               path=str(p)) from None
    return p, fd


class RunJournal:
    """The file a :class:`~icore.integrations.RunRecorder` appends its lines to (thread-safe).

    Args:
        path: where (created now: :func:`open_new`).
        writer: the recorder's chain id.
        header: the recorder's header line (:meth:`RunRecorder.header`), written first.
        fsync: ``"decisions"``, ``"lines"`` or ``"off"`` (the module).

    Raises:
        IntegrationError: as :func:`open_new`; ``fsync`` not one of the modes.
    """

    def __init__(self, path: object, writer: str, header: Mapping[str, Any], *,
                 fsync: Fsync = "decisions") -> None:
        if fsync not in FSYNC_MODES:
            raise IntegrationError(f"fsync must be one of {', '.join(FSYNC_MODES)}, not "
                                   f"{fsync!r}"[:120], argument="fsync")
        self.fsync = fsync
        self.path, self._fd = open_new(path)
        self._gone = weakref.finalize(self, os.close, self._fd)  # a recorder never closed
        self._gone.atexit = False  # at exit: closed by RunRecorder.close (_close_all) or the OS
        self._ident = file_identity(self.path)
        self._chain = ChainWriter(writer)
        self._lock = threading.Lock()
        self._pending: list[Mapping[str, Any]] = []
        """Lines made, not yet on disk (end lines wait for :meth:`finish`), in order."""
        self.broken: str | None = None
        """Why the file stopped being written (a failed write: nothing is appended after
        it, so no line is ever half there mid-file); None while it is written."""
        self.closed = False
        self.lines = 0
        """Lines on disk (the header included)."""
        try:
            self._append([header], sync=fsync != "off")
        except OSError as exc:
            self._gone()
            raise IntegrationError(f"cannot record the run to {self.path}: "
                                   f"{exc.strerror or exc}", path=str(self.path)) from None
        if fsync != "off":  # the file's name survives a power loss too
            _sync_folder(self.path.parent)

    def made(self, *lines: Mapping[str, Any]) -> None:
        """Queue ``lines`` (events as :meth:`RunRecorder.add` made them, PlanFence lines)."""
        with self._lock:
            if not self.closed:  # after the close: in memory only (write())
                self._pending.extend(lines)

    def drop(self, line: Mapping[str, Any]) -> None:
        """``line`` was removed before it was written: never write it."""
        with self._lock:
            self._pending = [x for x in self._pending if x is not line]

    def flush(self) -> None:
        """Append the queued lines but end lines (they wait for :meth:`finish`).

        A write that fails marks the file :attr:`broken` (logged once); the recorder
        keeps every line in memory for ``write()``.
        """
        with self._lock:
            if self.closed or not self._pending:
                return
            keep = [x for x in self._pending if is_end(x)]
            out = [x for x in self._pending if not is_end(x)]
            self._pending = keep
            if out:
                self._try(out, sync=self.fsync == "lines")

    def ahead(self, lines: Sequence[Mapping[str, Any]]) -> None:
        """Write a protected call's lines now, before its tool body runs.

        Queued lines first (the order kept); ``fsync``-ed unless ``fsync="off"``.

        Raises:
            IntegrationError: the lines cannot be written (the file is broken or closed):
                the body must not run.
        """
        with self._lock:
            if self.closed or self.broken is not None:
                raise IntegrationError(f"the run's trace {self.path} "
                                       f"{'is closed' if self.closed else self.broken}",
                                       path=str(self.path))
            out = [x for x in self._pending if not is_end(x)]
            self._pending = [x for x in self._pending if is_end(x)]
            try:
                self._append([*out, *lines], sync=self.fsync != "off")
            except OSError as exc:
                self._broke(exc)
                raise IntegrationError(f"cannot write the run's trace {self.path}: "
                                       f"{exc.strerror or exc}", path=str(self.path)) from None

    def finish(self, jsonl: Callable[[], str]) -> Path:
        """End the file: the waiting end lines appended, then replaced by ``jsonl()``.

        The end on disk first (a close killed midway leaves a run that ended), then the
        final form written beside it and renamed over it (listed in the folder's
        ledger). Idempotent while the file at :attr:`path` is the one this wrote.

        Raises:
            IntegrationError: the file at :attr:`path` is no longer this run's (moved or
                replaced while the run was recorded: left as it is), or the final form
                cannot be written (the appended file is left whole).
        """
        with self._lock:
            if not self.closed:
                out, self._pending = self._pending, []
                if out and self.broken is None:
                    self._try(out, sync=self.fsync != "off")
                self.closed = True
                self._gone()  # closes the descriptor, once
            data = jsonl().encode("utf-8")
            try:
                with folder_turn(self.path.parent):
                    if file_identity(self.path) != self._ident:
                        raise IntegrationError(
                            f"cannot end the run's trace {self.path}: the file there is no "
                            "longer the one this run appended to (moved or replaced); left "
                            "as it is", path=str(self.path),
                            fix="write the run elsewhere: rec.write('other.jsonl')")
                    write_owned(self.path, data, overwrite=True)
                    self._ident = file_identity(self.path)
            except OSError as exc:
                raise IntegrationError(f"cannot write the run's trace {self.path}: "
                                       f"{exc.strerror or exc}", path=str(self.path)) from None
        return self.path

    def same(self, path: object) -> bool:
        """Whether ``path`` names this run's file."""
        return isinstance(path, str | os.PathLike) and bool(os.fspath(path)) and \
            file_identity(Path(path)) == self._ident

    # ------------------------------------------------------------------ writing
    def _try(self, lines: Sequence[Mapping[str, Any]], *, sync: bool) -> None:
        if self.broken is not None:
            return
        try:
            self._append(lines, sync=sync)
        except OSError as exc:
            self._broke(exc)

    def _broke(self, exc: OSError) -> None:
        self.broken = f"stopped being written: {exc.strerror or exc}"
        _log.error("cannot write the run's trace %s: %s (nothing more is appended; "
                   "rec.write(path) still writes the whole run)", self.path, exc)

    def _append(self, lines: Sequence[Mapping[str, Any]], *, sync: bool) -> None:
        """Chain ``lines`` (events digested), write them in one call, sync if asked.

        As :meth:`RunRecorder.jsonl` writes them; the chain moves on only once the
        bytes are written (a failed write keeps it).
        """
        chain = ChainWriter(self._chain.writer)
        chain.seq, chain.last = self._chain.seq, self._chain.last
        batch = [chain.chained(sealed(x)) for x in lines]
        seal = chain.seal()
        data = "".join(_dump({**x, CHAIN_END: seal} if is_end(x) else x) + "\n"
                       for x in batch).encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        if sync:
            os.fsync(self._fd)
        self._chain, self.lines = chain, self.lines + len(batch)


def _sync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_OPEN: weakref.WeakSet[Any] = weakref.WeakSet()
"""Recorders with an open file, closed at the interpreter's exit (their end written)."""


def keep_open(recorder: Any) -> None:
    """Close ``recorder`` (:meth:`RunRecorder.close`) at exit if the app never did."""
    _OPEN.add(recorder)


def done(recorder: Any) -> None:
    """``recorder`` was closed: nothing to do at exit."""
    _OPEN.discard(recorder)


@atexit.register
def _close_all() -> None:
    for rec in list(_OPEN):
        try:
            rec.close()
        except Exception as exc:  # at exit: say it, never raise
            _log.error("cannot close the recorded run %s: %s", rec.run_id, exc)


__all__ = ["FSYNC_MODES", "Fsync", "RunJournal", "done", "keep_open", "open_new"]
