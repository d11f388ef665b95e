"""Declaration packages: loading, schema errors with file/path, Python construction."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from icore.errors import ErrorCode, IcoreError
from icore.state import (
    AgentDecl,
    AssertionKind,
    DeclarationPackage,
    DeclarationPackageError,
    EffectTemplate,
    ObservableType,
    OperationDecl,
    Parameters,
    declaration_from_dict,
    load_declaration,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "declarations"

MINIMAL = {
    "observables": [{"name": "obs"}],
    "agents": [{"id": "a", "capabilities": {"k": 0.5}, "roles": ["assigner"]}],
    "operations": [
        {
            "name": "introduce",
            "effects": [{"kind": "node", "target": "new", "many": True}],
            "preconditions": {"target_required": False},
        }
    ],
}


@pytest.mark.parametrize("name", ["code_review", "research_report", "planfence_reservation"])
def test_examples_load(name):
    d = load_declaration(EXAMPLES / f"{name}.yaml")
    assert d.operations and d.agents and d.validators
    assert len(d.fingerprint()) == 64


def test_json_and_yaml_agree(tmp_path):
    data = yaml.safe_load((EXAMPLES / "code_review.yaml").read_text())
    p = tmp_path / "d.json"
    p.write_text(json.dumps(data))
    assert (
        load_declaration(p).fingerprint()
        == load_declaration(EXAMPLES / "code_review.yaml").fingerprint()
    )


def test_minimal_package_gets_builtin_interfaces():
    d = declaration_from_dict(MINIMAL)
    assert d.parameters == Parameters()
    assert d.may_propose("a", "introduce") and not d.may_propose("zed", "introduce")
    assert not d.may_propose("a", "nope")


def _err(data, match: str, path: str) -> DeclarationPackageError:
    with pytest.raises(DeclarationPackageError) as info:
        declaration_from_dict(data, file="team.yaml")
    e = info.value
    assert e.file == "team.yaml" and e.path == path, (e.path, e.problem)
    assert match in e.problem, e.problem
    assert isinstance(e, ValueError) and isinstance(e, IcoreError)
    assert e.code == ErrorCode.DECLARATION
    assert e.fields["path"] == path
    return e


class TestMalformed:
    """Every malformed document gives a typed error naming file, path and problem."""

    def test_not_a_mapping(self):
        _err([1, 2], "mapping", "<root>")

    def test_unknown_top_level_field(self):
        _err({**MINIMAL, "agnets": []}, "Extra inputs", "agnets")

    def test_bad_effect_kind(self):
        data = json.loads(json.dumps(MINIMAL))
        data["operations"][0]["effects"][0]["kind"] = "teleport"
        _err(data, "Input should be", "operations[0].effects[0].kind")

    def test_capability_out_of_range(self):
        data = json.loads(json.dumps(MINIMAL))
        data["agents"][0]["capabilities"]["k"] = 1.5
        _err(data, "less than or equal", "agents[0].capabilities.k")

    def test_negative_epsilon(self):
        _err({**MINIMAL, "parameters": {"epsilon": -1}}, "greater than", "parameters.epsilon")

    def test_unknown_proposer(self):
        data = json.loads(json.dumps(MINIMAL))
        data["operations"][0]["proposers"] = ["role:wizard"]
        _err(data, "not a declared agent or role", "operations[0].proposers[0]")

    def test_unknown_required_validator(self):
        data = json.loads(json.dumps(MINIMAL))
        data["operations"][0]["requires"] = ["oracle"]
        _err(data, "not a declared validator", "operations[0].requires[0]")

    def test_node_template_must_target_new(self):
        data = json.loads(json.dumps(MINIMAL))
        data["operations"][0]["effects"][0]["target"] = "subject"
        _err(data, "target 'new'", "operations[0].effects[0].target")

    def test_status_template_value(self):
        data = json.loads(json.dumps(MINIMAL))
        data["operations"].append(
            {"name": "x", "effects": [{"kind": "status", "values": ["done-ish"]}]}
        )
        _err(data, "not a status", "operations[1].effects[0].values[0]")

    def test_operation_without_effects(self):
        data = json.loads(json.dumps(MINIMAL))
        data["operations"].append({"name": "x", "effects": []})
        _err(data, "no effects", "operations[1].effects")

    def test_duplicate_names(self):
        data = json.loads(json.dumps(MINIMAL))
        data["agents"].append({"id": "a"})
        _err(data, "duplicate", "agents[1]")

    def test_unknown_builtin_validator(self):
        _err(
            {**MINIMAL, "validators": [{"name": "v", "builtin": "oracle"}]},
            "unknown built-in",
            "validators[0].builtin",
        )

    def test_validator_needs_exactly_one_source(self):
        _err({**MINIMAL, "validators": [{"name": "v"}]}, "exactly one", "validators[0]")

    def test_unimportable_callable(self):
        _err(
            {**MINIMAL, "validators": [{"name": "v", "callable": "no.such.module:fn"}]},
            "cannot import",
            "validators[0].callable",
        )

    def test_malformed_callable_reference(self):
        _err(
            {**MINIMAL, "validators": [{"name": "v", "callable": "nocolon"}]},
            "module:attribute",
            "validators[0].callable",
        )

    def test_unknown_interface_builtin(self):
        _err(
            {**MINIMAL, "interfaces": {"value": "telepathy"}},
            "unknown built-in",
            "interfaces.value",
        )

    def test_transports_requires_removes(self):
        data = json.loads(json.dumps(MINIMAL))
        data["operations"].append(
            {"name": "t", "transports": True, "effects": [{"kind": "relation"}]}
        )
        _err(data, "transports requires removes", "operations[1].transports")

    def test_unknown_bound_condition(self):
        _err(
            {**MINIMAL, "parameters": {"bound_conditions": ["vibes"]}},
            "Input should be",
            "parameters.bound_conditions[0]",
        )


def test_importable_callable_validator():
    data = {
        **MINIMAL,
        "validators": [
            {"name": "v", "version": "3", "callable": "icore.state._interfaces:capability_value"}
        ],
    }
    d = declaration_from_dict(data)
    assert d.validators["v"].version == "3"
    assert d.validators["v"].source == "icore.state._interfaces:capability_value"

    bad = {**MINIMAL, "validators": [{"name": "v", "callable": "icore.state:ASSIGNER_ROLE"}]}
    _err(bad, "not callable", "validators[0].callable")


def test_callable_interface_by_path():
    d = declaration_from_dict(
        {
            **MINIMAL,
            "interfaces": {
                "weight": "icore.state._interfaces:uniform_weight",
                "assignment_authority": "role:assigner",
            },
        }
    )
    assert d.interfaces.weight.__name__ == "uniform_weight"


class TestFiles:
    """File-level failures name the file."""

    def test_missing_file(self, tmp_path):
        with pytest.raises(DeclarationPackageError, match="cannot read") as info:
            load_declaration(tmp_path / "nope.yaml")
        assert info.value.file.endswith("nope.yaml")

    def test_unparsable_yaml(self, tmp_path):
        p = tmp_path / "bad.yaml"
        p.write_text("agents: [unclosed\n")
        with pytest.raises(DeclarationPackageError, match="cannot parse"):
            load_declaration(p)

    def test_unparsable_json(self, tmp_path):
        p = tmp_path / "bad.json"
        p.write_text("{")
        with pytest.raises(DeclarationPackageError, match="cannot parse"):
            load_declaration(p)

    def test_not_utf8(self, tmp_path):
        p = tmp_path / "bin.yaml"
        p.write_bytes(b"\xff\xfe\x00\x81")
        with pytest.raises(DeclarationPackageError, match="cannot read") as info:
            load_declaration(p)
        assert info.value.file == str(p)

    @pytest.mark.parametrize("name", ["deep.yaml", "deep.json"])
    def test_nested_too_deeply(self, tmp_path, name):
        """Nesting past the recursion limit is a typed error, not a RecursionError."""
        p = tmp_path / name
        p.write_text("[" * 100_000 + "]" * 100_000)
        with pytest.raises(DeclarationPackageError, match="nested too deeply"):
            load_declaration(p)

    def test_error_in_file_names_path(self, tmp_path):
        p = tmp_path / "team.yaml"
        p.write_text(yaml.safe_dump({**MINIMAL, "parameters": {"tau": 3}}))
        with pytest.raises(DeclarationPackageError) as info:
            load_declaration(p)
        assert info.value.path == "parameters.tau" and info.value.file == str(p)
        assert str(p) in str(info.value)


class TestPython:
    """Building D in Python validates the same cross-references."""

    def test_python_package(self):
        d = DeclarationPackage(
            observables=[ObservableType("obs", "artifact", ("f",))],
            agents=[AgentDecl("a", {"k": 1.0}, ("verifier",))],
            operations=[
                OperationDecl(
                    "op", ("role:verifier",), effects=(EffectTemplate(AssertionKind.CLAIM),)
                )
            ],
        )
        assert d.may_propose("a", "op")
        assert "DeclarationPackage(name='D'" in repr(d)

    @pytest.mark.parametrize(
        ("kwargs", "path"),
        [
            ({"parameters": Parameters(patience=0)}, "parameters.patience"),
            ({"parameters": Parameters(tau=2.0)}, "parameters.tau"),
            ({"parameters": Parameters(epsilon=float("nan"))}, "parameters.epsilon"),
            ({"parameters": Parameters(p_min=2.0)}, "parameters.p_min"),
            ({"agents": [AgentDecl("a", {"k": 2.0})]}, "agents[0].capabilities.k"),
            ({"agents": [AgentDecl("")]}, "agents[0]"),
            ({"observables": [ObservableType("o", "thing")]}, "observables[0].kind"),  # type: ignore[arg-type]
            (
                {
                    "operations": [
                        OperationDecl(
                            "x", proposers=(), effects=(EffectTemplate(AssertionKind.CLAIM),)
                        )
                    ]
                },
                "operations[0].proposers",
            ),
        ],
    )
    def test_python_errors(self, kwargs, path):
        with pytest.raises(DeclarationPackageError) as info:
            DeclarationPackage(**kwargs)
        assert info.value.path == path and info.value.file == "<python>"


def test_validate_directly():
    from icore.state import ValidatorError, ValidatorInput, ValidatorSpec

    def boom(inp: ValidatorInput) -> bool:
        raise RuntimeError("x")

    d = DeclarationPackage(
        validators=[
            ValidatorSpec("ok", lambda i: True),
            ValidatorSpec("boom", boom),
            ValidatorSpec("str", lambda i: "y"),
        ]
    )  # type: ignore[arg-type,return-value]
    inp = ValidatorInput((), (), None, {})
    assert d.validate("ok", inp) is True
    with pytest.raises(ValidatorError, match="raised RuntimeError"):
        d.validate("boom", inp)
    with pytest.raises(ValidatorError, match="not bool"):
        d.validate("str", inp)


def test_fingerprint_covers_declarative_content():
    base = declaration_from_dict(MINIMAL)
    assert (
        base.fingerprint() == declaration_from_dict(json.loads(json.dumps(MINIMAL))).fingerprint()
    )
    changed_op = json.loads(json.dumps(MINIMAL))
    changed_op["operations"][0]["productive"] = True
    changed_param = {**MINIMAL, "parameters": {"epsilon": 0.2}}
    changed_cap = json.loads(json.dumps(MINIMAL))
    changed_cap["agents"][0]["capabilities"]["k"] = 0.6
    prints = {
        declaration_from_dict(d).fingerprint() for d in (changed_op, changed_param, changed_cap)
    }
    assert len(prints) == 3 and base.fingerprint() not in prints


@pytest.mark.timeout(30)
def test_load_declaration_refuses_a_fifo(tmp_path: Path) -> None:
    """A named pipe would block the read forever: a typed error naming it and its kind."""
    fifo = tmp_path / "team.yaml"
    os.mkfifo(fifo)
    with pytest.raises(DeclarationPackageError,
                       match=r"is a FIFO \(named pipe\), not a regular file") as ei:
        load_declaration(fifo)
    assert ei.value.file == str(fifo) and ei.value.path == "<root>"
    assert str(fifo) in str(ei.value)
