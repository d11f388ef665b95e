"""A protected call's decisions on disk before its tool body runs (#25, planfence App. A.3).

A :class:`~icore.integrations.RunRecorder` records a protected call once the fence has
returned (:meth:`~icore.integrations.RunRecorder.gate`): the call's result and its
failure belong to its lines. A run killed while the body runs would then leave no trace
of a call that may have acted. With a file (``RunRecorder(path=...)``) the fenced tool's
body is wrapped (:func:`~icore.integrations._tool_failed.body`): when the fence starts
it, the call's task name is taken and its PlanFence lines (the records its decisions
cite, each decision with its digest, :func:`icore.fence.authorizing`) are written and
``fsync``-ed first
(:meth:`~icore.integrations._run_journal.RunJournal.ahead`). When the call is recorded
afterwards, its gate, plan and tool-output lines name that task (:func:`call_task`) and
the decision lines already written are not written again (:func:`settled`); a decision
that changed (the body failed: its ``error`` and ``may_have_run``) is written again, as
the MCP gateway does, and the audit reads the two as one decision that failed after
authorization. If the lines cannot be written the body does not run: the call fails
with :class:`~icore.integrations.NoEffect` (recorded ``ran: false``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from icore.fence import GateDecision
from icore.integrations._call_lines import lineage_lines, lineage_records
from icore.records import Lookup


def write_ahead(rec: Any, tool: str, decisions: Sequence[GateDecision],
                lookup: Lookup | None) -> None:
    """Write the lines of the call ``decisions`` authorized to ``rec``'s file now.

    Nothing when the recorder has no file or the last decision did not authorize.

    Raises:
        IntegrationError: the lines cannot be written (the body must not run).
    """
    journal = rec.journal
    if journal is None or not decisions or not decisions[-1].authorized:
        return
    task = rec.next_task(tool)
    recs = lineage_records(decisions, lookup)
    with rec._lock:
        lines = lineage_lines(recs, decisions, task, None, rec._records)
        rec.planfence.extend(lines)
        rec._ahead[id(decisions[-1])] = (decisions[-1], task, [
            x for x in lines if "decision" in x["planfence"]])
    journal.ahead(lines)


def call_task(rec: Any, tool: str, decisions: Sequence[GateDecision]) -> str:
    """The ``task`` name of a recorded call: the one taken ahead, else the next one."""
    last = decisions[-1] if decisions else None
    with rec._lock:
        got = rec._ahead.pop(id(last), None) if last is not None else None
        if got is not None and got[0] is last:
            rec._ahead[got[1]] = got[2]  # its decision lines, for settled()
            return str(got[1])
    return str(rec.next_task(tool))


def settled(rec: Any, task: str, lines: list[dict[str, Any]]
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(lines to add, lines to append to the file)`` of a call whose lines were ahead.

    The decision lines written ahead are left out of ``lines``; one that changed since
    (its failure after authorization) is updated where it stands (``write()`` carries
    it once, as the decision with its error) and appended again to the file (an
    append-only file cannot change a line). Call with the recorder's lock held.
    """
    ahead: list[dict[str, Any]] | None = rec._ahead.pop(task, None)
    if not ahead:
        return lines, []
    out: list[dict[str, Any]] = []
    amends: list[dict[str, Any]] = []
    j = 0
    for x in lines:
        pf = x.get("planfence")
        d = pf.get("decision") if isinstance(pf, Mapping) else None
        if d is None or j >= len(ahead):
            out.append(x)
            continue
        old = ahead[j]["planfence"]["decision"]
        j += 1
        if old != d:
            old.clear()
            old.update(d)
            amends.append({"planfence": {"decision": dict(d)}})
    return out, amends


def retract(rec: Any, decisions: Sequence[GateDecision], exc: BaseException) -> None:
    """The body left by a control-flow exception (a pause, a stop on purpose).

    The fence records no call for such an attempt (LangGraph's ``interrupt()`` in the
    body: the node runs again on resume, its call with new decisions), so neither does
    ``write()``: the attempt's decision lines written ahead are taken out. The file
    cannot take a line back: the decision is appended again, ``may_have_run: false``
    with the exception named (a run killed before its close reads it as failed after
    authorization, not as an outcome unknown).
    """
    last = decisions[-1] if decisions else None
    with rec._lock:
        got = rec._ahead.pop(id(last), None) if last is not None else None
        if got is None or got[0] is not last:
            return
        mine = {id(x) for x in got[2]}
        rec.planfence[:] = [x for x in rec.planfence if id(x) not in mine]
    entry = dataclasses.replace(last.entry(task=got[1]), may_have_run=False, error=(
        f"stopped on purpose ({type(exc).__name__}): not recorded as a call"))
    if rec.journal is not None:
        rec.journal.made({"planfence": {"decision": entry.to_dict(digest=True)}})
        rec.journal.flush()


__all__ = ["call_task", "retract", "settled", "write_ahead"]
