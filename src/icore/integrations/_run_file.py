"""Writing a recorded run to a file without losing the user's files (issue 28).

:meth:`icore.integrations.RunRecorder.write` never replaces a file unless asked to
(``overwrite=True``). A file icore wrote there before (the folder's ``.icore-files``
ledger; an earlier run, a rerun, a concurrent run writing the same path) is moved aside
to the first free ``<stem>-1<suffix>``, ``<stem>-2<suffix>``, ... (as the MCP gateway
keeps an earlier run's trace: QA qa-fw7 S3, 4 concurrent runs lost 3
traces); any other file is refused. Writers of one folder take turns on an ``flock`` of
the folder, so two runs never pick the same name.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

from icore._files import (
    earlier_name,
    folder_turn,
    foreign_file,
    write_owned,
    written_path_problem,
)
from icore._flock import locked_elsewhere
from icore.errors import IntegrationError


def checked_path(path: object) -> Path:
    """``path`` as a :class:`Path` a run may be written to (nothing is written here).

    Raises:
        IntegrationError: as :meth:`icore.integrations.RunRecorder.write` (not a path,
            empty or blank, a surrogate or NUL, a folder, FIFO or device there).
    """
    if not isinstance(path, str | os.PathLike):
        raise IntegrationError(f"path must be a str or os.PathLike, not "
                               f"{type(path).__name__}", argument="path")
    # a NUL, a name over 255 bytes, a surrogate (as the gateway's trace): nothing written
    if (bad := written_path_problem(path)) is not None:
        raise IntegrationError(f"cannot write the run: the path {bad}", argument="path",
                               path=str(path)[:200])
    if not os.fspath(path).strip():  # only spaces: a typo, never a file name meant
        raise IntegrationError("path is blank: name the file to write the run to",
                               argument="path", fix="rec.write('run.jsonl')")
    p = Path(path)
    try:  # one stat: a concurrent writer moving the file aside is "not there", never odd
        mode: int | None = p.stat().st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):  # never open a folder, FIFO or device
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a device or special file")
        raise IntegrationError(f"cannot write the run to {p}: it is {kind}, not a "
                               "regular file", path=str(p))
    return p


def write_run(path: str | os.PathLike[str], jsonl: Callable[[], str], *,
              overwrite: bool = False) -> Path:
    """Write ``jsonl()`` to ``path``; return the path (see ``RunRecorder.write``).

    Raises:
        IntegrationError: as :meth:`icore.integrations.RunRecorder.write`.
    """
    p = checked_path(path)
    data = jsonl().encode("utf-8")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)  # as `icore audit --json` (QA qa-new10b)
        with folder_turn(p.parent):
            live = _gateway_trace(p)
            why = live or (None if overwrite else foreign_file(p))
            if why is not None:
                raise IntegrationError(
                    f"cannot write the run to {p}: the file there {why}" + (
                        ", which appends to it while it runs" if live else
                        "; icore never overwrites a file it did not write"), path=str(p),
                    fix="give the run its own path (the gateway's trace and the run's are "
                        "audited together)" if live else
                        "give another path, move the file away, or write(path, "
                        "overwrite=True)")
            if not overwrite and p.is_file():  # icore's earlier trace: kept, never lost
                aside = earlier_name(p)
                os.rename(p, aside)
                _log.warning("moved the earlier run at %s to %s (kept, never overwritten)",
                             p, aside)
            # checked just above (once: the ledger's hash of the file there is not taken
            # again); a link at p is replaced, not followed
            write_owned(p, data, overwrite=True)
    except OSError as exc:
        raise IntegrationError(f"cannot write the run to {p}: {exc.strerror or exc}",
                               path=str(p)) from None
    return p


_log = logging.getLogger("icore.integrations")


def _gateway_trace(p: Path) -> str | None:
    """Why ``p`` is an icore MCP gateway's trace (its ``.<name>.lock`` beside it), or None.

    A running gateway holds the lock and appends to the file: never written over, not
    even with ``overwrite=True``; a stopped one's trace is refused as any file
    RunRecorder did not write, naming what it is (it said "not written by icore", #29).
    """
    lock = p.with_name(f".{p.name}.lock")
    if not p.is_file() or not lock.is_file():
        return None
    if locked_elsewhere(lock, exclusive=False):
        return "is the trace of a running icore MCP gateway (it holds " + lock.name + ")"
    return None


