"""Issue 29, fifth sweep round: ``icore mcp --http`` ports and error messages of odd values.

``--http 127.0.0.1:١`` (an Arabic-Indic one: ``\\d`` matches it and ``int`` reads it) bound
port 1 and served instead of refusing; ``IcoreError.__str__`` formatted each field with
``repr``, which raises for an object whose ``__repr__`` raises, a 5000-deep list or an
int past the 4300-digit limit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icore.errors import IntegrationError, brief

from ._cli import invoke


@pytest.mark.parametrize("value", ["127.0.0.1:\u0661", "127.0.0.1:\u0668\u0668\u0660\u0668",
                                   "127.0.0.1:+80", "127.0.0.1:\uff18"])
def test_http_port_in_other_digits_is_a_usage_error(tmp_path: Path, value: str) -> None:
    man = tmp_path / "gw.yaml"
    man.write_text("name: gw\nupstreams: {notes: {command: /bin/true}}\n")
    rc, out = invoke("mcp", str(man), "--http", value)
    assert rc == 2 and "--http" in out and "HOST:PORT" in out


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr")


def _deep(n: int) -> list[Any]:
    x: list[Any] = []
    for _ in range(n):
        x = [x]
    return x


@pytest.mark.parametrize("value", [_BadRepr(), _deep(20_000), 10**5000, "x" * 100_000,
                                   {"k": _BadRepr()}], ids=["repr", "deep", "int", "long",
                                                            "nested-repr"])
def test_error_fields_and_brief_never_raise(value: Any) -> None:
    text = str(IntegrationError("bad", got=value))
    assert text.startswith("bad (got=") and len(text) < 4100
    shown = brief(value)
    assert 0 < len(shown) <= 120


def test_brief_keeps_a_short_repr() -> None:
    assert brief("abc") == "'abc'" and brief([1, 2]) == "[1, 2]"
    assert brief(10**5000) == f"<int of {(10**5000).bit_length()} bits>"
    assert brief(_BadRepr()).startswith("<_BadRepr")
    assert str(IntegrationError("m", keys=[str(i) for i in range(50)])).count("'") == 100
