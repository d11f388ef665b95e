"""Lock descriptors a forked child never keeps (``flock``, issue 29).

An ``flock`` belongs to the open file description, which a forked child shares: a child
forked (``multiprocessing`` with the ``fork`` start method, ``os.fork``) while another
thread of the parent held a writer's lock (the span file, a folder's turn, the
``.icore-files`` ledger, the gateway's trace claim) kept the lock for its whole life,
and the parent's next writer waited for the child to exit. Every such descriptor is
opened here: ``O_CLOEXEC`` (a child that ``exec``-s drops it) and listed, and a fork
handler closes the child's copies of the listed descriptors before the child runs any
code. Closing a copy never releases the parent's lock (only ``LOCK_UN`` or closing the
last copy does), so the parent keeps its turn and the child holds none. The child's
copies close when the child first runs (inside its ``os.fork``): the parent's next
writer waits at most until then, never for the child's life. A child that ``exec``-s
drops them by ``O_CLOEXEC``; a lock held by the forking thread itself is dropped too
(the child never runs the ``finally`` that would release it).

Opening and listing happen under one lock that the fork handler takes too, so a fork
never copies a lock descriptor that is not (yet, or any more) listed. Pure stdlib and
no icore import: every layer may use this module.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

_HELD: set[int] = set()
"""The lock descriptors this process holds open (closed in a forked child)."""
_GUARD = threading.Lock()


def open_lock(path: str | os.PathLike[str] | Path, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags | O_CLOEXEC, mode)``, listed so a forked child drops it.

    Close it with :func:`close_lock` (never ``os.close``: the list would keep its number).

    Raises:
        OSError: as ``os.open``.
    """
    with _GUARD:
        fd = os.open(path, flags | os.O_CLOEXEC, mode)
        _HELD.add(fd)
    return fd


def close_lock(fd: int) -> None:
    """Close ``fd`` opened by :func:`open_lock` (releases its ``flock``). Idempotent.

    A descriptor no longer listed (closed already, or closed in this forked child by the
    fork handler) is left alone: its number may name another file now.
    """
    with _GUARD:
        if fd not in _HELD:
            return
        _HELD.discard(fd)
        with contextlib.suppress(OSError):
            os.close(fd)


def locked_elsewhere(path: str | os.PathLike[str] | Path, *, exclusive: bool) -> bool | None:
    """Whether another open file description holds an ``flock`` on ``path`` now.

    Probes with a non-blocking ``LOCK_EX`` (``exclusive=True``: any holder counts) or
    ``LOCK_SH`` (only an exclusive holder counts) and releases at once; the probe's
    descriptor is listed like every lock here, so a child forked meanwhile never keeps it.

    Returns:
        True when held, False when free, None when ``path`` cannot be opened (missing,
        unreadable) or locked at all (a file system without ``flock``).
    """
    import fcntl  # POSIX only; imported here so the module itself loads everywhere

    try:
        fd = open_lock(path, os.O_RDWR if exclusive else os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        close_lock(fd)
    return False


def held() -> frozenset[int]:
    """The lock descriptors open now (for tests and diagnostics)."""
    with _GUARD:
        return frozenset(_HELD)


def _before_fork() -> None:
    _GUARD.acquire()


def _after_fork_in_parent() -> None:
    _GUARD.release()


def _after_fork_in_child() -> None:
    for fd in _HELD:  # the child's copies only: the parent's locks stay held
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()
    _GUARD.release()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


__all__ = ["close_lock", "held", "open_lock"]
