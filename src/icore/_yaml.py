"""YAML manifests read with values that cannot convert named by line (issue 29).

PyYAML's safe loader turns ``1000...0`` (over Python's 4300-digit limit) and
``2026-02-30`` / ``0000-01-01`` (a timestamp that is no date) into a bare ValueError that
names no line; every manifest loader of icore (run, team, MCP gateway) then said only
"a value YAML cannot convert". :func:`safe_load` is ``yaml.safe_load`` with those two
constructors raising :class:`yaml.constructor.ConstructorError` (a ``MarkedYAMLError``)
at the value's line and column, so each loader's YAML error path names the place.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import Node


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose int and timestamp errors carry the value's mark."""


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
        RecursionError: nesting too deep (as ``yaml.safe_load``).
    """
    return yaml.load(text, Loader=_Loader)


__all__ = ["safe_load"]
