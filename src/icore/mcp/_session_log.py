"""The gateway's trace: every session's reads, calls and gate decisions, for ``icore audit``.

Built on :class:`icore.integrations.RunRecorder` (the recorder every integration uses):
event lines from it, plus the PlanFence lines of the generic JSONL format (the records
a decision cites and the decisions themselves, each written once), so ``icore audit
TRACE`` draws the lineage pictures and ``--fail-on invalid`` judges the run. With a file,
the trace is appended after every event (a crash of the gateway loses nothing already
recorded) and rewritten once, atomically, when the gateway stops, ending with a
``termination`` line (a normal stop; a killed gateway's trace has none).

How a gateway run reads in the audit:

* a ``resources/read`` is an observation (``tool_output`` of the tool ``resources/read``
  with the version seen), not an agent's claim: reading a resource again is what a
  refusal asks for, never a repeated assertion;
* every protected call writes its plan: a ``plan`` line (``plan_id`` = the call's task,
  ``roots`` = its action record, whose parents are the versions it was planned from),
  so a run whose calls were all valid audits clean (the session's work is planned and
  assigned, as a framework recording's model turns are);
* a replan is the session's next call of a tool after a ``stale`` refusal that cites the
  values handed over (:class:`icore.mcp._replans.Replans`): a ``replan`` line rewriting
  the stale call's plan (its ``plan_id``) with whether it ran (``executed``); a further
  attempt of a failed replan is no new replan (and no new plan);
* a call refused before the gate decided (``not_read``, ``owner_unavailable``,
  ``dependency_unreadable``, ``gateway_error``, ``no_session``, ...) is a ``blocked``
  PlanFence decision with that reason (policy :data:`GATEWAY_POLICY`), so the audit's
  lineage lists every refused call as a blocked action, as it lists ``stale`` ones.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import stat
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from icore._line_chain import CHAIN_END, ChainWriter, is_end
from icore._line_seal import sealed
from icore._strict_json import strict_dumps
from icore._trace_marks import MAY_HAVE_RUN_MARK
from icore.fence import DecisionEntry, GateDecision, Outcome
from icore.integrations import GATEWAY_POLICY, RunRecorder, blocked_line
from icore.mcp._facts import SessionView, Verdict, text_of
from icore.mcp._replans import Ticket
from icore.mcp._trace_claim import (
    TraceClaim,
    free_sibling,
    open_new_trace,
    replace_atomically,
)
from icore.records import Record, RecordId

log = logging.getLogger("icore.mcp")


def _heads(heads: Mapping[str, list[str]] | None) -> dict[str, Any]:
    """The ``head_source`` field of a gate line (``{}`` when D(a) has no upstream resource)."""
    if not heads or not (heads.get("reread") or heads.get("trusted")):
        return {}
    return {"head_source": {"reread": list(heads.get("reread", ())),
                      "trusted": list(heads.get("trusted", ()))}}


def _resent(heads: Mapping[str, list[str]] | None) -> dict[str, Any]:
    """The replan line's ``resent_unchanged`` (``heads["resent"]``, QA qa-new10c S2)."""
    keys = heads.get("resent") if heads else None
    return {"resent_unchanged": list(keys)} if keys else {}


def _entry(d: GateDecision, task: str, heads: Mapping[str, list[str]] | None
           ) -> dict[str, Any]:
    """A decision's PlanFence line; its ``detail`` names the heads taken on trust.

    The audit shows a decision's detail beside its outcome (the report's validation
    caption, the lineage reason): a validation whose ``H(x)`` of some upstream resources
    came from a ``trust_updates`` upstream's promise, not from a read at that call, says
    so there (the gate line's ``head_source`` carries the same lists).
    """
    e = d.entry(task=task)
    trusted = list(heads.get("trusted", ())) if heads else []
    if trusted:
        note = (f"H(x) of {', '.join(trusted)} taken on trust (trust_updates: the "
                "upstream's subscription, not read again at this call)")
        e = dataclasses.replace(e, detail=f"{e.detail}; {note}" if e.detail else note)
    return e.to_dict(digest=True)


UNDELIVERED_MARK = "RESULT NOT DELIVERED: "
"""How the decision ``error`` of a call that ran but whose result never reached its
client starts (:meth:`GatewayTrace.undelivered`)."""


