"""Serve the gateway to MCP clients: stdio (what Claude Desktop and Cursor launch) or HTTP.

:func:`serve_stdio` speaks JSON-RPC on this process's stdin/stdout (logs go to stderr);
:func:`serve_http` serves the streamable-HTTP transport at ``http://HOST:PORT/mcp``
(one gateway session per MCP session id; each answer a JSON response, not a per-request
SSE stream: the gateway sends nothing during a request, and notifications such as
``resources/updated`` go on the session's standalone stream), printing one ready line
on stderr.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import anyio

from icore._extras import require
from icore.mcp._client_reach import GetStreams
from icore.mcp._gateway import Gateway
from icore.mcp._gateway_manifest import GatewayManifest
from icore.mcp._gateway_order import OrderMiddleware, StdioOrder
from icore.mcp._http_shape import MessageShape
from icore.mcp._stdio_lines import stdio_streams
from icore.mcp._stdio_pipes import FileIn, FileOut, pipe_stdio

log = logging.getLogger("icore.mcp")


async def serve_stdio(manifest: GatewayManifest) -> None:
    """Run the gateway over stdio until the client closes stdin or sends SIGTERM.

    Raises:
        MissingExtra: the ``mcp`` extra is not installed.
    """
    require("mcp.server.stdio", "mcp", feature="icore mcp")
    limit = int(manifest.max_message_mb * 2**20)
    async with Gateway(manifest) as gw, pipe_stdio(limit) as files, \
            anyio.create_task_group() as tg:
        gw.single_client = True
        if manifest.trace is None:  # stderr only: stdout is the protocol (#29)
            print(UNTRACED, file=sys.stderr, flush=True)
        run = anyio.CancelScope()
        # not pipes (a terminal, a file): read and written by a worker thread, with the
        # same line cap and answers to malformed lines (#29; the SDK's stdio_server had none)
        wire = files or (FileIn(0, limit), FileOut(1))
        tg.start_soon(_stop_on_signal, gw, files[0].stop if files else run.cancel)
        with run:
            gw.wire.stdio = StdioOrder()
            async with stdio_streams(*wire, order=gw.wire.stdio, limit=limit) as (read, write):
                await gw.server.run(read, write, gw.server.create_initialization_options())
        # calls whose client left (stdin closed, a cancel) run to their end: the signals
        # are still served meanwhile (a first SIGTERM waits for them, a second exits)
        await gw.wire.detached.wait()
        tg.cancel_scope.cancel()


async def _stop_on_signal(gw: Gateway, stop: Callable[[], object]) -> None:
    """SIGTERM or SIGINT (Ctrl-C) stops the stdio gateway; a second one at once (QA r7 D1).

    The first signal says on stderr how many calls are in flight; once their results are
    written to stdout and no request came for :data:`QUIET_S` (a client's follow-up to its
    last result, e.g. the SDK's ``tools/list`` to check the result's output schema; at
    most :data:`QUIET_MAX_S`; tool calls arriving meanwhile are refused), the input is
    ended (``stop``) as if the client closed stdin: the gateway closes its trace (with
    its ``termination`` line) and its upstreams, exit 0.
    A second signal stops at once (:func:`stop_now`): exit 130 (SIGINT) or 143
    (SIGTERM). The SDK's stdio client closes stdin, then SIGTERMs the gateway's process
    group 2 s later. Nothing is installed off the main thread (no signals there).
    """
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return

    async def drain() -> None:
        order = gw.wire.stdio
        pending = order.pending if order is not None else {}

        def busy() -> bool:  # handled now, or answered but not written
            return bool(gw.wire.in_flight or pending)

        if busy():  # answer the client's follow-ups too (#29, qa-new9b)
            await wait_quiet(lambda: order.seen if order is not None else 0, busy, 0.02)
        stop()

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:
            first = True
            async for sig in signals:
                if not first:
                    stop_now(gw, sig)
                first = False
                first_signal(gw, sig)
                tg.start_soon(drain)


def first_signal(gw: Gateway, sig: int) -> None:
    """Say on stderr that the gateway stops on ``sig`` and what it waits for."""
    import signal
    gw.wire.stop()  # tool calls arriving from now on are refused
    n = gw.wire.in_flight
    name = signal.Signals(sig).name
    if n:
        print(f"icore mcp: {name}: waiting for {n} call(s) in flight (new tool calls are "
              "refused); Ctrl-C again to stop now", file=sys.stderr, flush=True)
    else:
        print(f"icore mcp: {name}: stopping", file=sys.stderr, flush=True)


def stop_now(gw: Gateway, sig: int) -> None:
    """A second stop signal: exit at once, ``128 + sig`` (130 SIGINT, 143 SIGTERM).

    The trace keeps what was written (each decision is on disk before its call is
    forwarded) and gets no terminal marker: the audit says the run did not end normally.
    The OpenTelemetry spans already ended are flushed first (at most about 1 s).
    Upstream processes see their stdin close and exit.
    """
    import signal
    print(f"icore mcp: {signal.Signals(sig).name} again: stopping now with "
          f"{gw.wire.in_flight} call(s) in flight", file=sys.stderr, flush=True)
    if gw.otel is not None:
        try:
            gw.otel.flush(timeout_s=1.0)
        except Exception:  # stopping now regardless: the spans are best effort here
            pass
    os._exit(128 + sig)


class StaticTokens:
    """An SDK ``TokenVerifier`` over the manifest's ``http.clients`` (bearer tokens).

    A token is compared by its SHA-256 (constant time); a match is an ``AccessToken``
    whose ``client_id`` is the client's name: the principal the gateway ties that
    client's reads to its calls by when a request has no MCP session (2026-07-28).

    Args:
        digests: client name -> SHA-256 of its token (bytes).
    """

    def __init__(self, digests: dict[str, bytes]) -> None:
        self.digests = dict(digests)

    async def verify_token(self, token: str) -> Any:
        """The client's ``AccessToken`` for ``token``, or None (401)."""
        import hashlib
        import hmac

        from mcp.server.auth.provider import AccessToken
        got = hashlib.sha256(token.encode("utf-8")).digest()
        name = None
        for n, want in self.digests.items():  # every entry compared: no early exit
            if hmac.compare_digest(got, want):
                name = n
        if name is None:
            return None
        return AccessToken(token=token, client_id=name, scopes=[])


