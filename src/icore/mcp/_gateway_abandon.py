"""A protected call its client left while it ran: its reads spent at once (QA qa-new18b S1).

A call the gate authorized and sent runs to its end at its upstream even when its client
cancels it (its own timeout: ``notifications/cancelled``), ends its session, or its HTTP
connection closes (a sessionless client: :mod:`icore.mcp._gateway_delivery`). The model
got no result and may call again at once, before the call ends. Were the session's reads
of D(a) spent only when the call ended (as its result line says it was never delivered),
that retry would be authorized by the very read the first call used, and both would act
(two payments from one read). So the reads are spent the moment the client leaves the
call (:func:`spender`): a retry from the same read is refused ``not_read`` saying the
earlier call's outcome is unknown and it may still be running; a read made after that
backs calls again (planfence: never act twice on one read).

While such a call still runs, a read made after the spend backs calls again, as any read
does; with ``writes:`` declared, a call on those keys waits for it
(:mod:`icore.mcp._gateway_inflight`) and its gate then sees the write. :class:`Unknowns`
keeps, per session, the keys of calls whose outcome is unknown, for the refusals that are
no gate decision (``owner_unavailable``) to name them (QA qa-new18b #5).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from icore.mcp._gateway_inflight import overlap, patterns


def spender(trace: Any, view: Any, tool: str, deps: Iterable[str],
            unknowns: Unknowns) -> Callable[[str], None]:
    """``spend(why)``: spend ``view``'s session's reads of ``deps``, noted in the trace.

    ``trace``: the gateway's :class:`~icore.mcp._session_log.GatewayTrace`; ``view``:
    the session's :class:`~icore.mcp._facts.SessionView`; ``why``: the error its
    refusals quote (:data:`~icore.mcp._gateway_delivery.STILL_RUNNING`); ``unknowns``:
    where the keys are noted (:class:`Unknowns`).
    """
    keys = sorted(deps)

    def spend(why: str) -> None:
        view.agent.forget(keys, why=(tool, why))
        unknowns.note(view.sid, keys, tool)
        trace.note(view.sid, f"{tool}: {why}; this session's reads of {', '.join(keys)} "
                   "are spent (a call from them is refused until they are read again)",
                   tool=tool, keys=keys, spent=True)
    return spend


class Unknowns:
    """Per session: the keys of its protected calls whose outcome is unknown (QA #5).

    A refusal that is no gate decision (``owner_unavailable``: the upstream is down or
    restarting) says "try again later"; when an earlier call of the session on the same
    facts may have run, the model must hear that too (:meth:`said`). A key is noted when
    its call's reads are spent (sent, no answer; its client left it) and dropped when a
    later call on it is authorized. At most ``limit`` keys are kept (the oldest go).
    """

    def __init__(self, limit: int = 4096) -> None:
        self._keys: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._limit = limit

    def note(self, sid: str, keys: Iterable[str], tool: str) -> None:
        """``tool``'s call of session ``sid`` on ``keys`` has an unknown outcome."""
        for k in keys:
            self._keys[(sid, k)] = tool
            self._keys.move_to_end((sid, k))
        while len(self._keys) > self._limit:
            self._keys.popitem(last=False)

    def clear(self, sid: str, keys: Iterable[str]) -> None:
        """A call of session ``sid`` on ``keys`` was authorized: they are known again."""
        for k in keys:
            self._keys.pop((sid, k), None)

    def said(self, sid: str, depends_on: Iterable[str], args: Mapping[str, Any]) -> str:
        """What a non-gate refusal adds for D(a) entries ``depends_on``, else ``""``."""
        mine = patterns(depends_on, args)
        hit: dict[str, list[str]] = {}
        for (s, k), tool in self._keys.items():
            if s == sid and any(overlap((k, False), p) for p in mine):
                hit.setdefault(tool, []).append(k)
        if not hit:
            return ""
        calls = "; ".join(f"{t} (on {', '.join(sorted(ks))})" for t, ks in sorted(hit.items()))
        return (f". Note: an earlier call of this session may have run and its outcome is "
                f"unknown: {calls}. Once the upstream answers again, "
                "read those facts again and check its effect before calling again")


__all__ = ["Unknowns", "spender"]
