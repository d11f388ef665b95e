"""An upstream's ``notifications/*/list_changed``, relayed to the gateway's clients.

QA qa-new15b S3: the gateway dropped them and advertised ``listChanged: false``, so a
client that caches the tool list (Claude Desktop, the Agents SDK's
``cache_tools_list=True``) never saw a tool added or removed until it reconnected.

Now the gateway advertises ``listChanged: true`` for tools, resources and prompts
(:func:`advertise`; protocol revisions with sessions: a 2026-07-28 session's
capabilities are the SDK's own). On such a notification
(:class:`ListRelay`) the gateway lists its upstreams again, which checks the manifest
against the new list (:meth:`~icore.mcp._gateway_watch.ManifestWatch.recheck`: a
protected tool gone or back is logged and noted in the trace, and a tool that appeared
while a protected name vanished is blocked as the name's possible rename), notes the
change in the trace, then tells every client session it has seen.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("icore.mcp")

_KINDS = {"notifications/tools/list_changed": ("tools", "send_tool_list_changed"),
          "notifications/resources/list_changed": ("resources",
                                                   "send_resource_list_changed"),
          "notifications/prompts/list_changed": ("prompts", "send_prompt_list_changed")}
"""Notification method -> (capability, the SDK session's method that sends it on)."""


class ListRelay:
    """Relays upstreams' list changes to the client sessions (held by the gateway).

    Args:
        refresh: lists every upstream again (the gateway's ``refresh``; it rechecks the
            manifest).
        trace: the gateway's trace (a ``note`` per change).
        tasks: the gateway's task group now (None: not running): the listing runs
            there, never in the upstream's receive loop (which must read its answer).
    """

    def __init__(self, refresh: Callable[[], Awaitable[None]], trace: Any,
                 tasks: Callable[[], Any] = lambda: None) -> None:
        self._refresh = refresh
        self._trace = trace
        self._tasks = tasks
        self._sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def seen(self, session: Any) -> None:
        """Remember a client ``session`` (a request's ``ctx.session``) to notify."""
        conn = getattr(session, "_connection", None) or session
        try:
            self._sessions[conn] = session
        except TypeError:  # not weakly referable: not kept
            pass

    def then(self, rest: Callable[[str, Any], Awaitable[None]]
             ) -> Callable[[str, Any], Awaitable[None]]:
        """An upstream's notification handler: :meth:`changed`, else ``rest``'s."""
        async def notified(upstream: str, message: Any) -> None:
            if not await self.changed(upstream, message):
                await rest(upstream, message)
        return notified

    async def changed(self, upstream: str, message: Any) -> bool:
        """Handle ``upstream``'s list change: listed again, noted, told to every client.

        Returns:
            True when ``message`` is a ``notifications/{tools,resources,prompts}/
            list_changed`` (handled), False for any other notification.
        """
        got = _KINDS.get(str(getattr(message, "method", "")))
        if got is None:
            return False
        what, send = got
        self._trace.note("gateway", f"upstream {upstream} changed its {what} list; listed "
                         "again and passed on to the clients", upstream=upstream,
                         list_changed=what)
        tg = self._tasks()
        if tg is None:
            await self._relay(upstream, what, send)
        else:
            tg.start_soon(self._relay, upstream, what, send)
        return True

    async def _relay(self, upstream: str, what: str, send: str) -> None:
        try:
            await self._refresh()
        except Exception as exc:  # the next request lists again
            log.warning("listing again after %s's %s change failed: %r", upstream, what, exc)
        for session in list(self._sessions.values()):
            try:
                await getattr(session, send)()
            except Exception as exc:  # a gone client: dropped
                log.debug("%s to a client failed: %r", send, exc)
                self._sessions.pop(getattr(session, "_connection", None) or session, None)


def advertise(server: Any) -> None:
    """Make ``server`` advertise ``listChanged: true`` for tools, resources and prompts.

    The gateway's lists are its upstreams' and change whenever one does: an upstream
    that sends ``list_changed`` (the Python SDK's ``MCPServer`` sends it without
    declaring it), or one that restarts with other tools. Only for protocol revisions
    with sessions: for 2026-07-28 (change notifications only on
    ``subscriptions/listen``) the SDK's answer is kept.
    """
    plain = server.get_capabilities

    def get_capabilities(*args: Any, **kwargs: Any) -> Any:
        caps = plain(*args, **kwargs)
        if kwargs.get("protocol_version") is not None and _modern(kwargs["protocol_version"]):
            return caps
        update = {what: mine.model_copy(update={"list_changed": True})
                  for what in ("tools", "resources", "prompts")
                  if (mine := getattr(caps, what, None)) is not None}
        return caps.model_copy(update=update) if update else caps

    server.get_capabilities = get_capabilities


def _modern(version: str) -> bool:
    """True for a protocol revision without sessions (2026-07-28 and later)."""
    try:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS
    except ImportError:  # an SDK before them
        return False
    return version in MODERN_PROTOCOL_VERSIONS


__all__ = ["ListRelay", "advertise"]
