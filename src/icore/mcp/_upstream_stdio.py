r"""A stdio upstream's pipes: one JSON-RPC message a line, read in linear time, capped (#29).

The MCP SDK's ``stdio_client`` joins each 64 KiB chunk of the server's stdout to what it
holds of the line and splits the whole again (``(buffer + chunk).split("\n")``): a
40 MB answer was copied and scanned about 640 times, ~20 s of the gateway's CPU (cProfile:
17.6 s in its reader, 12.9 s in ``str.split``), and no line was too long to hold. Here
(:func:`upstream_stdio`) the bytes go through a
:class:`~icore.mcp._stdio_lines.LineSplitter`: each chunk is split once, a line joined
once, and a line over the manifest's ``max_message_mb`` is dropped as it is read (its
two ends kept). The request it answers, found by its ``id`` (or the only request in
flight), fails with :data:`ANSWER_TOO_BIG` naming the method (the tool), the size and the
cap; the connection goes on. An answer that is no valid message but shows its request's
id fails that request at once (:data:`ANSWER_INVALID`). The process is spawned and
stopped as the SDK does (its own session; stdin closed, 2 s, SIGTERM to its group, 2 s,
SIGKILL). Windows: the SDK's ``stdio_client`` (no cap there).
"""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TextIO

import anyio

from icore.mcp._stdio_lines import LineSplitter, Oversized, line_id, names_a_method

log = logging.getLogger("icore.mcp")

ANSWER_TOO_BIG = -32098
"""JSON-RPC code (implementation-defined server error range) of a request whose answer
from a stdio upstream was over ``max_message_mb``: dropped unread, the request failed."""

ANSWER_INVALID = -32097
"""JSON-RPC code of a request whose answer from a stdio upstream was no valid message
(bytes that are no UTF-8, a result of the wrong shape) but showed the request's id."""

CHUNK = 1 << 20
"""Most bytes taken from the upstream's stdout at once."""
PENDING_KEPT = 4096
"""Requests in flight remembered (their ids and methods); the oldest forgotten past it."""
STOP_GRACE_S = 2.0
"""How long a stdio upstream may take to exit once its stdin is closed (the SDK's)."""
KILL_AFTER_S = 2.0
"""How long after SIGTERM its process group is SIGKILLed (the SDK's)."""
FLUSH_S = 0.5
"""How long the messages accepted for stdin may take to be written at shutdown."""


class _Pending:
    """The requests sent and not answered yet: id -> what they ask (for the error text)."""

    def __init__(self) -> None:
        self.asked: dict[Any, str] = {}

    def sent(self, message: Any) -> None:
        """Note ``message`` (a JSON-RPC message to the upstream) when it is a request."""
        import mcp_types as types
        if not isinstance(message, types.JSONRPCRequest):
            return
        what = message.method
        params = message.params if isinstance(message.params, Mapping) else {}
        if isinstance(params.get("name"), str):
            what += f" {params['name'][:200]}"
        self.asked[message.id] = what
        while len(self.asked) > PENDING_KEPT:
            self.asked.pop(next(iter(self.asked)))

    def answered(self, message: Any) -> None:
        """Forget the request ``message`` (from the upstream) answers, if it is an answer."""
        import mcp_types as types
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self.asked.pop(message.id, None)


def too_big_error(line: Oversized, limit: int, pending: dict[Any, str],
                  upstream: str) -> Any:
    """The ``JSONRPCError`` that fails the request a dropped line answers, or None.

    The request is the one whose id the line shows (:func:`line_id`), else the only one
    in flight; none when the line's head shows a ``method`` (a notification or a request
    of the upstream's own, whose id is no answer's, and which nothing waits for). It is
    removed from ``pending``.
    """
    import mcp_types as types
    asks = names_a_method(line)  # the upstream's own request: its id is no answer's
    rid = None if asks else line_id(line)
    if rid is None and len(pending) == 1 and not asks:
        rid = next(iter(pending))
    if rid not in pending:
        log.warning("upstream %s: dropped a %d-byte line over max_message_mb (%g MiB) that "
                    "answers no request in flight", upstream, line.size, limit / 2**20)
        return None
    what = pending.pop(rid)
    text = too_big_text(upstream, what, line.size, limit)
    log.warning("%s", text)
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(
        code=ANSWER_TOO_BIG, message=text,
        data={"size": line.size, "limit": limit, "request": what}))


