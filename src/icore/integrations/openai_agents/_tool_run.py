"""Running a fenced Agents SDK tool's function, its failure told (issue 28, #29).

The SDK turns a tool's exception into the model's error text and the error it attaches
to the call's function span (redacted for its default text); the recording needs the
exception itself (``TimeoutError: ...``: the audit counts a timeout "outcome unknown").
:func:`invoked` runs the tool as a copy that lets the exception out and then does what
the SDK's tool does with it, so the model's text and the span are the SDK's alone
(QA qa-new9 S2); the SDK's own ``timeout=`` is told from a Ctrl-C (S4).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext
from agents.tracing import get_current_span
from agents.tracing.spans import NoOpSpan

from icore.errors import HeadConflict
from icore.integrations._failed import Failed, NoEffect, leaves_open, own_exception
from icore.integrations._refusals import refusal_head
from icore.integrations._rerun import unknown_outcome_text
from icore.integrations._tool_failed import describe

_RAISED: ContextVar[list[Exception] | None] = ContextVar("icore_agents_tool_raised",
                                                         default=None)
"""The exceptions the tool of the call running here raised (noted by its failure
function: :func:`noting_failures`)."""


def noting_failures(base: FunctionTool) -> FunctionTool | None:
    """A copy of ``base`` whose failure handling notes the tool's exception first.

    The SDK turns a tool's exception into the model's error text with the tool's
    ``failure_error_function``; the copy's failure function notes the exception (in
    :data:`_RAISED`) and then asks ``base``'s own policy for the text, unchanged (the
    default text, the run's ``tool_error_formatter``, a custom function, or none: raise).
    None when this SDK has no such hook (tracing then tells a failure, as before).
    """
    try:
        from agents.tool import (
            maybe_invoke_function_tool_failure_error_function as base_text,
        )
        from agents.tool import (
            set_function_tool_failure_error_function as set_failure_function,
        )
    except ImportError:  # pragma: no cover - an SDK without the hook
        return None
    inner = copy.copy(base)

    async def noted(ctx: Any, error: Exception) -> str | None:
        raised = _RAISED.get()
        if raised is not None:
            raised.append(error)
        return await base_text(function_tool=base, context=ctx, error=error)

    set_failure_function(inner, noted)
    return inner


@dataclass(frozen=True)
class Runs:
    """The copies of a fenced tool that tell its exception, made once when it is wrapped.

    :func:`raising`, else (an SDK without that handling) :func:`noting_failures`.
    """

    raising: FunctionTool | None
    noting: FunctionTool | None
    fresh: Callable[[str], Any] | None = None
    """The current value of a fact key, read for the calling agent (so its next call
    derives from it), for a :class:`~icore.errors.HeadConflict`'s text; None: not read."""


def conflict_text(name: str, exc: HeadConflict, fresh: Callable[[str], Any] | None) -> str:
    """The model's text for a tool whose write lost a compare-and-set (QA qa-new12 S3).

    A fenced tool's commit (``ws.commit(..., expected=...)``) found the fact changed
    since the version the call was authorized from (another call of the same model
    message, another process): its write was refused, so the call's change to that fact
    was not made. Replannable as a ``stale`` refusal is: the current value (read for the
    calling agent when ``fresh`` is given) and "plan again". Starts with
    :func:`~icore.integrations._refusals.refusal_head` (reason ``head_conflict``).
    """
    key = exc.fields.get("key")
    head = refusal_head(name, "head_conflict")
    where = f"{key}" if isinstance(key, str) else "a fact it writes"
    text = (f"{head}: {where} changed while this call ran (another change was "
            f"committed first), so the call's write to it was refused and not made")
    if isinstance(key, str) and fresh is not None:
        try:
            value = fresh(key)
        except Exception:
            value = None
        else:
            text += (f". Current value of {key}: "
                     f"{json.dumps(value, ensure_ascii=False, default=str)[:2000]}")
    return (text + f". Re-plan from the current value and call {name} again if it is "
            f"still needed (check first whether the rest of the call took effect)")


async def invoked(base: FunctionTool, runs: Runs, ctx: ToolContext[Any],
                   args: dict[str, Any]) -> Any:
    """Run the wrapped tool; a failure the SDK handled comes back as :class:`Failed`.

    The SDK turns a tool's exception into an error text for the model (its
    ``failure_error_function``): that call failed, whatever text the model reads
    (recorded ``exitcode: 1``; its body started, so the audit counts it "outcome
    unknown", unless it raised :class:`~icore.integrations.NoEffect`: "failed after
    authorization", QA qa-new12b S2). The recorded error is the exception itself
    (``TimeoutError: channel manager timed out``), traced or not (QA qa-new9 S2): the
    tool runs as a copy that lets its exception out (:func:`raising`), and the SDK's
    own handling is then done here exactly as its tool would (the model's text from the
    tool's failure policy, the error the SDK attaches to the call's function span: the
    span is what the SDK alone makes it, redacted as it redacts it). With
    ``RunConfig(trace_include_sensitive_data=False)`` only the exception's type is
    recorded. An SDK whose tool does not expose that handling: the copy whose failure
    function notes the exception (:func:`noting_failures`), or, traced, the span's error.

    The SDK's own ``timeout=`` cancels the call when it runs out: recorded as
    ``TimeoutError`` (the SDK's timeout), not as a Ctrl-C (QA qa-new9 S4).
    """
    try:
        return await _run_tool(base, runs, ctx, args)
    except asyncio.CancelledError as exc:
        timed_out = _timed_out(base)
        if timed_out is None:
            raise
        return Failed(None, timed_out, exc)  # recorded, then raised again


STARTED: ContextVar[float | None] = ContextVar("icore_agents_tool_started", default=None)
"""When the fenced call running here started (the event loop's clock)."""


