"""Why a request to an upstream got no answer, and whether it may have run (#25).

:class:`UpstreamError` is what the gateway's callers see; :func:`unanswered` builds it
for a request that was sent: one that may write (not read-only) may have run at the
upstream, so it says so and is never a clean refusal. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import anyio

from icore.mcp._gateway_manifest import GatewayError

READ_ONLY = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe",
                       "resources/list", "resources/templates/list", "tools/list",
                       "prompts/list", "ping"})
"""Requests that change nothing at the upstream; any other (``tools/call``,
``prompts/get``, ...) may write, so it bumps :attr:`~icore.mcp.Upstream.write_epoch`."""


class UpstreamError(GatewayError):
    """An upstream MCP server is down, crashed, or did not answer in time.

    Fields: ``upstream``, ``method``, ``timeout_s`` (for a timeout), ``may_have_run``
    (True when the request was sent and may write - a ``tools/call``, a
    ``prompts/get`` - so the upstream may have run it: never a clean refusal).
    """

    @property
    def may_have_run(self) -> bool:
        """Whether the upstream may have run the request before it failed."""
        return bool(self.fields.get("may_have_run"))


MAY_HAVE_RUN = ("the upstream may have run it (it was sent), so the gateway does not send "
                "it again: check its effect before calling again")
"""What a failed request that was sent and may write says (:attr:`UpstreamError.may_have_run`)."""


def unanswered(text: str, *, upstream: str, method: str, sent: bool = True,
               relaunched: str | None = None, **fields: Any) -> UpstreamError:
    """The error of a request to ``upstream`` that got no answer.

    Args:
        text: what happened (``upstream trip failed during tools/call: ...``).
        upstream: the upstream's name.
        method: the JSON-RPC method.
        sent: False when the request never left (an HTTP connection not opened).
        relaunched: the request whose timeout made the gateway end the connection this
            one was in flight on (named in the text), or None.
        fields: more fields (``timeout_s``).

    Returns:
        The :class:`UpstreamError`; ``may_have_run`` set (and said) when it was sent and
        ``method`` may write.
    """
    if relaunched is not None and not fields.get("timeout_s"):
        text += (f" (the gateway relaunched the upstream's process while this request "
                 f"was in flight: {relaunched} timed out)")
    if sent and method not in READ_ONLY:
        fields["may_have_run"] = True
        if "may have run" not in text:
            text += f"; {MAY_HAVE_RUN}"
    return UpstreamError(text, upstream=upstream, method=method, **fields)


def root_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group, else ``exc``.

    anyio task groups wrap a transport's failure as ``ExceptionGroup: unhandled errors
    in a TaskGroup``; the leaf is the cause a user can act on.
    """
    seen = 0
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions and seen < 64:
        leaves = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (leaves or list(exc.exceptions))[0]
        seen += 1
    return exc


def cause_line(exc: BaseException) -> str:
    """``<type>: <message>`` of ``exc``'s root cause (:func:`root_cause`), one line."""
    cause = root_cause(exc)
    text = getattr(cause, "message", None) or str(cause) or "no detail"
    return f"{type(cause).__name__}: {text}"


__all__ = ["MAY_HAVE_RUN", "READ_ONLY", "UpstreamError", "cause_line", "root_cause",
           "unanswered"]
