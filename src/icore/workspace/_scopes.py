"""Run scopes of a workspace agent: which conversation a read or a call belongs to (#28).

One agent handle often serves several conversations (a module-level ``ws.agent("desk")``
behind a web service). A call may derive only from versions read in its own run or
conversation, so every read is recorded under the scope current where it happens and a
call's basis is its own scope's reads (planfence Sec. 3.1: the reads are the agent's
memory; here, one memory per conversation). The scope is, first found: ``with
agent.scope(id):`` (a context variable), the application's ``scope_source``, then the
detectors an integration added (the Agents SDK run's trace, the LangGraph thread).

Unscoped is a scope of its own, for a handle that serves one conversation at a time. A
handle that has seen scoped use serves several: its unscoped history would be shared by
every caller whose scope is unknown (a LangGraph run without a ``thread_id``, a thread
that did not inherit the context), so a protected call there is refused with a
:class:`~icore.workspace.WorkspaceError` naming the fix (:meth:`RunScopes.call_scope`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from icore.workspace._errors import WorkspaceError

_SCOPE: ContextVar[Hashable | None] = ContextVar("icore_workspace_scope", default=None)
"""The scope :meth:`RunScopes.scope` set in this context (None: none set)."""

ScopeSource = Callable[[], Hashable | None]
"""A function returning the run scope code runs in now (None when it cannot tell)."""


class RunScopes:
    """The run-scope side of an :class:`~icore.workspace.Agent` (its base class).

    Attributes:
        name: the agent id (errors name it).
        scope_source: the application's scope function, or None.
    """

    name: str
    scope_source: ScopeSource | None
    _detectors: tuple[ScopeSource, ...]
    _lock: threading.RLock
    _scoped_use: bool = False
    """Set once a read or call of this handle had a scope (never cleared)."""

    @contextmanager
    def scope(self, scope_id: Hashable) -> Iterator[None]:
        """Reads and calls in the block belong to run scope ``scope_id`` (a conversation).

        A call derives only from the reads of its own scope, so one agent handle serving
        several conversations never lets one conversation's read authorize another's
        call. Set in a ``contextvars`` context: it holds for the code of the block and
        the tasks and threads started from it (``asyncio``, ``to_thread``), and wins
        over the agent's ``scope_source`` and over what an integration detects. The
        scope applies to every agent used in the block.

        Raises:
            WorkspaceError: ``scope_id`` is None or unhashable.
        """
        try:
            hash(scope_id)
        except TypeError:
            raise WorkspaceError("a scope id names one conversation or run: a hashable "
                                 "value (a str or a tuple)", agent=self.name,
                                 got=type(scope_id).__name__) from None
        if scope_id is None:
            raise WorkspaceError("a scope id names one conversation or run: not None",
                                 agent=self.name, fix="agent.scope('chat-42')")
        token = _SCOPE.set(("scope", scope_id))
        try:
            yield
        finally:
            _SCOPE.reset(token)

    def detect_scope(self, source: ScopeSource) -> None:
        """Add a detector of the run scope (integrations: the framework's run identity).

        Asked, in the order added, when neither :meth:`scope` nor ``scope_source``
        names one; the first that returns a value other than None wins. Adding the
        same function again does nothing.
        """
        with self._lock:
            if source not in self._detectors:
                self._detectors = (*self._detectors, source)

    def current_scope(self) -> Hashable | None:
        """The run scope code runs in now (None: none known, the unscoped reads).

        :meth:`scope` first, then ``scope_source``, then the detectors an integration
        added (:meth:`detect_scope`); a detector that raises names no scope.

        Raises:
            WorkspaceError: the application's ``scope_source`` raised or returned an
                unhashable value: failing closed, since treating it as "no scope" would
                pool every conversation's reads (QA qa-lg F1).
        """
        got = _SCOPE.get()
        if got is not None:
            return got
        src = self.scope_source
        if src is not None:
            try:
                found = src()
                hash(found)
            except Exception as exc:
                raise WorkspaceError(
                    "the agent's scope function failed, so the conversation of this read "
                    "or call is unknown (nothing is shared between conversations instead)",
                    agent=self.name, error=f"{type(exc).__name__}: {exc}"[:200],
                    fix="make scope= return the conversation id (hashable) or None when "
                        "there is none") from exc
            if found is not None:
                return ("app", found)
        for det in self._detectors:
            found = _ask(det)
            if found is not None:
                return found
        return None


    def note_scope(self, scope: Hashable | None) -> None:
        """A read or call of this handle happened in ``scope`` (a scoped one is remembered)."""
        if scope is not None:
            self._scoped_use = True

    def call_scope(self) -> Hashable | None:
        """The run scope of a protected call made now (:meth:`current_scope`), fail closed.

        A call derives only from the reads of its own scope. A handle that has seen
        scoped use (a read or call in some scope) serves several conversations, so an
        unscoped call on it is refused: its basis would be the one unscoped history that
        every caller of unknown scope shares (QA #28 follow-up).

        Raises:
            WorkspaceError: no scope is known now and this handle has seen scoped use
                (the fix names the ways to give the call its conversation); or the
                application's ``scope_source`` failed (:meth:`current_scope`).
        """
        scope = self.current_scope()
        if scope is not None:
            self._scoped_use = True
        elif self._scoped_use:
            raise WorkspaceError(
                "this agent handle serves scoped runs (conversations), and this protected "
                "call has no scope: it would derive from the unscoped reads every caller "
                "of unknown scope shares, so it is refused (fail closed)",
                agent=self.name,
                fix="give the run its conversation: a LangGraph thread_id (config="
                    "{'configurable': {'thread_id': chat_id}}), `with agent.scope(chat_id):` "
                    "around the run (a thread you start: contextvars.copy_context().run), "
                    "ws.agent(name, scope=f), or one agent handle per conversation")
        return scope


def _ask(source: ScopeSource) -> Hashable | None:
    """What a scope source names now; None when it raises or names something unhashable."""
    try:
        got = source()
        hash(got)
    except Exception:  # a source that cannot tell names no scope
        return None
    return got


__all__ = ["RunScopes", "ScopeSource"]
