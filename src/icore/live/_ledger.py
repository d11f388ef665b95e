"""iCORE recording of a live run: every step becomes events in G and audited proposals.

The run coordinator owns one :class:`icore.state.State` per run, built from a declaration
package derived from the run manifest (:func:`live_declaration`). Each workflow step is
recorded as it happens:

* commits of requirements, catalogs, shortlists and revisions are events in G;
* the plan, the protected primary action and the auditor's verdict are proposals
  audited under icore Def. 6 before they are committed; their ``lineage`` certificate
  cites the exact PlanFence requirement record the step was derived from, so
* an owner revision revokes the plan's certificate (a ``revocation`` hard flag, the plan
  becomes repair_pending), the one replan repairs it, and an action executed from an
  obsolete plan is *rejected* by the audit (its cited record is no longer the head) with a
  hard flag — the iCORE view of stale-plan execution.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from icore._clock import Clock
from icore.audit import Diagnosis, diagnose_flags
from icore.errors import IcoreError
from icore.fence import DecisionEntry
from icore.live._run_manifest import RunManifest
from icore.records import Record
from icore.state import (
    CertificateRequest,
    CitedRecord,
    DeclarationPackage,
    Effect,
    EventSpec,
    HardFlag,
    LineageHeadView,
    MemoryLog,
    Proposal,
    SQLiteLog,
    State,
    Verdict,
    declaration_from_dict,
)

RUN_AGENT = "run"
"""The run coordinator's identity in M_D (introduces and assigns work)."""

_KIND_OF_ROLE = {"planner": "plan", "executor": "act", "auditor": "audit"}

LedgerListener = Callable[[str, str, Mapping[str, Any], Mapping[str, Any]], None]
"""Called after each recorded workflow step as ``(call, task, args, outcome)``.

``call`` names the :class:`LiveLedger` method (``introduce``, ``committed``, ``revised``,
``planned``, ``gate``, ``executed``, ``audited``, ``failed``, ``event``), ``args`` are
its arguments (JSON-ready; ``task`` excluded), and ``outcome`` holds what the step did to
X: ``verdicts`` (the audited proposals, as in :attr:`LiveLedger.verdicts`), ``flags`` (the
hard flags raised, as dicts), ``event`` (the id of the event added to G, when one was)
and the metrics ``snd``, ``astab``, ``cq`` after it. The OpenTelemetry exporter
(:mod:`icore.adapters`) turns these into spans; the listener must not raise.
"""


def live_declaration(manifest: RunManifest) -> DeclarationPackage:
    """The declaration package D of a live run (agents from the manifest)."""
    agents: list[dict[str, Any]] = [{"id": RUN_AGENT, "roles": ["task", "assigner"]}]
    for a in manifest.agents:
        caps = {_KIND_OF_ROLE[a.role]: 1.0} if a.role in _KIND_OF_ROLE else {}
        agents.append({"id": a.id, "roles": [a.role], "capabilities": caps})
    doc: dict[str, Any] = {
        "name": f"icore-live-{manifest.family}",
        "version": "1",
        "parameters": {"epsilon": 0.1, "patience": 5, "tau": 0.5},
        "observables": [
            {"name": "task_introduced", "kind": "action", "fields": ["task"]},
            {"name": "requirement_committed", "kind": "artifact", "fields": ["record"]},
            {"name": "catalog_committed", "kind": "artifact", "fields": ["record"]},
            {"name": "shortlist_committed", "kind": "artifact", "fields": ["record"]},
            {"name": "plan_written", "kind": "artifact", "fields": ["record"]},
            {"name": "requirement_revised", "kind": "artifact", "fields": ["record"]},
            {"name": "gate_decision", "kind": "action", "fields": ["outcome", "reason"]},
            {"name": "action_done", "kind": "action", "fields": ["action", "option"]},
            {"name": "audit_done", "kind": "action", "fields": ["verdict"]},
            {"name": "decision_failed", "kind": "action", "fields": ["role", "error"]},
            {"name": "step_failed", "kind": "action", "fields": ["step", "error"]},
            {"name": "agent_crashed", "kind": "action", "fields": ["agent"]},
        ],
        "agents": agents,
        "validators": [
            {"name": "lineage", "version": "1", "builtin": "has_records",
             "params": {"min": 1}},
            {"name": "gate", "version": "1", "builtin": "event_field_equals",
             "params": {"field": "outcome", "value": "authorized"}},
        ],
        "operations": [
            {"name": "introduce", "proposers": ["role:task"],
             "preconditions": {"target_required": False},
             "effects": [{"kind": "node", "target": "new", "many": True}],
             "productive": True},
            {"name": "assign", "proposers": ["role:assigner"],
             "preconditions": {"status_in": ["open"]},
             "effects": [{"kind": "assignee"}, {"kind": "status", "values": ["assigned"]}]},
            {"name": "plan", "proposers": ["role:planner"],
             "preconditions": {"status_in": ["assigned", "submitted", "repair_pending"],
                               "assignee_is_proposer": True},
             "effects": [{"kind": "status", "values": ["submitted"]}, {"kind": "result"}],
             "requires": ["lineage"], "productive": True},
            {"name": "execute", "proposers": ["role:executor"],
             "preconditions": {"status_in": ["assigned"], "assignee_is_proposer": True},
             "effects": [{"kind": "status", "values": ["discharged"]}, {"kind": "result"}],
             "requires": ["lineage", "gate"], "productive": True},
            {"name": "verify", "proposers": ["role:auditor"],
             "preconditions": {"status_in": ["assigned"], "assignee_is_proposer": True},
             "effects": [{"kind": "status", "values": ["discharged", "failed"]},
                         {"kind": "result"}],
             "requires": ["lineage"], "productive": True},
            {"name": "fail", "proposers": ["role:task"],
             "effects": [{"kind": "status", "values": ["failed"]}]},
        ],
    }
    return declaration_from_dict(doc, file="<live run declaration>")


