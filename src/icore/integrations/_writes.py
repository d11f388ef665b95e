"""Sibling calls that write a fact another call depends on: one after the other.

Calls of one model message run at once (LangGraph ``ainvoke``'s ``ToolNode``, the OpenAI
Agents SDK's parallel tool calls), and each is validated before either has written
(planfence Sec. 6: validation is atomic neither with the call nor across calls). Two
``book(slot 09:00)`` siblings planned from one read of ``slot/dr-lee`` would both pass
the gate and book the slot twice (QA qa-new12 S2). A fenced tool that declares the keys
its effect writes (``writes=``) claims them from before its gate check until its body
ends; a protected call whose D(a) overlaps a claim waits for that call to end, and its
own gate check then sees the new head and refuses it (``stale``) as it refuses a second
call sent after the first. Calls with disjoint keys never wait for each other. The
same rule as the MCP gateway's ``writes:`` (:mod:`icore.mcp._gateway_inflight`).

One registry per process (:data:`CLAIMS`): keys are compared as text, so two workspaces
that use one key name only wait for each other, never run at once on one fact. Waiters
may be threads (a sync tool in a framework's worker thread) or asyncio tasks on any
loop; a sync call on the thread of an event loop whose own task holds the claim cannot
wait (it would block the loop that must finish the claim): it raises instead. A call
never waits for a claim of its own (a tool body calling another fenced tool).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from icore.errors import IntegrationError
from icore.workspace import GLOB_CHARS, arg_fault

Writes = Iterable[str] | Callable[[Mapping[str, Any]], Iterable[str]]
"""The keys a tool's effect writes: keys, or a function of the call's arguments."""

_HELD: ContextVar[tuple[_Claim, ...]] = ContextVar("icore_write_claims", default=())


class _Claim:
    __slots__ = ("done", "keys", "loop", "waiters")

    def __init__(self, keys: frozenset[str], loop: asyncio.AbstractEventLoop | None) -> None:
        self.keys = keys
        self.loop = loop
        self.done = threading.Event()
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class WriteClaims:
    """The write sets of the fenced calls between their gate check and their end.

    Thread-safe; one lock guards the claims, never held while a call waits or runs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: list[_Claim] = []

    @property
    def active(self) -> bool:
        """Some call holds a claim now (a racy read: see :func:`claimed`)."""
        return bool(self._claims)

    def _busy(self, deps: frozenset[str]) -> _Claim | None:
        held = _HELD.get()
        return next((c for c in self._claims if c not in held and c.keys & deps), None)

    def _add(self, writes: frozenset[str], loop: asyncio.AbstractEventLoop | None
             ) -> _Claim | None:
        if not writes:
            return None
        claim = _Claim(writes, loop)
        self._claims.append(claim)
        return claim

    def enter(self, deps: frozenset[str], writes: frozenset[str], *, tool: str
              ) -> _Claim | None:
        """Wait (this thread) until no call in flight writes a key of ``deps``.

        Then claim ``writes`` for this call.

        Returns:
            the claim to give :meth:`leave` (None when ``writes`` is empty).

        Raises:
            IntegrationError: a call of the event loop running on this thread holds a
                key of ``deps`` (a sync tool cannot wait for it here without blocking
                that loop): make the tool ``async def``, or run it in a worker thread.
        """
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        while True:
            with self._lock:
                busy = self._busy(deps)
                if busy is None:
                    return self._add(writes, loop)
            if loop is not None and busy.loop is loop:
                raise IntegrationError(
                    "a sibling call that writes a fact this call depends on is still "
                    "running on this thread's event loop; a sync tool cannot wait for it "
                    "here", tool=tool, keys=sorted(busy.keys & deps),
                    fix="make the tool async def (or run it in a worker thread)")
            busy.done.wait()

    async def aenter(self, deps: frozenset[str], writes: frozenset[str]) -> _Claim | None:
        """:meth:`enter` for an asyncio task: waits without blocking its loop.

        Cancelled while it waits: nothing is claimed.
        """
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                busy = self._busy(deps)
                if busy is None:
                    return self._add(writes, loop)
                fut: asyncio.Future[None] = loop.create_future()
                busy.waiters.append((loop, fut))
            await fut

    def leave(self, claim: _Claim | None) -> None:
        """End ``claim``: the calls waiting on its keys go on (then look again)."""
        if claim is None:
            return
        with self._lock:
            self._claims.remove(claim)
            waiters, claim.waiters = claim.waiters, []
        claim.done.set()
        for loop, fut in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_wake, fut)

    @contextlib.contextmanager
    def held(self, claim: _Claim | None) -> Iterator[None]:
        """Mark ``claim`` as this context's own for the call's extent (see module)."""
        if claim is None:
            yield
            return
        token = _HELD.set((*_HELD.get(), claim))
        try:
            yield
        finally:
            _HELD.reset(token)


CLAIMS = WriteClaims()
"""The process's registry of write claims (every fenced tool's)."""


