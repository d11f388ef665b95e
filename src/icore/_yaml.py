"""YAML manifests read with values that cannot convert named by line (issue 29).

PyYAML's safe loader turns ``1000...0`` (over Python's 4300-digit limit) and
``2026-02-30`` / ``0000-01-01`` (a timestamp that is no date) into a bare ValueError that
names no line; every manifest loader of icore (run, team, MCP gateway) then said only
"a value YAML cannot convert". :func:`safe_load` is ``yaml.safe_load`` with those two
constructors raising :class:`yaml.constructor.ConstructorError` (a ``MarkedYAMLError``)
at the value's line and column, so each loader's YAML error path names the place.

A key given twice in one mapping is refused too (:class:`DuplicateKeyError`, naming both
lines): YAML itself keeps the last one, so a second ``req/*:`` in a team manifest's
``ownership`` silently changed the key's owner, and a second top-level ``ownership:``
dropped the whole first block (QA r8-bad D19). A merge key (``<<: *base``) is not a
duplicate: the mapping's own keys override the merged ones, as YAML specifies; but a key
two merged mappings both bring (``<<: [*a, *b]``: YAML keeps the first, silently) is
refused the same way (#29).

:class:`ScalarTypes` is the base of the manifests' pydantic models: pydantic's lax mode
read ``timeout_s: true`` as 1 second, ``repeat: "3"`` as 3 and ``revision: "no"`` as
false (issue 29); a number field takes only a YAML number, a bool field only ``true`` or
``false``, and the error names the field and what was given.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

import yaml
from pydantic import BaseModel, ValidationInfo, field_validator
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_MERGE = "tag:yaml.org,2002:merge"


class DuplicateKeyError(ConstructorError):
    """A YAML mapping holds the same key twice (a ``yaml.MarkedYAMLError``).

    Attributes:
        key: the key's text; lines: the 1-based lines of its first and second entry.
    """

    def __init__(self, key: str, lines: tuple[int, int], mapping: Node, again: Node,
                 *, merged: bool = False) -> None:
        lost = ("two mappings merged with '<<' both hold it; YAML keeps only the first "
                "one's, so the other entry" if merged else
                "YAML keeps only the last one, so the first entry")
        super().__init__("while constructing a mapping", mapping.start_mark,
                         f"duplicate key {key!r} (first at line {lines[0]}, again at line "
                         f"{lines[1]}); {lost} would be silently lost", again.start_mark)
        self.key, self.lines = key, lines


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader``: marked int/timestamp errors, a key given twice refused."""

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        """Compose as YAML does, then refuse a scalar key given twice.

        Checked before any merge key is flattened, so merged keys are not counted.

        Raises:
            DuplicateKeyError: the same (tag, text) key twice in this mapping.
        """
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.tag == _MERGE:
                _merged_once(node, v)
                continue
            if not isinstance(k, ScalarNode):
                continue
            line = k.start_mark.line + 1
            if (k.tag, k.value) in seen:
                raise DuplicateKeyError(str(k.value), (seen[(k.tag, k.value)], line), node, k)
            seen[(k.tag, k.value)] = line
        return node


def _merged_keys(source: Node, out: dict[tuple[str, str], ScalarNode],
                 visiting: set[int]) -> None:
    """The scalar keys a merged mapping brings, its own merges included (a cycle stops)."""
    if not isinstance(source, MappingNode) or id(source) in visiting:
        return
    visiting.add(id(source))
    for k, v in source.value:
        if isinstance(k, ScalarNode) and k.tag == _MERGE:
            for sub in (v.value if isinstance(v, SequenceNode) else [v]):
                _merged_keys(sub, out, visiting)
        elif isinstance(k, ScalarNode):
            out.setdefault((k.tag, k.value), k)


def _merged_once(mapping: MappingNode, merge: Node) -> None:
    """Refuse a key two mappings of one merge (``<<: [*a, *b]``) both bring.

    YAML keeps the first one and silently drops the other, as with a key given twice
    (#29). A mapping's own keys over merged ones are YAML's rule and stay allowed.

    Raises:
        DuplicateKeyError: the key, with the lines of both entries.
    """
    if not isinstance(merge, SequenceNode):
        return
    seen: dict[tuple[str, str], ScalarNode] = {}
    for source in merge.value:
        keys: dict[tuple[str, str], ScalarNode] = {}
        _merged_keys(source, keys, set())
        for tk, k in keys.items():
            if tk in seen and seen[tk] is not k:
                first = seen[tk].start_mark.line + 1
                raise DuplicateKeyError(str(k.value), (first, k.start_mark.line + 1),
                                        mapping, k, merged=True)
            seen.setdefault(tk, k)


