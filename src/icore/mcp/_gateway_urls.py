"""URL-mode elicitation through the gateway: its completion goes to the session asked (#29).

MCP 2025-11-25 adds URL-mode elicitation: an upstream sends the client's human to a URL
(an OAuth flow, a payment) instead of a form, either mid-call (``elicitation/create``
with ``mode: "url"``, forwarded as every question: :mod:`icore.mcp._gateway_asks`) or by
answering a ``tools/call`` with the JSON-RPC error ``-32042`` (URL elicitation required,
its ``data.elicitations`` listing the URLs). When the interaction ends out of band, the
upstream sends ``notifications/elicitation/complete`` with the elicitation's id. The
gateway's connection to an upstream is shared by all its client sessions, so
:class:`UrlElicitations` remembers, per upstream and elicitation id, the client session
the URL went to, and passes the completion to that session only (never to another
session: the id is the upstream's, not a secret, but it names one user's interaction).

A completion is dropped, with a trace line saying why, when its id was never forwarded
(or forgotten: at most :data:`KEPT` ids are kept per gateway, oldest first), when its
session is gone, or when that session's protocol version has no such notification (the
2026-07-28 protocol removed it, with the ids: a client there retries on its own).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icore.mcp._session_log import GatewayTrace

log = logging.getLogger("icore.mcp")

KEPT = 1024
"""Most URL elicitations remembered (upstream and id -> session), oldest dropped first."""

COMPLETE = "notifications/elicitation/complete"


class UrlElicitations:
    """Which client session each forwarded URL elicitation went to (one per gateway).

    Args:
        trace: the gateway's trace (each completion passed on or dropped).
    """

    def __init__(self, trace: GatewayTrace) -> None:
        self.trace = trace
        self._to: OrderedDict[tuple[str, str], tuple[Any, str]] = OrderedDict()

    def sent(self, upstream: str, elicitation_id: str | None, session: Any, sid: str) -> None:
        """A URL elicitation ``elicitation_id`` of ``upstream`` went to ``session``."""
        if not isinstance(elicitation_id, str):
            return
        self._to[(upstream, elicitation_id)] = (session, sid)
        self._to.move_to_end((upstream, elicitation_id))
        while len(self._to) > KEPT:
            self._to.popitem(last=False)

    def required(self, upstream: str, session: Any, sid: str, error: Any) -> list[str]:
        """``upstream`` answered a call of ``session`` with ``-32042``: its URLs went there.

        Args:
            upstream: the upstream's name.
            session: the calling client's server-side session.
            sid: that session's id in the trace.
            error: the upstream's error (``MCPError``: its ``data.elicitations``).

        Returns:
            The URLs, as the trace shows them (the error itself is passed on as sent).
        """
        data = getattr(getattr(error, "error", None), "data", None)
        items = data.get("elicitations") if isinstance(data, Mapping) else None
        urls = []
        for item in items if isinstance(items, list) else ():
            if isinstance(item, Mapping):
                self.sent(upstream, item.get("elicitationId"), session, sid)
                urls.append(str(item.get("url", ""))[:500])
        return urls

    def then(self, rest: Callable[[str, Any], Awaitable[None]]
             ) -> Callable[[str, Any], Awaitable[None]]:
        """An upstream's notification handler: :meth:`completed`, else ``rest``'s."""
        async def notified(upstream: str, message: Any) -> None:
            if not await self.completed(upstream, message):
                await rest(upstream, message)
        return notified

    async def completed(self, upstream: str, message: Any) -> bool:
        """Pass ``upstream``'s ``notifications/elicitation/complete`` to its session.

        Returns:
            True when ``message`` is such a notification (handled: passed on or dropped,
            traced), False for any other notification.
        """
        if getattr(message, "method", None) != COMPLETE:
            return False
        import mcp_types as types
        from mcp_types import methods
        eid = str(getattr(message.params, "elicitation_id", ""))
        to = self._to.pop((upstream, eid), None)
        said = f"upstream {upstream} completed URL elicitation {eid[:100]!r}"
        if to is None:
            self.trace.note("gateway", f"{said}; not passed on: no client session was sent "
                            "that elicitation (or it was forgotten)")
            return True
        session, sid = to
        version = str(getattr(session, "protocol_version", None) or "2025-11-25")
        try:
            methods.parse_server_notification(COMPLETE, version, {"elicitationId": eid})
        except KeyError:
            self.trace.note(sid, f"{said}; not passed on: the client's protocol {version} has "
                            "no notifications/elicitation/complete")
            return True
        try:
            await session.send_notification(types.ElicitCompleteNotification(
                params=types.ElicitCompleteNotificationParams(elicitation_id=eid)))
        except Exception as exc:  # its session closed meanwhile: best effort, as notified
            self.trace.note(sid, f"{said}; not passed on: the client's session is gone "
                            f"({str(exc)[:200] or type(exc).__name__})")
            return True
        self.trace.note(sid, f"{said}; passed on to the client")
        return True


def url_required_error(error: Any) -> Any:
    """An ``MCPError`` carrying the upstream's ``-32042`` as sent (code, message, data)."""
    from mcp.shared.exceptions import MCPError
    e = error.error
    return MCPError(e.code, e.message, e.data)


URL_REQUIRED = -32042
"""JSON-RPC code of an upstream's "URL elicitation required" answer to a ``tools/call``."""


__all__ = ["COMPLETE", "KEPT", "URL_REQUIRED", "UrlElicitations", "url_required_error"]
