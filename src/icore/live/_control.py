"""The agent process's side of the control plane: JSON lines on stdin/stdout.

:class:`ControlPlane` writes :class:`~icore.live._messages.Ready`, replies and peer calls,
reads commands and peer replies from stdin (a reader thread), and runs each command as a
task on the agent's loop through a handler's ``cmd_<name>`` coroutine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from icore.live._messages import (
    Command,
    PeerCall,
    PeerReply,
    Ready,
    Reply,
    dumps,
    parse_line,
)

log = logging.getLogger("icore.live")

Handler = Callable[[Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""A command's coroutine: its arguments -> its result."""


class ControlPlane:
    """Control messages of one agent process (see :mod:`icore.live._messages`).

    Args:
        step_s: bound of a peer call (the other agent's step), seconds.
    """

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self._out_lock = threading.Lock()
        self._calls: dict[int, asyncio.Future[PeerReply]] = {}
        self._next_call = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, msg: Ready | Reply | PeerCall) -> None:
        """Write one control message to stdout."""
        line = dumps(msg.to_dict())
        with self._out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    async def call(self, to_role: str, cmd: str, **args: Any) -> PeerReply:
        """Ask another agent (through the coordinator); bounded by the step timeout.

        Raises:
            TimeoutError: no reply within ``step_s``.
        """
        assert self.loop is not None
        self._next_call += 1
        n = self._next_call
        fut: asyncio.Future[PeerReply] = self.loop.create_future()
        self._calls[n] = fut
        self.send(PeerCall(n, to_role, cmd, args))
        try:
            return await asyncio.wait_for(fut, self.step_s)
        finally:
            self._calls.pop(n, None)

    async def serve(self, agent: str, port: int,
                    handler: Callable[[str], Handler | None]) -> None:
        """Announce readiness, then run commands until stdin closes or ``shutdown``.

        Args:
            agent: this agent's id (in the ready message).
            port: its owner service's port (0: none).
            handler: ``cmd`` -> its coroutine, or None for an unknown command.
        """
        self.loop = loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def pump() -> None:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=pump, name="icore-stdin", daemon=True).start()
        self.send(Ready(port, os.getpid(), agent))
        while True:
            line = await queue.get()
            if line is None:
                break
            try:
                msg = parse_line(line, to_agent=True)
            except ValueError:
                msg = None
            if msg is None:
                log.warning("undecodable control line: %r", line[:200])
                continue
            if isinstance(msg, PeerReply):
                fut = self._calls.get(msg.reply)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
                continue
            assert isinstance(msg, Command)
            if msg.cmd == "shutdown":
                self.send(Reply(msg.id, True, {}))
                break
            t = asyncio.create_task(self._run(msg, handler(msg.cmd)))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _run(self, msg: Command, fn: Handler | None) -> None:
        if fn is None:
            self.send(Reply(msg.id, False, error=f"unknown command {msg.cmd!r}"))
            return
        try:
            result = await fn(msg.args)
            self.send(Reply(msg.id, True, result))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("command %s failed", msg.cmd)
            self.send(Reply(msg.id, False, error=f"{type(exc).__name__}: {exc}"))

    async def cancel(self) -> None:
        """Cancel the running commands and wait for them (bounded, 5 s)."""
        for t in list(self._tasks):
            t.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 5)
