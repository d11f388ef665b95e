"""The causal order of a session's reads and calls at the gateway (QA r6-oa D1).

A client plans a protected call from the reads it had *received* when it sent the call.
The gateway cannot see the model's messages, but it sees its own wire: a read can count
for a call's plan only if the gateway had finished writing that read's response to the
transport before it received the call's request. A read answered later (a sibling tool
of the same model message, run concurrently by the client) never counts: the call is
refused ``not_read`` as the in-process fence refuses it (workspace ``turn``).

Each request is an :class:`Exchange`: the moment its request arrived and the moment its
response was written, both ticks of one gateway-wide counter (:func:`tick`), so "before"
is exact on the event loop (no clock). The stdio transport stamps them in
:func:`icore.mcp._stdio_lines.stdio_streams` (:class:`StdioOrder`); streamable HTTP in
:class:`OrderMiddleware` (one request per POST: the gateway answers JSON). A client may
also name its model message: ``params._meta["icore/turn"]`` (:data:`TURN_META`); reads
of one turn never count for calls of the same turn, nor for calls that name no turn.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

from icore.mcp._gateway_delivery import Detached

TURN_META = "icore/turn"
"""The ``params._meta`` key naming the client's model turn (a string or an integer)."""

_TICKS = itertools.count(1)


def tick() -> int:
    """The next moment of the gateway's wire order (strictly increasing, this process)."""
    return next(_TICKS)


class Exchange:
    """One client request and its response, as the gateway's transport saw them.

    Used as the stamp of the reads a request made and as the ``turn`` of a protected
    call (:meth:`counts`, the workspace's hook).

    Args:
        received: the tick its request arrived at.
        turn: the client's model turn (``_meta["icore/turn"]``), or None.

    Attributes:
        sent: the tick its response was written to the transport (None: not yet).
    """

    __slots__ = ("claimed", "received", "sent", "turn")

    def __init__(self, received: int, turn: Hashable | None = None) -> None:
        self.received = received
        self.turn = turn
        self.sent: int | None = None
        self.claimed = False

    def __repr__(self) -> str:
        return f"Exchange(received={self.received}, sent={self.sent}, turn={self.turn!r})"

    def answered(self) -> None:
        """Its response was just written to the transport (the first time counts)."""
        if self.sent is None:
            self.sent = tick()

    def counts(self, stamp: Any) -> bool:
        """Whether a read stamped ``stamp`` counts for a call of this exchange.

        True only for a read whose response was written before this request arrived and,
        when the read names a turn, only for a call that names another one: a read (or a
        refusal's hand-over) of turn ``t`` never counts for a call without a turn, which
        may be a sibling of turn ``t`` (fail closed, #25). A read with no exchange (None:
        not made through a client request) counts; any other stamp counts when it
        differs.
        """
        if stamp is None:
            return True
        if not isinstance(stamp, Exchange):
            return bool(stamp != self)
        if stamp is self:
            return False
        if stamp.turn is not None and (self.turn is None or stamp.turn == self.turn):
            return False
        return stamp.sent is not None and stamp.sent < self.received


CURRENT: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar(
    "icore_mcp_exchange", default=None)
"""The HTTP request being handled (set by :class:`OrderMiddleware`; the SDK runs the
handler in the context of the task that received the request)."""


def turn_of(meta: Any) -> Hashable | None:
    """``_meta["icore/turn"]`` of a request (a string or an integer), else None.

    Raises:
        ValueError: the key is present with another type (a typed client error).
    """
    if not meta:
        return None
    raw = meta if isinstance(meta, Mapping) else getattr(meta, "model_extra", None) or {}
    if TURN_META not in raw:
        return None
    v = raw[TURN_META]
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise ValueError(f"_meta[{TURN_META!r}] must be a string or an integer, "
                         f"not {type(v).__name__}")
    return v


class StdioOrder:
    """The arrival and answer moments of the stdio client's requests, by JSON-RPC id."""

    def __init__(self) -> None:
        self.pending: dict[Any, Exchange] = {}
        self.seen = 0
        """Requests read so far (a stopping gateway waits for a quiet moment)."""

    def arrived(self, rid: Any, at: int) -> None:
        """Request ``rid`` arrived at tick ``at`` (its line was read)."""
        self.pending[rid] = Exchange(at)
        self.seen += 1

    def answered(self, rid: Any) -> None:
        """The response to ``rid`` was just written to the pipe."""
        ex = self.pending.pop(rid, None)
        if ex is not None:
            ex.answered()

    def dropped(self, rid: Any) -> None:
        """Request ``rid`` will not be answered (its client cancelled it: MCP sends none)."""
        self.pending.pop(rid, None)

    def take(self, rid: Any) -> Exchange | None:
        """The exchange of request ``rid`` being handled (None: unknown id)."""
        ex = self.pending.get(rid)
        if ex is None or ex.claimed:
            return None
        ex.claimed = True
        return ex


