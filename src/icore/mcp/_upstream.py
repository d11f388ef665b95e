"""One upstream MCP server: its client connection, kept alive, each request bounded.

The connection (the SDK's ``ClientSession`` over :mod:`icore.mcp._upstream_stdio` or
``streamable_http_client``) lives in a supervisor task of the gateway's task group. A
request that does not answer within the upstream's ``timeout_s`` fails with
:class:`UpstreamError` (the SDK cancels it upstream; a stdio server is then relaunched,
as its pipe would stay blocked by the late answer); a crashed upstream fails the requests
in flight, is marked down and is reconnected (a stdio server relaunched) on the next
request; one that exited while idle
(its receive stream ended, :meth:`Upstream.alive`) is relaunched before the next request
instead of failing it. Other upstreams and other sessions are unaffected. Over HTTP a
forwarded ``tools/call`` is posted directly in the SDK session's MCP session
(:mod:`icore.mcp._upstream_lean`, :meth:`Upstream.call_tool`), still bounded and retried
by :meth:`Upstream.request`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import anyio.abc

from icore.mcp._gateway_asks import CALLER, note_scope
from icore.mcp._gateway_manifest import UpstreamSpec
from icore.mcp._gateway_paths import launched
from icore.mcp._manifest_values import DEFAULT_CONNECT_TIMEOUT_S
from icore.mcp._upstream_failed import (
    READ_ONLY,
    UpstreamError,
    cause_line,
    root_cause,
    unanswered,
)
from icore.mcp._upstream_http import (
    DRAIN_S,
    KEEPALIVE_EXPIRY_S,
    TRANSPORT_FAILED,
    TRANSPORT_FAILED_TEXT,
    keepalive_http_client,
)
from icore.mcp._upstream_stdio import ANSWER_INVALID, ANSWER_TOO_BIG

log = logging.getLogger("icore.mcp")

T = TypeVar("T")


def connect_bound_s(spec: UpstreamSpec) -> float:
    """Bound of launching ``spec`` and its ``initialize``, seconds.

    Its ``connect_timeout_s``, else the larger of 30 s and its ``timeout_s``.
    """
    return spec.connect_timeout_s or max(spec.timeout_s, DEFAULT_CONNECT_TIMEOUT_S)


class _SessionLost(Exception):
    """The HTTP upstream no longer knows the gateway's session (404): reconnect."""


