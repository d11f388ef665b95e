"""Error families (issue 30 item 5): every public error reports its own family's code.

Over the library's front doors; the lab's errors (``BenchError`` and its subclasses) are
checked by the same rule in tests/lab/test_lab_house.py (library tests never name the lab).

The root's ``unclassified`` code is never reported by a public error, and an error's code
is one of the codes of the family (package) it belongs to (``icore.errors.FAMILIES``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import icore
import icore.errors as errors_mod
from icore.errors import (
    FAMILIES,
    DataUnavailable,
    ErrorCode,
    FenceError,
    IcoreError,
    IntegrationError,
    LineageError,
    MissingExtra,
    RecordError,
    StoreError,
    TransportError,
)

# errors defined in icore.errors belong to the family of the root they hang from; the
# first root that matches wins, so the transport branch (net) comes before StoreError:
# OwnerUnreachable is an OwnerUnavailable reached over a transport (code ``transport``)
_SHARED_ROOTS = {TransportError: "net", RecordError: "records", LineageError: "records",
                 StoreError: "memory", FenceError: "fence", MissingExtra: "extras",
                 IntegrationError: "integrations", DataUnavailable: "data"}


def _public_errors() -> dict[str, type[IcoreError]]:
    out: dict[str, type[IcoreError]] = {}
    for _, obj in inspect.getmembers(errors_mod, inspect.isclass):
        if issubclass(obj, IcoreError) and obj is not IcoreError:
            out[f"icore.errors.{obj.__name__}"] = obj
    for mod in pkgutil.walk_packages(icore.__path__, "icore."):
        if any(part.startswith("_") for part in mod.name.split(".")[1:]) or not mod.ispkg:
            continue
        try:
            pkg = importlib.import_module(mod.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for name in getattr(pkg, "__all__", ()):
            obj = getattr(pkg, name, None)
            if inspect.isclass(obj) and issubclass(obj, IcoreError) and obj is not IcoreError:
                out[f"{mod.name}.{name}"] = obj
    return out


def _family(cls: type[IcoreError]) -> str:
    if cls.__module__ == "icore.errors":
        for root, fam in _SHARED_ROOTS.items():
            if issubclass(cls, root):
                return fam
        raise AssertionError(f"{cls.__name__} in icore.errors hangs from no known root")
    parts = cls.__module__.split(".")
    return parts[1].lstrip("_") if len(parts) > 1 else ""


PUBLIC = _public_errors()


def test_the_walk_finds_every_layer() -> None:
    """The walk reaches every library room with errors (the lab's: tests/lab/test_lab_house.py)."""
    families = {_family(c) for c in PUBLIC.values()}
    assert {"records", "memory", "fence", "net", "state", "audit", "adapters",
            "live", "agents", "extras", "data"} <= families


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_no_public_error_reports_another_family(name: str) -> None:
    cls = PUBLIC[name]
    fam = _family(cls)
    assert fam in FAMILIES, f"{name}: family {fam!r} is not in icore.errors.FAMILIES"
    assert cls.code is not ErrorCode.UNCLASSIFIED, f"{name} sets no code"
    assert cls.code in FAMILIES[fam], f"{name} reports {cls.code!r}, not a {fam} code"


def test_the_root_reports_no_family() -> None:
    assert IcoreError.code is ErrorCode.UNCLASSIFIED
    assert all(ErrorCode.UNCLASSIFIED not in codes for codes in FAMILIES.values())


def test_live_llm_and_owner_errors_have_their_own_codes() -> None:
    from icore.agents import LLMUnavailable
    from icore.live import LiveManifestError, LiveRunError
    from icore.memory import OwnerUnavailable

    assert LiveManifestError.code is ErrorCode.LIVE
    assert LiveRunError.code is ErrorCode.LIVE
    assert LLMUnavailable.code is ErrorCode.LLM
    assert OwnerUnavailable.code is ErrorCode.OWNER_UNAVAILABLE
