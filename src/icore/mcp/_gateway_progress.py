"""Progress of a forwarded ``tools/call``: the upstream's notifications, relayed.

MCP (2025-06-18, Utilities: Progress): a request whose ``_meta`` carries a
``progressToken`` may be answered with ``notifications/progress`` naming that token,
before its result. The gateway's connection to an upstream is shared by all its client
sessions, so a client's own token is not sent on (two clients may pick the same one):
each forwarded call that asks for progress gets a token of the gateway's
(``icore-progress-<n>``), and the upstream's notifications naming it are sent to the
calling client with the client's token, related to the client's request (on that
request's own channel where it has one). A notification naming a token the gateway did
not hand out, from another upstream, or arriving after its call was answered, is dropped
(as the SDK's client drops a progress notification it has no request for). Progress is
not traced: it says how far a call got, never what it did.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio

from icore.mcp._gateway_forward import meta_dict

log = logging.getLogger("icore.mcp")

TOKEN_PREFIX = "icore-progress-"
"""The head of every progress token the gateway hands an upstream."""

SEND_TIMEOUT_S = 5.0
"""Longest wait to hand one progress notification to a client, s; then it is dropped."""


def client_token(meta: Any) -> str | int | None:
    """The ``progressToken`` of a client request's ``_meta`` (dict or model), if valid.

    MCP: a token is a string or an integer (a bool is neither).
    """
    if not meta:
        return None
    raw = meta_dict(meta)
    # the SDK's parsed ``_meta`` names it by its field (``progress_token``), the wire by
    # its alias
    token = raw.get("progressToken", raw.get("progress_token"))
    if isinstance(token, bool) or not isinstance(token, str | int):
        return None
    return token


class _Route:
    """Where one upstream token's progress goes: the client's session, token, request."""

    __slots__ = ("ctx", "token", "upstream")

    def __init__(self, ctx: Any, token: str | int, upstream: str) -> None:
        self.ctx, self.token, self.upstream = ctx, token, upstream


class ProgressRelay:
    """The gateway's progress tokens in flight: upstream token -> the calling client.

    One per gateway; used from its event loop only.
    """

    def __init__(self) -> None:
        self._routes: dict[str, _Route] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        """Calls in flight whose progress is relayed."""
        return len(self._routes)

    @contextlib.contextmanager
    def relayed(self, ctx: Any, meta: Any, upstream: str, forwarded: Any
                ) -> Iterator[Any]:
        """The ``_meta`` to send ``upstream`` for a call whose client ``_meta`` is ``meta``.

        Args:
            ctx: the client request's context (its ``session`` and ``request_id``).
            meta: the client request's ``_meta`` (dict, model or None).
            upstream: the upstream's name in the manifest.
            forwarded: the ``_meta`` the gateway sends on without progress (a dict or
                None, :func:`~icore.mcp._gateway_forward.forward_meta`).

        Yields:
            ``forwarded`` with a fresh gateway token as ``progressToken`` while the call is
            in flight, when the client asked for progress; else ``forwarded`` as it is.
            Leaving the block ends the relay: later notifications naming that token are
            dropped.
        """
        token = client_token(meta)
        if token is None:
            yield forwarded
            return
        mine = f"{TOKEN_PREFIX}{next(self._ids)}"
        self._routes[mine] = _Route(ctx, token, upstream)
        try:
            yield {**(forwarded or {}), "progressToken": mine}
        finally:
            self._routes.pop(mine, None)

    def forget(self, ctx: Any) -> None:
        """Relay nothing more to the request of ``ctx``: its client cancelled it or left.

        MCP: no message about a cancelled request; the call itself goes on.
        """
        for token in [t for t, r in self._routes.items() if r.ctx is ctx]:
            del self._routes[token]

    async def relay(self, upstream: str, message: Any) -> bool:
        """Send an upstream's progress notification to its caller; whether it was one.

        Returns:
            True when ``message`` is a ``notifications/progress`` (relayed, or dropped when
            no call of ``upstream`` in flight handed out its token, or its ``progress`` or
            ``total`` is no finite number: JSON cannot carry it); False for any other
            notification (the caller handles it). A client that cannot be reached within
            :data:`SEND_TIMEOUT_S` misses that notification; the call goes on.
        """
        if getattr(message, "method", None) != "notifications/progress":
            return False
        params = message.params
        route = self._routes.get(str(params.progress_token))
        if route is None or route.upstream != upstream:
            log.debug("upstream %s: progress for no call in flight dropped", upstream)
            return True
        if not all(math.isfinite(x) for x in (params.progress, params.total)
                   if x is not None):  # 1e400: no JSON number says it (sent as null)
            log.debug("upstream %s: progress that is no finite number dropped", upstream)
            return True
        session = route.ctx.session
        try:
            with anyio.fail_after(SEND_TIMEOUT_S):
                await session.send_progress_notification(
                    route.token, params.progress, params.total, params.message,
                    related_request_id=route.ctx.request_id
                    if session.can_send_request else None)
        except Exception:  # the client is gone or slow: progress is best effort
            log.debug("progress for %r not delivered", route.token, exc_info=True)
        return True

    def before(self, handler: Callable[[str, Any], Awaitable[None]]
               ) -> Callable[[str, Any], Awaitable[None]]:
        """An upstream notification handler: progress relayed here, the rest to ``handler``.

        Args:
            handler: awaited with ``(upstream name, notification)`` for every notification
                that is not ``notifications/progress``.
        """
        async def on_notification(upstream: str, message: Any) -> None:
            if not await self.relay(upstream, message):
                await handler(upstream, message)
        return on_notification