def too_big_text(upstream: str, what: str, size: int | None, limit: int) -> str:
    """What a request whose answer was over ``limit`` bytes fails with.

    ``size``: the answer's length; None when only "over the cap" is known (an HTTP
    answer cut off).
    """
    big = f"a {size:,}-byte message" if size is not None else \
        f"a message of more than {limit:,} bytes"
    return (f"upstream {upstream} answered {what} with {big}, over the gateway's "
            f"max_message_mb ({limit / 2**20:g} MiB, manifest); the answer was dropped "
            "unread. The upstream ran the request, so the gateway does not send it "
            "again: check its effect, or raise max_message_mb")


def invalid_error(line: bytes, exc: Exception, pending: dict[Any, str],
                  upstream: str) -> Any:
    """The ``JSONRPCError`` that fails the request a line that is no valid message answers.

    Only when the line is a JSON object whose ``id`` is a request in flight (bytes that
    are no UTF-8 replaced): an upstream's own stray output (a print) fails nothing. None
    otherwise. The SDK's transport ended the whole connection on bytes that were no
    UTF-8, and let any other such answer wait for its request's timeout.
    """
    import json

    import mcp_types as types
    try:
        obj = json.loads(line.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    rid = obj.get("id") if isinstance(obj, dict) else None
    if not isinstance(rid, int | str) or isinstance(rid, bool) or rid not in pending:
        return None
    what = pending.pop(rid)
    errors = getattr(exc, "errors", None)
    why = str(exc).splitlines()[0][:200]
    if callable(errors):
        first = (errors(include_url=False, include_input=False) or [{}])[0]
        why = f"{'.'.join(str(x) for x in first.get('loc', ()))}: {first.get('msg', why)}"
    text = (f"upstream {upstream} answered {what} with a message that is no valid "
            f"JSON-RPC ({why[:200]}). The upstream ran the request, so the gateway does "
            "not send it again: check its effect")
    log.warning("%s", text)
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(
        code=ANSWER_INVALID, message=text, data={"request": what}))


