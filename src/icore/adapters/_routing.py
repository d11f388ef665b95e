"""Routing turns of a declared orchestrator, and when repeating one is a loop.

A supervisor that hands work off says the same thing each round ("transfer to
researcher", a ``transfer_to_researcher`` call): the text names the next agent, not new
work, so saying it again is no repeated observation. It is a loop only when it
re-creates the same obligation with no progress between (icore Sec. 4: stalling is
judged by the progress predicate fixed in D, never by the text alone). The rule, as
docs/audit-real-runs.md ("Routing turns") states it:

- a **routing turn** is an ``output`` step of the trace's declared orchestrator
  (``Trace.orchestrator``) whose hand-off follows it: the next step that is not a
  ``thought`` (by anyone) or a ``tool_output`` of the orchestrator (the hand-off tool's
  answer) is an ``instruction`` of the orchestrator. Its hand-off is that instruction's
  addressee and text: the obligation it creates;
- progress (Progress_D of the import, the one ``ledger_evidence`` uses for
  ``is_progress_being_made``) is a new plan or a supported output of a step that is not a
  routing turn;
- a routing turn repeats (``output_evidence`` sees it as a repeat, a ``work`` hard flag)
  only when the ordinary repeat rule holds (the same text and calls reported again,
  docs/audit-real-runs.md "Generic JSONL format") **and** the last routing turn with the
  same text, calls and hand-off was made with no progress since;
- a **hand-off** is a routing turn's instruction, or an instruction of the orchestrator
  that is a recorded hand-off line (``<orchestrator> -> <addressee>``, optionally followed
  by `` (<tool>)``, as the LangGraph recorder writes a ``Command(goto=...)``, or
  ``handoff to <addressee>``: :func:`handoff_line`);
- a hand-off given again (the same addressee and text) is the same piece of work for
  the addressee (its outputs are compared with what it reported since, as for the same
  instruction again) only when no other agent made progress since that hand-off was last
  given; after progress by others it is new work, as an instruction the addressee had
  not got before (a worker's "Draft saved." in round 1 and round 3 is no repeat).

Pure: it reads the steps it is given, in order, and keeps a few counters. Part of
:mod:`icore.adapters._trace_audit` (split for size).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from icore.adapters._trace import Step, StepKind

REACH = 64
"""Most steps looked ahead of an orchestrator's output for its hand-off (a hand-off
tool's answer and the node notes between are a few; a longer gap is no hand-off)."""


def handoff_line(text: str, by: str, to: str) -> bool:
    """``text`` is a recorded hand-off line of ``by`` to ``to``, which holds no task.

    ``by -> to`` or ``by -> to (tool)`` (the LangGraph recorder's ``Command(goto=...)``),
    or ``handoff to <to>`` (``RunRecorder.handoff``'s default text: the Agents SDK's).
    """
    head = f"{by} -> {to}"
    return text in (head, f"handoff to {to}") or (text.startswith(head + " (")
                                                   and text.endswith(")"))


class RoutingTurns:
    """The routing turns of one imported run and the loop rule on them (icore Sec. 4).

    Args:
        orchestrator: the trace's declared orchestrator (None: no step is a routing turn).
    """

    def __init__(self, orchestrator: str | None) -> None:
        self.orchestrator = orchestrator
        self._handoff: dict[int, tuple[str, str]] = {}  # step index -> (to, text)
        self._given: set[int] = set()  # the step indexes of the hand-offs themselves
        self._last: dict[tuple[str, ...], tuple[int, int]] = {}
        self.progress = 0
        """Supported outputs of steps that are no routing turn, so far."""
        self._by: dict[str, int] = {}  # agent -> its part of :attr:`progress`

    def steps(self, steps: Iterable[Step]) -> Iterator[Step]:
        """``steps`` in order, each routing turn's hand-off noted before it is yielded.

        Looks at most :data:`REACH` steps ahead of an orchestrator's output (memory: that
        many steps, never the whole run).
        """
        orch = self.orchestrator
        if orch is None:
            yield from steps
            return
        it = iter(steps)
        ahead: deque[Step] = deque()
        while True:
            s = ahead.popleft() if ahead else next(it, None)
            if s is None:
                return
            if s.kind == StepKind.INSTRUCTION and s.agent == orch and s.to and \
                    handoff_line(s.content, orch, s.to):
                self._given.add(s.index)
            elif s.kind == StepKind.OUTPUT and s.agent == orch:
                for n in range(REACH):
                    nxt = ahead[n] if n < len(ahead) else next(it, None)
                    if nxt is None:
                        break
                    if n >= len(ahead):
                        ahead.append(nxt)
                    if nxt.kind == StepKind.THOUGHT or (nxt.kind == StepKind.TOOL_OUTPUT
                                                       and nxt.agent == orch):
                        continue
                    if nxt.kind == StepKind.INSTRUCTION and nxt.agent == orch and nxt.to:
                        self._handoff[s.index] = (nxt.to, nxt.content)
                        self._given.add(nxt.index)
                    break
            yield s

    def is_routing(self, index: int) -> bool:
        """Step ``index`` is a routing turn (from :meth:`steps` yielding it to its submission)."""
        return index in self._handoff

    def repeats(self, index: int, digest: str, plans: int) -> bool:
        """Whether step ``index``'s output may count as a repeat (False: it must not).

        True for every step but a routing turn made again after progress: its hand-off
        (addressee and text) and ``digest`` (text and calls) were last seen with another
        progress count or plan count (``plans``: plans imported so far) than now. Call it
        once per submitted output, in order: it remembers the routing turn.
        """
        handoff = self._handoff.get(index)
        if handoff is None:
            return True
        key = (digest, *handoff)
        mark = (self.progress, plans)
        looped = self._last.get(key) == mark
        self._last[key] = mark
        return looped

    def new_work(self, index: int, to: str, text: str, plans: int) -> bool:
        """Whether instruction step ``index`` (to ``to``, saying ``text``) is new work.

        True for a hand-off given when other agents than ``to`` made
        progress (or a plan was imported: ``plans``) since the same hand-off was last
        given (or never given before); False otherwise (every other instruction: the
        caller's own rule decides). Call it once per instruction, in order.
        """
        if index not in self._given:
            return False
        self._given.discard(index)  # memory: the hand-offs ahead only
        key = ("\0given", to, text)
        mark = (self.progress - self._by.get(to, 0), plans)
        fresh = self._last.get(key) != mark
        self._last[key] = mark
        return fresh

    def submitted(self, index: int, agent: str, passed: bool) -> None:
        """Count ``agent``'s output at step ``index`` as progress when it passed and routes not.

        Step ``index`` is no longer a routing turn afterwards (memory: its hand-off is done).
        """
        if self._handoff.pop(index, None) is None and passed:
            self.progress += 1
            self._by[agent] = self._by.get(agent, 0) + 1


__all__ = ["REACH", "RoutingTurns", "handoff_line"]
