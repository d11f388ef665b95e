"""Optional extras: import a dependency that an extra brings, or fail with a one-line hint.

``pip install icore`` brings what records, memory, fence, net and state need. Benchmarks
(numpy, scipy, matplotlib) and each framework integration are extras; code that needs one
calls :func:`require`, so a missing extra fails with ``pip install 'icore[<extra>]'``
instead of a bare ``ModuleNotFoundError`` deep in a traceback.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import itertools
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from types import ModuleType
from typing import Any, TypeVar

from icore.errors import MissingExtra

T = TypeVar("T")


def require(module: str, extra: str, *, feature: str = "") -> ModuleType:
    """Import ``module``; if it is missing, raise a one-line install hint.

    Args:
        module: dotted module name (``"numpy"``, ``"langgraph.graph"``).
        extra: the icore extra that installs it (``"bench"``, ``"langgraph"``).
        feature: what needs it, for the message (default: the extra's name).

    Returns:
        The imported module.

    Raises:
        MissingExtra: ``module`` (or a module it imports) is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        raise MissingExtra(
            f"{feature or 'icore[' + extra + ']'} needs {missing}: "
            f"pip install 'icore[{extra}]'", module=missing, extra=extra) from None


def _release(version: str) -> tuple[int, ...]:
    nums = []
    for part in version.split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        nums.append(int(digits))
    return tuple(nums)


def pinned_minimum(dist: str, extra: str, default: str) -> str:
    """The oldest ``dist`` release icore's ``extra`` pins (``dist>=X`` in pyproject).

    Read from the installed icore's metadata (pyproject's ``[project.optional-dependencies]``
    as built), so a message names the pin the package really has.

    Args:
        dist: the distribution (``"mcp"``).
        extra: the icore extra whose pin is read (``"mcp"``).
        default: the minimum when the metadata is missing or has no such pin (a source
            tree run without an install).

    Returns:
        The version string after ``>=`` (``"2.3"``).
    """
    import re
    try:
        reqs = importlib.metadata.requires("icore") or []
    except importlib.metadata.PackageNotFoundError:
        reqs = []
    pat = re.compile(rf"^{re.escape(dist)}\s*>=\s*([0-9][0-9A-Za-z.]*)\s*[,;]"
                     rf".*extra\s*==\s*['\"]{re.escape(extra)}['\"]")
    for r in reqs:
        m = pat.match(r)
        if m is not None:
            return m.group(1)
    return default


def require_version(module: str, dist: str, minimum: str, *, extra: str = "",
                    feature: str = "", fix: str = "") -> ModuleType:
    """Import ``module`` of the distribution ``dist`` at version ``minimum`` or newer.

    Unlike :func:`require`, an installed but older ``dist`` gets an upgrade hint
    (``pip install -U 'dist>=minimum'``), never an install line that could keep or bring
    back the old major version.

    Args:
        module: dotted module name (``"ag2"``).
        dist: the distribution that provides it (``"ag2"``).
        minimum: the oldest supported release (``"1.2"``).
        extra: the icore extra that installs it (default: ``dist``).
        feature: what needs it, for the message.
        fix: what to do about an older ``dist``, in place of the upgrade line (when
            upgrading would break what else the environment holds).

    Returns:
        The imported module.

    Raises:
        MissingExtra: ``dist`` is older than ``minimum`` (the upgrade line or ``fix``), or
            ``module`` (or a module it imports) is missing (the extra's install line: the extra pins
            ``dist>=minimum``, so it cannot downgrade).
    """
    what = feature or f"icore[{extra or dist}]"
    try:
        installed: str | None = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed is not None and _release(installed) < _release(minimum):
        raise MissingExtra(
            f"{what} needs {dist}>={minimum}; {dist} {installed} is installed: "
            + (fix or f"pip install -U '{dist}>={minimum}'"), module=module,
            extra=extra or dist,
            installed=installed, minimum=minimum)
    return require(module, extra or dist, feature=feature)


def lazy_attributes(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package ``__getattr__`` (PEP 562) importing each front-door name on first use.

    For a front door whose names would pull heavy layers into a process that needs none of
    them (the agent process of a live run imports :mod:`icore.live` and
    :mod:`icore.agents`, but neither the coordinator nor iCORE). The package still lists
    the names in ``__all__`` and imports them under ``TYPE_CHECKING`` for type checkers.

    Args:
        package: the package's ``__name__``.
        homes: exported name -> dotted name of the module that defines it.

    Returns:
        The function to bind as the package's module-level ``__getattr__``; it imports the
        home module, caches the value on the package and returns it.

    Raises:
        AttributeError: (from the returned function) ``name`` is not in ``homes``.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


EVENT_LOOP_ENV = "ICORE_EVENT_LOOP"
"""Environment variable choosing the event loop: ``uvloop`` (the default when installed) or
``asyncio`` (the standard library's loop, e.g. to compare the two)."""


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop the owner service and the benchmarks run on (issue 27).

    uvloop (extra ``net``) when it is installed and :data:`EVENT_LOOP_ENV` is not
    ``asyncio``; otherwise ``None``, which :class:`asyncio.Runner` reads as the standard
    loop. uvloop runs the same protocol code (TLS stays on ``ssl.MemoryBIO``, so every
    ciphertext byte is still counted); only the loop's scheduling and socket calls are
    faster.

    Raises:
        ValueError: :data:`EVENT_LOOP_ENV` is set to something other than ``uvloop`` or
            ``asyncio``.
    """
    choice = os.environ.get(EVENT_LOOP_ENV, "").strip().lower()
    if choice not in ("", "uvloop", "asyncio"):
        raise ValueError(f"{EVENT_LOOP_ENV} must be 'uvloop' or 'asyncio', got {choice!r}")
    if choice == "asyncio" or sys.platform == "win32":
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        if choice == "uvloop":
            raise MissingExtra(f"{EVENT_LOOP_ENV}=uvloop needs uvloop: pip install "
                               "'icore[net]'", module="uvloop", extra="net") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion like :func:`asyncio.run`, on :func:`event_loop_factory`'s loop.

    Raises:
        Exception: whatever ``main`` raises.
    """
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(main)