def token_verifier(manifest: GatewayManifest) -> StaticTokens | None:
    """The verifier of the manifest's ``http.clients`` (None: no clients declared).

    Raises:
        GatewayManifestError: a ``token_env`` variable is unset or empty, or two clients
            have the same token (both named, with their lines).
    """
    clients = manifest.http.clients
    if not clients:
        return None
    digests: dict[str, bytes] = {}
    for name, c in clients.items():
        if c.token_sha256 is not None:
            digests[name] = bytes.fromhex(c.token_sha256)
            continue
        assert c.token_env is not None
        value = os.environ.get(c.token_env, "")
        if not value:
            raise manifest.error(f"environment variable {c.token_env} (the token of client "
                                 f"{name!r}) is not set", "http", "clients", name,
                                 "token_env", variable=c.token_env)
        import hashlib
        digests[name] = hashlib.sha256(value.encode("utf-8")).digest()
    seen: dict[bytes, str] = {}
    for name, d in digests.items():  # one token, two clients: whose reads and rights?
        if (first := seen.setdefault(d, name)) != name:
            lines = [manifest.line_of("http", "clients", n) for n in (first, name)]
            raise manifest.error(f"clients {first!r} (line {lines[0]}) and {name!r} (line "
                                 f"{lines[1]}) have the same token: each client needs its "
                                 "own (the token is who a request is)", "http", "clients",
                                 name, clients=[first, name], lines=lines)
    return StaticTokens(digests)


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):  # type: ignore[misc]
        """uvicorn's server that stops on SIGTERM/SIGINT and returns.

        uvicorn raises a captured signal again once it has shut down, which kills the
        process before the gateway can close (its trace's last lines, the stores);
        here the gateway's own exit follows instead (``icore mcp`` exits 0).
        """

        gw: Gateway | None = None
        draining = False
        """A first stop signal came while calls were in flight (:func:`drain_http`)."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.gw is not None:  # the first says what it waits for, a second stops
                if self.should_exit or self.draining:  # at once (exit 128 + sig)
                    stop_now(self.gw, sig)
                first_signal(self.gw, sig)
                if self.gw.wire.in_flight:  # keep serving open sessions meanwhile
                    self.draining = True
                    return
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    return Server


QUIET_S = 1.0
"""After a stop signal, the gateway (stdio or HTTP) stops once no call is in flight and no
request came for this long, seconds (a client's follow-up to its last result)."""

QUIET_MAX_S = 10.0
"""At most this long after the last call in flight ended, seconds (clients still talking)."""


async def drain_http(server: Any, gw: Gateway, order: OrderMiddleware) -> None:
    """Stop the HTTP server once a stop signal's calls in flight are answered (#29).

    After a first SIGINT/SIGTERM with calls in flight (``server.draining``), the server
    keeps answering its open sessions: the calls in flight finish and their results reach
    their clients, with what a client asks after them (the MCP SDK's client lists the
    tools to check a result against the tool's output schema); every tool call arriving
    after the signal is refused ``gateway_stopping``. Once no call is in flight and no
    request arrived for :data:`QUIET_S` (at most :data:`QUIET_MAX_S` after the last call
    ended), the listener closes as uvicorn's own stop does.
    """
    while not server.draining:
        await anyio.sleep(0.1)  # uvicorn polls its should_exit as often
    await wait_quiet(lambda: order.seen, lambda: bool(gw.wire.in_flight or order.busy), 0.05)
    server.should_exit = True


async def wait_quiet(seen: Callable[[], int], busy: Callable[[], bool], poll_s: float) -> None:
    """Return once a stopping gateway's clients are done talking.

    Done: nothing is ``busy`` and no request came (``seen`` unchanged) for
    :data:`QUIET_S`, or :data:`QUIET_MAX_S` passed since the last busy moment. ``busy``
    is polled every ``poll_s`` seconds.
    """
    while True:
        while busy():
            await anyio.sleep(poll_s)
        ended, n = anyio.current_time(), seen()
        await anyio.sleep(QUIET_S)
        if (seen() == n and not busy()) or anyio.current_time() - ended >= QUIET_MAX_S:
            return


def _http_parser() -> str:
    """The HTTP/1.1 parser uvicorn runs: ``httptools`` (C, llhttp) when installed, else ``h11``.

    The ``mcp`` extra installs httptools: h11 (pure Python) was ~8% of the gateway's CPU
    per call over HTTP, the server's and the forward's parsing together (#25 item 7).
    Both parse the same HTTP/1.1; only uvicorn's side changes here.
    """
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    return "httptools"


_GONE_LOGGERS = ("mcp.server.streamable_http", "mcp.server.streamable_http_manager",
                 "uvicorn.error")
"""Loggers that print a traceback when an HTTP client goes away mid-request."""


def _gone(exc: BaseException | None) -> BaseException | None:
    """The stream error behind ``exc`` when it means "the client went away", else None.

    anyio's ``ClosedResourceError``, ``BrokenResourceError`` or ``EndOfStream`` (the
    session's streams closed under a request), found in ``exc``, its cause or context
    chain, or an exception group's members.
    """
    gone_types = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    stack, seen = [exc], set()
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, gone_types):
            return e
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
        stack.extend((e.__cause__, e.__context__))
    return None


