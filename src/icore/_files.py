"""Refuse special files by kind before a loader opens them.

Opening a FIFO (named pipe) blocks until a writer appears, and reading a character device
such as ``/dev/zero`` never ends, so every loader of a user-supplied path ``stat``-s it
first and refuses anything that is not a regular file (or, where a folder is accepted, a
directory), without opening it. The loaders wrap the answer in their own typed error.

:func:`move_aside` keeps an earlier run's folder instead of mixing or overwriting it;
:func:`make_room` moves only a folder icore created (it holds the :data:`MARKER` file
written by :func:`mark_folder`) and refuses any other folder holding a run's files, so
a user's own folder is never renamed (issue 29). :func:`write_owned` writes a file into
a folder the user may share with icore (``icore audit --out``, a run folder) only when
nothing is there yet or the file there is one icore wrote and nobody changed since (the
:data:`WRITTEN` ledger); anything else (the user's trace, a symlink, a changed report)
is refused, never overwritten (issue 29).

Pure stdlib (``os``, ``stat``, ``hashlib``) and no icore import: every layer may use
this module.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import cast

from icore._flock import close_lock, open_lock

_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


NAME_MAX = 255
"""Longest file-name component in bytes (Linux, macOS)."""


@contextlib.contextmanager
def folder_turn(folder: Path) -> Iterator[None]:
    """This writer's turn in ``folder`` (an exclusive ``flock`` of the folder itself).

    Processes writing a set of files into one folder take turns, so one never reads
    the other's half-written set (two ``icore certs init`` at once, two recorders).
    On a file system without ``flock`` the block runs unlocked. Raises ``OSError`` when
    ``folder`` cannot be opened.
    """
    # a forked child never keeps the turn (icore._flock)
    fd = open_lock(folder if str(folder) else ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(OSError):  # a file system without flock: unlocked
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        close_lock(fd)


def path_problem(path: object) -> str | None:
    """Say why ``path`` cannot name a file at all, or return None when it can.

    Checked before anything is opened or created (issue 29): a user's ``None``, number or
    bytes, an empty string, a NUL byte, a lone surrogate the file system cannot encode,
    or a name component over :data:`NAME_MAX` bytes (characters on macOS; ``File name
    too long`` only after the work was done). An NTFS or exFAT mount on Linux, which
    allows 255 characters, is held to 255 bytes too.

    Returns:
        None, or the problem without the path, e.g. ``"must be a str or os.PathLike,
        not NoneType"``, ``"holds a NUL byte"``.
    """
    if isinstance(path, bool) or not isinstance(path, str | os.PathLike):
        return f"must be a str or os.PathLike, not {type(path).__name__}"
    try:
        s = os.fspath(path)
    except Exception as exc:  # a PathLike whose __fspath__ raises or returns no str
        return f"is no path: {exc}"
    if not isinstance(s, str):
        return f"must name a text path, not {type(s).__name__}"
    if not s:
        return "is empty"
    if "\x00" in s:
        return "holds a NUL byte"
    try:
        raw = os.fsencode(s)
    except UnicodeEncodeError:
        return "cannot be encoded for the file system (a lone surrogate)"
    if sys.platform == "darwin":  # APFS / HFS+ count a name's characters, not its bytes
        longest, unit = max((len(part) for part in s.split("/")), default=0), "characters"
    else:
        longest, unit = max((len(part) for part in raw.split(b"/")), default=0), "bytes"
    if longest > NAME_MAX:
        return f"has a name of {longest} {unit} (the file system allows {NAME_MAX})"
    return None


def written_path_problem(path: object) -> str | None:
    r""":func:`path_problem` for a file icore creates, and a name that is not text.

    A path holding a surrogate (U+D800-U+DFFF) is refused, the ``\udc80``-``\udcff``
    that stand for bytes not UTF-8 (``surrogateescape``, a shell's ``$'\x80'``) too: the
    file system takes such a name, but icore names the files it writes in JSON (a
    trace's notes, ``--json`` reports, the ``.icore-files`` ledger), where it has no
    UTF-8 form and came out as U+FFFD, a name no file has; an MCP peer refuses it
    (issue 29). One rule for every writer: RunRecorder, the gateway's ``trace``,
    ``icore audit --out``/``--json``, the span file and PROV-JSON exporters.

    Returns:
        None, or the problem without the path, e.g. ``"holds '\udc80' (character 3), a
        lone surrogate: ..."``.
    """
    if (problem := path_problem(path)) is not None:
        return problem
    return surrogate_problem(str(os.fspath(cast(str, path))))  # path_problem: a str path


def surrogate_problem(s: str) -> str | None:
    """Why the path text ``s`` holds a surrogate (:func:`written_path_problem`), or None."""
    at = next((i for i, c in enumerate(s) if "\ud800" <= c <= "\udfff"), None)
    if at is None:
        return None
    return (f"holds {s[at]!a} (character {at}), a lone surrogate: a name of bytes that "
            "are not UTF-8 has no form in the JSON icore writes about its files; name "
            "the file in UTF-8 text")


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
        ``"is a FIFO (named pipe), not a regular file"``, or :func:`path_problem`'s.
    """
    if (problem := path_problem(path)) is not None:
        return problem
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


WRITTEN = ".icore-files"
"""Ledger icore keeps in each folder it writes files into: one ``<sha256>  <name>`` line
per file it wrote there (the ``sha256sum`` format). A file written again has its line's
digest rewritten in place (same length), so the ledger holds one line per file, also
when processes write one file at once (QA qa-new9 S4: four audits writing one ``--json``
file left four lines); a ledger of an earlier version with repeated lines is read
last-line-wins and rewritten with one line per file when its lines outnumber the files
(more than twice as many lines as files, plus 64)."""

_Ledger = tuple[tuple[int, int, int], dict[str, str], int, dict[str, int]]
_LEDGERS: dict[str, _Ledger] = {}
"""Parsed ledgers by real folder path: (stat signature, name -> digest, lines, name ->
byte offset of the line that names it)."""
_LEDGER_LOCK = threading.Lock()


def _fresh_ledger_lock() -> None:
    """A forked child's own lock: the thread that held the parent's is not in the child."""
    global _LEDGER_LOCK
    _LEDGER_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_ledger_lock)


def _ledger(folder: Path, *, fresh: bool = False) -> tuple[dict[str, str], int]:
    """The folder's :data:`WRITTEN` ledger (name -> sha256 hex) and its line count.

    ``fresh``: read the file even when the cached copy's (inode, size, mtime) still
    match (an in-place rewrite within the file system's time granularity keeps them).
    """
    p = folder / WRITTEN
    try:
        st = os.stat(p)
    except OSError:
        return {}, 0
    sig = _signature(st)
    key = os.path.realpath(folder)
    hit = _LEDGERS.get(key)
    if hit is not None and hit[0] == sig and not fresh:
        return hit[1], hit[2]
    try:
        with open(p, "rb") as f:
            book, lines, where = _parse_ledger(f.read())
    except OSError:
        return {}, 0
    _LEDGERS[key] = (sig, book, lines, where)
    return book, lines


def _digest_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def foreign_file(path: Path) -> str | None:
    """Why icore must not replace ``path``, or None when it may.

    None when nothing is at ``path``, or when it is a regular file that the folder's
    :data:`WRITTEN` ledger lists with its current content (icore wrote it, in this run or
    an earlier one, and nobody changed it since). Symlinks are not followed.

    Returns:
        The problem, without the path, e.g. ``"was not written by icore"``.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return f"cannot be checked ({exc})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    recorded = _ledger(path.parent)[0].get(path.name)
    try:
        digest = _digest_of(path) if recorded is not None else None
        if digest != recorded or recorded is None:  # the cached copy may lag: read it
            recorded = _ledger(path.parent, fresh=True)[0].get(path.name)
            if recorded is not None and digest is None:
                digest = _digest_of(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if recorded is None:
        return f"was not written by icore (not listed in {WRITTEN})"
    if digest != recorded:
        return "was changed since icore wrote it"
    return None


def refuse_foreign(paths: Iterable[Path]) -> None:
    """Raise for the first of ``paths`` that :func:`write_owned` would refuse.

    Lets a command refuse before it writes anything, not after its first files.

    Raises:
        FileExistsError: naming every such path (the first five) and why, and what to do.
    """
    bad = [(p, why) for p in paths if (why := foreign_file(p)) is not None]
    if bad:
        named = "; ".join(f"{p} {why}" for p, why in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise FileExistsError(errno.EEXIST, f"{named}{more}; icore never overwrites a file "
                              "it did not write: move it away or give another output "
                              "folder", str(bad[0][0]))


def output_refusal(path: Path) -> str | None:
    """Why a command's single output file (``--json FILE``) must not be written, or None.

    Refused: icore's own bookkeeping (a :data:`WRITTEN` ledger, a :data:`MARKER`: writing
    it would make icore forget the files it owns), and a regular file that
    :func:`foreign_file` refuses (the user's file, one changed since icore wrote it, a
    symlink to one). A missing path, a device (``/dev/stdout``, ``/dev/null``) or a FIFO
    may be written.
    """
    if path.name in (WRITTEN, MARKER):
        return f"is icore's own bookkeeping file ({path.name}); give another file name"
    if (problem := path_problem(path)) is not None:
        return problem
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return foreign_file(path) if stat.S_ISREG(mode) else None


def append_refusal(path: Path) -> str | None:
    """Why a file icore appends to (``--otlp-endpoint file:PATH``) must not be, or None.

    As :func:`output_refusal`, but an existing empty file may be appended to too: the
    lines icore appends are recorded by :func:`record_written` after the export, so the
    next run may append again; another file (the user's notes, a trace) is refused.
    """
    try:
        if path.name not in (WRITTEN, MARKER) and os.stat(path).st_size == 0:
            return None
    except (OSError, ValueError):
        pass
    return output_refusal(path)


def record_written(path: Path) -> None:
    """List the regular file ``path`` in its folder's :data:`WRITTEN` ledger as it is now.

    For a file icore wrote all of (created, or appended to). Nothing for another kind.

    Raises:
        OSError: the file or the ledger cannot be read or written.
    """
    if stat.S_ISREG(os.lstat(path).st_mode):
        _record(path.parent, path.name, _digest_of(path))


def _foreign_message(path: Path, why: str) -> str:
    return (f"{path} {why}; icore never overwrites a file it did not write: move it "
            "away or give another output folder")


def write_owned(path: Path, data: bytes, *, overwrite: bool = False) -> Path:
    """Write ``data`` at ``path`` unless something icore did not write is there.

    The bytes go to a temporary file beside ``path`` that then replaces it (a reader
    never sees half a file, and a hard or symbolic link at ``path`` is replaced, never
    written through); the file is then listed in the folder's :data:`WRITTEN` ledger
    with its SHA-256. The check, the replacement and the ledger line are one step under
    the ledger's lock: processes writing one file at once take turns, and the ledger
    names the content the last of them left (QA qa-new9 S4). ``overwrite``: replace
    whatever is there (the caller's explicit choice), still never through a link.

    Returns:
        ``path``.

    Raises:
        FileExistsError: :func:`foreign_file` gives a reason (the message names the path).
        OSError: the write failed (nothing was replaced).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        with _LEDGER_LOCK, _locked(path.parent / WRITTEN) as fd:
            why = None if overwrite else foreign_file(path)  # decided under the lock
            if why is not None:
                raise FileExistsError(errno.EEXIST, _foreign_message(path, why), str(path))
            os.replace(tmp, path)
            _note(fd, path.parent, path.name, hashlib.sha256(data).hexdigest())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


@contextlib.contextmanager
def _locked(p: Path) -> Iterator[int]:
    """The ledger ``p`` opened for reading and writing (created if missing), ``flock``-ed.

    Another process may have replaced the ledger while this one waited for the lock;
    the lock is then taken again on the file the path names now. Yields the descriptor
    (no ``O_APPEND``: a line is rewritten in place at its offset).
    """
    while True:
        fd = open_lock(p, os.O_RDWR | os.O_CREAT, 0o666)  # a forked child drops it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino == os.stat(p).st_ino:
                break
        except FileNotFoundError:
            pass
        except BaseException:
            close_lock(fd)
            raise
        close_lock(fd)
    try:
        yield fd
    finally:
        close_lock(fd)


def _parse_ledger(data: bytes) -> tuple[dict[str, str], int, dict[str, int]]:
    """Name -> digest (last line wins), line count and name -> byte offset of its line."""
    book: dict[str, str] = {}
    where: dict[str, int] = {}
    lines = at = 0
    while at < len(data):
        end = data.find(b"\n", at)
        stop = len(data) if end < 0 else end
        lines += 1
        # surrogateescape: a name of bytes that are no UTF-8 (a shell's $'\xff') reads
        # back as the str the file system gave, and writes back as its bytes
        got, sep, n = data[at:stop].decode("utf-8", "surrogateescape").partition("  ")
        if sep and len(got) == 64:
            book[n] = got
            if got.isascii():  # 64 bytes: rewritable in place
                where[n] = at
            else:
                where.pop(n, None)
        at = stop + 1
    return book, lines, where


def _signature(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _record(folder: Path, name: str, digest: str) -> None:
    """List ``name`` with ``digest`` in the folder's ledger, under the ledger's lock."""
    with _LEDGER_LOCK, _locked(folder / WRITTEN) as fd:
        _note(fd, folder, name, digest)


def _note(fd: int, folder: Path, name: str, digest: str) -> None:
    """List ``name`` with ``digest`` in the ledger open (and locked) as ``fd``.

    A name already listed has its line's digest rewritten in place (64 bytes at the
    line's offset: one line per file, QA qa-new9 S4); a new name's line is appended.
    When the ledger holds more than twice as many lines as files (plus 64: an earlier
    version's appended ledger), it is rewritten with one line per file (a temporary
    file replacing it: a crash keeps the old ledger). The parsed ledger is kept per
    folder and re-read only when the file's (inode, size, mtime) changed, so writing n
    files costs O(n) ledger work, not O(n^2) (#28). The caller holds ``flock`` on
    ``fd``: processes writing into one folder at once take turns, so none loses
    another's line.
    """
    if "\n" in name or "\r" in name:  # report names never hold one; keep the format
        return
    p = folder / WRITTEN
    key = os.path.realpath(folder)
    now = os.fstat(fd)
    hit = _LEDGERS.get(key)
    if hit is not None and hit[0] == _signature(now):
        book, lines, where = dict(hit[1]), hit[2], dict(hit[3])
    else:
        book, lines, where = _parse_ledger(os.pread(fd, now.st_size, 0))
    if book.get(name) == digest:
        return
    size = now.st_size  # the lock is held: nobody wrote since the fstat
    if name in where:
        os.pwrite(fd, digest.encode("ascii"), where[name])
    else:
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"  # a crash mid-line
        line = ("\n" if torn else "") + f"{digest}  {name}\n"
        os.pwrite(fd, line.encode("utf-8", "surrogateescape"), size)
        where[name] = size + torn
        lines += 1
    book[name] = digest
    if lines > 2 * len(book) + 64:  # an earlier version's repeated lines: one per file
        tmp = p.with_name(f"{WRITTEN}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_text("".join(f"{d}  {n}\n" for n, d in book.items()),
                           encoding="utf-8", errors="surrogateescape")
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _LEDGERS.pop(key, None)  # read again when next asked
        return
    _LEDGERS[key] = (_signature(os.fstat(fd)), book, lines, where)


def file_identity(path: Path) -> tuple[object, ...]:
    """What makes two paths one file: (device, inode) when it exists, else its real path.

    ``stat`` follows symlinks, so a symlink, a hard link, a symlinked folder and
    ``x/../name`` all meet the file they name; a path that does not exist yet is
    compared by :func:`os.path.realpath` (its symlinked folders resolved).
    """
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except (OSError, ValueError):
        pass
    try:
        return ("path", os.path.realpath(path))
    except (OSError, ValueError):
        return ("path", str(path))


__all__ = [
    "MARKER",
    "WRITTEN",
    "append_refusal",
    "earlier_name",
    "file_identity",
    "foreign_file",
    "make_room",
    "mark_folder",
    "not_a_regular_file",
    "output_refusal",
    "record_written",
    "refuse_foreign",
    "write_owned",
]


def earlier_name(path: Path) -> Path:
    """Where an earlier run's file at ``path`` is kept: the first free ``<stem>-<n><suffix>``.

    n = 1, 2, ...; a name held by anything (a dangling link too) is skipped. One rule for
    every trace icore moves aside (the MCP gateway's, ``RunRecorder.write``'s).
    """
    n = 1
    while os.path.lexists(old := path.with_name(f"{path.stem}-{n}{path.suffix}")):
        n += 1
    return old


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
    real = Path(os.path.realpath(folder))  # Path.resolve raises RuntimeError on a link loop
    if here is not None and (real == here or real in here.parents):
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
