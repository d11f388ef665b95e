"""Setup checks of a fenced CrewAI tool, run when it is wrapped (issue 28 item 4).

* :func:`check_base_tool`: a tool whose arguments cannot be named is refused. An
  ``@tool`` function is checked as such; a ``BaseTool`` subclass is checked by its
  ``args_schema`` (explicit fields are what CrewAI validates and passes) or, without
  fields, by its ``_run`` (``_run(self, **kwargs)`` with no schema fields would run with
  no arguments at all: CrewAI drops what the model sent).
* :func:`probe_scope`: a ``depends_on`` function is run once on placeholder arguments
  (every parameter of the tool's schema). Only what cannot depend on the values is
  reported: reading a parameter the tool does not have, returning a str or something
  that is not a collection of str keys, or a key whose fixed part matches no declared
  owner (``f"ofer/{a['pax']}"`` when ``offer/*`` is declared). Anything else (an error on
  a placeholder value, an empty set) is checked on the call's real arguments.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

from pydantic import BaseModel

from icore.errors import IntegrationError
from icore.integrations import check_tool_function
from icore.memory import OwnershipMap
from icore.workspace import GLOB_CHARS

_FW = "crewai"
_MARK = "\u2063icore\u2063"
"""The placeholder value of every parameter (an invisible separator around a word)."""
_GLOB = GLOB_CHARS


def schema_fields(tool: Any) -> tuple[str, ...]:
    """The parameter names of a CrewAI tool's ``args_schema`` (empty when it has none)."""
    schema = getattr(tool, "args_schema", None)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return tuple(schema.model_fields)
    return ()


def check_base_tool(tool: Any) -> None:
    """Refuse a tool whose calls could not be bound to their arguments.

    Raises:
        IntegrationError: an ``@tool`` function, or a ``BaseTool`` subclass without
            schema fields whose ``_run``, takes ``*args`` / ``**kwargs`` /
            positional-only parameters (the error names the fix).
    """
    func = getattr(tool, "func", None)
    if callable(func):
        check_tool_function(func, framework=_FW, tool=tool.name)
        return
    if schema_fields(tool):
        return  # CrewAI validates the call against these fields and passes them by name
    run = getattr(tool, "_run", None)
    try:
        sig = inspect.signature(run) if callable(run) else None
    except (TypeError, ValueError):
        sig = None
    variadic = [p.name for p in (sig.parameters.values() if sig is not None else ())
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)]
    if variadic:
        raise IntegrationError(
            "a fenced BaseTool needs named arguments: its _run takes *args / **kwargs and "
            "its args_schema has no fields, so CrewAI would call it with no arguments "
            "(whatever the model sent) and every call would bind {}",
            framework=_FW, tool=tool.name, parameters=variadic,
            fix="declare the parameters: def _run(self, pax: str, flight: str), or an "
            "args_schema with a field per argument")


def _fixed_part(key: str) -> str:
    """What of a probed key cannot depend on the values: the text before a placeholder."""
    return key.split(_MARK, 1)[0]


def _literal(pattern: str) -> str:
    """The text of an ownership entry before its first glob character."""
    cut = min((pattern.index(c) for c in _GLOB if c in pattern), default=len(pattern))
    return pattern[:cut]


def probe_scope(depends_on: Callable[[Mapping[str, Any]], Any], fields: Collection[str],
                ownership: OwnershipMap, *, tool: str) -> None:
    """Run ``depends_on`` on placeholder arguments; raise what cannot depend on values.

    Args:
        depends_on: the tool's D(a) function.
        fields: the tool's parameter names (its ``args_schema`` fields).
        ownership: the workspace's ownership map o(k).
        tool: the tool's name (for the error).

    Raises:
        IntegrationError: the function reads a parameter the tool does not have, returns
            a str or not a collection of str keys, or a key whose fixed part no declared
            key or pattern can match (each error names the fix).
    """
    names = sorted(fields)
    try:
        keys = depends_on({f: _MARK for f in names})
    except KeyError as exc:
        missing = exc.args[0] if exc.args else None
        if isinstance(missing, str) and missing not in fields:
            raise IntegrationError(
                "depends_on reads an argument the tool does not have", framework=_FW,
                tool=tool, argument=missing, parameters=names,
                fix="read the call's arguments by the tool's parameter names: "
                + ", ".join(names)) from None
        return
    except Exception:
        return  # it needs real values: checked on the call's arguments
    if isinstance(keys, str | bytes):
        shown = str(keys).replace(_MARK, "...")
        raise IntegrationError("depends_on returned a str, not a collection of keys",
                               framework=_FW, tool=tool, got=shown[:80],
                               fix=f"return a set: lambda a: {{f'{shown[:60]}'}}")
    try:
        got = list(keys)
    except TypeError:
        raise IntegrationError("depends_on must return a collection of keys",
                               framework=_FW, tool=tool, got=type(keys).__name__,
                               fix="lambda a: {f'order/{a[\"order_id\"]}'}") from None
    bad = [k for k in got if not isinstance(k, str)]
    if bad:
        raise IntegrationError("depends_on returned keys that are not str", framework=_FW,
                               tool=tool, got=[type(k).__name__ for k in bad][:5],
                               fix="return str keys, e.g. f'order/{a[\"order_id\"]}'")
    for key in got:
        if ownership.owner_of(key) is not None:
            continue
        fixed = _fixed_part(key)
        lits = {_literal(d): d for d in ownership.to_dict()}
        if fixed != key and any(lit.startswith(fixed) or fixed.startswith(lit)
                                for lit in lits):
            continue  # some values could make it an owned key: checked at the call
        near = difflib.get_close_matches(fixed, list(lits), n=1)
        raise IntegrationError(
            "depends_on names facts no owner is declared for", framework=_FW, tool=tool,
            key=key.replace(_MARK, "{...}"),
            fix=(f"did you mean a key under {near[0]!r} (declared: {lits[near[0]]!r})?"
                 if near else "declare an owner for it in the Workspace, or fix the key"))
