"""A long run's step texts kept in a temporary file, not in memory (issue 29).

An OpenTelemetry run's steps are columns (:class:`~icore.adapters._line_steps.ColumnSteps`)
whose texts are most of what the trace holds (about 140 bytes a step of the 200 MB bench
document, kept by nothing else once X is built). Past :data:`SPILL_CHARS` characters a
run's texts are appended to an unnamed temporary file instead (UTF-8 with lone
surrogates passed through, so every ``str`` reads back equal), and each is read back when
its step is built: 8 bytes a step (its end offset) stay in memory.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterator
from typing import BinaryIO

from icore.adapters._errors import AdapterError

SPILL_CHARS = 1 << 20
"""Characters of step text a run keeps in memory; past that they go to a temporary file."""

_BLOCK = 1 << 20
"""Bytes written (and read, when iterating) at a time."""


class TextSpill:
    """Texts appended to an unnamed temporary file, read back by position.

    The file is made in :func:`tempfile.gettempdir` (``TMPDIR``) and deleted by the
    system when closed (it has no name once made); writes are buffered in blocks of
    1 MiB, and a text not yet written is read from the buffer.

    Raises:
        OSError: the temporary file cannot be made (the caller keeps its texts).
    """

    __slots__ = ("_buf", "_ends", "_file", "_flushed", "_where")

    def __init__(self, *, where: str) -> None:
        self._file: BinaryIO = tempfile.TemporaryFile(prefix="icore-texts-", buffering=0)
        self._buf = bytearray()
        self._flushed = 0
        self._ends: array[int] = array("q")
        self._where = where

    def append(self, text: str) -> None:
        """Add the next text (its position: the count before it)."""
        self._buf += text.encode("utf-8", "surrogatepass")
        self._ends.append(self._flushed + len(self._buf))
        if len(self._buf) >= _BLOCK:
            self._flush()

    def _flush(self) -> None:
        done = 0
        try:
            with memoryview(self._buf) as view:
                while done < len(view):
                    n = self._file.write(view[done:])
                    if not n:
                        raise OSError("nothing written")
                    done += n
        except OSError as exc:
            raise AdapterError(f"cannot keep the step texts in a temporary file ({exc}); "
                               "set TMPDIR to a folder with room", file=self._where,
                               field="<root>") from None
        self._flushed += len(self._buf)
        self._buf.clear()

    def __len__(self) -> int:
        return len(self._ends)

    def _bytes(self, start: int, end: int) -> bytes:
        if start >= self._flushed:
            return bytes(self._buf[start - self._flushed:end - self._flushed])
        if end > self._flushed:  # partly in the buffer: write it first
            self._flush()
        fd = self._file.fileno()
        out = os.pread(fd, end - start, start)
        while len(out) < end - start:  # a regular file reads whole; never loop forever
            more = os.pread(fd, end - start - len(out), start + len(out))
            if not more:
                raise AdapterError("the temporary file of step texts was cut short",
                                   file=self._where, field="<root>")
            out += more
        return out

    def __getitem__(self, i: int) -> str:
        """The text at position ``i`` (``0 <= i < len(self)``)."""
        ends = self._ends
        start = ends[i - 1] if i else 0
        return self._bytes(start, ends[i]).decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        """Every text in order, read in blocks of about 1 MiB."""
        ends = self._ends
        n = len(ends)
        i = start = 0
        while i < n:
            j = i
            while j < n and ends[j] - start < _BLOCK:
                j += 1
            j = max(j, i + 1)
            block = self._bytes(start, ends[j - 1])
            at = start
            for k in range(i, j):
                yield block[at - start:ends[k] - start].decode("utf-8", "surrogatepass")
                at = ends[k]
            i, start = j, ends[j - 1]

    def close(self) -> None:
        """Close (and so delete) the file; no text can be read after."""
        self._file.close()

    def __del__(self) -> None:  # the steps are dropped: the file goes with them
        f = getattr(self, "_file", None)
        if f is not None:
            f.close()


__all__ = ["SPILL_CHARS", "TextSpill"]