class ClientGoneFilter(logging.Filter):
    """One log line, no traceback, when an HTTP client went away mid-request (QA r3 U6).

    The SDK's streamable-HTTP transport logs ``anyio.ClosedResourceError`` with its
    traceback when a client disconnects (or ends its session) while a request of it is
    being handled, and uvicorn then logs the failed error answer again. Such a record
    becomes one WARNING line naming the error; uvicorn's follow-up (a ``RuntimeError``
    caused by it: the answer could not be sent) is dropped. Any other record passes
    unchanged. The gateway itself is unaffected: an accepted call still runs to its end
    and is recorded.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False for uvicorn's follow-up record; True (maybe rewritten) otherwise."""
        exc = record.exc_info[1] if record.exc_info else None
        gone = _gone(exc)
        if gone is None:
            return True
        if record.name == "uvicorn.error" and exc is not gone:
            return False  # "Exception in ASGI application" after the SDK's own line
        what = record.getMessage()
        record.msg = "an HTTP client went away mid-request (%s: %s); the gateway goes on"
        record.args = (type(gone).__name__, what)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


UNTRACED = ("icore mcp: warning: the manifest has no trace: line, so this run is not "
            "recorded (icore audit has nothing to read); add trace: FILE to record it")
"""The warning of a gateway without a trace: at stdio start, after the HTTP ready line."""


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def check_bindable(host: str, port: int) -> None:
    """Bind ``host:port`` once and let it go, as the HTTP server will (SO_REUSEADDR).

    Raises:
        OSError: naming ``host:port`` and why (a port in use, an address that is not
            this machine's, a name that does not resolve).
    """
    import socket
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        fam, kind, proto, _, addr = infos[0]
        with socket.socket(fam, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(addr)
    except OSError as exc:  # socket.gaierror is one
        raise OSError(exc.errno, listen_problem(host, port, exc)) from None


def listen_problem(host: str, port: int, exc: OSError | None = None) -> str:
    """Why ``host:port`` cannot be listened on, naming the address (IPv6 bracketed).

    A port in use (``EADDRINUSE``) says so and what to do; another error gives its text.
    """
    where = f"{_url_host(host)}:{port}"
    if exc is not None and exc.errno == errno.EADDRINUSE:
        return (f"cannot listen on {where}: the address is already in use (another "
                "process listens there): stop it or give --http another port (PORT 0: "
                "one the system picks)")
    why = "" if exc is None else f": {exc.strerror or exc}"
    return f"cannot listen on {where}{why}"


def open_warning(host: str, tools: dict[str, Any]) -> str | None:
    """The stderr warning of a gateway served beyond loopback without ``http.clients``.

    None when ``host`` is a loopback address (or ``localhost``) or no listed tool may be
    destructive (MCP's default: a tool is, unless its annotations say ``readOnlyHint``
    or ``destructiveHint: false``). QA qa-mcp7 S4 (#25).
    """
    import ipaddress
    try:
        if host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback:
            return None
    except ValueError:  # a host name: it may resolve beyond this machine
        pass
    risky = sorted(n for n, t in tools.items() if not (
        (a := getattr(t, "annotations", None)) is not None
        and (a.read_only_hint or a.destructive_hint is False)))
    if not risky:
        return None
    shown = ", ".join(risky[:5]) + (f" and {len(risky) - 5} more" if len(risky) > 5 else "")
    return (f"icore mcp: warning: serving on {host} (beyond this machine) without "
            "http.clients (no bearer tokens): anyone who reaches the port can call "
            f"{len(risky)} tool(s) that may be destructive ({shown}); declare http.clients "
            "in the manifest or bind 127.0.0.1")


async def serve_http(manifest: GatewayManifest, host: str = "127.0.0.1", port: int = 8808
                     ) -> None:
    """Run the gateway over streamable HTTP at ``http://host:port/mcp`` until cancelled.

    With ``http.clients`` in the manifest every request must carry one of their bearer
    tokens (401 otherwise); a request without an MCP session (protocol 2026-07-28) is
    then that client's session. Without it, such a request's protected calls are refused.

    Args:
        manifest: the gateway manifest.
        host: interface to bind (``127.0.0.1``: loopback only).
        port: TCP port (0..65535; 0: one the system picks, announced on stderr as
            ``icore mcp: serving http://HOST:PORT/mcp`` with the port bound).

    Raises:
        MissingExtra: the ``mcp`` extra (or uvicorn) is not installed.
        OSError: the port cannot be bound (in use, not this machine's address), checked
            before the upstreams start.
        GatewayManifestError: a client's ``token_env`` is not set.
    """
    require("mcp.server", "mcp", feature="icore mcp")
    uvicorn = require("uvicorn", "mcp", feature="icore mcp --http")

    verifier = token_verifier(manifest)
    _Server = _server_class()
    check_bindable(host, port)  # before the upstreams start: a port in use is said at once
    cap = int(manifest.max_message_mb * 2**20)
    async with Gateway(manifest) as gw:
        # the SDK's own body bound (4 MiB by default, a plain-text 413) raised to the
        # manifest's cap: MessageShape answers every body over it as JSON-RPC (QA qa-new10c)
        if verifier is None:
            app = gw.server.streamable_http_app(host=host, json_response=True,
                                                max_request_body_size=cap)
        else:
            from mcp.server.auth.settings import AuthSettings
            app = gw.server.streamable_http_app(
                host=host, json_response=True, token_verifier=verifier,
                max_request_body_size=cap,
                auth=AuthSettings.model_validate({
                    "issuer_url": f"http://{_url_host(host)}:{port}",
                    "resource_server_url": None}))
        gw.asks.streams = GetStreams()  # a question goes only to a session with one open
        shape = MessageShape(app, max_body=cap, verifier=verifier, streams=gw.asks.streams)
        order = OrderMiddleware(shape)
        config = uvicorn.Config(order,
                                host=host, port=port,
                                log_level="warning",
                                lifespan="on", http=_http_parser(),
                                access_log=False, proxy_headers=False)
        server = _Server(config)
        server.gw = gw

        async def ready() -> None:
            while not server.started:
                await anyio.sleep(0.02)
            # the port bound, not the one asked: with port 0 the system picks it
            bound = next((sk.getsockname()[1] for srv in getattr(server, "servers", ())
                          for sk in (srv.sockets or ())), port)
            print(f"icore mcp: serving http://{_url_host(host)}:{bound}/mcp", file=sys.stderr,
                  flush=True)
            if verifier is None and (said := open_warning(host, gw.tool_defs)):
                print(said, file=sys.stderr, flush=True)
            if manifest.trace is None:  # QA qa-new10c S4: said, not silently unrecorded
                print(UNTRACED, file=sys.stderr, flush=True)

        quiet = ClientGoneFilter()
        for name in _GONE_LOGGERS:
            logging.getLogger(name).addFilter(quiet)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ready)
                tg.start_soon(drain_http, server, gw, order)
                try:
                    await server.serve()
                except SystemExit:  # uvicorn's start-up failure (bound since the check)
                    raise OSError(f"the HTTP server could not listen on "
                                  f"{_url_host(host)}:{port} (see the line above)") from None
                tg.cancel_scope.cancel()
        finally:
            for name in _GONE_LOGGERS:
                logging.getLogger(name).removeFilter(quiet)
