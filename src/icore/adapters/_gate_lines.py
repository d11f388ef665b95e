"""Event lines of a JSONL run that speak of protected calls (QA qa-new9 S3).

A human's answer to a protected call (:func:`human_answer`, on a span
:func:`span_answer`: the action's lineage shows it) and a gate at work
(:func:`gate_activity`: a trace that shows one but holds no PlanFence line is warned,
:func:`gate_without_records`). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from icore.adapters import _otel_names as N
from icore.adapters._errors import AdapterError
from icore.adapters._trace import HumanAnswer, StepKind
from icore.errors import brief
from icore.records import is_record_id

_DECISIONS = {"approve": True, "edit": True, "reject": False}
"""A human's ``decision`` on a call put to them: approved (True) or rejected."""


def human_answer(obj: Mapping[str, Any], step: int,
                 kind: StepKind = StepKind.THOUGHT) -> HumanAnswer | None:
    """The human's answer a ``thought`` line records (:class:`HumanAnswer`), or None.

    ``approval: {tool, approved, request}`` (the Agents SDK recorder), or
    ``answered_by: "human"`` with ``decision`` ``approve`` / ``edit`` / ``reject``,
    ``tool`` and ``args`` (LangGraph, AG2). A ``tool_output`` (``kind``) is an answer
    only with ``answered_by: "human"`` and the ``task`` of the action it refused (a call
    a human rejected before its gate: AG2); an answer naming a ``task`` (that, or a
    "yes" to a call then refused before its gate) is linked to that action exactly.
    Anything else (another question's answer, a field of the wrong type) is no answer to
    a protected call: None.
    """
    task = obj.get("task")
    if kind == StepKind.TOOL_OUTPUT:
        if not isinstance(task, str) or not task:
            return None
    elif kind != StepKind.THOUGHT:
        return None
    ap = obj.get("approval")
    if isinstance(ap, Mapping):
        tool, ok, req = ap.get("tool"), ap.get("approved"), ap.get("request")
        if isinstance(tool, str) and tool and isinstance(ok, bool):
            return HumanAnswer(step, tool, ok, req if is_record_id(req) else None)
        return None
    said, tool = obj.get("decision"), obj.get("tool")
    if obj.get("answered_by") != "human" or not isinstance(said, str) \
            or said not in _DECISIONS or not isinstance(tool, str) or not tool:
        return None
    args = obj.get("args")
    try:
        text = json.dumps(args, sort_keys=True, separators=(",", ":"), allow_nan=False) \
            if isinstance(args, Mapping) and said != "edit" else None
    except (TypeError, ValueError, RecursionError):
        text = None
    return HumanAnswer(step, tool, _DECISIONS[said], None, text,
                       task if isinstance(task, str) and task else None,
                       isinstance(obj.get("ask"), Mapping))


def answer_args(obj: Mapping[str, Any], step: int) -> tuple[str | None, int] | None:
    """A task-less human answer's arguments as the audit links them, and its step.

    ``(canonical JSON or None, step)`` for an answer line naming no ``task``: None when
    it records no arguments (an ``edit``'s are not its call's: the human changed them);
    None for a line naming a ``task`` (linked exactly) or no answer at all.
    """
    if obj.get("task") or ("answered_by" not in obj and "approval" not in obj):
        return None
    args = obj.get("args")
    if not isinstance(args, dict) or obj.get("decision") == "edit":
        return None, step
    try:
        return json.dumps(args, sort_keys=True, separators=(",", ":"), allow_nan=False), step
    except (TypeError, ValueError, RecursionError):
        return None, step


def strs(v: Any) -> tuple[str, ...]:
    """``v`` as a tuple of strings when it is a list of them, else ``()``."""
    return tuple(v) if isinstance(v, list) and all(isinstance(x, str) for x in v) else ()