def _fail(d: dict[str, Any], error: str, may_have_run: bool) -> None:
    """Set a decision line's ``error`` and ``may_have_run``, and its digest over them.

    ``may_have_run``: the call was sent and not answered (its effect is open: the audit
    counts it ``outcome unknown``; the error's text then starts ``MAY HAVE RUN:`` for
    older readers). The digest is written again (:meth:`DecisionEntry.digest`, #29).
    """
    e = dataclasses.replace(DecisionEntry.from_dict(d), may_have_run=may_have_run,
                            error=error.strip()[:2000] or "the upstream answered an error")
    d.clear()
    d.update(e.to_dict(digest=True))


def _record_line(rec: Record, role: str) -> dict[str, Any]:
    line = {"id": rec.id, "key": rec.key, "owner": rec.owner, "seq": rec.seq,
            "type": rec.type, "parents": list(rec.parents), "role": role}
    if rec.supersedes is not None:  # the version it replaces (the chain link, not a parent)
        line["supersedes"] = rec.supersedes
    return {"planfence": {"record": line}}


class GatewayTrace:
    """The recorder of one gateway run (thread-safe; one agent per client session).

    Args:
        run_id: the run's id in the trace header.
        path: the JSONL file to keep current (None: in memory only).
        claim: the path's claim (:func:`claim_trace`): its lock released at
            :meth:`close`, what it made removed at :meth:`discard`.
    """

    def __init__(self, run_id: str, path: Path | None = None, *,
                 claim: TraceClaim | None = None) -> None:
        self.recorder = RunRecorder(run_id, question=f"MCP gateway {run_id}",
                                    agents={"gateway": "icore MCP gateway"})
        self.path = path
        self.planfence: list[dict[str, Any]] = []
        self._ids: set[str] = set()
        self._lock = threading.RLock()
        self._fh: TextIO | None = None
        self._events_done = 0
        self._pf_done = 0
        self._amends: list[dict[str, Any]] = []
        """Decision lines written again with their call's ``error`` (failed after
        authorization), appended at the next flush; the final rewrite has the decision
        line itself carry the error instead."""
        self._plan_of: dict[RecordId, str] = {}
        """A protected call's action record -> its plan id (its task), for its replan."""
        self._sessions = 0
        self._chain = ChainWriter(self.recorder.writer)  # the live file's (#29)
        self._claim = claim
        self._closed = False
        self._ident: tuple[int, int] | None = None
        """(device, inode) of the file the gateway created at ``path`` (its own)."""
        self.written_to: Path | None = path
        """Where the final trace went: ``path``, or a sibling when ``path`` held a file
        the gateway did not write at the stop (:meth:`close`); None: not written."""

    def _rec(self, rec: Record, role: str) -> None:
        with self._lock:
            if rec.id in self._ids:
                return
            self._ids.add(rec.id)
            self.planfence.append(_record_line(rec, role))

    def session(self, sid: str, client: str) -> None:
        """A client session started."""
        self._sessions += 1
        self.recorder.agents.setdefault(sid, f"MCP client {client}")
        self.recorder.task(f"session {sid} ({client}) connected", agent=sid)
        self.flush()

    def version(self, rec: Record, source: str) -> None:
        """A new version of a fact was committed (``source``: who or what changed it)."""
        self._rec(rec, "revision" if rec.parents else "input")
        self.recorder.add("gateway", "thought", f"new version of {rec.key} (seq {rec.seq}) "
                          f"from {source}", fact={"key": rec.key, "record": rec.id,
                                                  "supersedes": rec.supersedes,
                                                  "source": source})
        self.flush()

    def read(self, sid: str, uri: str, rec: Record | None) -> None:
        """A session read ``uri`` (the version it saw, when ``uri`` is a fact).

        An observation the session made (``tool_output`` of ``resources/read``), not an
        output of its own: a second read of one resource is a new observation.
        """
        fields: dict[str, Any] = {"read": {"key": uri}}
        text = f"read {uri}"
        if rec is not None:
            self._rec(rec, "revision" if rec.parents else "input")
            fields["read"] = {"key": uri, "record": rec.id, "seq": rec.seq}
            text = f"read {uri} (owner seq {rec.seq}): {text_of(rec.content, 500)}"
        self.recorder.tool_call(sid, "resources/read", {"uri": uri}, text, error=False,
                                **fields)
        self.flush()

    def verdict(self, sid: str, tool: str, v: Verdict, args: Mapping[str, Any], *,
                task: str, replan: str | None = None, plan_roots: Sequence[str] = (),
                flush: bool = True, heads: Mapping[str, list[str]] | None = None) -> None:
        """One protected call: its replan mark, gate decisions, action record, a block.

        Each decision's PlanFence line is written once (with the records it cites).

        Args:
            sid: the session.
            tool: the tool's name.
            v: the call's :class:`Verdict`.
            args: the call's arguments.
            task: the call's task name (``<session>/<n>``).
            replan: ``"replan"`` (the call is the session's replan after a stale refusal:
                a ``replan`` line rewriting the stale call's plan, with whether it ran),
                ``"retry"`` (another attempt of a blocked replan: no line) or None (a plan
                of its own: a ``plan`` line).
            plan_roots: the stale call's roots (the plan the replan rewrites).
            flush: False when the caller records the call's result next (one write).
            heads: how each upstream resource of D(a) got its head: ``{"reread": [uri],
                "trusted": [uri]}`` (read again now, or taken on trust from a
                ``trust_updates`` upstream); written on each gate line as ``head_source``.
        """
        call = v.call
        self._lines(sid, tool, call.record, v.decisions, list(v.changed.values()), args,
                    executed=call.executed, reason=call.reason, detail=call.detail,
                    deps=v.deps, task=task, replan=replan, plan_roots=plan_roots,
                    heads=heads)
        if flush:
            self.flush()

    def authorized(self, view: SessionView, tool: str, since: int, args: Mapping[str, Any],
                   *, task: str, ticket: Ticket | None,
                   heads: Mapping[str, list[str]] | None = None) -> None:
        """A protected call the gate authorized, written (flushed) before it is forwarded.

        The lines :meth:`verdict` writes for an executed call (its action record, plan or
        replan line, gate decisions), so a gateway killed while the upstream runs the call
        still shows an authorized, forwarded call (with no result) to the audit (QA r7 D2).
        Called from the forward itself: the gate's decision is then the last entry of the
        session's decision log (logged with no await since), and the call's decisions are
        the entries from ``since`` (the log's length before the call) citing its roots.

        Args:
            view: the session.
            tool: the tool's name.
            since: ``len(view.agent.log)`` before the call.
            args: the call's arguments.
            task: the call's task name.
            ticket: the replan ticket the call redeems (:meth:`Replans.before`), or None.
            heads: as in :meth:`verdict`.
        """
        got = view.agent.log.since(since)
        mine = [d for d in got if d.roots == got[-1].roots] if got else []
        record = view.agent.record(mine[-1].roots[0]) if mine and mine[-1].roots else None
        replan = None if ticket is None else "retry" if ticket.failed else "replan"
        reason = mine[-1].reason.value if mine else "valid"
        self._lines(view.sid, tool, record, mine, (), args, executed=True, reason=reason,
                    detail="", deps=(), task=task, replan=replan,
                    plan_roots=ticket.roots if ticket is not None else (), heads=heads)
        self.flush()

    def _lines(self, sid: str, tool: str, record: Record | None,
               decisions: Sequence[GateDecision], changed: Sequence[Record],
               args: Mapping[str, Any], *, executed: bool, reason: str, detail: str,
               deps: Sequence[str], task: str, replan: str | None,
               plan_roots: Sequence[str], heads: Mapping[str, list[str]] | None) -> None:
        """The lines of one protected call's decision (see :meth:`verdict`), not flushed."""
        if record is not None:
            self._rec(record, "replan" if replan == "replan" else "plan")
        for r in changed:
            self._rec(r, "revision" if r.parents else "input")
        said = json.dumps(dict(args), default=str, ensure_ascii=False, sort_keys=True)
        roots = [record.id] if record is not None else None
        with self._lock:
            for d in decisions:
                self.planfence.append({"planfence": {"decision": _entry(d, task, heads)}})
            if not decisions and not executed:  # refused before the gate
                self.planfence.append(
                    blocked_line(tool, task, reason, GATEWAY_POLICY, detail, deps))
            plan_id = None
            if replan == "replan":  # the plan it rewrites: the stale call's own
                plan_id = next((self._plan_of[r] for r in plan_roots
                                if r in self._plan_of), None)
            elif replan is None and record is not None:
                self._plan_of[record.id] = task
        if replan is None:  # a plan of its own: the versions it was planned from
            self.recorder.plan(sid, f"plan for {tool}: {said}", roots=roots, plan_id=task)
        elif replan == "replan":
            if plan_id is None:  # the stale call's plan was not recorded: written now
                plan_id = f"{task}/plan"
                self.recorder.plan(sid, f"plan for {tool}", roots=list(plan_roots),
                                   plan_id=plan_id)
            self.recorder.plan(sid, f"replan for {tool}: {said}", roots=roots, replan=True,
                               plan_id=plan_id, executed=executed, reason=reason,
                               **_resent(heads))
        for d in decisions:
            self.recorder.add(sid, "thought", f"gate {d.outcome.value}/{d.reason.value} "
                              f"for {tool}", gate={"outcome": d.outcome.value,
                                                   "reason": d.reason.value, "tool": tool,
                                                   "replanned": d.replanned,
                                                   "point": d.point,
                                                   **_heads(heads)},
                              task=task, args=dict(args))  # a call killed mid-run: named
        if not executed:
            self.recorder.tool_call(sid, tool, args, f"BLOCKED: {reason}: {detail}",
                                    error=True, blocked=True, task=task, reason=reason,
                                    retry=True if replan == "retry" else None)

    def decisions(self, sid: str, tool: str, decisions: Sequence[GateDecision], *,
                  task: str, heads: Mapping[str, list[str]] | None = None) -> None:
        """Gate decisions of a call whose forward then failed (recorded before the error).

        ``heads``: as in :meth:`verdict`.
        """
        roots = list(decisions[0].roots) if decisions else None
        self.recorder.plan(sid, f"plan for {tool}", roots=roots, plan_id=task)
        with self._lock:
            for d in decisions:
                self.planfence.append({"planfence": {"decision": _entry(d, task, heads)}})
        for d in decisions:
            self.recorder.add(sid, "thought", f"gate {d.outcome.value}/{d.reason.value} "
                              f"for {tool}", gate={"outcome": d.outcome.value,
                                                   "reason": d.reason.value, "tool": tool,
                                                   "replanned": d.replanned,
                                                   **_heads(heads)})
        self.flush()

    def refused(self, sid: str, tool: str, args: Mapping[str, Any], *, task: str,
                reason: str, deps: Sequence[str], detail: str, action: bool = True) -> None:
        """A protected call the gateway refused before the gate decided (fail closed).

        Recorded as the other refusals are: the call's plan (it cites no version: none
        was validated), a ``blocked`` PlanFence decision with ``reason`` (``not_read``,
        ``owner_unavailable``, ``dependency_unreadable``, ``gateway_error``,
        ``no_session``, ...; policy :data:`GATEWAY_POLICY`), so the audit's lineage lists
        it as a blocked action, and the blocked tool output.

        Args:
            sid: the session.
            tool: the tool's name.
            args: the call's arguments.
            task: the call's task name (``<session>/<n>``).
            reason: the refusal's reason code.
            deps: D(a) as far as it is known (empty when it could not be bound).
            detail: what failed (the refusal's ``Detail:`` line).
            action: False for a refusal that is no protected action (a fact write refused
                ``not_owner``: puts are not gated by PlanFence, so neither an accepted nor
                a refused one is among the audit's protected actions, QA r7 D6): the
                blocked tool output only, no plan and no PlanFence decision.
        """
        if not action:
            self.recorder.tool_call(sid, tool, args, f"BLOCKED: {reason}: {detail}",
                                    error=True, task=task, blocked=True, reason=reason)
            self.flush()
            return
        said = json.dumps(dict(args), default=str, ensure_ascii=False, sort_keys=True)
        self.recorder.plan(sid, f"plan for {tool}: {said}", plan_id=task)
        with self._lock:
            self.planfence.append(blocked_line(tool, task, reason, GATEWAY_POLICY, detail, deps))
        self.recorder.add(sid, "thought", f"gate {Outcome.BLOCKED.value}/{reason} for {tool}",
                          gate={"outcome": Outcome.BLOCKED.value, "reason": reason,
                                "tool": tool, "replanned": False}, task=task)
        self.recorder.tool_call(sid, tool, args, f"BLOCKED: {reason}: {detail}", error=True,
                                task=task, blocked=True, reason=reason)
        self.flush()

    def call(self, sid: str, tool: str, args: Mapping[str, Any] | None, result: Any, *,
             error: bool, **fields: Any) -> None:
        """A tool call forwarded to an upstream (or served by the gateway) and its result.

        A protected call (``task`` in ``fields``) the gate authorized whose upstream then
        answered an error (``isError``, a JSON-RPC error, no answer) is failed after
        authorization: its last decision line gets the ``error`` (issue 28); one sent
        and not answered gets ``may_have_run: true`` (:func:`_fail`), which the audit
        counts ``outcome unknown`` (#29; ``ran``: it ran, the decision kept). The file is
        append-only while the gateway runs, so the decision is appended again with the
        error at once (the audit reads the two lines as one decision, the later one's
        error kept): a gateway stopped at once (a second signal, SIGKILL) keeps the
        failure; the rewrite at a normal stop has the one line carry it (#25).
        """
        task = fields.get("task")
        if error and task is not None and not fields.get("blocked") and not fields.get("ran"):
            text = result if isinstance(result, str) else text_of(result)
            if fields.get("may_have_run"):  # sent, not answered: outcome unknown (#29)
                text = MAY_HAVE_RUN_MARK + text
            self._failed(str(task), text, bool(fields.get("may_have_run")))
        self.recorder.tool_call(sid, tool, args, result, error=error, **fields)
        self.flush()

    def _failed(self, task: str, error: str, may_have_run: bool) -> None:
        """:func:`_fail` ``task``'s last decision line if it authorized the call."""
        with self._lock:
            for i in range(len(self.planfence) - 1, -1, -1):
                d = self.planfence[i].get("planfence", {}).get("decision")
                if isinstance(d, dict) and d.get("task") == task:
                    if d.get("outcome") == Outcome.AUTHORIZED.value:
                        _fail(d, error, may_have_run)
                        if self.path is not None and i < self._pf_done:  # on disk already
                            self._amends.append({"planfence": {"decision": dict(d)}})
                    return

    def note(self, agent: str, text: str, **fields: Any) -> None:
        """Anything else worth keeping (an upstream down, a refused request)."""
        self.recorder.add(agent, "thought", text, **fields)
        self.flush()

    def jsonl(self) -> str:
        """The trace: the recorder's lines, then the PlanFence lines (one chain, #29)."""
        with self._lock:
            extra = list(self.planfence)
        return self.recorder.jsonl(after=extra)

    def flush(self) -> None:
        """Append the events recorded since the last flush to the trace file.

        Append-only while the gateway runs (O(1) per event, a killed gateway keeps every
        line written); :meth:`close` rewrites the file once, atomically, with the final
        header (every session's agent named). Digested and chained as the rewrite (#29).
        """
        if self.path is None:
            return
        with self._lock:
            events = self.recorder.events[self._events_done:]
            pf = self.planfence[self._pf_done:]
            amends = list(self._amends)
            head = (self.recorder.header(),) if self._fh is None else ()
            chain, lines = _appended(self._chain, (*head, *events, *pf, *amends))
            try:
                if self._fh is None:  # created here: never followed, never truncated
                    opened, fd = open_new_trace(self.path)
                    if opened != self.path:
                        log.warning("the trace path %s holds a file or link the gateway "
                                    "did not write: it is left as it is; the trace goes "
                                    "to %s", self.path, opened)
                        self.path = self.written_to = opened
                    self._fh = os.fdopen(fd, "w", encoding="utf-8")
                    st = os.fstat(self._fh.fileno())
                    self._ident = (st.st_dev, st.st_ino)
                self._fh.write("".join(lines))
                self._fh.flush()
            except OSError as exc:  # keep serving; the trace stays in memory
                log.error("cannot write the trace %s: %s", self.path, exc)
                return
            self._events_done += len(events)
            self._pf_done, self._chain = self._pf_done + len(pf), chain
            del self._amends[:len(amends)]

    def close(self, failure: str | None = None) -> None:
        """End the run and write the trace's final form.

        A ``termination`` line when the gateway stopped normally (``failure`` None), else
        a note of why it stopped (no terminal marker: the audit says the run did not end
        normally), appended to the live file first (a rewrite cut short, as by a client
        that kills a slow stop, still leaves a trace that ended); then the file is
        rewritten atomically with the final header and closed. Idempotent.

        The rewrite replaces only the file this gateway created at ``path`` (or fills a
        ``path`` left empty): when ``path`` holds anything else at the stop (the trace
        was moved away and a user's file put there while the gateway ran), that is left
        as it is and the trace goes to the first free ``<stem>-stopped-<n><suffix>``
        beside it (:attr:`written_to`, and a logged warning naming both; #29).
        """
        if self._closed:
            return
        self._closed = True
        if failure is None:
            self.recorder.finish("gateway", f"gateway stopped normally after serving "
                                 f"{self._sessions} client session(s)")
        else:
            self.recorder.add("gateway", "thought", f"gateway stopped: {failure}")
        self.flush()  # the end on disk first: a rewrite killed midway leaves it (#25)
        try:
            self._rewrite()
        finally:
            if self._claim is not None:  # its lock file removed once the trace is written
                self._claim.release(remove=self.written_to is not None)

    def discard(self) -> None:
        """End a run that never served (manifest refused at start): no trace file.

        Removes only the very file this gateway created at :attr:`path`, then what its
        claim made (:meth:`TraceClaim.undo`: the lock file, the folders; an earlier
        trace moved aside is put back; QA qa-new9b, #29). Idempotent; a no-op after
        :meth:`close`.
        """
        if self._closed:
            return
        self._closed = True
        with self._lock:
            _close_live(self._fh, self.path)
            self._fh = None
            if self.path is not None and _not_ours(self.path, self._ident) is None:
                self.path.unlink(missing_ok=True)
            self.written_to = None
        if self._claim is not None:
            self._claim.undo()

    def _rewrite(self) -> None:
        if self.path is None:
            return
        with self._lock:
            _close_live(self._fh, self.path)
            self._fh = None
            text, why, target = self.jsonl(), _not_ours(self.path, self._ident), self.path
            try:
                if why is not None:
                    target = free_sibling(self.path, text)
                    log.warning("the trace path %s %s: it is left as it is (never "
                                "overwritten); the trace was written to %s instead",
                                self.path, why, target)
                else:
                    target = replace_atomically(self.path, text)
                    if target != self.path:
                        log.warning("the trace's temporary name beside %s is taken by a "
                                    "link or another file (left as it is); the final trace "
                                    "was written to %s", self.path, target)
                self.written_to = target
            except OSError as exc:
                self.written_to = None
                log.error("cannot write the trace %s: %s", target, exc)


