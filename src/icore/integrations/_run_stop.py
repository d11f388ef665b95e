"""A recorded run whose ``with`` block was left by an exception (QA qa-new17c #5).

``with RunRecorder(path=...) as rec:`` left by an exception (the graph raised, Ctrl-C)
closed the file like a normal end but wrote no end line: no ``chain_end`` seal, so the
run audited exactly like a process killed with ``kill -9`` and its trailing lines could
be deleted unseen. :func:`stopped` makes the run's last line say why it stopped, a
``thought`` "the run stopped: <Type>: <message>" with ``error`` and ``stopped: true``;
the chain seals such a line like an end line (:func:`icore._line_chain.is_end`), and
the closed file's header says it is sealed, so a cut is flagged. The run still has no
final answer: ``icore audit`` counts it not ended (``--fail-on not-ended``).
"""

from __future__ import annotations

from typing import Any

from icore._line_chain import is_end
from icore.integrations._failed import describe

STOPPED = "the run stopped: "
"""How a stopped run's last line begins (as every integration writes it)."""


def stopped(rec: Any, exc: BaseException) -> None:
    """Mark ``rec``'s run stopped by ``exc`` (a :class:`~icore.integrations.RunRecorder`).

    Nothing when an end line (or a stopped line) was recorded since the run's last
    ``task`` line (the run ended, then the app raised). The last line, when it is the
    integration's own "the run stopped: ..." thought, gets ``stopped: true``; otherwise a
    new such thought is added, by the last line's agent (else the orchestrator, else
    ``"run"``), with ``cancelled: true`` for ``KeyboardInterrupt``.
    """
    with rec._lock:
        events: list[dict[str, Any]] = rec.events
        start = max((i for i, e in enumerate(events) if e.get("kind") == "task"),
                    default=-1)
        if any(is_end(e) for e in events[start + 1:]):
            return
        last = events[-1] if events else None
        if last is not None and last.get("kind") == "thought" and "error" in last \
                and str(last.get("content", "")).startswith(STOPPED):
            last["stopped"] = True  # the journal writes it with the end lines (sealed)
            return
        agent = (last or {}).get("agent") or rec.orchestrator or "run"
    text = describe(exc)
    rec.add(str(agent), "thought", f"{STOPPED}{text}", error=text, stopped=True,
            cancelled=True if isinstance(exc, KeyboardInterrupt) else None)


__all__ = ["STOPPED", "stopped"]
