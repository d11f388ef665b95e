"""The same human answer written twice: one naming its call's task, one a thought (#29).

A recorder may write a human's answer both on the refused call's own line (naming its
``task``: linked exactly) and as a thought naming only the tool and the arguments.
:func:`icore.adapters.human_answers` links such a thought to the first not yet used
answer naming a task with the same tool and answer, and the same arguments when both
record them, so it answers nothing else. :class:`Twins` finds that answer in
amortised constant time (a run whose answers all name tasks used to make each thought
scan them all: quadratic). Pure: no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from icore.adapters._trace import HumanAnswer


class Twins:
    """The answers naming a task, in order, each taken at most once by :meth:`take`.

    Args:
        exact: the answers that name a task (in the trace's order).
    """

    def __init__(self, exact: Sequence[HumanAnswer]) -> None:
        self._exact = list(exact)
        self._used = [False] * len(self._exact)
        self._all: dict[tuple[str, bool], deque[int]] = {}
        self._bare: dict[tuple[str, bool], deque[int]] = {}  # the ones without arguments
        self._args: dict[tuple[str, bool, str], deque[int]] = {}
        for i, x in enumerate(self._exact):
            self._all.setdefault((x.tool, x.approved), deque()).append(i)
            if x.args is None:
                self._bare.setdefault((x.tool, x.approved), deque()).append(i)
            else:
                self._args.setdefault((x.tool, x.approved, x.args), deque()).append(i)

    def _first(self, q: deque[int] | None) -> int | None:
        """The first unused index of ``q`` (the used ones at its front dropped for good)."""
        if q is None:
            return None
        while q and self._used[q[0]]:
            q.popleft()
        return q[0] if q else None

    def take(self, ans: HumanAnswer) -> HumanAnswer | None:
        """The first unused answer like ``ans`` (None: none); used from now on.

        Like: the same tool and answer, and the same arguments when both record them.
        """
        key = (ans.tool, ans.approved)
        if ans.args is None:
            got = self._first(self._all.get(key))
        else:
            found = [i for i in (self._first(self._bare.get(key)),
                                 self._first(self._args.get((*key, ans.args))))
                     if i is not None]
            got = min(found) if found else None
        if got is None:
            return None
        self._used[got] = True
        return self._exact[got]


__all__ = ["Twins"]