@contextlib.asynccontextmanager
async def upstream_stdio(command: str, args: Sequence[str], env: Mapping[str, str] | None,
                         cwd: str | None, *, limit: int, upstream: str,
                         errlog: TextIO = sys.stderr) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` of a stdio MCP server, as the SDK's ``stdio_client``.

    Args:
        command: the program to launch.
        args: its arguments.
        env: variables added to the SDK's default environment (PATH, HOME, ...).
        cwd: its folder (None: the gateway's).
        limit: the longest line read, bytes (the manifest's ``max_message_mb``).
        upstream: its name (in the error of an answer over ``limit``).
        errlog: where its stderr goes, each line prefixed ``upstream <name>: `` (an
            upstream's stray output names its upstream among the gateway's own lines;
            the SDK's stdio server sends a handler's prints to stderr, QA qa-new13c).

    Raises:
        OSError: the process cannot be spawned.
    """
    from mcp.client.stdio import get_default_environment
    if sys.platform == "win32":  # pragma: no cover - the SDK's job objects
        from mcp.client.stdio import StdioServerParameters, stdio_client
        params = StdioServerParameters(command=command, args=list(args),
                                       env=dict(env) if env else None, cwd=cwd)
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
        return
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process([command, *args], env=get_default_environment()
                                       | dict(env or {}), stderr=subprocess.PIPE,
                                       cwd=cwd, start_new_session=True)
    read_w, read_r = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_w, write_r = anyio.create_memory_object_stream[SessionMessage](0)
    pending = _Pending()
    writer_done = anyio.Event()
    stopping = False
    adapter = types.jsonrpc_message_adapter

    def message(line: bytes | Oversized) -> Any:
        if isinstance(line, Oversized):
            err = too_big_error(line, limit, pending.asked, upstream)
            return None if err is None else SessionMessage(err)
        if not line.strip():
            return None
        try:
            msg = adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            err = invalid_error(line, exc, pending.asked, upstream)
            if err is None:  # one line, as the SDK's (its traceback only at debug)
                log.warning("upstream %s: Failed to parse JSONRPC message from its stdout "
                            "(%s: %s); the line is ignored", upstream, type(exc).__name__,
                            str(exc).splitlines()[0][:200])
            return exc if err is None else SessionMessage(err)
        pending.answered(msg)
        return SessionMessage(msg)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        split = LineSplitter(limit)
        try:
            async with read_w:
                try:
                    while True:
                        try:
                            chunk = await process.stdout.receive(CHUNK)
                        except anyio.EndOfStream:
                            return
                        for line in split.feed(chunk):
                            if (msg := message(line)) is None:
                                continue
                            try:
                                await read_w.send(msg)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                finally:
                    await _drain(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not stopping:
                log.exception("upstream %s: reading its stdout failed", upstream)

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_r:
                async for sm in write_r:
                    pending.sent(sm.message)
                    await process.stdin.send((sm.message.model_dump_json(
                        by_alias=True, exclude_unset=True) + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_w.aclose()  # the session sees the connection end
        finally:
            writer_done.set()

    stderr_done = anyio.Event()

    async def stderr_relay() -> None:
        try:
            await relay_stderr(process.stderr, errlog, upstream)
        finally:
            stderr_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        tg.start_soon(stderr_relay)
        try:
            yield read_r, write_w
        finally:
            stopping = True
            with anyio.CancelScope(shield=True):
                read_r.close()
                write_w.close()
                with anyio.move_on_after(FLUSH_S):
                    await writer_done.wait()
                await _stop(process)
                with anyio.move_on_after(FLUSH_S):  # its last words (a child may hold it)
                    await stderr_done.wait()
                for s in (read_r, write_w, read_w, write_r):
                    await s.aclose()
            tg.cancel_scope.cancel()


_LINES = re.compile(rb"[^\n]*\n|[^\n]+")


async def relay_stderr(stream: Any, errlog: TextIO, upstream: str) -> None:
    """Copy an upstream's stderr to ``errlog``, each line prefixed ``upstream <name>: ``.

    Bytes as they come (a line cut across reads is prefixed once); until end of file or
    the stream closes. Written to ``errlog``'s binary buffer when it has one, else as
    text (invalid UTF-8 replaced).
    """
    prefix = f"upstream {upstream}: ".encode()
    start = True
    out = getattr(errlog, "buffer", None)
    while True:
        try:
            chunk = await stream.receive(CHUNK)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
                OSError):
            return
        said = bytearray()
        for m in _LINES.finditer(chunk):
            if start:
                said += prefix
            said += m.group()
            start = m.group().endswith(b"\n")
        with contextlib.suppress(OSError, ValueError):  # a closed stderr: dropped
            if out is not None:
                errlog.flush()
                out.write(bytes(said))
                out.flush()
            else:
                errlog.write(said.decode("utf-8", errors="replace"))
                errlog.flush()


async def _drain(process: Any) -> None:
    """Read and drop the rest of stdout (a server blocked writing cannot exit)."""
    with anyio.CancelScope(shield=True), contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
            OSError):
        while True:
            await process.stdout.receive(CHUNK)


async def _exited(process: Any, within_s: float) -> bool:
    with anyio.move_on_after(within_s):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False


async def _stop(process: Any) -> None:
    """Close stdin, wait :data:`STOP_GRACE_S`, then SIGTERM/SIGKILL the process group."""
    from mcp.os.posix.utilities import terminate_posix_process_tree
    for pipe in (process.stdin,):
        with contextlib.suppress(OSError, anyio.BrokenResourceError,
                                 anyio.ClosedResourceError):
            await pipe.aclose()
    if not await _exited(process, STOP_GRACE_S):
        await terminate_posix_process_tree(process, KILL_AFTER_S)
        if not await _exited(process, 2.0):
            log.warning("upstream process %d is still alive after SIGKILL; abandoned",
                        process.pid)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    if process.stderr is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError,
                                 anyio.ClosedResourceError):
            await process.stderr.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):  # else it warns at exit while a child holds a pipe
        with contextlib.suppress(PermissionError):
            close()
