"""Where a gateway's trace file goes: the path claimed at start, a sibling at the stop.

:func:`claim_trace` locks a path no other live gateway writes (an earlier run's trace
is renamed, never overwritten; anything else at the path is refused);
:func:`free_sibling` is where the final trace goes when the path holds a file the
gateway did not write at its stop (#29); :func:`replace_atomically` rewrites it in place.
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import stat
from pathlib import Path

from icore._files import earlier_name
from icore._flock import close_lock, open_lock


def is_gateway_trace(path: Path) -> bool:
    """True when ``path`` is a regular file whose first line is a gateway trace's header.

    Only such a file is ever moved aside (an earlier run's trace); anything else at a
    trace path (a folder, a device, the manifest, a user's file) is never touched.
    """
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):
            return False
        with path.open("rb") as f:
            first = f.readline(1 << 16)
        head = json.loads(first.decode("utf-8"))
    except (OSError, ValueError):
        return False
    run = head.get("run") if isinstance(head, dict) else None
    return isinstance(run, dict) and str(run.get("question", "")).startswith("MCP gateway ")


class TraceTaken(FileExistsError):
    """A trace path holds something the gateway did not write (it is never moved)."""


class TraceClaim:
    """A trace path claimed by this gateway process (:func:`claim_trace`), and its undo.

    Attributes:
        path: the claimed path.
        fd: the descriptor holding the ``flock`` on ``.<name>.lock`` beside it.
        lock: the lock file's path.
        made: what the claim created: the lock file (when it was not there) and the
            folders above the path that did not exist, deepest first.
        aside: where an earlier run's trace at ``path`` was moved (None: nothing was).
    """

    def __init__(self, path: Path, fd: int, lock: Path, made: list[Path],
                 aside: Path | None) -> None:
        self.path, self.fd, self.lock, self.made, self.aside = path, fd, lock, made, aside

    def release(self, *, remove: bool = False) -> None:
        """Release the lock. Idempotent.

        ``remove`` (a clean stop: the trace is written): the lock file is removed first,
        while this claim still holds its ``flock`` and only when the file at its path is
        still the one locked, so never while another gateway holds it. Safe against a
        gateway waiting for it: :func:`claim_trace` checks, once it holds a lock, that
        the file locked is still at the path, and claims again when it is not (the file
        this one removed). Otherwise the lock file stays (the next run's claim takes it;
        a killed gateway's ``flock`` ends with its process).
        """
        if remove and self.fd >= 0 and _same_file(self.fd, self.lock):
            with contextlib.suppress(OSError):
                self.lock.unlink()
        if self.fd >= 0:
            close_lock(self.fd)
            self.fd = -1

    def said(self) -> None:
        """Log where the earlier run's trace went, once the start stands (QA qa-new15b S4).

        Not at the move: a start refused afterwards (a bad manifest) puts it back
        (:meth:`undo`), so the line would name a move that did not stand.
        """
        if self.aside is not None:
            logging.getLogger("icore.mcp").warning(
                "moved the earlier trace at %s to %s (kept, never overwritten)", self.path,
                self.aside)

    def undo(self) -> None:
        """Release the claim and remove what it made: a start refused (#29).

        The lock file is removed only while this claim holds its ``flock`` and only when
        the file at its path is still the one locked (never another gateway's: a gateway
        that opened it meanwhile finds it gone once it gets the lock, and claims
        again); the earlier run's trace moved aside is put back when nothing is at the
        path; the folders the claim created are removed when empty. Idempotent.
        """
        if self.fd >= 0 and self.lock in self.made and _same_file(self.fd, self.lock):
            with contextlib.suppress(OSError):
                self.lock.unlink()
        self.release()
        if self.aside is not None and not os.path.lexists(self.path) \
                and is_gateway_trace(self.aside):
            with contextlib.suppress(OSError):
                self.aside.rename(self.path)
        self.aside = None
        for folder in (m for m in self.made if m != self.lock):
            with contextlib.suppress(OSError):  # not empty: something else is there
                folder.rmdir()
        self.made = []


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` is (still) the file open as ``fd`` (no link followed)."""
    try:
        a, b = os.fstat(fd), path.lstat()
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _made_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; those created, deepest first."""
    missing: list[Path] = []
    f = folder
    while not os.path.lexists(f) and f != f.parent:
        missing.append(f)
        f = f.parent
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def claim_trace(path: Path, *, limit: int = 1000) -> TraceClaim:
    """A trace path for this gateway process, locked until its trace is closed.

    ``path`` itself when no live gateway holds it, else ``<stem>-gw<k><suffix>``
    (k = 2, 3, ...): two gateways sharing a manifest never write one file. A file
    left at the claimed path by an earlier run is renamed ``<stem>-<n><suffix>`` first
    (never overwritten), and the temporary files of a stop killed mid-rewrite
    (``<name>.<pid>.tmp`` of a dead process) are removed. The lock is ``flock`` on
    ``.<name>.lock`` beside it (released when the process exits, so a killed gateway
    never blocks its path); a lock file removed between its opening and its lock
    (:meth:`TraceClaim.undo` of a refused start) is opened again.

    Returns:
        the :class:`TraceClaim` (its ``undo`` removes what it made).

    Raises:
        TraceTaken: the path (or the one claimed) holds a folder, a device, a link or a
            file that is not a gateway trace: it is left as it is.
        OSError: the folder cannot be created or written, or ``limit`` paths are held.
    """
    import fcntl
    made = _made_folders(path.parent)
    try:
        for k in range(1, limit + 1):
            p = path if k == 1 else path.with_name(f"{path.stem}-gw{k}{path.suffix}")
            if (p.exists() or p.is_symlink()) and not is_gateway_trace(p):
                raise TraceTaken(f"{p} exists and is not a trace an icore gateway wrote (a "
                                 "folder, a device, a link or another file); it is never "
                                 "moved or overwritten: choose another trace path")
            lock = p.with_name(f".{p.name}.lock")
            while True:  # again when the file locked was removed before the lock held
                new = not os.path.lexists(lock)
                # O_CLOEXEC and listed: a forked child of the gateway drops its copy
                fd = open_lock(lock, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    close_lock(fd)
                    fd = -1
                    break
                except BaseException:
                    close_lock(fd)
                    raise
                if _same_file(fd, lock):
                    break
                close_lock(fd)
            if fd < 0:
                continue
            claim = TraceClaim(p, fd, lock, [lock, *made] if new else made, None)
            try:
                if (p.exists() or p.is_symlink()) and not is_gateway_trace(p):  # raced
                    raise TraceTaken(f"{p} is no longer a gateway trace; left as it is")
                _drop_orphans(p)
                if p.exists():  # an earlier run's trace: kept beside, never overwritten
                    claim.aside = earlier_name(p)
                    p.rename(claim.aside)  # said once the start stands (:meth:`said`)
            except BaseException:
                claim.undo()
                raise
            return claim
        raise OSError(f"{limit} gateways hold traces beside {path}")
    except BaseException:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _drop_orphans(path: Path) -> None:
    """Remove the ``<name>.<pid>.tmp`` files a killed stop left beside ``path`` (#25).

    Called with ``path``'s lock held, so only a gateway that held it wrote them: those
    of a process no longer alive, that are regular files, empty or a gateway trace, go;
    anything else is left as it is.
    """
    for tmp in path.parent.glob(f"{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 1:-4]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            if _leftover(tmp):
                tmp.unlink()
        except OSError:
            continue


def _leftover(tmp: Path) -> bool:
    """True when ``tmp`` is a regular file, empty or a gateway trace (a stop's leftover)."""
    try:
        st = tmp.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_size == 0 or is_gateway_trace(tmp))


def _alive(pid: int) -> bool:
    """True when a process ``pid`` exists (signal 0; another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def free_sibling(path: Path, text: str, *, limit: int = 10_000) -> Path:
    """Write ``text`` to the first ``<stem>-stopped-<n><suffix>`` not taken; its path.

    Created exclusively (``O_EXCL``): an existing file is never opened or replaced.

    Raises:
        OSError: no name was free within ``limit`` tries, or the write failed.
    """
    data = text.encode("utf-8")
    for n in range(1, limit + 1):
        p = path.with_name(f"{path.stem}-stopped-{n}{path.suffix}")
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return p
    raise OSError(f"no free name beside {path} for the trace")


def replace_atomically(path: Path, text: str) -> Path:
    """Write ``text`` to a fresh temporary sibling of ``path``, then rename it over ``path``.

    The temporary name (``<name>.<pid>.tmp``) is created exclusively and never followed.
    When it is taken by a leftover of an earlier stop under the same pid (a regular file,
    empty or a gateway trace: the caller holds ``path``'s lock) it is removed and taken;
    when it holds anything else (a link, a user's file) the text goes to
    :func:`free_sibling` instead. Returns where the text went (the caller says so when
    it is not ``path``).

    Raises:
        OSError: the write or the rename failed (the temporary file is removed).
    """
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    for _ in range(2):
        try:
            fd = os.open(tmp, _NEW, 0o644)
            break
        except FileExistsError:
            if not _leftover(tmp):  # a link or a user's file: never touched
                return free_sibling(path, text)
            tmp.unlink()  # a stop killed under this very pid (PID 1 in a container)
    else:
        return free_sibling(path, text)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""A file created here, never one found there, never through a link."""


def open_new_trace(path: Path) -> tuple[Path, int]:
    """Create the trace file at ``path`` exclusively, or at a free sibling; (path, fd).

    ``path`` was claimed free (:func:`claim_trace`); when something appeared there before
    the first write (a link, a user's file) it is left as it is and the trace goes to the
    first free ``<stem>-stopped-<n><suffix>`` instead, for the whole run (the caller says
    so once).

    Raises:
        OSError: neither could be created.
    """
    try:
        return path, os.open(path, _NEW, 0o644)
    except FileExistsError:
        pass
    sibling = free_sibling(path, "")
    return sibling, os.open(sibling, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
