"""What a fenced AG2 call hands back: the model's arguments in, tool results and errors out.

The gate of :func:`~icore.integrations.ag2.fenced_tool` reads the model's own JSON from
the ``ToolCallEvent`` and answers with AG2 events: the tool's ``ToolResultEvent`` when the
call ran (wrapped in :class:`Result`, whose text the recorder keeps), else a
``ToolErrorEvent`` whose text is what the model reads (a block carrying
:class:`~icore.errors.ActionBlocked`, arguments that do not fit the schema, a setup
mistake): a reason it can act on, never a traceback (planfence App. A.3).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import logging
from copy import copy
from typing import Any

from ag2.events import ToolCallEvent, ToolErrorEvent, ToolResult
from pydantic import ValidationError

from icore.errors import ActionBlocked, IntegrationError
from icore.fence import GateDecision, Reason
from icore.integrations import ArgNormalizer
from icore.integrations._approvals import canon
from icore.integrations._arg_problems import invalid_args_message, non_finite
from icore.integrations._failed import Failed, leaves_open
from icore.integrations._json_args import bounded_value, read_json
from icore.integrations._json_args import given_args as args_as_given
from icore.integrations._rerun import unknown_outcome_text
from icore.integrations._tool_failed import describe
from icore.workspace import ReplanFailed

_log = logging.getLogger("icore.integrations.ag2")


class Result:
    """A tool's result event, with its text as ``content`` (what the recorder keeps)."""

    def __init__(self, event: Any) -> None:
        self.event = event
        if isinstance(event, ToolErrorEvent):
            self.content = f"Error: {type(event.error).__name__}: {event.error}"
        else:
            parts = getattr(getattr(event, "result", None), "parts", None) or []
            self.content = "\n".join(str(getattr(p, "content", p)) for p in parts)

    def __str__(self) -> str:
        return self.content


BODY: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "icore_ag2_body", default=None)
"""Set by the gate around one call: the tool's body marks it when it is entered."""


def entering(fn: Any) -> Any:
    """``fn`` that marks :data:`BODY` when it is entered (same sync/async kind).

    Generators are returned as they are (their body is counted as run).
    """
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return fn

    def mark() -> None:
        seen = BODY.get()
        if seen is not None:
            seen.append(True)

    if inspect.iscoroutinefunction(fn):
        async def entered_async(*a: Any, **k: Any) -> Any:
            mark()
            return await fn(*a, **k)
        return functools.wraps(fn)(entered_async)

    def entered(*a: Any, **k: Any) -> Any:
        mark()
        return fn(*a, **k)
    return functools.wraps(fn)(entered)


async def run_body(call_next: Any, event: Any, context: Any) -> Result | Failed:
    """``call_next(event, context)`` (the layers after the gate, then the tool), ran.

    As :func:`ran` sees it: whether the tool's body was entered is noted (:data:`BODY`).
    """
    seen: list[bool] = []
    token = BODY.set(seen)
    try:
        out = await call_next(event, context)
    finally:
        BODY.reset(token)
    return ran(out, body=bool(seen))


def ran(event: Any, body: bool = True) -> Result | Failed:
    """What an authorized call's body gave back: its :class:`Result`, or a failure.

    AG2 turns the body's exception (a ``RuntimeError``, a ``HeadConflict`` of the
    ``running_call().basis`` pattern, in a sync or ``async def`` tool) into a
    ``ToolErrorEvent`` the model reads: that call failed after its authorization, so it
    comes back as :class:`~icore.integrations._failed.Failed` (recorded ``exitcode: 1``,
    issue 28; ``may_have_run``: the body started, so its outcome is unknown, unless it
    raised :class:`~icore.integrations.NoEffect`, QA qa-new12b S2) whose value is the
    event the model reads.
    ``body`` False: the tool's body was never entered (:data:`BODY`): an error event
    then came from a layer before it (AG2's own argument check, a policy middleware),
    and is :class:`Failed` with ``ran=False`` (recorded as not run, #28).
    A started body's failure that leaves the outcome open is told to the model as such
    (:func:`~icore.integrations._rerun.unknown_outcome_text`: it may have run, check its
    effect before calling again), not as AG2's bare traceback (QA qa-new13a S3: the model
    paid again).
    """
    result = Result(event)
    if isinstance(event, ToolErrorEvent):
        error = describe(event.error)
        open_ = body and leaves_open(event.error)
        if open_:
            told = ToolErrorEvent(parent_id=event.parent_id, name=event.name,
                                  error=event.error, result=ToolResult(
                                      unknown_outcome_text(str(event.name), error[:500])))
            result = Result(told)
            result.content = said(told)
        return Failed(result, error, ran=body, open=open_)
    return result