class LiveLedger:
    """Records a live run in iCORE and audits every proposal as it happens.

    Args:
        manifest: the run manifest (agents of D).
        log_path: SQLite event log (None: in memory).
        clock: time source for events.
        listener: told of every recorded step (:data:`LedgerListener`), e.g. an exporter.
    """

    def __init__(self, manifest: RunManifest, log_path: Path | None, clock: Clock, *,
                 listener: LedgerListener | None = None) -> None:
        self.manifest = manifest
        self.decl = live_declaration(manifest)
        self.log = (SQLiteLog(log_path, declaration=self.decl) if log_path is not None
                    else MemoryLog())
        self.state = State(self.decl, log=self.log, clock=clock)
        self.heads: dict[str, str] = {}
        self.records: dict[str, Record] = {}  # the coordinator's replica (verified)
        self._view = _CoordinatorView(self.heads.get, self.records.get)
        self.verdicts: list[dict[str, Any]] = []
        self.diagnoses: dict[str, Diagnosis] = {}  # hard flag id -> F (icore.audit)
        self.timeline: list[tuple[int, float, float, float]] = []
        self.role_agent: dict[str, str] = {a.role: a.id for a in manifest.agents}
        self._n = 0
        self._last: dict[str, str] = {}
        self.listener = listener

    def _told(self, call: str, task: str, args: Mapping[str, Any], *,
              mark: tuple[int, int], event: str | None = None) -> None:
        """Tell the listener what ``call`` did (the verdicts and flags it added)."""
        if self.listener is None:
            return
        since, flags_before = mark
        m = self.state.metrics()
        flags = list(self.state.flags.values())[flags_before:]
        outcome = {"verdicts": self.verdicts[since:], "event": event,
                   "flags": [{"id": f.id, "kind": str(f.kind), "obligations": list(f.obligations),
                              "assertions": list(f.assertions), "detail": f.detail}
                             for f in flags],
                   "snd": m.snd, "astab": m.astab, "cq": m.cq}
        self.listener(call, task, args, outcome)

    def _diagnose(self, flags: Sequence[HardFlag]) -> None:
        """Diagnose each new hard flag with iCORE-Audit's diagnosis F.

        iCORE-Audit's one diagnosis step (:func:`icore.audit.diagnose_flags`: the
        ``hard_flag`` trigger routed by D's rule, and its step rule), one flag at a time
        right after X raised it: id ``d<n>`` numbers the diagnoses so far; the step is
        the proposal number the flag was raised at (the flagged proposal's own, as on the
        run's timeline); kept in :attr:`diagnoses` by flag id; X's log is unchanged.
        """
        for f in flags:
            for d in diagnose_flags(self.state, (f,), first_id=len(self.diagnoses) + 1):
                self.diagnoses[f.id] = d

    def _mark(self) -> tuple[int, int]:
        return len(self.verdicts), len(self.state.flags)

    # -- helpers --------------------------------------------------------------------
    def _eid(self, task: str, what: str) -> str:
        self._n += 1
        return f"{task}:{what}:{self._n}"

    def head_view(self, key: str) -> str | None:
        """The coordinator's view of owners' heads (from acknowledged commits)."""
        return self._view(key)

    @property
    def lineage_view(self) -> LineageHeadView:
        """The lineage-aware head view proposals are audited with (icore.state).

        Heads are the ones the owners acknowledged; records are the acknowledged records
        (verified against their ids), so a revision of any input revokes every
        certificate derived from it (docs/state.md "Revocation follows derivation").
        """
        return self._view

    def _hold(self, rec: Mapping[str, Any]) -> None:
        """Keep an acknowledged record in the replica when its fields hash to its id."""
        rid = rec.get("id")
        if not isinstance(rid, str) or rid in self.records:
            return
        try:
            r = Record.create(key=rec["key"], owner=rec["owner"], seq=rec["seq"],
                              content=rec.get("content"), parents=rec.get("parents") or (),
                              type=rec.get("type") or "record",
                              supersedes=rec.get("supersedes"))
        except (KeyError, TypeError, IcoreError):
            return
        if r.id == rid:
            self.records[rid] = r

    def _causes(self, task: str, causes: Sequence[str] = ()) -> tuple[str, ...]:
        """``causes`` plus the workflow's previous event in G (steps run in sequence)."""
        last = self._last.get(task)
        out = [c for c in causes if c in self.state.events]
        if last is not None and last not in out:
            out.append(last)
        return tuple(out)

    def _advance(self, task: str, event_id: str) -> None:
        if event_id in self.state.events:
            self._last[task] = event_id

    def event(self, task: str, type_: str, agent: str, fields: Mapping[str, Any],
              causes: Sequence[str] = ()) -> str:
        """Append an event to G; return its id.

        It is caused by ``causes`` and by the workflow's previous event.
        """
        mark = self._mark()
        eid = self._add_event(task, type_, agent, fields, causes)
        self._told("event", task, {"type": type_, "agent": agent, "fields": dict(fields),
                                   "causes": list(causes)}, mark=mark, event=eid)
        return eid

    def _add_event(self, task: str, type_: str, agent: str, fields: Mapping[str, Any],
                   causes: Sequence[str] = ()) -> str:
        eid = self._eid(task, type_)
        self.state.add_event(EventSpec(type=type_, agent=agent, fields=dict(fields),
                                   causes=self._causes(task, causes), id=eid))
        self._advance(task, eid)
        return eid

    def submit(self, task: str, p: Proposal) -> Verdict:
        """Audit and record one proposal (icore Def. 6)."""
        v = self.state.submit(p, head_view=self._view)
        self._diagnose(v.flags)
        self.verdicts.append({"task": task, "operation": p.operation, "proposer": p.proposer,
                              "target": p.target, "decision": str(v.decision),
                              "reasons": [f"{r.code}: {r.detail}" for r in v.reasons]})
        m = self.state.metrics()
        self.timeline.append((len(self.verdicts), m.snd, m.astab, m.cq))
        return v

    def _proposal(self, task: str, proposer: str, op: str, target: str, ev: EventSpec,
                  effects: Sequence[Effect], certs: Sequence[CertificateRequest]) -> Verdict:
        ev = EventSpec(type=ev.type, agent=ev.agent, fields=ev.fields, id=ev.id,
                       causes=self._causes(task, ev.causes))
        v = self.submit(task, Proposal(proposer=proposer, operation=op, target=target,
                                       events=(ev,), effects=tuple(effects),
                                       justification=(str(ev.id),),
                                       certificates=tuple(certs)))
        self._advance(task, str(ev.id))
        return v

    # -- workflow steps -------------------------------------------------------------
    def introduce(self, task: str) -> None:
        """Introduce the task's obligations (plan -> act -> audit) and assign them."""
        mark = self._mark()
        ev = EventSpec(type="task_introduced", agent=RUN_AGENT, fields={"task": task},
                       id=self._eid(task, "intro"))
        o_plan, o_act, o_audit = f"{task}/plan", f"{task}/act", f"{task}/audit"
        self.submit(task, Proposal(
            proposer=RUN_AGENT, operation="introduce", target=None, events=(ev,),
            effects=(Effect.node(o_plan, "plan"),
                     Effect.node(o_act, "act", deps=(o_plan,), required_root=True),
                     Effect.node(o_audit, "audit", deps=(o_act,))),
            justification=(str(ev.id),)))
        self._advance(task, str(ev.id))
        for oid, role in ((o_plan, "planner"), (o_act, "executor"), (o_audit, "auditor")):
            self.submit(task, Proposal(
                proposer=RUN_AGENT, operation="assign", target=oid,
                effects=(Effect.assign(oid, self.role_agent[role]),
                         Effect.status(oid, "assigned")),
                justification=(str(ev.id),)))
        self._told("introduce", task, {}, mark=mark, event=str(ev.id))

    def committed(self, task: str, type_: str, agent: str, rec: Mapping[str, Any]) -> str:
        """A record commit observed (requirement, catalog, shortlist): an event in G."""
        mark = self._mark()
        if rec.get("key") and rec.get("id"):
            self.heads[rec["key"]] = rec["id"]
            self._hold(rec)
        eid = self._add_event(task, type_, agent, {"record": rec["id"], "key": rec["key"]})
        self._told("committed", task, {"type": type_, "agent": agent, "record": _rec(rec)},
                   mark=mark, event=eid)
        return eid

    def revised(self, task: str, agent: str, rec: Mapping[str, Any]) -> list[str]:
        """An owner revision: event in G, head moves, dependent certificates revoked."""
        mark = self._mark()
        self.heads[rec["key"]] = rec["id"]
        self._hold(rec)
        eid = self._add_event(task, "requirement_revised", agent, {"record": rec["id"],
                                                                   "key": rec["key"]})
        flags = self.state.on_head_change(rec["key"], rec["id"])
        self._diagnose(flags)
        self._told("revised", task, {"agent": agent, "record": _rec(rec)}, mark=mark,
                   event=eid)
        return [f.id for f in flags]

    def planned(self, task: str, agent: str, rec: Mapping[str, Any], req_key: str,
                req_id: str, *, replan: bool) -> Verdict:
        """The plan (or the one replan) as an audited proposal citing its requirement."""
        mark = self._mark()
        ev = EventSpec(type="plan_written", agent=agent,
                       fields={"record": rec["id"], "replan": replan,
                               "candidate": rec["content"]["args"]["option"]},
                       id=self._eid(task, "plan"))
        v = self._proposal(task, agent, "plan", f"{task}/plan", ev,
                           [Effect.status(f"{task}/plan", "submitted"),
                            Effect.result(f"{task}/plan", {"candidate":
                                                           rec["content"]["args"]["option"]})],
                           [CertificateRequest("lineage", events=(str(ev.id),),
                                               records=(CitedRecord(req_key, req_id),))])
        if replan and v.committed:
            for f in self.state.open_flags():
                if any(o.startswith(f"{task}/") for o in f.obligations):
                    self.state.resolve_flag(f.id, by=agent, note="replanned from the fresh record")
        self._told("planned", task, {"agent": agent, "record": _rec(rec), "req_key": req_key,
                                     "req_id": req_id, "replan": replan},
                   mark=mark, event=str(ev.id))
        return v

    def gate(self, task: str, agent: str,
             decision: DecisionEntry | Mapping[str, Any]) -> str:
        """One gate decision: an event in G.

        ``decision`` is the typed :class:`~icore.fence.DecisionEntry` of a live run, or
        the fields a recorded run's span carried (any of them may be missing).
        """
        d = decision.to_dict() if isinstance(decision, DecisionEntry) else decision
        mark = self._mark()
        eid = self._add_event(task, "gate_decision", agent, {
            "outcome": d.get("outcome"), "reason": d.get("reason"),
            "policy": d.get("policy"), "replanned": d.get("replanned"),
            "point": d.get("point")})
        self._told("gate", task, {"agent": agent, "decision": dict(d)}, mark=mark,
                   event=eid)
        return eid

    def executed(self, task: str, agent: str, action: str, option: str, gate_event: str,
                 req_key: str, frontier_id: str) -> Verdict:
        """The primary action as an audited proposal citing the plan's frontier."""
        mark = self._mark()
        ev = EventSpec(type="action_done", agent=agent,
                       fields={"action": action, "option": option},
                       causes=(gate_event,), id=self._eid(task, "act"))
        v = self._proposal(task, agent, "execute", f"{task}/act", ev,
                              [Effect.status(f"{task}/act", "discharged"),
                               Effect.result(f"{task}/act", {"action": action,
                                                             "option": option})],
                              [CertificateRequest("lineage", events=(str(ev.id),),
                                                  records=(CitedRecord(req_key, frontier_id),)),
                               CertificateRequest("gate", events=(gate_event,))])
        self._told("executed", task, {"agent": agent, "action": action, "option": option,
                                      "gate_event": gate_event, "req_key": req_key,
                                      "frontier_id": frontier_id}, mark=mark, event=str(ev.id))
        return v

    def audited(self, task: str, agent: str, verdict: str, req_key: str, req_id: str
                ) -> Verdict:
        """The auditor's verdict as an audited proposal citing the current requirement."""
        mark = self._mark()
        ev = EventSpec(type="audit_done", agent=agent, fields={"verdict": verdict},
                       id=self._eid(task, "audit"))
        status = "discharged" if verdict in ("accept", "repeat_action") else "failed"
        v = self._proposal(task, agent, "verify", f"{task}/audit", ev,
                           [Effect.status(f"{task}/audit", status),
                            Effect.result(f"{task}/audit", {"verdict": verdict})],
                           [CertificateRequest("lineage", events=(str(ev.id),),
                                               records=(CitedRecord(req_key, req_id),))])
        self._told("audited", task, {"agent": agent, "verdict": verdict, "req_key": req_key,
                                     "req_id": req_id}, mark=mark, event=str(ev.id))
        return v

    def failed(self, task: str, obligation: str, type_: str, agent: str,
               fields: Mapping[str, Any]) -> Verdict | None:
        """A failed step (decision failure, block, crash): event plus a ``fail`` entry."""
        mark = self._mark()
        eid = self._add_event(task, type_, agent if agent in self.decl.agents else RUN_AGENT,
                              fields)
        oid = f"{task}/{obligation}"
        v = None
        if oid in self.state.obligations:
            v = self.submit(task, Proposal(proposer=RUN_AGENT, operation="fail", target=oid,
                                           effects=(Effect.status(oid, "failed"),),
                                           justification=(eid,)))
        self._told("failed", task, {"obligation": obligation, "type": type_, "agent": agent,
                                    "fields": dict(fields)}, mark=mark, event=eid)
        return v

    def summary(self) -> dict[str, Any]:
        """Metrics and counts for the report."""
        m = self.state.metrics()
        committed = sum(1 for v in self.verdicts if v["decision"] == "commit")
        return {"snd": m.snd, "astab": m.astab, "cq": m.cq, "evaluated": m.evaluated,
                "events": len(self.state.events), "proposals": len(self.verdicts),
                "committed": committed, "rejected": len(self.verdicts) - committed,
                "hard_flags": len(self.state.flags), "open_flags": len(self.state.open_flags())}

    def close(self) -> None:
        """Close the log."""
        close = getattr(self.log, "close", None)
        if callable(close):
            close()


class _CoordinatorView(LineageHeadView):
    """The coordinator's lineage view: derivation is followed from the records it holds.

    A cited record the coordinator could not rebuild from an acknowledged reply (a
    recording whose spans carry no envelope) has no known lineage: only the record itself
    is checked against its head, as before lineage was followed. Missing ancestors of a
    held record fail closed (:meth:`LineageHeadView.ancestors`).
    """

    def ancestors(self, ref: CitedRecord) -> tuple[CitedRecord, ...]:
        """Ancestors of a held record (fail closed); () for one the coordinator lacks."""
        if self.record(ref.record_id) is None:
            return ()
        return super().ancestors(ref)


def _rec(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a record reply a listener sees: id, key, owner, seq, plan option."""
    out = {k: rec[k] for k in ("id", "key", "owner", "seq") if k in rec}
    args = (rec.get("content") or {}).get("args") if isinstance(rec.get("content"), dict) \
        else None
    if isinstance(args, dict) and "option" in args:
        out["content"] = {"args": {"option": args["option"]}}
    return out


LiveAudit = LiveLedger
"""Former name of :class:`LiveLedger` (the live run's recorder of X), kept for existing code."""
AuditListener = LedgerListener
"""Former name of :data:`LedgerListener`, kept for existing code."""
