"""What the model is told when its call's arguments do not fit the tool (issue 28).

A fenced tool normalises the model's JSON through the tool's own schema before the gate
(:class:`~icore.integrations.ArgNormalizer`). When that fails it is the model's mistake,
not a setup error, so the model must read which argument is wrong and why, as the
framework tells it for a plain tool: ``day: Input should be a valid date (got
"tomorrow"); slot: Field required``. Nothing ran and nothing was validated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from icore.fence import NOT_FINITE as FENCE_NOT_FINITE
from icore.fence import non_finite_paths

if TYPE_CHECKING:
    from icore.integrations._recorder import RunRecorder
    from icore.workspace import Call

MAX_PROBLEMS = 8
"""At most this many argument problems are named (the rest are counted)."""
_MAX_INPUT_CHARS = 80


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_INPUT_CHARS else text[:_MAX_INPUT_CHARS] + "..."


def non_finite(value: Any, where: str = "") -> list[str]:
    """The dotted paths of the non-finite floats (NaN, +-infinity) in ``value``.

    The model's JSON may hold ``NaN`` or ``1e999`` (Python's reader accepts both); no
    tool argument is such a number (strict JSON has none, the trace could not hold it):
    each is an argument problem, ``"<path>: not a finite number"`` (QA qa-new13a S4).
    Walks mappings and lists without recursion; ``""`` names the value itself.
    """
    return non_finite_paths(value, where, limit=MAX_PROBLEMS)


NOT_FINITE = FENCE_NOT_FINITE
"""The problem named for a NaN or infinite argument (:func:`non_finite`), as every path
names it (:data:`icore.fence.NOT_FINITE`)."""


def schema_problems(schema: type[BaseModel], args: Mapping[str, Any]) -> list[str]:
    """One ``"field: why (got value)"`` line per way ``args`` fail ``schema``.

    Args:
        schema: the tool's parameter model (the normaliser's ``schema``).
        args: the model's arguments (a JSON object).

    Returns:
        The problems in pydantic's order (empty when ``args`` validate), at most
        :data:`MAX_PROBLEMS` and a count of the rest; the field path is dotted
        (``to.city``, ``items.0.qty``). Arguments that validate but hold a NaN or an
        infinity: ``"amount: not a finite number"`` each (:func:`non_finite`).
    """
    try:
        m = schema.model_validate(dict(args))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        out: list[str] = []
        for e in errors[:MAX_PROBLEMS]:
            where = ".".join(str(p) for p in e.get("loc", ())) or "(arguments)"
            line = f"{where}: {e.get('msg', 'invalid')}"
            if e.get("type") != "missing":
                line += f" (got {_shown(e.get('input'))})"
            out.append(line)
        if len(errors) > MAX_PROBLEMS:
            out.append(f"and {len(errors) - MAX_PROBLEMS} more")
        return out
    return [f"{at}: {NOT_FINITE}" for at in non_finite(m.model_dump())]


def invalid_args_message(tool: str, schema: type[BaseModel] | None,
                         args: Mapping[str, Any], fallback: str = "") -> str:
    """The model's message for a call whose arguments do not fit the tool's schema.

    Args:
        tool: the tool's name.
        schema: its parameter model (None: only ``fallback`` is known).
        args: the model's arguments.
        fallback: said when no problem can be named (e.g. the normaliser's error).

    Returns:
        ``"the arguments of <tool> do not fit its schema: <field>: <why>; ... Nothing
        ran; call <tool> again with the arguments corrected."``
    """
    problems = schema_problems(schema, args) if schema is not None else []
    said = "; ".join(problems) or fallback or "they do not validate"
    return (f"the arguments of {tool} do not fit its schema: {said}. Nothing ran; call "
            f"{tool} again with the arguments corrected.")


def refused_args(rec: RunRecorder, agent: str, tool: str, args: Any, said: str) -> str:
    """A fenced call whose arguments were refused before its gate, into ``rec``.

    Written as :func:`~icore.integrations._refusals.refused_call` writes any refusal
    before the gate (reason :data:`~icore.fence.INVALID_ARGUMENTS`), so the
    call is in the trace as a plain tool's same error is (QA qa-fw7 S3). ``args`` that
    are not a JSON object are kept under ``input``; arguments holding a NaN or an
    infinity as their JSON text under ``raw`` (strict JSON has no such number). Returns
    ``said``.
    """
    from icore.fence import INVALID_ARGUMENTS
    from icore.integrations._refusals import refused_call

    refused_call(rec, agent, tool, as_given(args), said, reason=INVALID_ARGUMENTS)
    return said


def as_given(args: Any) -> dict[str, Any]:
    """Refused arguments as a trace line holds them (bounded; JSON text if non-finite).

    Not a mapping: under ``input``. Holding a NaN or an infinity: their JSON text under
    ``raw`` (strict JSON has no such number; ``"nan"`` would read as a string the model
    never sent, QA qa-new13a S4).
    """
    from icore.integrations._trace_data import bounded_args

    if not isinstance(args, Mapping):
        return {"input": args}
    if non_finite(args):
        return {"raw": json.dumps(args, default=str)[:2000]}
    return bounded_args(args)



def not_finite_call(tool: str, args: Any) -> Call | None:
    """A fence-mode call whose arguments hold a NaN or an infinity, refused, else None.

    The same refusal as agent mode and every framework's schema check (#29): reason
    :data:`~icore.fence.INVALID_ARGUMENTS`, the detail naming each such argument
    (``"amount: not a finite number"``), the arguments as given (:func:`as_given`). It
    used to reach the gate and be blocked ``args_mismatch`` with the record's field path.
    """
    from icore.fence import INVALID_ARGUMENTS
    from icore.workspace import Call

    bad = non_finite(args) if isinstance(args, Mapping) else []
    if not bad:
        return None
    return Call(tool, False, reason=INVALID_ARGUMENTS, args=as_given(args),
                detail="; ".join(f"{at}: {NOT_FINITE}" for at in bad))
