"""Grounded role decisions (planfence App. A.2): one tool, finite enumerations, one call.

A :class:`DecisionRequest` carries everything a backend may use: the role, the workflow
family, the *model-facing* user object (role content only: no memory record ids, no
owner ids) and one :class:`ToolSpec` whose JSON schema enumerates every permitted id,
action and argument built from the role's local state. ``scripted`` holds the template's
deterministic answer; only :class:`~icore.agents.ScriptedDecider` reads it and it is never
sent to a model.

:func:`check_call` is the schema check every backend's output passes before anything is
committed: an unknown field, a missing field or a value outside an enumeration is a
violation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

SYSTEM_PROMPT = (
    "You are {role} in a controlled {family} workflow. Use only supplied evidence. "
    "Call exactly one supplied tool. Do not invent IDs or hidden state. The tool schema "
    "enumerates the complete allowed IDs and actions for this decision."
)
"""The controlled live-agent system instruction (planfence App. A.2)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One grounded tool offered for a decision.

    Attributes:
        name: function name the model must call.
        description: one-line description.
        parameters: JSON schema of the arguments (an object whose fields are finite
            enumerations; additional fields are rejected).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_openai(self) -> dict[str, Any]:
        """Return the OpenAI ``tools`` entry."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": dict(self.parameters)}}


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """One role decision.

    Attributes:
        role: planner, retriever, executor or auditor.
        family: workflow family.
        user: the model-facing user object (JSON; role content only).
        tool: the single grounded tool.
        scripted: the template's deterministic arguments (never shown to a model).
        isolated: True for the one replan (isolated conversational history).
    """

    role: str
    family: str
    user: Mapping[str, Any]
    tool: ToolSpec
    scripted: Mapping[str, Any]
    isolated: bool = False

    def messages(self) -> list[dict[str, Any]]:
        """The chat messages sent to a model (system + user object)."""
        return [
            {"role": "system", "content": SYSTEM_PROMPT.format(role=f"the {self.role}",
                                                               family=self.family)},
            {"role": "user", "content": json.dumps(self.user, sort_keys=True)},
        ]


@dataclass(frozen=True, slots=True)
class DecisionOutcome:
    """What a backend decided.

    Attributes:
        ok: True when ``args`` passed the schema.
        args: the accepted arguments (None when the attempt failed).
        responses: model responses received or attempted (scripted: 1).
        accepted: responses accepted (0 or 1).
        violations: the public rejection reasons, in order.
        error: why the attempt failed (empty when ok).
        infrastructure: the attempt failed because the server could not be used (HTTP
            5xx, timeout, refused connection after the retries), not by the model.
        infra_failures: infrastructure failures seen (retried or not).
        mode: the tool-call mode used (llm backend; empty for scripted).
    """

    ok: bool
    args: Mapping[str, Any] | None
    responses: int = 1
    accepted: int = 1
    violations: tuple[str, ...] = ()
    error: str = ""
    infrastructure: bool = False
    infra_failures: int = 0
    mode: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"ok": self.ok, "args": dict(self.args) if self.args is not None else None,
                "responses": self.responses, "accepted": self.accepted,
                "violations": list(self.violations), "error": self.error,
                "infrastructure": self.infrastructure,
                "infra_failures": self.infra_failures, "mode": self.mode}


class Decider(Protocol):
    """A role backend: returns one grounded decision."""

    name: str

    def decide(self, request: DecisionRequest) -> DecisionOutcome:
        """Decide; never raises for model misbehaviour (it returns ``ok=False``)."""
        ...


def enum_prop(values: Sequence[str], description: str = "") -> dict[str, Any]:
    """A string field restricted to ``values``."""
    out: dict[str, Any] = {"type": "string", "enum": list(values)}
    if description:
        out["description"] = description
    return out


def object_schema(props: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """An object schema: every field required, no additional fields."""
    return {"type": "object", "properties": {k: dict(v) for k, v in props.items()},
            "required": list(props), "additionalProperties": False}


def _check_value(schema: Mapping[str, Any], value: Any, path: str) -> str | None:
    typ = schema.get("type")
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: {value!r} is not one of the allowed values"
    if typ == "string" and not isinstance(value, str):
        return f"{path}: expected a string"
    if typ == "object":
        return _check_object(schema, value, path)
    if typ == "array":
        if not isinstance(value, list):
            return f"{path}: expected an array"
        if len(value) < int(schema.get("minItems", 0)):
            return f"{path}: fewer than {schema['minItems']} items"
        if "maxItems" in schema and len(value) > int(schema["maxItems"]):
            return f"{path}: more than {schema['maxItems']} items"
        if schema.get("uniqueItems") and len({json.dumps(v) for v in value}) != len(value):
            return f"{path}: items are not unique"
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, v in enumerate(value):
                bad = _check_value(items, v, f"{path}[{i}]")
                if bad:
                    return bad
    return None


def _check_object(schema: Mapping[str, Any], value: Any, path: str) -> str | None:
    if not isinstance(value, dict):
        return f"{path}: expected an object"
    props: Mapping[str, Any] = schema.get("properties", {})
    for k in schema.get("required", []):
        if k not in value:
            return f"{path}: missing field {k!r}"
    if schema.get("additionalProperties") is False:
        extra = sorted(set(value) - set(props))
        if extra:
            return f"{path}: additional fields are not allowed: {extra}"
    for k, v in value.items():
        if k in props:
            bad = _check_value(props[k], v, f"{path}.{k}")
            if bad:
                return bad
    return None


def check_call(tool: ToolSpec, name: str | None, arguments: str | Mapping[str, Any] | None
               ) -> tuple[dict[str, Any] | None, str | None]:
    """Check one tool call against the grounded tool.

    Args:
        tool: the only permitted tool.
        name: the function name the backend called.
        arguments: the arguments (JSON text or an already-decoded object).

    Returns:
        ``(args, None)`` when valid, else ``(None, reason)`` with a public reason.
    """
    if name != tool.name:
        return None, f"the call must use the tool {tool.name!r}, not {name!r}"
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return None, f"arguments are not valid JSON ({exc.msg})"
    else:
        parsed = dict(arguments) if arguments is not None else None
    bad = _check_value(tool.parameters, parsed, "arguments")
    if bad is not None:
        return None, bad
    assert isinstance(parsed, dict)
    return parsed, None