def _close_live(fh: TextIO | None, path: Path | None) -> None:
    """Close the live trace file; a failed write its buffer still held is logged.

    As :meth:`GatewayTrace.flush` logs it (a full disk, the file size limit; sweep round
    9: it escaped the stop as ``error: File too large``, naming no file).
    """
    if fh is None:
        return
    try:
        fh.close()
    except OSError as exc:
        log.error("cannot write the trace %s: %s", path, exc)


def _appended(chain: ChainWriter, lines: Sequence[Mapping[str, Any]]
              ) -> tuple[ChainWriter, list[str]]:
    """The text of ``lines`` appended to the live trace, and its chain after them (#29).

    Each line with its whole-line digest (:func:`icore._line_seal.sealed`) and its link in
    ``chain`` (continued, not changed: a write that fails keeps the old one), an end
    line with the chain's seal; the final rewrite is chained anew
    (:meth:`RunRecorder.jsonl`).
    """
    after = ChainWriter(chain.writer)
    after.seq, after.last = chain.seq, chain.last
    batch = [after.chained(sealed(x)) for x in lines]
    return after, [strict_dumps({**x, CHAIN_END: after.seal()} if is_end(x) else x,
                                sort_keys=True) + "\n" for x in batch]


def _not_ours(path: Path, ident: tuple[int, int] | None) -> str | None:
    """Why the file now at ``path`` is not the one a gateway wrote, or None.

    None when nothing is there, or when it is the very file (device, inode ``ident``) the
    gateway created and appended to.
    """
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be checked ({exc.strerror})"
    if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == ident:
        return None
    return ("now holds a file the gateway did not write (its trace was moved or "
            "replaced while it ran)")


def started(trace: GatewayTrace) -> None:
    """The gateway's start stands: an earlier trace moved aside is logged now (qa-new15b)."""
    if trace._claim is not None:
        trace._claim.said()


def undelivered(trace: GatewayTrace, task: str, *, cancelled: bool) -> None:
    """A protected call that ran, whose result its client never received.

    Its client cancelled the request (``cancelled``) or went away first (QA qa-new13c
    S3): the upstream ran it to its end (its ``tool_output`` line holds the result, with
    ``client_cancelled`` or ``client_gone``), but the agent never saw the result and
    may call again, so its decision is marked as one whose effect is open to the agent:
    ``error`` ``RESULT NOT DELIVERED: <why> ...`` with ``may_have_run: true``, which the
    audit counts ``outcome unknown``, never ``valid``.
    """
    why = ("the client cancelled the request before its result" if cancelled else
           "the client went away before its result")
    trace._failed(task, f"{UNDELIVERED_MARK}{why}; the upstream ran it to its end (the "
                  "result is on its tool_output line), but the agent never saw the "
                  "result and may call again: check its effect first", True)
    trace.flush()
