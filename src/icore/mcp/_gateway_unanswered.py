"""A forwarded call the upstream never answered: its effect open, or plainly failed (h35gw).

A protected call the gate authorized and sent whose upstream then fails without an
answer - the upstream's ``timeout_s`` passed (a stdio server is relaunched), its process
died mid-call, the HTTP connection dropped after the request was sent, an answer that is
no JSON-RPC answer - may have made its effect before it failed (a card charged, then the
process died). So, as an error result without ``error_means_no_effect``
(:mod:`icore.mcp._gateway_outcome`), its **outcome is unknown**:

- the client gets an ``isError`` result that says so in the outcome-unknown wording
  (:func:`~icore.workspace.check_first`: check its effect, i.e. read the declared
  resources, before calling again), ``_meta`` ``{"icore/upstream": {"upstream": ...,
  "may_have_run": true}}``;
- the session's reads of D(a) are spent (:meth:`~icore.mcp._facts.FactBook.execute`'s
  ``open_effect``): the same call from the same read is refused ``not_read`` until the
  model reads again;
- the trace keeps the call authorized, failed with ``may_have_run: true`` (``icore
  audit``: ``outcome unknown``; ``--fail-on unknown`` fails).

A call whose client cancelled it (its own timeout) or went away runs on to its end at
the upstream (:mod:`icore.mcp._gateway_delivery`); answered or not, the agent never saw
its result, so its reads are spent too (:func:`not_delivered`).

``error_means_no_effect`` does not apply: it speaks of the server's *error results*; a
call it never answered is no such result. A request that surely never left (an HTTP
connection that could not be opened; :attr:`UpstreamError.may_have_run` False) is a
plain failure, the reads kept. A JSON-RPC error answer means the upstream refused it
(no effect), unless the upstream asked the client something during the call (it was
running the call's body).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from icore.mcp._gateway_outcome import write_uris
from icore.mcp._gateway_refusal import error_result
from icore.mcp._upstream_answer import upstream_refused
from icore.mcp._upstream_failed import MAY_HAVE_RUN, UpstreamError
from icore.workspace import check_first


def effect_open(exc: Exception, *, reached: bool, asked: bool) -> bool:
    """Whether ``exc``, raised by a forwarded ``tools/call``, leaves its effect open.

    Args:
        exc: what the forward raised.
        reached: the call was handed to its upstream connection (False: the gate path
            or the connection failed first: never sent).
        asked: the upstream asked the client something during the call (its body ran).

    Returns:
        True for an :class:`UpstreamError` that says it may have run (sent, no answer),
        for any other failure after the call was handed over except a JSON-RPC error
        answer, and for a JSON-RPC error after the upstream asked the client.
    """
    if isinstance(exc, UpstreamError):
        return exc.may_have_run
    if not reached:
        return False
    return asked or not upstream_refused(exc)


def spent_error(exc: Exception) -> str:
    """The failure of an unanswered call as the workspace keeps it (``Type: message``).

    What the refusal of a repeat quotes (:func:`~icore.workspace._unknown.spent_detail`):
    the first clause of the message, without the gateway's advice.
    """
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    head = msg.split(f"; {MAY_HAVE_RUN}")[0]
    return f"no answer from its upstream ({head})"[:300]


def unknown_text(tool: str, said: str, depends_on: Any, args: Mapping[str, Any]) -> str:
    """What the model reads of a protected call sent without an answer: outcome unknown.

    ``said``: what happened (the upstream's failure, its advice ``MAY_HAVE_RUN`` taken
    off); ``depends_on``: the tool's declared D(a) (filled from ``args``), named as the
    resources to read again.
    """
    said = said.split(f"; {MAY_HAVE_RUN}")[0]
    uris, _ = write_uris(depends_on, args)
    names = ", ".join(uris or [str(d) for d in depends_on])
    return (f"{said}; the call was sent and got no valid answer, so {tool} may have run: its "
            f"outcome is unknown: {check_first(tool)} (read {names} again first: the read "
            "this call was authorized by no longer backs a call)")


def not_delivered(delivery: Any) -> str | None:
    """Why an answered call's result never reached its client, else None.

    ``delivery``: the call's :class:`~icore.mcp._gateway_delivery.Delivery`. The client
    cancelled the request (its own timeout) or went away while the upstream ran it: the
    agent never saw the result and may call again, so, as the trace says (``icore
    audit``: outcome unknown), the session's reads of D(a) are spent.
    """
    if delivery.cancelled:
        return "its result never reached the client (the client cancelled the request)"
    if delivery.abandoned or delivery.gone:
        return "its result never reached the client (the client went away first)"
    return None


def upstream_failed(gw: Any, sid: str, name: str, args: Mapping[str, Any], task: str,
                    upstream: str, exc: UpstreamError, spec: Any,
                    lost: Mapping[str, Any]) -> Any:
    """The answer (and trace line) of a forwarded call whose upstream failed: ``exc``.

    Sent and not answered (``exc.may_have_run``): it may have run, never a clean refusal
    (#25); a protected one (``spec``: its ``ToolSpec``) in the outcome-unknown wording
    (:func:`unknown_text`). Not sent: a plain failure. ``lost``: the result line's
    undelivered fields (:meth:`~icore.mcp._gateway_delivery.Delivery.undelivered`).
    """
    ran = {"may_have_run": True} if exc.may_have_run else {}
    said = exc.message
    if ran and spec is not None:
        said = unknown_text(name, said, spec.depends_on, args)
    gw.trace.call(sid, name, args, f"UPSTREAM FAILED: {said}", error=True, task=task,
                  **ran, **lost)
    return error_result(said, meta={"icore/upstream": {"upstream": upstream, **ran}}
                        if ran else None)


__all__ = ["effect_open", "not_delivered", "spent_error", "unknown_text",
           "upstream_failed"]