def static_keys(scope: Any, *, what: str) -> frozenset[str] | None:
    """``depends_on=`` / ``writes=`` checked at wrap time: its keys, or None (a function).

    Raises:
        IntegrationError: ``scope`` is a str or a mapping, not a collection of keys or a
            function, or holds a key that is not a str (never coerced: 1 is no fact key,
            QA qa-new10b S4).
    """
    if callable(scope):
        return None
    if isinstance(scope, str | bytes):
        raise IntegrationError(f"{what} must be a collection of keys, not a str",
                               got=str(scope), fix=f"{what}={{{str(scope)!r}}}")
    if isinstance(scope, Mapping):  # its values would be dropped without a word
        raise IntegrationError(f"{what} must be a collection of keys, not a mapping",
                               got=type(scope).__name__,
                               fix=f"{what}={set(map(str, scope))!r} (the keys only)")
    try:
        keys = frozenset(scope)
    except TypeError:
        raise IntegrationError(f"{what} must be a collection of keys or a function of "
                               "the call's arguments", got=type(scope).__name__) from None
    bad = next((k for k in keys if not isinstance(k, str)), None)
    if bad is not None:
        raise IntegrationError(f"{what} keys must be str (fact keys)", fix=f"{what}="
                               f"{{{str(bad)!r}}}", got=f"{type(bad).__name__} {bad!r}"[:80])
    if what == "writes":
        for k in keys:
            if (why := key_fault(k)) is not None:
                raise IntegrationError(f"a writes key must name one fact, not {why}",
                                       key=ascii(k)[:80], fix="writes={'slot/09:00'}: "
                                       "the exact keys the effect writes (or a function "
                                       "of the call's arguments)")
    return keys


def key_fault(key: str) -> str | None:
    """Why ``key`` names no fact a claim could guard (None: it names one).

    Claims compare keys as text and a ``depends_on`` key is always one fact, so a
    ``writes`` pattern (``slot/*``), an empty key or one no store can hold (a NUL, a
    lone surrogate) would never meet a sibling's key: the claim would silently guard
    nothing (sweep round 9).
    """
    if not key:
        return "an empty str"
    if "\x00" in key:
        return "a key holding a NUL"
    if not key.isascii():
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            return "a key holding a lone surrogate"
    if any(c in GLOB_CHARS for c in key):
        return "a pattern ('*', '?' and '[' only declare owners)"
    return None


def keys_for(scope: Any, args: Mapping[str, Any], *, what: str, tool: str
             ) -> frozenset[str]:
    """The keys of ``scope`` (static keys, or a function of ``args``) for one call.

    Raises:
        IntegrationError: the function raised, or returned a str or keys that are not str.
    """
    if scope is None:
        return frozenset()
    if not callable(scope):
        return frozenset(scope)
    try:
        keys = scope(args)
        if isinstance(keys, str | bytes):
            raise TypeError("a str, not a collection of keys")
        out = frozenset(keys)
    except Exception as exc:
        raise IntegrationError(f"the {what} function failed on the call's arguments",
                               tool=tool, error=f"{type(exc).__name__}: {exc}"[:200]) from exc
    if any(not isinstance(k, str) for k in out):
        raise IntegrationError(f"the {what} function returned keys that are not str",
                               tool=tool)
    if what != "writes":
        return out
    faults = {k: why for k in out if (why := key_fault(k)) is not None}
    for k, why in faults.items():
        if arg_fault(k, args) is None:  # the function's own text: a developer's mistake
            raise IntegrationError(f"the writes function returned {why}, not one fact's "
                                   "key", tool=tool, key=ascii(k)[:80])
    # a key an argument's value spoiled (``day="*"``) names no fact: the gate's D(a)
    # check refuses such a call with the argument named; nothing to claim for it
    return out - faults.keys()


@contextlib.contextmanager
def claimed(depends_on: Any, writes: Any, args: Mapping[str, Any], *, tool: str
            ) -> Iterator[None]:
    """One sync call's extent: wait for the claims on its D(a), hold its ``writes``.

    A D(a) function that fails is not asked here: the guard's own check refuses the
    call with its error (nothing to wait for). Raises what :func:`keys_for` (``writes``)
    and :meth:`WriteClaims.enter` raise.
    """
    need = _needs(depends_on, writes, args, tool=tool)
    if need is None:
        yield
        return
    claim = CLAIMS.enter(*need, tool=tool)
    try:
        with CLAIMS.held(claim):
            yield
    finally:
        CLAIMS.leave(claim)


@contextlib.asynccontextmanager
async def aclaimed(depends_on: Any, writes: Any, args: Mapping[str, Any], *, tool: str
                   ) -> AsyncIterator[None]:
    """:func:`claimed` for an asyncio task (waits without blocking its loop)."""
    need = _needs(depends_on, writes, args, tool=tool)
    if need is None:
        yield
        return
    claim = await CLAIMS.aenter(*need)
    try:
        with CLAIMS.held(claim):
            yield
    finally:
        CLAIMS.leave(claim)


def _needs(depends_on: Any, writes: Any, args: Mapping[str, Any], *, tool: str
           ) -> tuple[frozenset[str], frozenset[str]] | None:
    """(D(a), writes) of one call, or None when there is nothing to wait for or claim."""
    mine = keys_for(writes, args, what="writes", tool=tool)
    if not mine and not CLAIMS.active:
        return None
    try:
        deps = keys_for(depends_on, args, what="depends_on", tool=tool)
    except IntegrationError:
        deps = frozenset()
    return deps, mine