class OrderMiddleware:
    """ASGI middleware: each HTTP request an :class:`Exchange` (arrival, answer written).

    Args:
        app: the streamable-HTTP ASGI app.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.busy = 0
        """POST requests (client messages) being served now."""
        self.seen = 0
        """POST requests received so far (a stopping gateway waits for a quiet moment)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve one ASGI request with its exchange in :data:`CURRENT`."""
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        ex = Exchange(tick())

        async def sent(message: Any) -> None:
            await send(message)
            if message.get("type") == "http.response.body" and not message.get("more_body"):
                ex.answered()

        post = scope.get("method") == "POST"  # not the long-lived GET stream
        self.busy += post
        self.seen += post
        token = CURRENT.set(ex)
        try:
            await self.app(scope, receive, sent)
        finally:  # an answer never sent (a client gone) stays unsent: its reads never count
            CURRENT.reset(token)
            self.busy -= post


class Wire:
    """A gateway's source of request exchanges (the transport's stamps).

    Attributes:
        stdio: the stdio pipes' :class:`StdioOrder` (None: not serving stdio pipes).
    """

    def __init__(self) -> None:
        self.stdio: StdioOrder | None = None
        self.detached = Detached(self)
        """The gateway's tool calls, each in a task of its own (a cancel ends its request)."""
        self.in_flight = 0
        """Requests (reads, tool calls) whose handler runs now (told on a stop signal)."""
        self._unstamped: set[Exchange] = set()
        self.stopped_at: int | None = None
        """The tick of the first stop signal (None: not stopping; :meth:`stop`)."""

    def stop(self) -> None:
        """The gateway stops (a first SIGINT/SIGTERM): later tool calls are refused."""
        if self.stopped_at is None:
            self.stopped_at = tick()

    def refuses(self, ex: Exchange | None) -> bool:
        """Whether a tool call of ``ex`` arrived after the stop (:meth:`stop`): refused.

        A call whose request arrived before the stop signal is in flight and runs to its
        end, even when its handler starts later; one that arrived after never runs.
        """
        return self.stopped_at is not None and (ex is None or ex.received > self.stopped_at)

    def exchange(self, ctx: Any) -> Exchange:
        """The :class:`Exchange` of the request a handler serves (``ctx``: its context).

        Stamped by the transport (stdio pipes, streamable HTTP); on any other transport
        (an in-memory client) it arrives now and is answered when :meth:`done` is called
        as its handler returns. Its turn is ``ctx.meta["icore/turn"]``.

        Raises:
            ValueError: ``_meta["icore/turn"]`` is neither a string nor an integer.
        """
        ex: Exchange | None = None
        if self.stdio is not None:
            ex = self.stdio.take(getattr(ctx, "request_id", None))
        else:
            cur = CURRENT.get()
            if cur is not None and not cur.claimed:
                cur.claimed = True
                ex = cur
        if ex is None:
            ex = Exchange(tick())
            ex.claimed = True
            self._unstamped.add(ex)
        ex.turn = turn_of(getattr(ctx, "meta", None))
        return ex

    def done(self, ex: Exchange) -> None:
        """The handler of ``ex`` returned (answers an exchange no transport stamps)."""
        if ex in self._unstamped:
            self._unstamped.discard(ex)
            ex.answered()

    def handler(self, fn: Callable[[Any, Any, Exchange], Awaitable[Any]]
                ) -> Callable[[Any, Any], Awaitable[Any]]:
        """An SDK request handler ``(ctx, params)`` calling ``fn(ctx, params, exchange)``.

        A malformed ``_meta["icore/turn"]`` is answered as invalid params (``MCPError``).
        """
        async def handle(ctx: Any, params: Any) -> Any:
            try:
                ex = self.exchange(ctx)
            except ValueError as exc:
                from mcp.shared.exceptions import MCPError
                from mcp_types import INVALID_PARAMS
                raise MCPError(INVALID_PARAMS, str(exc)) from None
            self.in_flight += 1
            try:
                return await fn(ctx, params, ex)
            finally:
                self.in_flight -= 1
                self.done(ex)
        return handle
