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

import os
from pathlib import Path

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
