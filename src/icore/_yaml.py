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
duplicate: the mapping's own keys override the merged ones, as YAML specifies.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode

_MERGE = "tag:yaml.org,2002:merge"


class DuplicateKeyError(ConstructorError):
    """A YAML mapping holds the same key twice (a ``yaml.MarkedYAMLError``).

    Attributes:
        key: the key's text; lines: the 1-based lines of its first and second entry.
    """

    def __init__(self, key: str, lines: tuple[int, int], mapping: Node, again: Node) -> None:
        super().__init__("while constructing a mapping", mapping.start_mark,
                         f"duplicate key {key!r} (first at line {lines[0]}, again at line "
                         f"{lines[1]}); YAML keeps only the last one, so the first entry "
                         "would be silently lost", again.start_mark)
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
        for k, _ in node.value:
            if not isinstance(k, ScalarNode) or k.tag == _MERGE:
                continue
            line = k.start_mark.line + 1
            if (k.tag, k.value) in seen:
                raise DuplicateKeyError(str(k.value), (seen[(k.tag, k.value)], line), node, k)
            seen[(k.tag, k.value)] = line
        return node


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


__all__ = ["DuplicateKeyError", "safe_load"]
