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

ABANDONED = "abandoned"
"""How a client left a call whose request's handler was cancelled (a cancel or its
session's end, not told apart yet: :meth:`Delivery.left`)."""


STILL_RUNNING = {
    CANCELLED: "no result yet: its client cancelled the request while its upstream ran it "
               "(it may still be running there)",
    GONE: "no result yet: its client went away while its upstream ran it (it may still be "
          "running there)",
    ABANDONED: "no result yet: its client cancelled the request or went away while its "
               "upstream ran it (it may still be running there)",
}
"""What a call's reads were spent by when its client left it mid-call (the quoted error)."""


class Delivery:
    """One tool call's client: whether it cancelled or went away before the result.

    Args:
        link: the HTTP request's client connection
            (:class:`~icore.mcp._gateway_asks.ClientLink`), None over stdio.

    Attributes:
        cancelled: the client sent ``notifications/cancelled`` for the request.
        abandoned: the request's handler ended before the result (a cancel, or the
            client session ended: an HTTP ``DELETE``, stdin closed).
        gone: the request's HTTP connection was found closed (:meth:`look`), its handler
            still running (a sessionless client that timed out: QA qa-new18b S1).
        keys: D(a) of the protected call once authorized and sent (:meth:`arm`).
    """

    __slots__ = ("_spend", "abandoned", "cancelled", "gone", "keys", "link", "tool")

    def __init__(self, link: Any = None) -> None:
        self.link = link
        self.cancelled = False
        self.abandoned = False
        self.gone = False
        self.keys: frozenset[str] = frozenset()
        self.tool = ""
        self._spend: Callable[[str], object] | None = None

    def left(self) -> str | None:
        """How the client left the call: :data:`CANCELLED`, :data:`ABANDONED`, :data:`GONE`.

        None while it has not.
        """
        if self.cancelled:
            return CANCELLED
        return ABANDONED if self.abandoned else GONE if self.gone else None

    def arm(self, tool: str, keys: frozenset[str], spend: Callable[[str], object]) -> None:
        """The protected call ``tool`` of D(a) ``keys`` is authorized and sent.

        ``spend(why)`` is called once, as soon as its client leaves it (at once when it
        already has): its session's reads of ``keys`` are spent while it may still run,
        so a retry from the same read is refused (planfence: never act twice on one
        read; QA qa-new18b S1). ``why``: :data:`STILL_RUNNING`'s text.
        """
        self.tool, self.keys, self._spend = tool, keys, spend
        self.settle()

    def settle(self) -> None:
        """Spend the armed call's reads now if its client left it (once)."""
        how = self.left()
        if how is not None and self._spend is not None:
            spend, self._spend = self._spend, None
            spend(STILL_RUNNING[how])

    async def look(self, sid: str, tool: str) -> bool:
        """Whether the client is gone: its HTTP connection asked now, without waiting.

        Found gone: :attr:`gone` set, the reads spent (:meth:`settle`) and one warning
        line on stderr naming the session and tool.
        """
        if self.gone or self.link is None or not await self.link.gone_now():
            return self.gone
        self.gone = True
        log.warning("an HTTP client went away mid-request (session %s: its connection "
                    "closed while %s ran); the gateway goes on: the call runs to its end, "
                    "is recorded client_gone, and the session's reads of its facts are "
                    "spent", sid, tool)
        self.settle()
        return True

    async def undelivered(self, sid: str, tool: str) -> dict[str, Any]:
        """The result line's fields when the result cannot reach the client, else ``{}``.

        ``{"client_cancelled": true, "delivered": false}`` after the client's cancel;
        ``{"client_gone": true, "delivered": false}`` when its request ended otherwise or
        its HTTP connection is closed (:meth:`look`).
        """
        if self.cancelled:
            return {CANCELLED: True, "delivered": False}
        gone = self.abandoned or await self.look(sid, tool)
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
                delivery.settle()
            raise
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def cancel(self, key: Hashable) -> None:
        """The client cancelled request ``key``: its call, if running, is marked so."""
        d = self._running.get(key)
        if d is not None:
            d.cancelled = True
            d.settle()

    async def look(self, sid: str) -> None:
        """Ask each running call of session ``sid`` whether its HTTP client is gone.

        A sessionless client (a bearer token, no MCP session) whose connection closed
        mid-call sends no cancel: its call is found gone here, when the session's next
        call arrives, and its reads spent before that call's gate (QA qa-new18b S1).
        """
        for k, d in list(self._running.items()):
            if _of(k, sid) and d.link is not None and not d.left():
                await d.look(sid, d.tool or "a call")

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




def _of(key: Hashable, sid: str) -> bool:
    """Whether the request ``key`` (session id, request id) is of session ``sid``."""
    return isinstance(key, tuple) and len(key) == 2 and key[0] == sid


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


__all__ = ["ABANDONED", "CANCELLED", "GONE", "STILL_RUNNING", "Delivery", "Detached",
           "run_detached"]
