"""The declaration package D = (O_D, M_D, Ω, V, I_D) (icore Sec. 3; design.md 4.1).

:class:`DeclarationPackage` cross-checks its components when built. Loading one from a
YAML/JSON file is :mod:`icore.state._loader`'s job. No I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from icore.state._components import (
    BOUND_CONDITIONS,
    AgentDecl,
    ObservableType,
    OperationDecl,
    Parameters,
    ValidatorInput,
    ValidatorSpec,
)
from icore.state._errors import DeclarationPackageError, ValidatorError
from icore.state._interfaces import Interfaces
from icore.state._xmodel import AssertionKind, Status


# ------------------------------------------------------------------ the package
def _proposer_ref_ok(ref: str, agents: Mapping[str, AgentDecl], roles: set[str]) -> bool:
    if ref == "*":
        return True
    if ref.startswith("role:"):
        return ref[5:] in roles
    return ref in agents


class DeclarationPackage:
    """D = (O_D, M_D, Ω, V, I_D) (icore Sec. 3; design.md 4.1).

    Args:
        name: package name.
        version: package version.
        observables: O_D.
        agents: M_D.
        operations: Ω.
        validators: V.
        interfaces: I_D (built-in defaults).
        parameters: ε, H, τ and the Prop. 4 declaration.
        file: where it came from, used in error messages.

    Raises:
        DeclarationPackageError: duplicate names, a proposer or required validator that is
            not declared, a template target/kind mismatch, out-of-range parameters.
    """

    def __init__(
        self,
        *,
        name: str = "D",
        version: str = "1",
        observables: Iterable[ObservableType] = (),
        agents: Iterable[AgentDecl] = (),
        operations: Iterable[OperationDecl] = (),
        validators: Iterable[ValidatorSpec] = (),
        interfaces: Interfaces | None = None,
        parameters: Parameters | None = None,
        file: str = "<python>",
    ) -> None:
        self.name = name
        self.version = version
        self.file = file
        self.observables: dict[str, ObservableType] = _index(observables, "observables", file)
        self.agents: dict[str, AgentDecl] = _index(agents, "agents", file)
        self.operations: dict[str, OperationDecl] = _index(operations, "operations", file)
        self.validators: dict[str, ValidatorSpec] = _index(validators, "validators", file)
        self.interfaces = interfaces or Interfaces()
        self.parameters = parameters or Parameters()
        self._check()
        self._effect_kinds = {
            name: frozenset(t.kind for t in op.effects) for name, op in self.operations.items()
        }

    def _check(self) -> None:
        f = self.file
        p = self.parameters
        if not (math.isfinite(p.epsilon) and p.epsilon >= 0):
            raise DeclarationPackageError("epsilon must be >= 0", file=f, path="parameters.epsilon")
        if p.patience < 1:
            raise DeclarationPackageError(
                "patience must be >= 1", file=f, path="parameters.patience"
            )
        if not 0.0 <= p.tau <= 1.0:
            raise DeclarationPackageError("tau must be in [0, 1]", file=f, path="parameters.tau")
        if p.p_min is not None and not 0.0 <= p.p_min <= 1.0:
            raise DeclarationPackageError(
                "p_min must be in [0, 1]", file=f, path="parameters.p_min"
            )
        unknown = set(p.bound_conditions) - BOUND_CONDITIONS
        if unknown:
            raise DeclarationPackageError(
                f"unknown bound conditions {sorted(unknown)}",
                file=f,
                path="parameters.bound_conditions",
            )
        for i, ag in enumerate(self.agents.values()):
            for cap, v in ag.capabilities.items():
                if not (isinstance(v, int | float) and 0.0 <= v <= 1.0):
                    raise DeclarationPackageError(
                        f"capability value {v!r} is not in [0, 1]",
                        file=f,
                        path=f"agents[{i}].capabilities.{cap}",
                    )
        for i, ob in enumerate(self.observables.values()):
            if ob.kind not in ("action", "artifact"):
                raise DeclarationPackageError(
                    f"kind must be action or artifact, not {ob.kind!r}",
                    file=f,
                    path=f"observables[{i}].kind",
                )
        roles = {r for a in self.agents.values() for r in a.roles}
        for i, op in enumerate(self.operations.values()):
            base = f"operations[{i}]"
            if not op.proposers:
                raise DeclarationPackageError("no proposers", file=f, path=f"{base}.proposers")
            for j, ref in enumerate(op.proposers):
                if not _proposer_ref_ok(ref, self.agents, roles):
                    raise DeclarationPackageError(
                        f"proposer {ref!r} is not a declared agent or role",
                        file=f,
                        path=f"{base}.proposers[{j}]",
                    )
            for j, req in enumerate(op.requires):
                if req not in self.validators:
                    raise DeclarationPackageError(
                        f"required certificate {req!r} is not a declared validator",
                        file=f,
                        path=f"{base}.requires[{j}]",
                    )
            if not op.effects:
                raise DeclarationPackageError("no effects declared", file=f, path=f"{base}.effects")
            for j, t in enumerate(op.effects):
                if t.kind == AssertionKind.NODE and t.target != "new":
                    raise DeclarationPackageError(
                        "a node effect must have target 'new'",
                        file=f,
                        path=f"{base}.effects[{j}].target",
                    )
                if t.kind == AssertionKind.STATUS and t.values is not None:
                    for k, v in enumerate(t.values):
                        if v not in Status.__members__.values():
                            raise DeclarationPackageError(
                                f"{v!r} is not a status",
                                file=f,
                                path=f"{base}.effects[{j}].values[{k}]",
                            )
            if op.transports and not op.removes:
                raise DeclarationPackageError(
                    "transports requires removes", file=f, path=f"{base}.transports"
                )
        for i, vs in enumerate(self.validators.values()):
            if not callable(vs.fn):
                raise DeclarationPackageError(
                    "validator is not callable", file=f, path=f"validators[{i}]"
                )

    # -- queries ---------------------------------------------------------------------
    def effect_kinds(self, operation: str) -> frozenset[AssertionKind]:
        """Assertion kinds ``operation`` declares effects of (empty if undeclared)."""
        return self._effect_kinds.get(operation, frozenset())

    def may_propose(self, agent: str, operation: str) -> bool:
        """True if ``agent`` is declared and authorized to propose ``operation``."""
        op = self.operations.get(operation)
        ag = self.agents.get(agent)
        if op is None or ag is None:
            return False
        for ref in op.proposers:
            if ref == "*" or ref == agent or (ref.startswith("role:") and ref[5:] in ag.roles):
                return True
        return False

    def validate(self, validator: str, inp: ValidatorInput) -> bool:
        """Run validator ``validator`` of V once on ``inp``.

        Raises:
            KeyError: ``validator`` is not declared.
            ValidatorError: the validator raised or returned a non-boolean.
        """
        spec = self.validators[validator]
        try:
            out = spec.fn(inp)
        except Exception as exc:  # wrapped: a validator's own failure, typed
            raise ValidatorError(
                f"validator raised {type(exc).__name__}: {exc}", validator=validator
            ) from exc
        if not isinstance(out, bool):
            raise ValidatorError(
                f"validator returned {type(out).__name__}, not bool", validator=validator
            )
        return out

    def fingerprint(self) -> str:
        """A stable sha256 over the declarative content (interface code excluded).

        Covers name, version, observables, agents (capabilities, roles), operations (all
        fields), validators (name, version, source, params) and parameters.
        """
        import dataclasses
        import hashlib

        def plain(obj: Any) -> Any:
            if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
                return {
                    f.name: plain(getattr(obj, f.name))
                    for f in dataclasses.fields(obj)
                    if f.name != "fn"
                }
            if isinstance(obj, Mapping):
                return {str(k): plain(v) for k, v in sorted(obj.items())}
            if isinstance(obj, list | tuple):
                return [plain(v) for v in obj]
            return obj

        doc = {
            "name": self.name,
            "version": self.version,
            "observables": plain(self.observables),
            "agents": plain(self.agents),
            "operations": plain(self.operations),
            "validators": plain(self.validators),
            "parameters": plain(self.parameters),
        }
        body = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()

    def __repr__(self) -> str:
        return (
            f"DeclarationPackage(name={self.name!r}, version={self.version!r}, "
            f"agents={len(self.agents)}, operations={len(self.operations)})"
        )


def _index(items: Iterable[Any], what: str, file: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        name = item.id if isinstance(item, AgentDecl) else item.name
        if not isinstance(name, str) or not name:
            raise DeclarationPackageError("empty name", file=file, path=f"{what}[{i}]")
        if name in out:
            raise DeclarationPackageError(
                f"duplicate name {name!r}", file=file, path=f"{what}[{i}]"
            )
        out[name] = item
    return out
