"""A forwarded ``tools/call`` the upstream did not answer cleanly: traced and told.

Split from :mod:`icore.mcp._gateway_calls` (module size). :func:`no_answer`: an answer
that is no JSON-RPC answer (it may have run); :func:`refused_by_upstream`: a JSON-RPC
error (it did not run, unless the upstream asked the client something during the call).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from icore.mcp._client_reach import not_forwarded
from icore.mcp._gateway_refusal import error_result
from icore.mcp._gateway_resources import Route
from icore.mcp._gateway_unanswered import unknown_text
from icore.mcp._gateway_urls import URL_REQUIRED, url_required_error
from icore.mcp._session_log import GatewayTrace
from icore.mcp._upstream_answer import garbage_text
from icore.mcp._upstream_failed import MAY_HAVE_RUN


def no_answer(trace: GatewayTrace, sid: str, name: str, args: Mapping[str, Any], task: str,
               route: Route, exc: BaseException, spec: Any = None) -> Any:
    """A forwarded call whose answer was no JSON-RPC answer: it may have run (QA qa-new10c).

    Said so to the model (never "refused", no invitation to call again; a protected one,
    ``spec`` its ``ToolSpec``, in the outcome-unknown wording:
    :func:`~icore.mcp._gateway_unanswered.unknown_text`), traced ``may_have_run``
    (``icore audit``: outcome unknown), as a lost answer on stdio.
    """
    said = (f"upstream {route.upstream} sent no valid answer to {name} "
            f"({garbage_text(exc)}); {MAY_HAVE_RUN}")
    if spec is not None:
        said = unknown_text(name, said, spec.depends_on, args)
    trace.call(sid, name, args, f"UPSTREAM FAILED: {said}", error=True, task=task,
               may_have_run=True)
    return error_result(said, meta={"icore/upstream": {"upstream": route.upstream,
                                                        "may_have_run": True}})


def refused_by_upstream(gw: Any, ctx: Any, sid: str, name: str, args: Mapping[str, Any],
                         task: str, route: Route, exc: Any, asked: list[str]) -> Any:
    """A forwarded call the upstream answered with a JSON-RPC error ``exc``: traced.

    It did not run, unless the upstream asked the client something (``asked``: the
    kinds) during the call: then it was running the call's body (its question proves
    it), so its error does not mean it did not run: traced ``may_have_run``
    (``icore audit``: outcome unknown), never a clean refusal, as any failure of a
    started body (#29). A ``-32042`` (URL elicitation required) is raised again as sent,
    its URLs remembered for the calling session (:mod:`icore.mcp._gateway_urls`).
    """
    msg = getattr(exc, "message", None) or str(exc)
    if getattr(exc, "code", None) == URL_REQUIRED and not asked:
        # the client's human must open URLs first: the error passed on as sent
        urls = gw.asks.urls.required(route.upstream, ctx.session, sid, exc)
        gw.trace.call(sid, name, args, f"UPSTREAM ERROR: {msg} ({', '.join(urls)})",
                      error=True, task=task)
        raise url_required_error(exc) from None
    what = not_forwarded(msg)
    said = f"upstream {route.upstream} refused {name}: {msg}"
    if what is not None:  # the client cannot be asked
        said = (f"upstream {route.upstream} could not finish {name}: it asked the "
                f"client for {what}, which this client does not support or cannot "
                "receive (the icore gateway forwards such a request to the calling "
                f"client when it can); its error: {msg}")
    if not asked:  # it did not run the call
        gw.trace.call(sid, name, args, f"UPSTREAM ERROR: {msg}", error=True, task=task)
        return error_result(said)
    if what is None:
        said = (f"upstream {route.upstream} ended {name} with an error after it asked the "
                f"client for {' and '.join(asked)} during the call: {msg}")
    said = f"{said}; {MAY_HAVE_RUN}"
    gw.trace.call(sid, name, args, f"UPSTREAM FAILED: {said}", error=True, task=task,
                  may_have_run=True)
    return error_result(said, meta={"icore/upstream": {"upstream": route.upstream,
                                                        "may_have_run": True}})


__all__ = ["no_answer", "refused_by_upstream"]