def said(event: ToolErrorEvent) -> str:
    """The text the model reads of a tool error (its result's parts joined).

    Without the error's class path (AG2 writes ``icore.errors.IntegrationError: ...``):
    a reason says the message.
    """
    parts = getattr(getattr(event, "result", None), "parts", None) or []
    text = "\n".join(str(getattr(p, "content", p)) for p in parts).strip()
    if not text:
        return str(event.error) or type(event.error).__name__
    cls = type(event.error)
    for prefix in (f"{cls.__module__}.{cls.__qualname__}: ", f"{cls.__qualname__}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def run_args(event: ToolCallEvent) -> tuple[Any, str | None]:
    """The arguments AG2 runs the tool on, or why they do not read.

    AG2's ``FunctionTool`` calls the tool with ``event.serialized_arguments`` (the
    model's text parsed, or what a middleware set through its public setter), so the
    gate and the trace read that same value, never ``event.arguments`` beside it (#28).
    Text AG2 cannot parse (``ValueError``, ``RecursionError``) gives
    :func:`~icore.integrations._json_args.read_json`'s reason; a value nested deeper than
    :data:`~icore.integrations._json_args.MAX_NESTING` levels is refused as it is.
    """
    try:
        value = event.serialized_arguments
    except (ValueError, RecursionError):
        value, why = read_json(event.arguments)
        if why is not None:
            return None, why
    return bounded_value(value)


def given_args(event: ToolCallEvent) -> dict[str, Any]:
    """The arguments AG2 runs (:func:`run_args`) when an object, else the model's text.

    The text as given (:func:`~icore.integrations._json_args.given_args`:
    ``{"raw": text}``), also for an object holding a NaN or an infinity.
    """
    args, _why = run_args(event)
    return args if isinstance(args, dict) and not non_finite(args) else \
        args_as_given(event.arguments)


def error_event(event: ToolCallEvent, error: Exception, text: str) -> ToolErrorEvent:
    """A tool error whose text (what the model reads) is ``text``, without a traceback."""
    return ToolErrorEvent(parent_id=event.id, name=event.name, error=error,
                          result=ToolResult(text))


def blocked(event: ToolCallEvent, message: str, name: str, reason: str) -> ToolErrorEvent:
    """A blocked call: the tool's error carrying :class:`~icore.errors.ActionBlocked`.

    ``message`` is what the model reads; ``reason`` the gate's or workspace's reason.
    """
    return ToolErrorEvent.from_call(event, error=ActionBlocked(message, action=name,
                                                               reason=reason))


def invalid(event: ToolCallEvent, name: str, norm: ArgNormalizer, args: dict[str, Any],
             exc: IntegrationError) -> ToolErrorEvent:
    """The model's arguments do not fit the schema: which field and why (nothing ran)."""
    cause = exc.__context__  # the normaliser's pydantic error (raised "from None")
    error = cause if isinstance(cause, ValidationError) else exc
    return error_event(event, error, invalid_args_message(name, norm.schema, args,
                                                     fallback=str(exc)))


def setup_error(event: ToolCallEvent, name: str, exc: IntegrationError) -> ToolErrorEvent:
    """A setup mistake found only at the gate, logged for the developer.

    The model is told not to retry (no traceback, no paths). A broken replanner was
    logged once already, by the guard that caught it.
    """
    if not isinstance(exc, ReplanFailed):
        _log.error("fenced tool %s: %s", name, exc)
    return error_event(event, exc, f"PlanFence could not check {name}: the application's "
                  "fence setup is wrong (an application error, reported to the developer); "
                  "nothing ran. Do not retry this call.")


def stopped_message(name: str, d: GateDecision, fresh: dict[str, Any]) -> str:
    """What the model reads of a call stopped at the human's answer.

    ``fresh``: the changed facts' current values (key -> value).
    """
    if d.reason is Reason.STALE and fresh:
        return (f"PlanFence blocked {name} (stale): {', '.join(sorted(fresh))} changed while "
                f"the human decided; the call stopped at the human's answer. Current "
                f"values: {json.dumps(fresh, sort_keys=True, default=str)}. Decide again "
                f"from these values and call {name} again.")
    return (f"PlanFence blocked {name} ({d.reason.value}): validated again after the "
            f"human's answer, the call is no longer authorized; it stopped at the answer. "
            f"Detail: {d.detail}")


def model_args(event: ToolCallEvent, name: str) -> dict[str, Any] | ToolErrorEvent:
    """The model's JSON arguments (an object), else the tool error the model reads.

    The value AG2 runs (:func:`run_args`). Text that does not read (not JSON, an integer
    over the interpreter's digit limit, nesting deeper than its stack or
    :data:`~icore.integrations._json_args.MAX_NESTING`) is
    the model's mistake, answered as AG2 answers it for a plain tool, never raised.
    """
    args, why = run_args(event)
    if why is not None:
        return ToolErrorEvent.from_call(event, error=IntegrationError(
            f"the arguments of {name} are not JSON: {why}", tool=name))
    if not isinstance(args, dict):
        return ToolErrorEvent.from_call(event, error=IntegrationError(
            f"the arguments of {name} must be a JSON object", tool=name))
    return args


def with_args(event: ToolCallEvent, args: dict[str, Any], original: dict[str, Any]
               ) -> ToolCallEvent:
    """``event``, or a copy carrying ``args`` when they differ from ``original``.

    A replan's arguments are what the tool body gets.
    """
    if canon(args) == canon(original):
        return event
    run = copy(event)
    run.arguments = json.dumps(args)
    run.serialized_arguments = args
    return run


def never(**args: Any) -> Any:
    """The protected tool of a second validation is only checked, never called."""
    raise IntegrationError("a re-validation tool is never called")

