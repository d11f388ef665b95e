"""Loopback instruments shared by the benchmarks (127.0.0.1 only).

Free ports, waiting for a server to listen, and a relay that counts the bytes on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_port(port: int, proc: subprocess.Popen[bytes], what: str,
                     timeout_s: float = 20.0) -> None:
    """Wait until ``proc`` listens on 127.0.0.1:``port``.

    Raises:
        RuntimeError: ``proc`` exited, or did not listen within ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            _r, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            with contextlib.suppress(OSError):
                await w.wait_closed()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s")


class ByteRelay:
    """A loopback TCP relay that counts the payload bytes it forwards both ways."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.bytes = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Listen on a free 127.0.0.1 port and relay each connection to ``target_port``.

        Returns:
            The port clients connect to.
        """
        self._server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(65536):
                self.bytes += len(data)
                w.write(data)
                await w.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            w.close()

    async def _on_conn(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sr, sw = await asyncio.open_connection("127.0.0.1", self.target_port)
        for t in (self._pipe(cr, sw), self._pipe(sr, cw)):
            task = asyncio.ensure_future(t)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop listening and cancel the pipes of open connections (:attr:`bytes` is kept)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
