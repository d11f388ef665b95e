"""A fenced tool that failed after the gate authorized it is recorded as failed.

The gate decides before the tool runs; what the tool then does is the application's. A
tool that raises (or is cancelled: Ctrl-C, ``asyncio`` cancellation) used to leave the
guard before anything was recorded, so the audit lost an authorized, started action; a
framework that turns the exception into an error text for the model (the Agents SDK's
``failure_error_function``) made it look like a success (``exitcode: 0``).

:func:`catching` wraps the tool function so its exception comes back as a
:class:`Failed` value: the gate's decisions are recorded with the call as a failure
(``exitcode: 1``, ``failed: true``, the error), then :meth:`Failed.reraise` raises the
original exception (a handled failure gives the framework's text back instead).
:func:`body` also writes the call's decisions to the recorder's file before the body
runs (:mod:`icore.integrations._write_ahead`, #25).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from icore.errors import IntegrationError
from icore.fence import ActionResult, authorizing
from icore.integrations._failed import MAX_ERROR_CHARS as MAX_ERROR_CHARS
from icore.integrations._failed import Failed, NoEffect
from icore.integrations._failed import describe as describe
from icore.integrations._failed import message_of as message_of
from icore.integrations._write_ahead import retract, write_ahead
from icore.records import Lookup
from icore.workspace import WorkspaceError

if TYPE_CHECKING:
    from icore.integrations._recorder import RunRecorder


_CONTROL_FLOW = frozenset({("icore.integrations._approvals", "ApprovalChanged"),
                           ("icore.integrations.ag2._human", "StoppedAfterHuman"),
                           ("langgraph.errors", "GraphBubbleUp")})
"""Exceptions a tool raises on purpose (not failures): a fence-mode call that is not the
approved one, an AG2 tool stopped after its in-tool human question, LangGraph's
``interrupt()`` pause. They pass through unchanged."""


def _control_flow(exc: BaseException) -> bool:
    return any((c.__module__, c.__name__) in _CONTROL_FLOW for c in type(exc).__mro__)


def catching(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` returning :class:`Failed` instead of raising (sync or ``async def`` kept).

    Every exception is caught, ``KeyboardInterrupt`` and ``asyncio.CancelledError``
    too: the caller records the call and then raises it again (:meth:`Failed.reraise`).
    A tool's control-flow exceptions (``_CONTROL_FLOW``) pass through.
    """
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def acaught(**args: Any) -> Any:
            try:
                return await fn(**args)
            except BaseException as exc:  # raised again once recorded
                if _control_flow(exc):
                    raise
                return Failed(None, describe(exc), exc)

        return acaught

    @functools.wraps(fn)
    def caught(**args: Any) -> Any:
        try:
            return fn(**args)
        except BaseException as exc:  # raised again once recorded
            if _control_flow(exc):
                raise
            return Failed(None, describe(exc), exc)

    return caught


@functools.lru_cache(maxsize=1024)
def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except ValueError:  # no signature to check against
        return None


def body(fn: Callable[..., Any], rec: Any, tool: str,
         lookup: Callable[[], Lookup | None]) -> Callable[..., Any]:
    """``fn`` caught (:func:`~icore.integrations._tool_failed.catching`), lines first.

    When ``rec`` has a file, the call's lines are written before the body runs
    (:func:`~icore.integrations._write_ahead.write_ahead`); sync or ``async def`` kept.
    """
    caught = catching(fn)
    if rec is None or rec.journal is None:
        return caught

    def before() -> Failed | None:
        try:
            write_ahead(rec, tool, authorizing(), lookup())
        except IntegrationError as exc:
            why = (f"not run: the decision authorizing it could not be written to the "
                   f"run's trace ({exc})")
            return Failed(None, why, NoEffect(why), ran=False)
        return None

    if inspect.iscoroutinefunction(caught):
        @functools.wraps(caught)
        async def abody(**args: Any) -> Any:
            failed, ahead = before(), authorizing()
            try:
                return failed if failed is not None else await caught(**args)
            except BaseException as exc:  # a pause on purpose: no call of this attempt
                retract(rec, ahead, exc)
                raise

        return abody

    @functools.wraps(caught)
    def sbody(**args: Any) -> Any:
        failed, ahead = before(), authorizing()
        try:
            return failed if failed is not None else caught(**args)
        except BaseException as exc:  # a pause on purpose: no call of this attempt
            retract(rec, ahead, exc)
            raise

    return sbody


def check_fits(action: str, fn: Any, args: Any) -> None:
    """A plain function (no ``**kwargs``) must accept exactly ``args``.

    The workspace's own check before the gate, made here because :func:`catching` hides
    the function's parameters from it (so an authorized call never fails on them).

    Raises:
        WorkspaceError: the arguments do not fit (``action``, ``error``, ``args``).
    """
    code = getattr(fn, "__code__", None)
    if not isinstance(args, Mapping) or code is None or code.co_flags & inspect.CO_VARKEYWORDS:
        return  # a wrapper passing arguments on, a callable object, a builtin
    try:
        sig = _signature(fn)
    except TypeError:  # unhashable callable: no cache
        sig = _signature.__wrapped__(fn)
    try:
        if sig is not None:
            sig.bind(**args)
    except TypeError as exc:
        raise WorkspaceError("the call's arguments do not fit the tool function's "
                             "parameters", action=action, error=str(exc),
                             args=sorted(args)) from None


def record_ran(rec: RunRecorder, who: str, name: str, args: Mapping[str, Any], value: Any,
               replanned: bool) -> None:
    """Record an authorized call that ran: its result, or its failure (``exitcode`` 1)."""
    if isinstance(value, Failed) and not value.ran:  # authorized; its body never ran
        rec.tool_call(who, name, args, value.output, error=True, ran=False,
                      reason="not_run", error_text=value.error, replanned=replanned)
    elif isinstance(value, Failed):
        rec.tool_call(who, name, args, value.output, error=True, failed=True,
                      error_text=value.error, replanned=replanned)
    else:
        rec.tool_call(who, name, args, value, replanned=replanned)


def unwrapped(res: ActionResult) -> ActionResult:
    """``res`` with a failed tool's value as the model reads it.

    Raises:
        BaseException: the tool's own exception (a raised failure, after recording).
    """
    if not isinstance(res.value, Failed):
        return res
    return dataclasses.replace(res, value=res.value.reraise())
