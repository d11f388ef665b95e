"""Load a declaration package from YAML/JSON (design.md 4.1): the I/O edge of state/.

The only module of :mod:`icore.state` that reads files or imports user code (a D names
its validators and interfaces by dotted path). :func:`load_declaration` reads a file;
:func:`declaration_from_dict` validates a document against the schema and cross-checks
names. Every error is a :class:`~icore.state.DeclarationPackageError` naming the file,
the path inside the document and the problem.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
import yaml

from icore._files import not_a_regular_file
from icore._yaml import safe_load
from icore.state._components import (
    AgentDecl,
    EffectTemplate,
    ObservableType,
    OperationDecl,
    Parameters,
    Preconditions,
    ValidatorSpec,
)
from icore.state._errors import DeclarationPackageError
from icore.state._interfaces import (
    BUILTIN_VALIDATORS,
    Interfaces,
    any_feasible,
    assigned_view,
    canonical_normalize,
    capability_feasible,
    capability_value,
    declared_weight,
    priority_responsible,
    role_authority,
    roots_done,
    status_change_progress,
    uniform_weight,
)
from icore.state._package import DeclarationPackage
from icore.state._xmodel import AssertionKind, Status


# ------------------------------------------------------------------ schema (YAML/JSON)
class _Spec(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=False)


class _ObservableSpec(_Spec):
    name: str = pydantic.Field(min_length=1)
    kind: Literal["action", "artifact"] = "action"
    fields: list[str] = []


class _AgentSpec(_Spec):
    id: str = pydantic.Field(min_length=1)
    capabilities: dict[str, pydantic.confloat(ge=0.0, le=1.0)] = {}  # type: ignore[valid-type]
    roles: list[str] = []


class _EffectSpec(_Spec):
    kind: AssertionKind
    values: list[Any] | None = None
    key: str | None = None
    target: Literal["subject", "new", "any"] = "subject"
    many: bool = False


class _PreSpec(_Spec):
    status_in: list[Status] | None = None
    deps_done: bool = False
    assignee_is_proposer: bool = False
    target_required: bool = True


class _OperationSpec(_Spec):
    name: str = pydantic.Field(min_length=1)
    proposers: list[str] = ["*"]
    preconditions: _PreSpec = _PreSpec()
    effects: list[_EffectSpec]
    requires: list[str] = []
    productive: bool = False
    removes: bool = False
    transports: bool = False
    settles: bool = False


class _ValidatorSpec(_Spec):
    name: str = pydantic.Field(min_length=1)
    version: str = "1"
    builtin: str | None = None
    callable: str | None = None
    params: dict[str, Any] = {}


class _ParamSpec(_Spec):
    epsilon: float = pydantic.Field(default=0.1, ge=0.0)
    patience: int = pydantic.Field(default=5, ge=1)
    tau: float = pydantic.Field(default=0.5, ge=0.0, le=1.0)
    responsible_priority: Literal["assignee", "proposer"] = "assignee"
    p_min: float | None = pydantic.Field(default=None, ge=0.0, le=1.0)
    bound_conditions: list[Literal["decomposable", "validator_adequacy", "value_calibration"]] = []
    progress_fields: list[
        Literal["status", "assignee", "result", "claim", "relation", "terminal"]
    ] = ["status", "result"]


class _InterfaceSpec(_Spec):
    value: str = "capability"
    weight: str = "declared"
    feasible: str = "capability"
    local_view: str = "assigned"
    normalize: str = "canonical"
    terminal: str = "roots_done"
    progress: str = "status_change"
    responsible: str = "priority"
    assignment_authority: str = "role:assigner"


class _PackageSpec(_Spec):
    name: str = "D"
    version: str = "1"
    parameters: _ParamSpec = pydantic.Field(default_factory=_ParamSpec)
    observables: list[_ObservableSpec] = []
    agents: list[_AgentSpec] = []
    operations: list[_OperationSpec] = []
    validators: list[_ValidatorSpec] = []
    interfaces: _InterfaceSpec = _InterfaceSpec()


_BUILTIN_INTERFACES: dict[str, dict[str, Any]] = {
    "value": {"capability": capability_value},
    "weight": {"declared": declared_weight, "uniform": uniform_weight},
    "feasible": {"capability": capability_feasible, "any": any_feasible},
    "local_view": {"assigned": assigned_view},
    "normalize": {"canonical": canonical_normalize},
    "terminal": {"roots_done": roots_done},
    "progress": {"status_change": status_change_progress},
    "responsible": {"priority": priority_responsible},
}


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def _import_callable(ref: str, file: str, path: str) -> Callable[..., Any]:
    mod_name, sep, attr = ref.partition(":")
    if not sep or not mod_name or not attr:
        raise DeclarationPackageError(
            f"{ref!r} is not of the form 'module:attribute'", file=file, path=path
        )
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise DeclarationPackageError(
            f"cannot import {ref!r}: {exc}", file=file, path=path
        ) from exc
    if not callable(obj):
        raise DeclarationPackageError(f"{ref!r} is not callable", file=file, path=path)
    return obj  # type: ignore[no-any-return]


def declaration_from_dict(data: Any, *, file: str = "<dict>") -> DeclarationPackage:
    """Build D from a parsed YAML/JSON document (design.md 4.1).

    Args:
        data: the document (a mapping).
        file: name used in error messages.

    Raises:
        DeclarationPackageError: naming ``file``, the path and the problem, for a schema
            violation, an unknown built-in, an unimportable callable or a cross-reference
            to an undeclared agent, role or validator.
    """
    if not isinstance(data, Mapping):
        raise DeclarationPackageError(
            f"top level must be a mapping, not {type(data).__name__}", file=file, path="<root>"
        )
    try:
        spec = _PackageSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        raise DeclarationPackageError(
            err["msg"], file=file, path=_path(tuple(err["loc"])), errors=len(exc.errors())
        ) from None
    validators = []
    for i, v in enumerate(spec.validators):
        path = f"validators[{i}]"
        if (v.builtin is None) == (v.callable is None):
            raise DeclarationPackageError(
                "give exactly one of 'builtin' and 'callable'", file=file, path=path
            )
        if v.builtin is not None:
            if v.builtin not in BUILTIN_VALIDATORS:
                raise DeclarationPackageError(
                    f"unknown built-in validator {v.builtin!r} (known: "
                    f"{', '.join(sorted(BUILTIN_VALIDATORS))})",
                    file=file,
                    path=f"{path}.builtin",
                )
            fn = BUILTIN_VALIDATORS[v.builtin]
            source = f"builtin:{v.builtin}"
        else:
            assert v.callable is not None
            fn = _import_callable(v.callable, file, f"{path}.callable")
            source = v.callable
        validators.append(
            ValidatorSpec(name=v.name, fn=fn, version=v.version, params=v.params, source=source)
        )
    ifaces: dict[str, Any] = {}
    for name, ref in spec.interfaces.model_dump().items():
        path = f"interfaces.{name}"
        if name == "assignment_authority":
            if ref.startswith("role:"):
                ifaces[name] = role_authority(ref[5:])
            else:
                ifaces[name] = _import_callable(ref, file, path)
            continue
        builtins = _BUILTIN_INTERFACES[name]
        if ref in builtins:
            ifaces[name] = builtins[ref]
        elif ":" in ref:
            ifaces[name] = _import_callable(ref, file, path)
        else:
            raise DeclarationPackageError(
                f"unknown built-in {ref!r} (known: {', '.join(sorted(builtins))})",
                file=file,
                path=path,
            )
    p = spec.parameters
    return DeclarationPackage(
        name=spec.name,
        version=spec.version,
        file=file,
        observables=[ObservableType(o.name, o.kind, tuple(o.fields)) for o in spec.observables],
        agents=[AgentDecl(a.id, dict(a.capabilities), tuple(a.roles)) for a in spec.agents],
        operations=[
            OperationDecl(
                name=o.name,
                proposers=tuple(o.proposers),
                preconditions=Preconditions(
                    status_in=None
                    if o.preconditions.status_in is None
                    else tuple(o.preconditions.status_in),
                    deps_done=o.preconditions.deps_done,
                    assignee_is_proposer=o.preconditions.assignee_is_proposer,
                    target_required=o.preconditions.target_required,
                ),
                effects=tuple(
                    EffectTemplate(
                        kind=e.kind,
                        values=None if e.values is None else tuple(e.values),
                        key=e.key,
                        target=e.target,
                        many=e.many,
                    )
                    for e in o.effects
                ),
                requires=tuple(o.requires),
                productive=o.productive,
                removes=o.removes,
                transports=o.transports,
                settles=o.settles,
            )
            for o in spec.operations
        ],
        validators=validators,
        interfaces=Interfaces(**ifaces),
        parameters=Parameters(
            epsilon=p.epsilon,
            patience=p.patience,
            tau=p.tau,
            responsible_priority=p.responsible_priority,
            p_min=p.p_min,
            bound_conditions=tuple(p.bound_conditions),
            progress_fields=tuple(p.progress_fields),
        ),
    )


def load_declaration(path: str | Path) -> DeclarationPackage:
    """Load D from a ``.yaml``/``.yml`` or ``.json`` file (design.md 4.1).

    Raises:
        DeclarationPackageError: the path names no file (None, a NUL byte, a lone
            surrogate) or is not a regular file (a FIFO, a device, a folder: refused by
            kind without opening it), or the file is missing,
            unparsable, or invalid (the error names the file, the path inside it and the
            problem).
    """
    if (problem := not_a_regular_file(path)) is not None:  # None, a NUL: no Path at all
        raise DeclarationPackageError(f"the declaration path {problem}",
                                      file=str(path)[:200], path="<root>")
    p = Path(path)
    file = str(p)
    if (problem := not_a_regular_file(p)) is not None:
        raise DeclarationPackageError(f"{problem}; refusing to read it", file=file,
                                      path="<root>")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DeclarationPackageError(f"cannot read: {exc}", file=file, path="<root>") from exc
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = safe_load(text)  # an int of 5000 digits, 2026-02-30: marked errors
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise DeclarationPackageError(f"cannot parse: {exc}", file=file, path="<root>") from exc
    except (ValueError, OverflowError) as exc:  # JSON: an int over 4300 digits
        raise DeclarationPackageError(f"cannot parse: a value that cannot be converted: "
                                      f"{exc}", file=file, path="<root>") from None
    except RecursionError:
        raise DeclarationPackageError("cannot parse: nested too deeply", file=file,
                                      path="<root>") from None
    return declaration_from_dict(data, file=file)
