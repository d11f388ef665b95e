"""The gateway's own stdin/stdout for :func:`icore.mcp._transport.serve_stdio`.

Pipes are read and written on the event loop; a terminal or a file (the MCP SDK's own
stdio transport would read those with no line cap) in a worker thread, through the same
line splitter, so both paths cap a line at the manifest's ``max_message_mb`` (#29).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from icore.mcp._stdio_lines import Oversized

_KEPT = 4096
"""Bytes kept of each end of an over-long line (to find its id), the rest dropped."""


class _PipeIn:
    """stdin lines from the event loop (what ``anyio.wrap_file`` reads in a thread).

    ``stop()`` ends the input as if the client closed stdin (the read pipe is closed: its
    reader sees end of file, nothing read afterwards).
    """

    def __init__(self, reader: asyncio.StreamReader,
                 stop: Callable[[], object] = lambda: None) -> None:
        self.reader = reader
        self.stop = stop

    def __aiter__(self) -> _PipeIn:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # the last line, with no newline
            line = exc.partial
        except asyncio.LimitOverrunError:
            return await self._oversized()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")

    async def _oversized(self) -> Oversized:
        """Drop a line longer than the reader's limit, keeping only its two ends (#29)."""
        head = await self.reader.read(_KEPT)
        size, tail = len(head), b""
        while True:
            try:
                rest = await self.reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as exc:
                rest = await self.reader.read(max(exc.consumed, 1))
                size += len(rest)
                tail = (tail + rest)[-_KEPT:]
                continue
            except asyncio.IncompleteReadError as exc:  # end of input in the line
                rest = exc.partial
            size += len(rest)
            tail = (tail + rest)[-_KEPT:]
            return Oversized(head.decode("utf-8", errors="replace"),
                             tail.decode("utf-8", errors="replace"), size)


class FileIn:
    """Lines of a descriptor that is no pipe (a terminal, a file), read by a worker thread.

    Each read takes what is there (at most :data:`~icore.mcp._upstream_stdio.CHUNK`
    bytes); lines are cut by a :class:`~icore.mcp._stdio_lines.LineSplitter`, so a line
    over ``limit`` bytes is an :class:`~icore.mcp._stdio_lines.Oversized`, as on a pipe.
    """

    def __init__(self, fd: int, limit: int) -> None:
        from collections import deque

        from icore.mcp._stdio_lines import LineSplitter
        self.fd, self.split, self.ready = fd, LineSplitter(limit), deque[bytes | Oversized]()
        self.eof = False

    def __aiter__(self) -> FileIn:
        return self

    async def __anext__(self) -> str:
        from icore.mcp._upstream_stdio import CHUNK
        while not self.ready:
            if self.eof:
                raise StopAsyncIteration
            try:
                chunk = await anyio.to_thread.run_sync(os.read, self.fd, CHUNK,
                                                       abandon_on_cancel=True)
            except OSError:  # a terminal whose other side closed (EIO): the input's end
                chunk = b""
            if chunk:
                self.ready.extend(self.split.feed(chunk))
            else:  # end of input: the last line, with no newline
                self.eof = True
                if (last := self.split.end()) is not None:
                    self.ready.append(last)
        line = self.ready.popleft()
        return line if isinstance(line, Oversized) else line.decode("utf-8", errors="replace")


class FileOut:
    """Writes to a descriptor that is no pipe, by a worker thread (``flush`` writes)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.queued, self.lock = fd, bytearray(), anyio.Lock()

    async def write(self, text: str) -> None:
        """Queue ``text`` (one JSON-RPC line), UTF-8."""
        self.queued += text.encode("utf-8")

    async def flush(self) -> None:
        """Write what was queued."""
        async with self.lock:  # the reader's answers and the writer's, one at a time
            data, self.queued = bytes(self.queued), bytearray()
            await anyio.to_thread.run_sync(_write_all, self.fd, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _PipeOut:
    """stdout writes on the event loop (``write`` then ``flush`` = drain)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        """Queue ``text`` (one JSON-RPC line) on the pipe, UTF-8."""
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Wait until the pipe took what was queued (flow control)."""
        await self.writer.drain()


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def pipe_stdio(limit: int) -> AsyncIterator[tuple[Any, Any] | None]:
    """stdin/stdout served by the event loop itself, when both are pipes or sockets.

    The SDK's stdio transport reads and writes through a worker thread per line (three
    thread hops per request: ~1-2 ms on a busy machine). Here the wire moves to private
    descriptors read and written by the asyncio loop; as in the SDK, fd 0 then reads the
    null device and fd 1 writes to stderr (stray output of handlers or children never
    reaches the wire), and both are restored on exit. A line over ``limit`` bytes (the
    manifest's ``max_message_mb``) is dropped as it is read and yielded as an
    :class:`~icore.mcp._stdio_lines.Oversized` (answered, never parsed). Yields None (a worker
    thread reads and writes them, :class:`_FileIn`) on another event loop or when stdin/stdout
    are not pipes.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None or not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    import fcntl
    rfd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wfd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    rfile = os.fdopen(rfd, "rb", buffering=0)
    wfile = os.fdopen(wfd, "wb", buffering=0)
    wtransport: Any = None
    rtransport: Any = None
    try:
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        rtransport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), rfile)
        wtransport, wproto = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), wfile)
        writer = asyncio.StreamWriter(wtransport, wproto, None, loop)
        yield _PipeIn(reader, rtransport.close), _PipeOut(writer)
    finally:
        with contextlib.suppress(OSError):  # the wire back on fd 0 and 1
            os.dup2(rfd, 0)
            os.dup2(wfd, 1)
        for t in (rtransport, wtransport):
            if t is not None:
                t.close()  # a write pipe sends what it buffered, then closes
        if rtransport is None:
            rfile.close()
        if wtransport is None:
            wfile.close()
