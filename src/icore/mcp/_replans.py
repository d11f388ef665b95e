"""Which protected call of a gateway session is a replan (planfence App. A.3).

:class:`Replans` is the gateway trace's bookkeeping (:mod:`icore.mcp._session_log`): after
a ``stale`` refusal the session's next call of the tool citing the handed-over versions is
its replan, and an unchanged resend of the stale call is marked (QA qa-new10c S2).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icore.fence import Reason
from icore.mcp._facts import SessionView, Verdict
from icore.records import Record, RecordId, canonical_json


@dataclass
class Ticket:
    """A stale refusal's ticket: the handed-over versions ``ids`` its replan must cite."""

    ids: dict[str, RecordId]
    roots: tuple[RecordId, ...]
    failed: bool = False
    args: bytes | None = None  # the stale call's arguments, canonical JSON
    moved: tuple[str, ...] = ()  # keys whose handed-over value differs from the planned
    resent: tuple[str, ...] = ()  # moved, when the replan's arguments are the same


def _canonical(args: Mapping[str, Any]) -> bytes | None:
    try:
        return canonical_json(dict(args))
    except Exception:  # not JSON: never "the same arguments"
        return None


class Replans:
    """Which protected call is a replan (planfence App. A.3), per session, tool and D(a).

    After a ``stale`` refusal the fresh versions are handed to the session; its next call
    of the tool citing exactly those versions is the one replan (the workspace validates
    it with ``replanned``). A call citing other versions (the session read again) is a
    new plan. A replan that was blocked stays blocked until a new read; attempts in
    between are retries of it, not new replans.
    """

    def __init__(self) -> None:
        self._tickets: dict[tuple[str, str, frozenset[str]], Ticket] = {}
        self._lock = threading.Lock()

    def before(self, view: SessionView, tool: str, deps: frozenset[str],
               args: Mapping[str, Any] | None = None) -> Ticket | None:
        """The ticket this call redeems (it is a replan), else None.

        Its :attr:`Ticket.resent` says whether the replan is the stale call resent
        unchanged (``args`` equal to its arguments although a value it was planned from
        changed): the ``resent_unchanged`` keys of the replan line (QA qa-new10c S2).
        """
        key = (view.sid, tool, deps)
        with self._lock:
            t = self._tickets.get(key)
            if t is None:
                return None
            seen = view.seen
            if all(k in seen and seen[k].id == rid for k, rid in t.ids.items()):
                same = args is not None and t.args is not None and _canonical(args) == t.args
                t.resent = t.moved if same and not t.failed else ()
                return t
            del self._tickets[key]  # read again: a new plan
            return None

    def after(self, view: SessionView, tool: str, deps: frozenset[str], v: Verdict,
              ticket: Ticket | None, args: Mapping[str, Any] | None = None,
              planned: Mapping[str, Record] | None = None) -> str | None:
        """Note the call's outcome.

        ``args``, ``planned``: the call's arguments and the versions the session held
        before it, kept with a ``stale`` refusal's ticket.

        Returns:
            ``"replan"`` (this call is a replan), ``"retry"`` (a further attempt of a
            blocked replan) or None (a plan of its own).
        """
        key = (view.sid, tool, deps)
        with self._lock:
            if ticket is not None:
                mark = "retry" if ticket.failed else "replan"
                if v.call.executed:
                    self._tickets.pop(key, None)
                else:
                    ticket.failed = True
                return mark
            if v.reason == Reason.STALE.value and not v.call.executed:
                seen = view.seen
                root = v.call.record.id if v.call.record is not None else None
                was = planned or {}
                moved = tuple(sorted(k for k, r in v.changed.items() if k in was and
                                     canonical_json(was[k].content) != canonical_json(
                                         r.content)))
                self._tickets[key] = Ticket({k: seen[k].id for k in deps if k in seen},
                                             (root,) if root else (),
                                             args=None if args is None else _canonical(args),
                                             moved=moved)
        return None
