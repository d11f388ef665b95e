"""Can an existing output file be written? Asked before a command does its work (issue 29).

``open()`` for writing succeeds on files that no write reaches: ``/proc/version`` (EIO on
the first write), ``/dev/full`` (ENOSPC), and files of a kernel pseudo file system that
a write would reconfigure (``/proc/sys/kernel/hostname`` as root). So an existing output
is (1) refused when it lies on a pseudo file system (``proc``, ``sysfs``, ...: read from
``/proc/self/mountinfo``, Linux only; elsewhere nothing is refused by this rule), then
(2) opened for appending, without truncating, and written zero bytes: the kernel runs the
file's write operation with nothing to write, so ``/dev/full`` and read-only proc files
fail now while a regular file's content and times are unchanged.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path

from icore._files import surrogate_problem

# kernel file systems whose files are interfaces, not storage
PSEUDO_FS = frozenset({"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs",
                       "securityfs", "configfs", "bpf", "pstore", "efivarfs", "binfmt_misc",
                       "fusectl", "devpts", "mqueue", "hugetlbfs", "autofs"})


def pseudo_fs(path: Path) -> str | None:
    """The pseudo file system type ``path`` lies on (``"proc"``, ...), else None.

    The longest mount point of ``/proc/self/mountinfo`` above the resolved path decides;
    None when mountinfo cannot be read (not Linux).
    """
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            mounts = f.read().splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for line in mounts:
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(parts) < 5 or not rparts:
            continue
        point = parts[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, rparts[0]
    return kind if kind in PSEUDO_FS else None


def write_probe(path: Path) -> str | None:
    """Why the existing file or device ``path`` cannot be written, or None.

    Never changes ``path``: opened with ``O_APPEND`` (no truncation) and written zero
    bytes. A FIFO is not probed (opening it could block; see the callers).

    Returns:
        None, or the reason without the path, e.g. ``"cannot be written: it is on the
        kernel's proc file system"``, ``"cannot be written: No space left on device"``.
    """
    kind = pseudo_fs(path)
    if kind is not None:
        return f"cannot be written: it is on the kernel's {kind} file system, not a file"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
    except OSError as exc:
        return f"cannot be written: {exc.strerror}"
    try:
        os.write(fd, b"")
    except OSError as exc:
        return f"cannot be written: {exc.strerror}"
    finally:
        os.close(fd)
    return None


def shown_path(path: Path, limit: int = 120) -> str:
    """``path`` for a message: a very long one cut, with its length said."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit - 40]}… ({len(text)} characters)"


def _existing(path: Path) -> Path:
    """``path`` when it exists (a broken link too), else its nearest existing parent."""
    anchor = path
    while not os.path.lexists(anchor) and anchor != anchor.parent:
        anchor = anchor.parent
    return anchor


def too_long(path: Path) -> str | None:
    r"""Why ``path`` is too long for the file system (or holds a surrogate), or None.

    First a surrogate in it (a name of bytes that are not UTF-8, ``$'\x80'``): refused
    as :func:`icore._files.written_path_problem` refuses it for every file icore writes
    (the report and ``--json`` name their files). Then the length: a name (one part of
    the path) over ``NAME_MAX`` bytes or the whole absolute path over ``PATH_MAX - 1``
    bytes, as the nearest existing folder's file system says
    (else Linux's 255 and 4096). Nothing is opened; a ``stat`` of such a path would
    fail with "File name too long".
    """
    if (bad := surrogate_problem(str(path))) is not None:
        return f"cannot be created: the path {bad}"
    anchor = _existing(path)
    name_max, path_max = 255, 4096
    with contextlib.suppress(OSError, ValueError):
        name_max = os.pathconf(anchor, "PC_NAME_MAX")
        path_max = os.pathconf(anchor, "PC_PATH_MAX")
    longest = max((len(os.fsencode(p)) for p in path.parts), default=0)
    if longest > name_max:
        return (f"cannot be created: a name in it is {longest} bytes long, over the file "
                f"system's limit of {name_max}")
    full = len(os.fsencode(os.path.abspath(path)))
    if full >= path_max:
        return (f"cannot be created: the path is {full} bytes long, over the system's "
                f"limit of {path_max - 1}")
    return None


def unwritable(path: Path, *, folder: bool) -> str | None:
    """Why an output ``path`` cannot be created or written, or None when it can.

    Checked before a command does its work, so the error names the option and the
    reason up front instead of an ``[Errno ...]`` after the work. In order: a file or
    folder name longer than the file system's ``NAME_MAX`` or a whole path over
    ``PATH_MAX`` (in bytes); with ``folder``, an existing path that is not a folder; a
    folder on the way that is a file; then a probe: a temporary folder is created and
    removed at once in the output folder (or the nearest existing folder above it), so
    a read-only file system, missing permission or a pseudo file system such as
    ``/proc`` is found whoever runs the command (``root`` included, which ``access()``
    cannot tell). An existing file or device (not ``folder``) is refused on a kernel
    pseudo file system and otherwise written zero bytes (:func:`write_probe`): its content
    is unchanged, ``/proc/version`` and ``/dev/full`` fail now.

    Args:
        path: the output folder (``folder``) or file.
        folder: the path is a folder the command creates or writes into.

    Returns:
        None, or the reason without the path, e.g. ``"cannot be created: a name in it is
        5000 bytes long, over the file system's limit of 255"``.
    """
    if (problem := too_long(path)) is not None:
        return problem
    anchor = _existing(path)
    try:
        st = os.stat(anchor)
    except OSError as exc:
        return f"cannot be created: {exc.strerror}"
    if anchor == path and not folder:  # an existing output file
        if stat.S_ISDIR(st.st_mode):
            return "is a folder; give a file name"
        if stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode):
            return write_probe(path)  # /proc/version, /dev/full: refused now, not at the end
        return None  # a FIFO: see OutputFile
    if not stat.S_ISDIR(st.st_mode):
        return ("exists and is not a folder" if anchor == path else
                f"cannot be created: {shown_path(anchor)} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".icore-probe-", dir=anchor))
    except OSError as exc:
        where = "in it" if anchor == path else f"in {shown_path(anchor)}"
        return f"cannot be {'written' if anchor == path else 'created'}: cannot create " \
               f"anything {where} ({exc.strerror})"
    return None


def is_stream(path: Path) -> bool:
    """``path`` names a stream of this process (``/dev/stdout``, ``/proc/self/fd/1``).

    Whatever it leads to (a file the shell redirected the console to), it is written
    after what is already there, never checked against the ledger nor replaced.
    """
    parts = Path(os.path.abspath(path)).parts
    return len(parts) > 2 and parts[1] in ("dev", "proc")


def write_stream(path: Path, data: bytes) -> None:
    """Write ``data`` to the stream ``path``.

    Through this process's own descriptor when it names one (``/dev/stdout`` is 1): the
    console's text already buffered goes first, and both share the one file offset (a
    second descriptor would write over one another).
    """
    parts = Path(os.path.abspath(path)).parts
    fd = {"stdout": 1, "stderr": 2}.get(parts[-1]) if parts[1:2] == ("dev",) else None
    if parts[-2:-1] == ("fd",) and parts[-1].isdigit() and parts[1:3] in (
            ("dev", "fd"), ("proc", "self")):
        fd = int(parts[-1])
    if fd is None:
        with open(path, "ab") as f:
            f.write(data)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