def note_plan(plan_id: str, replan: bool, roots: Any,
               plan_roots: dict[str, tuple[str, ...]],
               replans: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> None:
    """Note a plan line's roots; a replan line pairs its plan id's previous roots with its own.

    Roots that are not a list of record ids (strings) are no roots: no replan is drawn
    from them (the field is optional; the audit's counts do not depend on it).
    """
    if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
        return
    got = tuple(roots)
    old = plan_roots.get(plan_id)
    if replan and old and got:
        replans.append((old, got))
    if got:
        plan_roots[plan_id] = got


def call_of(obj: Mapping[str, Any], kind: StepKind) -> tuple[str, str, str | None] | None:
    """``(task, agent, args)`` of an event line naming a protected action's ``task``.

    A gate ``thought`` or a ``tool_output`` with a str ``task`` and ``agent``; ``args``
    the line's arguments object as canonical JSON text (None: none, or no JSON form).
    None for any other line (#28, QA qa-new10 S3: which call it was, who made it).
    """
    task, agent = obj.get("task"), obj.get("agent")
    if kind not in (StepKind.THOUGHT, StepKind.TOOL_OUTPUT) or not isinstance(task, str) \
            or not task or not isinstance(agent, str):
        return None
    if kind == StepKind.THOUGHT and not isinstance(obj.get("gate"), Mapping):
        return None
    args = obj.get("args")
    try:
        text = json.dumps(args, sort_keys=True, separators=(",", ":"), allow_nan=False) \
            if isinstance(args, Mapping) else None
    except (TypeError, ValueError, RecursionError):
        text = None
    return task, agent, text


def note_call(callers: dict[str, tuple[str, str | None]], branches: dict[str, str],
              obj: Mapping[str, Any], kind: StepKind, agent: str,
              gated: dict[str, str] | None = None) -> None:
    """Note which call an event line naming a protected action's ``task`` is.

    ``callers``: task -> ``(agent, args)`` from the first line naming the task, the
    arguments from a later one when the first has none (QA qa-new11), and a tool
    output's (a digested line) over a gate thought's (QA qa-new15b: a gateway writes
    them on the gate thought too, for a call killed before its output);
    ``branches``: task -> the ``branch`` (a str) of the first such line having one
    (LangGraph ``Send`` branches, #28); ``gated``: task -> tool of a gate thought that
    authorized the call (:attr:`PlanfenceLog.gated`). Lines :func:`call_of` refuses
    are skipped.
    """
    made = call_of(obj, kind)
    if made is None:
        return
    if made[0] not in callers or (made[2] and (callers[made[0]][1] is None
                                               or kind == StepKind.TOOL_OUTPUT)):
        callers[made[0]] = (callers.get(made[0], (agent, None))[0], made[2])
    gate = obj.get("gate")
    if gated is not None and kind == StepKind.THOUGHT and isinstance(gate, Mapping) \
            and gate.get("outcome") == "authorized" and isinstance(gate.get("tool"), str):
        gated[made[0]] = gate["tool"]
    if made[0] not in branches and isinstance(b := obj.get("branch"), str) and b:
        branches[made[0]] = b[:200]


def span_answer(a: Mapping[str, Any], step: int, *, file: str,
                where: str) -> HumanAnswer | None:
    """The human's answer an OpenTelemetry span records (``icore.approval.*``), or None.

    What :meth:`icore.adapters.OtelExporter.human_answer` writes: ``icore.approval.tool``,
    ``.approved``, ``.request`` and ``.args`` (the JSONL ``approval`` thought's fields;
    :func:`human_answer`). A span with neither ``tool`` nor ``approved`` is no answer.

    Args:
        a: the span's attributes.
        step: the index of the step the span becomes.
        file: the trace file, for errors.
        where: the span, for errors (``span <id> ('<name>')``).

    Raises:
        AdapterError: ``approved`` is not a boolean, ``tool`` not a non-empty string,
            ``request`` not a record id (64 lowercase hex digits), ``args`` not the JSON
            text of an object (naming the span and the attribute).
    """
    p = N.APPROVAL
    ok, tool = a.get(p + "approved"), a.get(p + "tool")
    if ok is None and tool is None:
        return None
    if not isinstance(ok, bool):
        raise AdapterError(f"must be a boolean, not {brief(ok)}", file=file,
                           field=f"{where}.{p}approved")
    if not isinstance(tool, str) or not tool:
        raise AdapterError(f"must be the tool's name, not {brief(tool)}", file=file,
                           field=f"{where}.{p}tool")
    req, args = a.get(p + "request"), a.get(p + "args")
    if req is not None and not is_record_id(req):
        raise AdapterError(f"must be an approval request id (64 lowercase hex digits), not "
                           f"{brief(req)}", file=file, field=f"{where}.{p}request")
    text = None
    if args is not None:
        try:
            obj = json.loads(args) if isinstance(args, str) else None
            text = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            obj = None
        if not isinstance(obj, Mapping):
            raise AdapterError(f"must be the JSON text of the call's arguments (an object), "
                               f"not {brief(args)}", file=file, field=f"{where}.{p}args")
    return HumanAnswer(step, tool, ok, req, text)


def gate_activity(obj: Mapping[str, Any], kind: StepKind) -> bool:
    """Whether an event line shows a PlanFence gate at work (QA qa-new9 S3).

    A ``thought`` carrying a ``gate`` decision (what the recorders write beside the
    decision line), or a ``tool_output`` of a call refused by a gate (``blocked: true``
    with a ``reason``, or a ``PlanFence blocked`` / ``BLOCKED:`` text).
    """
    if kind == StepKind.THOUGHT:
        return isinstance(obj.get("gate"), Mapping)
    if kind != StepKind.TOOL_OUTPUT or obj.get("blocked") is not True:
        return False
    text = obj.get("content")
    return isinstance(obj.get("reason"), str) or (isinstance(text, str) and text.startswith(
        ("PlanFence blocked ", "BLOCKED:")))


def gate_without_records(line: int, file: str, recorded: bool) -> tuple[str, ...]:
    """The warning of a run that shows gate activity at ``line`` but has no PlanFence line."""
    if not line or recorded:
        return ()
    return (f"{file}: line {line} shows a PlanFence gate at work (a gate decision, a "
            "refused call or a human's answer to a protected call) but the trace has no "
            f"PlanFence record or decision line: {UNCOUNTABLE} (lines removed from the "
            "trace, or a recorder that wrote none)",)


UNCOUNTABLE = "its protected actions cannot be counted or checked"
"""What the warning of :func:`gate_without_records` says; ``icore audit --fail-on invalid``
and ``--fail-on unknown`` fail a run warned so (fail closed, QA qa-new15b S3)."""


def tool_claim(obj: dict[str, Any]) -> tuple[str | None, bool | None]:
    """A ``tool_output`` line's tool and what it says of its call (:attr:`Step.ran`)."""
    tool = obj.get("tool")
    if obj.get("ran") is True or obj.get("failed") is True:
        ran: bool | None = True
    elif obj.get("blocked") is True or obj.get("ran") is False:
        ran = False
    else:
        ran = True if obj.get("exitcode") == 0 else None
    return (tool if isinstance(tool, str) and tool else None), ran


def check_tool_calls(value: Any, *, file: str, field: str) -> None:
    """Refuse an output's ``tool_calls`` that is not ``[{"name": str, "args"?, "id"?}, ...]``.

    ``args`` may be any JSON value (a model may send a non-object); ``id`` a string, an
    integer or null. QA qa-new15c S3: a wrong shape was read silently, though it decides
    whether an output repeats an earlier one.

    Raises:
        AdapterError: not a list, an item not an object, or an item without a non-empty
            string ``name`` (field ``<field>[i].name``) or with another type of ``id``.
    """
    if not isinstance(value, list):
        raise AdapterError(f"tool_calls must be a list of {{\"name\", \"args\", \"id\"?}} "
                           f"objects, not {type(value).__name__}", file=file, field=field)
    for i, c in enumerate(value):
        if not isinstance(c, dict):
            raise AdapterError(f"each tool call must be an object, not {type(c).__name__}",
                               file=file, field=f"{field}[{i}]")
        name = c.get("name")
        if not isinstance(name, str) or not name.strip():
            got = "missing" if "name" not in c else f"{type(name).__name__} {name!r}"[:80]
            raise AdapterError(f"a tool call needs a non-empty string name ({got}; keys: "
                               f"{', '.join(sorted(map(str, c)))[:120]})", file=file,
                               field=f"{field}[{i}].name")
        cid = c.get("id")
        if cid is not None and (isinstance(cid, bool) or not isinstance(cid, str | int)):
            raise AdapterError(f"a tool call's id must be a string, not {type(cid).__name__}",
                               file=file, field=f"{field}[{i}].id")


def tool_calls(value: Any) -> str | None:
    """An output's ``tool_calls`` as canonical JSON, call ids dropped (None: none)."""
    if not value:
        return None
    if isinstance(value, list):
        value = [{k: v for k, v in c.items() if k != "id"} if isinstance(c, dict) else c
                 for c in value]
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


__all__ = ["answer_args", "check_tool_calls", "gate_activity", "gate_without_records",
           "human_answer", "note_call", "note_plan", "span_answer", "strs", "tool_calls",
           "tool_claim"]
