"""Whether a client session can be sent an upstream's request now, and why not (#29).

The gateway forwards an upstream's ``elicitation/create``, ``sampling/createMessage``
and ``roots/list`` to the client session whose call raised it
(:mod:`icore.mcp._gateway_asks`). Sending one the client cannot receive used to leave
the upstream waiting the whole ``ask_timeout_s``: the SDK's streamable-HTTP server
drops a request for a session with no GET stream open (the gateway answers POSTs with
JSON, so that stream is the only way a request reaches an HTTP client). Such a request
is now answered at once with :func:`not_receivable`'s JSON-RPC error (``-32601``, the
method not supported by the client), saying why:

* the client declared no such capability in its ``initialize`` (``elicitation``,
  ``sampling``, ``roots``; URL-mode elicitation needs ``elicitation.url``);
* a sessionless (2026-07-28) client: its connection has no channel for a server's
  request;
* an HTTP session with no GET stream open (:class:`GetStreams`, seen by the gateway's
  HTTP front: a ``GET /mcp`` of that ``Mcp-Session-Id`` answered 200 and not ended). A
  session that never opened one yet gets up to :data:`FIRST_GET_GRACE_S` to open its
  first (:meth:`GetStreams.first_open`): the SDK's client opens it alongside its first
  request, so a question raised by that request could otherwise beat it.

Pure except :meth:`GetStreams.serve` (an ASGI wrapper).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

NOT_SUPPORTED = {"elicitation": "Elicitation not supported",
                 "sampling": "Sampling not supported",
                 "roots": "List roots not supported"}
"""The head of the answer (the SDK client's own words) when the client cannot be asked."""

ASKED = {"elicitation": "input (elicitation, ctx.elicit)",
         "sampling": "a completion (sampling, ctx.session.create_message)",
         "roots": "its roots (roots/list, ctx.session.list_roots)"}
"""What an upstream asked the client for, by kind (the call's error text)."""


FIRST_GET_GRACE_S = 5.0
"""Longest wait for a session's first GET stream when a question finds none, seconds."""

NO_GET_STREAM = ("its HTTP session has no GET stream open (the gateway answers POSTs with "
                 "JSON, so a request to the client can only go on that stream; the SDK "
                 "would drop it)")
"""Why an HTTP session with no GET stream open cannot be asked (:func:`cannot_receive`)."""

SEEN_MAX = 100_000
"""Most session ids :class:`GetStreams` remembers as having had a GET stream."""


class GetStreams:
    """The HTTP client sessions' open GET streams, by ``Mcp-Session-Id``.

    The gateway's HTTP front (:class:`~icore.mcp._http_shape.MessageShape`) runs each
    ``GET /mcp`` through :meth:`serve`: a stream counts as open from its ``200`` answer
    until the SDK's handler returns (the client closed it, the session ended).
    """

    def __init__(self) -> None:
        self._open: dict[str, int] = {}
        self._seen: dict[str, None] = {}  # sessions that had one (insertion order: oldest)
        self._waits: dict[str, anyio.Event] = {}

    def is_open(self, session_id: str) -> bool:
        """Whether session ``session_id`` has a GET stream open now."""
        return self._open.get(session_id, 0) > 0

    async def first_open(self, session_id: str, grace_s: float) -> bool:
        """Whether ``session_id`` has a GET stream open, waiting for its first one.

        A session that never had one gets up to ``grace_s`` seconds to open it (its
        opening ends the wait at once); one that had one and closed it: False at once.
        """
        if self.is_open(session_id):
            return True
        if session_id in self._seen:
            return False
        event = self._waits.setdefault(session_id, anyio.Event())
        with anyio.move_on_after(grace_s):
            await event.wait()
        if self._waits.get(session_id) is event and not event.is_set():
            del self._waits[session_id]
        return self.is_open(session_id)

    async def serve(self, app: Any, scope: Mapping[str, Any], receive: Any,
                    send: Any) -> None:
        """Run ``app`` for a ``GET`` request, counting its stream while it is open."""
        sid = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                    if k.lower() == b"mcp-session-id"), "")
        opened = False

        async def watch(message: Mapping[str, Any]) -> None:
            nonlocal opened
            if message.get("type") == "http.response.start" and sid and not opened \
                    and message.get("status") == 200:
                opened = True
                self._open[sid] = self._open.get(sid, 0) + 1
                self._seen[sid] = None
                while len(self._seen) > SEEN_MAX:
                    del self._seen[next(iter(self._seen))]
                if (event := self._waits.pop(sid, None)) is not None:
                    event.set()
            await send(message)

        try:
            await app(scope, receive, watch)
        finally:
            if opened:
                left = self._open.get(sid, 1) - 1
                if left > 0:
                    self._open[sid] = left
                else:
                    self._open.pop(sid, None)


def cannot_receive(session: Any, kind: str, params: Any,
                   streams: GetStreams | None) -> str | None:
    """Why the client of ``session`` cannot be sent a ``kind`` request now, else None.

    Args:
        session: the client's server-side session (the SDK's ``ServerSession``).
        kind: ``elicitation``, ``sampling`` or ``roots``.
        params: the request's params (an elicitation's ``mode``: ``form`` or ``url``).
        streams: the HTTP front's GET streams, or None (stdio: the pipe carries it).
    """
    caps = getattr(session, "client_capabilities", None)
    if caps is None:
        return "it declared no capabilities in its initialize"
    if kind == "elicitation":
        el = caps.elicitation
        if el is None:
            return "it declared no elicitation capability in its initialize"
        if getattr(params, "mode", "form") == "url" and el.url is None:
            return "it declared no URL-mode elicitation (elicitation.url) in its initialize"
        if getattr(params, "mode", "form") != "url" and el.form is None and el.url is not None:
            return "it declared URL-mode elicitation only, and this is a form"
    elif getattr(caps, kind, None) is None:
        return f"it declared no {kind} capability in its initialize"
    if session.can_send_request:  # its request's own channel (stdio; an SSE answer)
        return None
    conn = getattr(session, "_connection", None)
    if not getattr(conn, "has_standalone_channel", False):
        return ("its connection has no channel for a server's request (a sessionless "
                "2026-07-28 client)")
    sid = session_id(session)
    if streams is not None and sid and not streams.is_open(sid):
        return NO_GET_STREAM
    return None


def session_id(session: Any) -> str | None:
    """The HTTP ``Mcp-Session-Id`` of a client's server-side ``session``, else None."""
    sid = getattr(getattr(session, "_connection", None), "session_id", None)
    return sid if isinstance(sid, str) and sid else None


def not_receivable(kind: str, why: str) -> Any:
    """The JSON-RPC error an upstream gets for a ``kind`` request the client cannot get.

    ``METHOD_NOT_FOUND`` (-32601: the method is not available at the client), its
    message :data:`NOT_SUPPORTED`'s head (the SDK's own words) and ``why``.
    """
    import mcp_types as types
    return types.ErrorData(code=types.METHOD_NOT_FOUND,
                           message=f"{NOT_SUPPORTED[kind]} by the client: {why}")


def not_forwarded(message: str) -> str | None:
    """What an upstream asked (:data:`ASKED`) when ``message`` is such an answer, else None."""
    for kind, head in NOT_SUPPORTED.items():
        if message.startswith(head):
            return ASKED[kind]
    return None


__all__ = ["ASKED", "FIRST_GET_GRACE_S", "NOT_SUPPORTED", "NO_GET_STREAM", "GetStreams",
           "cannot_receive", "not_forwarded", "not_receivable", "session_id"]