class Upstream:
    """A kept-alive client connection to one upstream server.

    Args:
        name: the upstream's name in the manifest.
        spec: its :class:`~icore.mcp.UpstreamSpec`.
        on_notification: awaited with ``(upstream name, notification)`` for every
            notification the upstream sends (``notifications/resources/updated``, ...).
        max_message: the longest message read from an upstream, bytes (the
            manifest's ``max_message_mb``): a longer answer fails its request (#29).
        callbacks: the connection's ``ClientSession`` callbacks (the upstream's
            questions to the client: :meth:`~icore.mcp._gateway_asks.Asks.callbacks`).
    """

    def __init__(self, name: str, spec: UpstreamSpec,
                 on_notification: Callable[[str, Any], Awaitable[None]],
                 max_message: int = 16 << 20,
                 callbacks: Mapping[str, Any] | None = None) -> None:
        self.name, self.spec, self.max_message = name, spec, max_message
        self.callbacks = dict(callbacks or {})
        self.on_notification = on_notification
        self.session: Any = None
        self.capabilities: Any = None
        self.instructions: str | None = None
        """The upstream's ``instructions`` from its answer to ``initialize``."""
        self.generation = 0
        self.watch_epoch = 0
        """Bumped whenever the channel that carries this upstream's notifications opens or
        is lost (a connection; over HTTP also the standalone GET stream)."""
        self.watch_live = False
        """True while that channel is open: notifications sent now reach the gateway."""
        self.write_epoch = 0
        """Bumped when a request that may write (not in :data:`READ_ONLY`) is sent and
        again when it ends: a read made before or during it is no longer trusted (the
        upstream may notify the change it made only after answering)."""
        self.session_lost = False
        """Set when the HTTP upstream answered 404 to the session id (it restarted)."""
        self.http_session: bool | None = None
        """HTTP: whether the upstream's answer to ``initialize`` gave an ``Mcp-Session-Id``
        (False: a stateless server, which has no GET stream to notify on); None: stdio."""
        self.http_client: Any = None
        """HTTP: the connection's ``httpx2.AsyncClient`` (:func:`keepalive_http_client`)."""
        self._inbox: Any = None
        """The connection's receive stream (its end: the upstream exited or closed it)."""
        self._lean: tuple[Any, Any] | None = None
        """HTTP: ``(session, LeanCalls)`` when its ``tools/call`` go the lean way."""
        self._lock = anyio.Lock()
        self._scope: anyio.CancelScope | None = None
        self._live: tuple[int, anyio.CancelScope] | None = None
        """``(generation, its scope)`` of the initialized connection :meth:`drop` ends."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._relaunched: dict[int, str] = {}
        """Connection generation -> the request whose timeout made the gateway end it
        (its requests in flight then fail: they say why, and that they may have run)."""

    def _watching(self, live: bool) -> None:
        """The notification channel opened (``live``) or was lost: a new epoch."""
        self.watch_epoch += 1
        self.watch_live = live

    def _lost(self) -> None:
        """The HTTP upstream answered 404 to the session id: the session is gone."""
        self.session_lost = True

    def _session_id(self, given: bool) -> None:
        """The HTTP upstream answered ``initialize`` with (``given``) or without a session id."""
        self.http_session = given

    def bind(self, tg: anyio.abc.TaskGroup) -> None:
        """Run connections in ``tg`` (the gateway's task group)."""
        self._tg = tg

    async def _handler(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.debug("upstream %s: transport error %r", self.name, message)
            return
        with contextlib.suppress(Exception):
            await self.on_notification(self.name, message)

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        from mcp.client import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        from icore.mcp._upstream_lean import http_streams, lean_wanted
        from icore.mcp._upstream_stdio import upstream_stdio

        CALLER.set(None)  # not the call that connected: its questions go to no caller
        spec = self.spec
        started = False
        mine = -1
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with contextlib.AsyncExitStack() as stack:
                    if spec.command is not None:  # linear, capped (_upstream_stdio)
                        r, w = await stack.enter_async_context(upstream_stdio(
                            launched(spec.command), spec.args, spec.env, spec.cwd,
                            limit=self.max_message, upstream=self.name, errlog=sys.stderr))
                    else:
                        assert spec.url is not None
                        client = keepalive_http_client(dict(spec.headers) or None,
                                                       on_listen=self._watching,
                                                       on_lost=self._lost,
                                                       on_session=self._session_id,
                                                       limit=self.max_message,
                                                       upstream=self.name)
                        event_max = self.max_message + 4096  # capped before (EventCap)
                        await stack.enter_async_context(client)
                        self.http_client = client
                        if self._tg is not None and lean_wanted(spec.url):
                            http, inject, r, w = await stack.enter_async_context(
                                http_streams(spec.url, client, event_max))
                        else:  # the SDK's plain transport: nothing private used
                            http = inject = None
                            r, w = await stack.enter_async_context(
                                streamable_http_client(spec.url, http_client=client,
                                                       max_sse_event_size=event_max))
                    session = ClientSession(r, w, message_handler=self._handler,
                                            **self.callbacks)
                    await stack.enter_async_context(session)
                    with anyio.fail_after(connect_bound_s(spec)):
                        init = await session.initialize()
                    if spec.url is not None and http is not None:
                        self._lean = self._lean_calls(session, http, inject, stack)
                    self.capabilities = init.capabilities
                    self.instructions = init.instructions
                    self.session = session
                    self._inbox = r
                    self.session_lost = False
                    self.generation += 1
                    mine = self.generation
                    self._live = (mine, scope)
                    if spec.command is not None:  # stdio: the pipe carries notifications
                        self._watching(True)
                    started = True
                    task_status.started(session)
                    await anyio.sleep_forever()
        except Exception as exc:
            if not started:
                task_status.started(exc)
            else:
                log.warning("upstream %s disconnected: %r", self.name, exc)
        finally:
            if not started or self.generation == mine:  # not a newer connection's state
                self.session = None
                self._lean = None
                self._inbox = None
                self._live = None
                self._watching(False)
            if not started:
                with contextlib.suppress(RuntimeError):
                    task_status.started(None)

    def _lean_calls(self, session: Any, transport: Any, inject: Any,
                    stack: contextlib.AsyncExitStack) -> tuple[Any, Any] | None:
        """``(session, LeanCalls)`` for this HTTP connection, or None (the SDK's way).

        Built only when :func:`~icore.mcp._upstream_lean.lean_wanted`; None when the session cannot
        (:meth:`~icore.mcp._upstream_lean.LeanCalls.usable`).
        """
        from icore.mcp._lean_http import LeanHttp, lean_origin
        from icore.mcp._upstream_lean import LeanCalls
        origin = lean_origin(self.spec.url or "")
        if origin is None or self._tg is None \
                or not LeanCalls.usable(session, transport, self.spec.headers):
            return None
        http = LeanHttp(*origin, dict(self.spec.headers), keepalive_s=KEEPALIVE_EXPIRY_S,
                        drain_s=DRAIN_S)
        stack.callback(http.close)
        return session, LeanCalls(http, transport, inject.send, self._lost,
                                  (TRANSPORT_FAILED, TRANSPORT_FAILED_TEXT),
                                  self._tg.start_soon, limit=self.max_message,
                                  upstream=self.name)

    async def call_tool(self, session: Any, name: str, args: Mapping[str, Any], meta: Any
                        ) -> dict[str, Any]:
        """``tools/call`` at the upstream in ``session``; the result as the wire dict.

        Over the lean path when this connection has one (HTTP), else the SDK's
        (:func:`~icore.mcp._gateway_forward.call_raw`). Run it inside :meth:`request`.

        Raises:
            MCPError: the upstream's JSON-RPC error, or a failed exchange.
        """
        from icore.mcp._gateway_forward import call_raw
        lean = self._lean
        if lean is not None and lean[0] is session:
            out: dict[str, Any] = await lean[1].call(session, name, args, meta)
            out.setdefault("resultType", "complete")  # as call_raw
            return out
        return await call_raw(session, name, args, meta)

    async def connect(self) -> Any:
        """The live client session, connecting (or relaunching) first when down.

        Raises:
            UpstreamError: the upstream cannot be reached or did not initialize.
        """
        s = self.session
        if s is not None and self.alive():
            return s
        async with self._lock:
            if self.session is not None and not self.alive():
                self.drop(self.generation)  # it exited while idle: relaunch, not fail
            if self.session is not None:
                return self.session
            if self._tg is None:
                raise UpstreamError("the gateway is not running", upstream=self.name)
            got = await self._tg.start(self._serve)
            if isinstance(got, BaseException) or got is None:
                from icore.mcp._upstream_probe import http_answer, probe_said
                said = None if self.spec.url is None else await http_answer(
                    self.spec.url, self.spec.headers, got)  # reached, but no MCP there
                raise UpstreamError(probe_said(self.name, said) if said else
                                    f"upstream {self.name} is unreachable: "
                                    f"{self._why(got)}", upstream=self.name)
            return got

    def _why(self, exc: BaseException | None) -> str:
        """What made a connection fail, in one line (the cause, not the task group)."""
        from mcp.shared.exceptions import MCPError
        if exc is None:
            return "it did not initialize"
        cause = root_cause(exc)
        if isinstance(cause, MCPError) and cause.code == TRANSPORT_FAILED:
            data = cause.error.data  # the HTTP transport's own failure (ConnectError: ...)
            if isinstance(data, dict) and isinstance(data.get("cause"), str):
                return str(data["cause"])
        if isinstance(cause, TimeoutError):
            return (f"it did not initialize within {connect_bound_s(self.spec):g} s "
                    "(its connect_timeout_s)")
        what = cause_line(cause)
        if self.spec.command is not None and isinstance(cause, FileNotFoundError) \
                and (self.spec.cwd is None or os.path.isdir(self.spec.cwd)):
            what = (f"its command {self.spec.command!r} was not found (neither on the "
                    f"PATH the upstream gets nor a file; give an absolute path) ({what})")
        if self.spec.command is not None and (isinstance(cause, MCPError)
                                              or isinstance(cause, anyio.EndOfStream)):
            what += (f" (the command {self.spec.command!r} exited or closed its stdout "
                     "before answering; its stderr is on the gateway's stderr)")
        return what

    def alive(self) -> bool:
        """False once the connection's receive stream has ended.

        A stdio upstream exited or closed its stdout, an HTTP transport closed: whatever
        it would have notified since is lost. Checked at each trust check and before
        each request.
        """
        inbox = self._inbox
        if self.session is None or inbox is None or self.session_lost:
            return False
        try:
            st = inbox.statistics()
        except Exception:  # not a memory stream: nothing to tell, the channel decides
            return True
        return bool(st.open_send_streams > 0)

    def drop(self, generation: int) -> None:
        """Close connection ``generation`` (a crash seen by a request); next request reconnects.

        A reconnection in progress (started by another request, not initialized yet, so
        not ``generation``) is left alone.
        """
        live = self._live
        if live is not None and live[0] == generation:
            live[1].cancel()
            self._live = None
            self.session = None
            self._lean = None
            self._watching(False)

    async def request(self, method: str, fn: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``fn(session)`` against the upstream, bounded by its ``timeout_s``.

        Raises:
            UpstreamError: unreachable, crashed during the request, or no answer in
                ``timeout_s`` (the request is cancelled upstream).
            MCPError: the upstream answered with a JSON-RPC error (passed on as is).
        """
        writes = method not in READ_ONLY
        if writes:
            self.write_epoch += 1
        try:
            for attempt in (1, 2):
                session = await self.connect()
                gen = self.generation
                try:
                    return await self._once(method, fn, session, gen)
                except _SessionLost:
                    # the server answered 404 to our session id: it restarted and never
                    # saw this request; a new session (initialized, subscribed again)
                    log.warning("upstream %s lost our MCP session (HTTP 404: restarted?); "
                                "reconnecting", self.name)
                    self.drop(gen)
                    if attempt == 2:
                        raise UpstreamError(f"upstream {self.name} lost the MCP session "
                                            f"again during {method}", upstream=self.name,
                                            method=method) from None
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            if writes:  # its change may be notified only after the answer
                self.write_epoch += 1

    def _failed(self, text: str, method: str, gen: int, *, sent: bool = True,
                **fields: Any) -> UpstreamError:
        """The error of a request sent on connection ``gen`` (:func:`unanswered`)."""
        return unanswered(text, upstream=self.name, method=method, sent=sent,
                          relaunched=self._relaunched.get(gen), **fields)

    async def _once(self, method: str, fn: Callable[[Any], Awaitable[T]], session: Any,
                    gen: int) -> T:
        """One attempt of :meth:`request` on connection ``gen``."""
        from mcp.shared.exceptions import MCPError

        from icore.mcp._upstream_lean import not_taken
        try:
            with anyio.fail_after(self.spec.timeout_s) as scope:
                note_scope(scope)  # paused while the upstream asks the client
                return await fn(session)
        except TimeoutError:
            restart = ""
            if self.spec.command is not None:
                # a stdio pipe is one queue: its late answer (a 20 MB result, a blocked
                # server) would hold every later request up; relaunch it instead (the
                # requests in flight on it fail: they are told why)
                self._relaunched[gen] = f"another request ({method}, {self.spec.timeout_s:g} s)"
                while len(self._relaunched) > 64:
                    self._relaunched.pop(next(iter(self._relaunched)))
                self.drop(gen)
                restart = "; it is relaunched for the next request"
                log.warning("upstream %s did not answer %s within %g s: relaunching it",
                            self.name, method, self.spec.timeout_s)
            raise self._failed(f"upstream {self.name} did not answer {method} within "
                               f"{self.spec.timeout_s:g} s{restart}", method, gen,
                               timeout_s=self.spec.timeout_s) from None
        except MCPError as exc:
            if exc.code in (ANSWER_TOO_BIG, ANSWER_INVALID) and isinstance(
                    d := exc.error.data, dict) and "request" in d:  # it ran
                raise UpstreamError(exc.message, upstream=self.name, method=method,
                                    may_have_run=method not in READ_ONLY,
                                    size=d.get("size"), limit=d.get("limit")) from None
            if self.spec.url is not None and not_taken(exc):  # this POST: 404 to our session
                raise _SessionLost() from None
            if exc.code == TRANSPORT_FAILED and self.spec.url is not None and \
                    exc.message.startswith(TRANSPORT_FAILED_TEXT):
                data = exc.error.data if isinstance(exc.error.data, dict) else {}
                cause = data.get("cause")  # the SDK's httpx2 error, or the lean path's
                raise self._failed(f"upstream {self.name} failed during {method}: "
                                   f"{exc.message}", method, gen, sent=not (
                                       data.get("sent") is False or (isinstance(cause, str)
                                       and cause.startswith(
                                           ("ConnectError", "ConnectTimeout"))))) from None
            if _is_connection_loss(exc):
                self.drop(gen)
                raise self._failed(f"upstream {self.name} failed during {method}: "
                                   f"{exc.message}{self._next(gen)}", method, gen) from None
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                OSError) as exc:
            self.drop(gen)
            raise self._failed(f"upstream {self.name} crashed during {method}: "
                               f"{type(exc).__name__}{self._next(gen)}", method, gen) from None

    def _next(self, gen: int) -> str:
        """What the gateway does after losing connection ``gen`` mid-request (said so).

        Nothing when the gateway itself ended it (a relaunch after a timeout: said by
        :func:`~icore.mcp._upstream_failed.unanswered`).
        """
        if gen in self._relaunched:
            return ""
        if self.spec.command is not None:
            return (" (its process exited or closed its stdout; its stderr is on the "
                    "gateway's stderr); it is relaunched for the next request")
        return "; the gateway reconnects for the next request"

    def close(self) -> None:
        """Stop the connection (the gateway's task group then finishes)."""
        if self._scope is not None:
            self._scope.cancel()


def _is_connection_loss(exc: Any) -> bool:
    from mcp_types import CONNECTION_CLOSED
    return bool(exc.code == CONNECTION_CLOSED)