def _int(loader: yaml.SafeLoader, node: Node) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)  # type: ignore[arg-type]
    except (ValueError, OverflowError):
        digits = sum(c.isdigit() for c in str(node.value))
        raise ConstructorError(None, None, f"an integer of {digits} digits (over 4300 are "
                               "refused; quote it to keep it as text)",
                               node.start_mark) from None


def _timestamp(loader: yaml.SafeLoader, node: Node) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)  # type: ignore[arg-type]
    except (ValueError, OverflowError) as exc:
        raise ConstructorError(None, None, f"{str(node.value)[:40]!r} is no date or time "
                               f"({exc}); quote it to keep it as text",
                               node.start_mark) from None


_Loader.add_constructor("tag:yaml.org,2002:int", _int)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``, an unconvertible int or timestamp a marked error.

    Raises:
        yaml.YAMLError: as ``yaml.safe_load``; an integer over 4300 digits or a
            timestamp that is no date (``2026-02-30``, year 0) is a
            :class:`yaml.constructor.ConstructorError` with the value's line and column.
        DuplicateKeyError: a mapping holds the same key twice (both lines named).
        RecursionError: nesting too deep (as ``yaml.safe_load``).
    """
    return yaml.load(text, Loader=_Loader)


def _leaves(ann: Any) -> set[Any]:
    """The scalar types a field annotation admits (through unions, tuples, Annotated)."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _leaves(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_leaves(a) for a in typing.get_args(ann)))
    if origin is typing.Literal:
        return {type(a) for a in typing.get_args(ann)}
    return {ann}


def _items(ann: Any) -> Any:
    """The element annotation of ``tuple[X, ...]`` / ``list[X]`` (else None)."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _items(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        for a in typing.get_args(ann):
            if (inner := _items(a)) is not None:
                return inner
        return None
    if origin in (tuple, list, set, frozenset):
        args = [a for a in typing.get_args(ann) if a is not Ellipsis]
        return args[0] if len(set(args)) == 1 else None
    return None


_YAML11_EXP = re.compile(r"[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+")
"""A number YAML 1.1 reads as a string (``1e300``: no dot, or no exponent sign)."""


def scalar_problem(value: Any, ann: Any) -> str | None:
    """Why ``value`` (as parsed from YAML/JSON) does not fit ``ann`` without coercion.

    Returns:
        ``"expected a valid number, not true"`` / ``"... not the string '3'"`` /
        ``"expected a valid boolean (true or false), not 'no'"``, or None when the value
        may go on to pydantic's own validation (which names other mismatches).
    """
    if isinstance(value, (list, tuple)):
        inner = _items(ann)
        if inner is None:
            return None
        for i, v in enumerate(value):
            if (p := scalar_problem(v, inner)) is not None:
                return f"item {i}: {p}"
        return None
    leaves = _leaves(ann)
    numeric = bool(leaves & {int, float}) and not leaves & {bool, str, Any}
    if numeric and isinstance(value, (bool, str)):
        shown = str(value).lower() if isinstance(value, bool) else f"the string {value!r:.40}"
        if isinstance(value, str) and _YAML11_EXP.fullmatch(value.strip()):
            m, _, e = value.strip().lower().partition("e")
            shown += (" (YAML 1.1 reads an exponent without a dot and a sign as a string: "
                      f"write {m if '.' in m else m + '.0'}e{e if e[0] in '+-' else '+' + e})")
        return f"expected a valid number, not {shown}"
    if leaves <= {bool, type(None)} and bool in leaves and value is not None \
            and not isinstance(value, bool):
        return f"expected a valid boolean (true or false), not {value!r:.40}"
    return None


class ScalarTypes(BaseModel):
    """A pydantic base that takes numbers and bools only as YAML numbers and bools.

    Raises:
        pydantic.ValidationError: at the field, ``expected a valid number, not true`` (a
            bool or a string for an ``int``/``float`` field, also inside a
            ``tuple[int, ...]``) or ``expected a valid boolean ...`` (anything else for a
            ``bool``).
    """

    @field_validator("*", mode="before")
    @classmethod
    def _no_coercion(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        if name is None or name not in cls.model_fields:
            return value
        if (problem := scalar_problem(value, cls.model_fields[name].annotation)) is not None:
            raise ValueError(problem)
        return value


__all__ = ["DuplicateKeyError", "ScalarTypes", "safe_load", "scalar_problem"]
