"""Did-you-mean hints and messages for a gateway manifest's errors (QA r6-lgmcp D6).

A misspelt key (top-level ``tool:`` for ``tools:``, ``depends-on:`` for ``depends_on:``)
is named as an unknown key with the field it most likely means, found among the keys
allowed at that place (the pydantic model the key sits in).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel


def model_at(model: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The model whose fields hold the last element of ``loc`` (a pydantic error path).

    Mapping fields (``tools: {name: ToolSpec}``) take one path element for the key.
    None when the path leaves the models.
    """
    cur: Any = model
    for part in loc[:-1]:
        if isinstance(cur, type) and issubclass(cur, BaseModel):
            field = cur.model_fields.get(str(part))
            if field is None:
                return None
            cur = field.annotation
        elif typing.get_origin(cur) is dict:
            cur = typing.get_args(cur)[1]
        else:
            return None
        cur = _unwrap(cur)
    return cur if isinstance(cur, type) and issubclass(cur, BaseModel) else None


def _unwrap(tp: Any) -> Any:
    """``X | None`` as ``X`` (one model in a union)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return tp


def unknown_key(model: type[BaseModel], loc: Sequence[Any]) -> str:
    """The message of an ``extra_forbidden`` error at ``loc``: unknown, did you mean."""
    key = str(loc[-1]) if loc else ""
    at = model_at(model, loc)
    allowed = sorted(at.model_fields) if at is not None else []
    norm = key.replace("-", "_").lower()
    near = [norm] if norm in allowed else difflib.get_close_matches(key, allowed, n=1,
                                                                    cutoff=0.6)
    hint = f"; did you mean `{near[0]}`?" if near else ""
    where = f" (allowed here: {', '.join(allowed)})" if allowed else ""
    return f"unknown key `{key}`{hint}{where}"


def error_message(model: type[BaseModel], err: Mapping[str, Any]) -> str:
    """A pydantic error of ``model`` in the manifest's words (no class names).

    An unknown key: did-you-mean (:func:`unknown_key`); a string where a list goes: how to
    write the list; an entry that is no mapping (``tools: {book: }``): the fields it
    takes, required first (QA qa-new17a #5: it said "instance of ToolSpec").
    """
    kind = str(err.get("type", ""))
    loc = tuple(err.get("loc", ()))
    got = err.get("input")
    if kind == "extra_forbidden":
        return unknown_key(model, loc)
    if kind in ("tuple_type", "list_type"):
        what = "a string" if isinstance(got, str) else f"a {type(got).__name__}"
        return (f"must be a list (YAML [a, b] or one '- a' line per item), not {what}"
                + (f" ({got!r}: write [{got!r}])" if isinstance(got, str) else ""))
    if kind in ("model_type", "model_attributes_type", "dict_type") and (
            at := model_at(model, (*loc, "_"))) is not None:
        need = [n for n, f in at.model_fields.items() if f.is_required()]
        rest = [n for n, f in at.model_fields.items() if not f.is_required()]
        shape = ", ".join(f"{n}: ..." for n in need) or (f"{rest[0]}: ..." if rest else "")
        name = type(got).__name__
        what = "nothing" if got is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
        fields = (f" (required: {', '.join(need)}" + (f"; optional: {', '.join(rest)}"
                  if rest else "") + ")") if need else (
                  f" (fields: {', '.join(rest)})" if rest else "")
        return f"must be a mapping such as {{{shape}}}{fields}, not {what}"
    return str(err.get("msg", "invalid")).removeprefix("Value error, ")