def _timed_out(base: FunctionTool) -> str | None:
    """The error of a call cancelled by the SDK's ``timeout=``, else None.

    The SDK cancels the call's task when ``timeout_seconds`` ran out since it started
    it; a cancellation that comes that late is the timeout (a Ctrl-C before it is a
    cancellation). A little slack: the call's task starts a loop step after the SDK's
    clock.
    """
    limit = getattr(base, "timeout_seconds", None)
    started = STARTED.get()
    if not isinstance(limit, int | float) or started is None:
        return None
    waited = asyncio.get_running_loop().time() - started
    if waited < limit - min(0.05, limit / 10):
        return None
    return (f"TimeoutError: the SDK's timeout for {base.name} (function_tool "
            f"timeout={limit:g} s) ran out while the tool ran: the call was cancelled and "
            f"may have had its effect")


async def _run_tool(base: FunctionTool, runs: Runs, ctx: ToolContext[Any],
                    args: dict[str, Any]) -> Any:
    """:func:`invoked` without the SDK's timeout."""
    payload = json.dumps(args)
    raising, noting = runs.raising, runs.noting
    if raising is not None:
        try:
            return await raising.on_invoke_tool(ctx, payload)
        except Exception as exc:  # the SDK's own handling, as the tool would do it
            text = await _failure_text(base, ctx, exc, runs.fresh)
            if text is None:  # no failure policy: the exception leaves the run
                raise
            base.on_invoke_tool._on_handled_error(base, exc, payload, ctx)  # type: ignore[attr-defined]
            return Failed(text, _error_of(exc, ctx), open=leaves_open(exc))
    span = get_current_span()
    if noting is not None and (span is None or isinstance(span, NoOpSpan)):
        raised: list[Exception] = []
        token = _RAISED.set(raised)
        try:
            out = await noting.on_invoke_tool(ctx, payload)
        finally:
            _RAISED.reset(token)
        return Failed(out, _error_of(raised[-1], ctx),
                      open=leaves_open(raised[-1])) if raised else out
    before = getattr(span, "error", None)
    out = await base.on_invoke_tool(ctx, payload)
    err = getattr(span, "error", None)
    if span is None or err is None or err is before:
        return out
    data = err.get("data") if isinstance(err, dict) else None
    detail = data.get("error") if isinstance(data, dict) else None
    return Failed(out, str(detail or (err.get("message") if isinstance(err, dict) else err)
                           or "the tool failed"))


def _error_of(exc: BaseException, ctx: ToolContext[Any]) -> str:
    """The recorded error: ``Type: message``.

    The type only when the run keeps sensitive data out of its traces
    (``RunConfig(trace_include_sensitive_data=False)``).
    """
    config = getattr(ctx, "run_config", None)
    if getattr(config, "trace_include_sensitive_data", True) is False:
        return (f"{type(exc).__name__} (its message is not recorded: "
                f"trace_include_sensitive_data=False)")
    return describe(exc)


def raising(base: FunctionTool) -> FunctionTool | None:
    """A copy of ``base`` that lets its exception out (no failure function), or None.

    None when this SDK's tool does not expose the handling the run then does
    itself (its invoker's ``_on_handled_error``, the failure-policy helpers).
    """
    if not callable(getattr(base.on_invoke_tool, "_on_handled_error", None)):
        return None
    try:
        from agents.tool import set_function_tool_failure_error_function as set_failure
    except ImportError:  # pragma: no cover - an SDK without the hook
        return None
    inner = copy.copy(base)
    set_failure(inner, None)
    return inner


async def _failure_text(base: FunctionTool, ctx: ToolContext[Any], exc: Exception,
                        fresh: Callable[[str], Any] | None = None) -> str | None:
    """The model's text for ``exc`` from ``base``'s own failure policy (None: raise).

    A :class:`~icore.errors.HeadConflict` under the SDK's default policy (its fixed "An
    error occurred while running the tool" text, no run ``tool_error_formatter``) is told
    as a replannable refusal instead (:func:`conflict_text`), also when the tool raised
    it as ``NoEffect(...) from conflict``. Any other failure that leaves the outcome
    open (not ``NoEffect``) tells the model so
    (:func:`~icore.integrations._rerun.unknown_outcome_text`): instead of the default
    policy's "Please try again", after a custom policy's text (QA qa-new13a S3).
    """
    from agents.tool import maybe_invoke_function_tool_failure_error_function as base_text
    text = await base_text(function_tool=base, context=ctx, error=exc)
    own = own_exception(exc)
    if isinstance(own, NoEffect) and isinstance(own.__cause__, HeadConflict):
        own = own.__cause__  # ``raise NoEffect(...) from conflict`` (docs/workspace.md)
    if isinstance(own, HeadConflict) and text is not None and _default_policy(base, ctx):
        return conflict_text(base.name, own, fresh)
    if text is None or not leaves_open(exc):
        return text
    told = unknown_outcome_text(base.name, describe(exc)[:500])
    return told if _default_policy(base, ctx) else f"{text}\n{told}"


def _default_policy(base: FunctionTool, ctx: ToolContext[Any]) -> bool:
    """Whether ``base`` fails with the SDK's fixed default text (no custom formatter)."""
    try:
        from agents.tool import (
            default_tool_error_function,
            resolve_function_tool_failure_error_function,
        )
    except ImportError:  # pragma: no cover - an SDK without these
        return False
    config = getattr(ctx, "run_config", None)
    if getattr(config, "tool_error_formatter", None) is not None:
        return False
    return resolve_function_tool_failure_error_function(base, ctx) is \
        default_tool_error_function


__all__ = ["STARTED", "Runs", "conflict_text", "invoked", "noting_failures", "raising"]
