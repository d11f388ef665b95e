"""Refuse special files by kind before a loader opens them.

Opening a FIFO (named pipe) blocks until a writer appears, and reading a character device
such as ``/dev/zero`` never ends, so every loader of a user-supplied path ``stat``-s it
first and refuses anything that is not a regular file (or, where a folder is accepted, a
directory), without opening it. The loaders wrap the answer in their own typed error.

:func:`move_aside` keeps an earlier run's folder instead of mixing or overwriting it;
:func:`make_room` moves only a folder icore created (it holds the :data:`MARKER` file
written by :func:`mark_folder`) and refuses any other folder holding a run's files, so
a user's own folder is never renamed (issue 29).

Pure stdlib (``os``, ``stat``) and no icore import: every layer may use this module.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_a_regular_file(path: str | os.PathLike[str], *, dir_ok: bool = False) -> str | None:
    """Say why ``path`` must not be read, or return None when it may be.

    The path is only ``stat``-ed (following symlinks), never opened. A path that cannot be
    ``stat``-ed (missing, no permission) returns None: the loader's own read reports it.

    Args:
        path: the user-supplied path.
        dir_ok: a directory is acceptable too.

    Returns:
        None for a regular file (or, with ``dir_ok``, a directory) or a path that cannot
        be ``stat``-ed; otherwise the problem, without the path, e.g.
        ``"is a FIFO (named pipe), not a regular file"``.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or (dir_ok and stat.S_ISDIR(mode)):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    wanted = "a regular file or a directory" if dir_ok else "a regular file"
    return f"is {kind}, not {wanted}"


MARKER = ".icore-output"
"""File icore writes into every output folder it creates (run folders, bench results)."""


def mark_folder(folder: Path) -> None:
    """Write :data:`MARKER` into ``folder`` (icore created it and may move it later)."""
    (folder / MARKER).write_text("created by icore; a rerun into this folder moves it to "
                                 "<folder>.1 instead of mixing runs\n", encoding="utf-8")


def make_room(folder: Path, *, run_files: tuple[str, ...] = ()) -> Path | None:
    """Make ``folder`` free for a new run's output; return where an earlier run went.

    - missing, or an empty folder: nothing to do (None);
    - a folder holding :data:`MARKER` (icore created it): moved to ``<folder>.1`` (then
      ``.2``, ...) by :func:`move_aside`; returns the new path, for the caller to say so;
    - a folder without the marker that holds any of ``run_files`` (or, with
      ``run_files`` empty, anything at all): refused, never moved or mixed;
    - any other folder (only unrelated files): None, the run writes next to them.

    Raises:
        FileExistsError: the folder holds a run's files but icore did not create it
            (no marker); the message names the folder and what to do.
        OSError: as :func:`move_aside`.
    """
    if not folder.is_dir():
        return None
    if (folder / MARKER).is_file():
        return move_aside(folder)
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return None
    clash = sorted(names & set(run_files)) if run_files else sorted(names)
    if not clash:
        return None
    raise FileExistsError(
        errno.EEXIST, f"the output folder holds {', '.join(clash[:4])} but was not created "
        f"by icore (no {MARKER} marker); icore never moves or mixes a folder it did not "
        "create: give a new or empty folder", str(folder))


__all__ = ["MARKER", "make_room", "mark_folder", "not_a_regular_file"]


def move_aside(folder: Path) -> Path:
    """Rename ``folder`` to the first free ``<folder>.1``, ``<folder>.2``, ...

    An earlier run's results are kept, never mixed with a new run's.

    Returns:
        The new path of the moved folder.

    Raises:
        OSError: the rename failed, or ``folder`` is the current folder or contains it
            (``--out .``: renaming it would move the caller's own working folder; EBUSY).
    """
    try:
        here: Path | None = Path.cwd().resolve()
    except OSError:  # the working folder was removed: nothing of it can be moved
        here = None
    if here is not None and (folder.resolve() == here or folder.resolve() in here.parents):
        raise OSError(errno.EBUSY, "cannot move an earlier run aside: this folder is the "
                      "current folder or contains it; give a subfolder (e.g. --out "
                      "results/run)", str(folder))
    folder = Path(os.path.abspath(folder))  # "." or "x/..": a name to number
    n = 1
    while folder.with_name(f"{folder.name}.{n}").exists():
        n += 1
    target = folder.with_name(f"{folder.name}.{n}")
    folder.rename(target)
    return target
