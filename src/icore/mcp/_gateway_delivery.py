"""Whether a forwarded call's result reached its client (QA qa-new13c S2, S3).

A call the gateway accepted runs to its end, so the trace holds every call the upstream
saw; its client, though, may cancel it (``notifications/cancelled``) or go away first.
:class:`Detached` runs each tool call in a task of the gateway's own, so a cancelled
request's handler ends at once and the SDK answers it as it answers any cancelled
request (over streamable HTTP, protocol up to 2025-11-25: ``-32800 Request cancelled``
on its POST at once; over stdio nothing, as MCP says), while the call goes on. Before,
the handler ran the call shielded: the POST stayed open until the call ended, and a
client closing its session meanwhile got a late error answer that crashed the SDK's
HTTP client (``ClosedResourceError`` in ``_handle_post_request``).
:class:`Delivery` says what the trace records of such a call: ``client_cancelled`` or
``client_gone`` and ``delivered: false`` on its result line.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import anyio
import anyio.abc

log = logging.getLogger("icore.mcp")

CANCELLED = "client_cancelled"
"""The result line's field of a call whose client sent ``notifications/cancelled``."""

GONE = "client_gone"
"""The result line's field of a call whose client went away before its result."""


class Delivery:
    """One tool call's client: whether it cancelled or went away before the result.

    Args:
        link: the HTTP request's client connection
            (:class:`~icore.mcp._gateway_asks.ClientLink`), None over stdio.

    Attributes:
        cancelled: the client sent ``notifications/cancelled`` for the request.
        abandoned: the request's handler ended before the result (a cancel, or the
            client session ended: an HTTP ``DELETE``, stdin closed).
    """

    __slots__ = ("abandoned", "cancelled", "link")

    def __init__(self, link: Any = None) -> None:
        self.link = link
        self.cancelled = False
        self.abandoned = False

    async def undelivered(self, sid: str, tool: str) -> dict[str, Any]:
        """The result line's fields when the result cannot reach the client, else ``{}``.

        ``{"client_cancelled": true, "delivered": false}`` after the client's cancel;
        ``{"client_gone": true, "delivered": false}`` when its request ended otherwise or
        its HTTP connection is closed (asked now, without waiting: the POST is still
        open), with one warning line on stderr naming the session and tool.
        """
        if self.cancelled:
            return {CANCELLED: True, "delivered": False}
        gone = self.abandoned
        if not gone and self.link is not None:
            gone = await self.link.gone_now()
            if gone:
                log.warning("an HTTP client went away mid-request (session %s: its "
                            "connection closed while %s ran); the gateway goes on: the "
                            "call ran to its end and is recorded client_gone", sid, tool)
        return {GONE: True, "delivered": False} if gone else {}


class Detached:
    """The gateway's tool calls, each in a task of its own (:meth:`run`).

    Args:
        wire: the gateway's :class:`~icore.mcp._gateway_order.Wire` (its ``in_flight``
            count keeps a call whose handler ended until the call ends).

    Attributes:
        tg: the gateway's task group (set while it serves; None: calls run in the
            handler's task).
    """

    def __init__(self, wire: Any) -> None:
        self.wire = wire
        self.tg: anyio.abc.TaskGroup | None = None
        self._running: dict[Hashable, Delivery] = {}
        self._n = 0
        self._idle = anyio.Event()
        self._idle.set()

    def __len__(self) -> int:
        """Calls running now."""
        return self._n

    async def run(self, fn: Callable[[], Awaitable[Any]], delivery: Delivery,
                  key: Hashable, on_abandon: Callable[[], object] = lambda: None) -> Any:
        """``await fn()`` in the gateway's task group; its value, or its exception.

        When the awaiting handler is cancelled first (the client's cancel, its session
        ended), ``delivery.abandoned`` is set, ``on_abandon`` called, the cancellation
        goes on (the SDK answers the request as cancelled) and ``fn`` runs to its end
        (an exception it raises then is logged at debug: nobody waits for it).
        ``key``: the request (client session, request id) a ``notifications/cancelled``
        names (:meth:`cancel`).
        """
        if self.tg is None:
            return await fn()
        box: dict[str, Any] = {}
        done = anyio.Event()
        self._running[key] = delivery
        self._n += 1
        self._idle = anyio.Event()

        async def task() -> None:
            try:
                box["value"] = await fn()
            except Exception as exc:
                box["error"] = exc
                if delivery.abandoned:
                    log.debug("a call its client left failed", exc_info=True)
            finally:
                done.set()
                if self._running.get(key) is delivery:
                    del self._running[key]
                if delivery.abandoned:
                    self.wire.in_flight -= 1
                self._n -= 1
                if not self._n:
                    self._idle.set()

        self.tg.start_soon(task)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            if not done.is_set():
                delivery.abandoned = True
                self.wire.in_flight += 1  # still in flight: a stop waits for it
                on_abandon()
            raise
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def cancel(self, key: Hashable) -> None:
        """The client cancelled request ``key``: its call, if running, is marked so."""
        d = self._running.get(key)
        if d is not None:
            d.cancelled = True

    def listen(self, server: Any, host: Any) -> Any:
        """Serve ``notifications/cancelled`` at the SDK ``server`` of gateway ``host``.

        The SDK cancels the request's handler itself; here the call is marked
        cancelled (:meth:`cancel`, keyed ``(session id, str(request id))``).

        Returns:
            ``server``.
        """
        from mcp_types import CancelledNotificationParams

        async def cancelled(ctx: Any, params: Any) -> None:
            if params.request_id is not None:
                self.cancel((host.view(ctx).sid, str(params.request_id)))
        server.add_notification_handler("notifications/cancelled",
                                        CancelledNotificationParams, cancelled)
        return server

    async def wait(self) -> None:
        """Until no call runs, shielded (the gateway stops only then: each is recorded)."""
        with anyio.CancelScope(shield=True):
            await self._idle.wait()




async def run_detached(host: Any, ctx: Any, sid: str,
                       run: Callable[[Delivery], Awaitable[Any]],
                       leave: Callable[[], Awaitable[None]]) -> Any:
    """``run(delivery)``, shielded, in a task of the gateway ``host``'s (:class:`Detached`).

    A client that goes away mid-call (a dropped connection, a cancel) does not cut the
    call short: it runs to its end (each upstream request is bounded by its timeout)
    and is recorded, so the trace holds every call the upstream saw; its own task lets
    a cancelled request be answered at once, as the SDK answers one (QA qa-new13c), and
    its result line say it was never delivered. ``leave``: awaited when it ends.
    """
    from icore.mcp._gateway_asks import CLIENT_GONE
    delivery = Delivery(CLIENT_GONE.get())
    rid = getattr(ctx, "request_id", None)

    async def call() -> Any:
        with anyio.CancelScope(shield=True):
            try:
                return await run(delivery)
            finally:
                await leave()

    def abandoned() -> None:  # no progress for it, and no answer (MCP) a stop waits for
        host.progress.forget(ctx)
        if host.wire.stdio is not None:
            host.wire.stdio.dropped(rid)
    return await host.wire.detached.run(call, delivery, (sid, str(rid)), on_abandon=abandoned)


__all__ = ["CANCELLED", "GONE", "Delivery", "Detached", "run_detached"]
