"""One agent process of a live run (``python -m icore.live._agent_proc CONFIG``).

The process holds the agent's owner memory through a backend chosen once from its config
(:mod:`icore.live._backend`: durable SQLite behind its own mutual-TLS owner service and
an owner client to the others, or the team's NATS JetStream engine), and performs its
role's steps when the run coordinator asks (control plane: JSON lines on stdin/stdout,
:mod:`icore.live._control`; data plane: records, heads and fetches over TLS).

Control messages (typed in :mod:`icore.live._messages`)::

    coordinator -> agent   {"id": n, "cmd": "...", ...}            a step
    agent -> coordinator   {"id": n, "ok": true, "result": {...}}  its answer
    agent -> coordinator   {"call": m, "to": "<role>", "cmd": ...}  ask another agent
    coordinator -> agent   {"reply": m, "ok": ..., "result": ...}  (e.g. the one replan)

The process exits when stdin closes (the coordinator died) or on ``shutdown``; SQLite
commits are durable before they are acknowledged, so a killed agent loses nothing it
acknowledged.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from icore._clock import WallClock
from icore.agents import (
    Decider,
    DecisionOutcome,
    DecisionRequest,
    ToolSpec,
    decider_from_config,
    dumps_transcript,
    enum_prop,
    object_schema,
)
from icore.fence import (
    DecisionLog,
    Fence,
    PointCounter,
    Replan,
    ReplanRequest,
    bind_action,
)
from icore.live._backend import AgentBackend, make_backend
from icore.live._control import ControlPlane, Handler
from icore.live._executor import executor_fence, protected_tool
from icore.live._messages import PeerReply
from icore.live._replies import (
    AuditReply,
    CommittedRecord,
    ExecuteReply,
    PeersReply,
    PingReply,
    PlanReply,
    ShortlistReply,
    StatsReply,
)
from icore.live._workflow import FAMILY_SPECS, MAX_CANDIDATES, eligible, opaque_digest
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    AsyncOwnerAccess,
    OwnerAccess,
    OwnershipMap,
    Store,
)
from icore.records import Record, decode_record, derive, encode_record

log = logging.getLogger("icore.live")


def rec_b64(rec: Record) -> str:
    """A record in the control-plane form (base64 of the canonical binary encoding)."""
    return base64.b64encode(encode_record(rec)).decode("ascii")


def rec_from_b64(text: str) -> Record:
    """Decode and verify a control-plane record."""
    return decode_record(base64.b64decode(text))


class LiveAgentProcess:
    """The agent side of a live run (see the module docstring)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.id: str = cfg["agent"]
        self.role: str = cfg["role"]
        self.family: str = cfg.get("family", "reservation")
        self.policy: str = cfg.get("policy", "planfence")
        self.rpc_s: float = float(cfg.get("rpc_s", DEFAULT_TIMEOUT_S))
        self.step_s: float = float(cfg.get("step_s", 60.0))
        self.roles: dict[str, str] = dict(cfg.get("roles", {}))
        self.ownership = OwnershipMap.from_mapping(cfg["ownership"])
        self.backend: AgentBackend = make_backend(cfg, self.ownership, policy=self.policy,
                                                  rpc_s=self.rpc_s)
        """The owner-memory backend (TCP + SQLite, or NATS), chosen once from the config."""
        self.store: Store = self.backend.store
        self.control = ControlPlane(self.step_s)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._decider: Decider | None = None
        self._transcript: list[dict[str, Any]] = []
        self._clock: WallClock | None = None
        self._points: PointCounter | None = None
        self._log = DecisionLog()
        self.external: list[dict[str, Any]] = []

    # -- control plane --------------------------------------------------------------
    async def call(self, to_role: str, cmd: str, **args: Any) -> PeerReply:
        """Ask another agent (through the coordinator); bounded by the step timeout."""
        return await self.control.call(to_role, cmd, **args)

    async def run(self) -> None:
        """Serve until stdin closes or ``shutdown``."""
        self.loop = asyncio.get_running_loop()
        port = await self.backend.start()
        try:
            await self.control.serve(self.id, port, self._handler)
        finally:
            await self._close()

    def _handler(self, cmd: str) -> Handler | None:
        fn: Handler | None = getattr(self, f"cmd_{cmd}", None)
        return fn

    async def _close(self) -> None:
        await self.control.cancel()
        await self.backend.close()
        self._flush_transcript()

    # -- helpers --------------------------------------------------------------------
    def decider(self) -> Decider:
        """The role backend (built on first use; the llm backend imports openai lazily)."""
        if self._decider is None:
            self._decider = decider_from_config(self.cfg.get("backend", {}),
                                                transcript=self._transcript)
        return self._decider

    async def decide(self, request: DecisionRequest) -> DecisionOutcome:
        """One role decision (model calls run off the event loop)."""
        d = self.decider()
        if d.name == "scripted":
            out = d.decide(request)
        else:
            out = await asyncio.to_thread(d.decide, request)
            self._flush_transcript()
        return out

    def _flush_transcript(self) -> None:
        path = self.cfg.get("transcript")
        if not path or not self._transcript:
            return
        entries, self._transcript[:] = list(self._transcript), []
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(dumps_transcript(entries))

    def local(self, key: str) -> Record | None:
        """This agent's current version of ``key`` (own head, else installed replica).

        On NATS a key the watcher has not delivered yet is pulled from the engine once
        (the publisher's commit was acknowledged before this step was asked for).
        """
        h = self.store.head(key) or self.store.installed_head(key)
        if h is None:
            return self.backend.pull(key)
        return self.store.get(h.record_id)

    def owner_access(self) -> OwnerAccess:
        """A sync owner access for the fence.

        The engine on NATS, else the owner client driven on this agent's loop from the
        fence's worker thread.
        """
        return self.backend.owner_access()

    def async_owner_access(self) -> AsyncOwnerAccess:
        """The gate's async owner access on this agent's loop.

        The engine on NATS (its calls run on the store's connection loop), else the owner
        client.
        """
        return self.backend.async_owner_access()

    async def publish(self, rec: Record, to_roles: Sequence[str]) -> CommittedRecord:
        """Commit an own record (and at the central service), then replicate it.

        The record replaces this agent's current head of its key, named explicitly
        (compare-and-set): a re-derived plan or shortlist need not cite the version it
        replaces, and a lost race is a typed HeadConflict instead of a lost update.
        On NATS the commit is the publication: the engine's KV watchers deliver it.
        """
        head = self.store.head(rec.key)
        base = None if head is None else head.record_id
        # synchronous: the record's sequence came from next_seq() in this same loop
        # turn, so concurrent workflows never race on it
        self.store.commit(rec, writer=self.id, expected_head=base)
        targets = [self.roles[r] for r in to_roles if r in self.roles and self.roles[r] != self.id]
        failed = await self.backend.propagate(rec, base, targets)
        return CommittedRecord.of(rec, tuple(failed))

    def fam(self, msg: Mapping[str, Any]) -> str:
        """The workflow family of a step (per task; default: the manifest's)."""
        fam = str(msg.get("family") or self.family)
        if fam not in FAMILY_SPECS:
            raise ValueError(f"unknown family {fam!r}")
        return fam

    # -- every role -----------------------------------------------------------------
    async def cmd_peers(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Learn the team's owner addresses and open the owner client."""
        addrs = {k: (str(v[0]), int(v[1])) for k, v in msg["addresses"].items()}
        self.backend.connect(addrs)
        if self.role == "executor":
            self._clock, self._points = WallClock(), PointCounter()
        if self.role in ("planner", "retriever", "executor", "auditor"):
            # build the backend now (the llm one imports openai), in parallel across the
            # team's processes rather than on each role's first decision
            await asyncio.to_thread(self.decider)
        return PeersReply(len(addrs)).to_dict()

    async def cmd_ping(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Liveness."""
        return PingReply(self.id, self.role).to_dict()

    async def cmd_stats(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Traffic and memory counters."""
        return self.backend.stats(StatsReply(self.id, len(self.external))).to_dict()

    # -- reviser ----------------------------------------------------------------------
    async def cmd_seed(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Commit the task's initial requirement (reviser)."""
        rec = Record.create(key=f"req/{msg['task']}", owner=self.id, seq=self.store.next_seq(),
                            type="requirement", content=msg["requirement"])
        return (await self.publish(rec, ("planner", "retriever", "executor", "auditor"))
                ).to_dict()

    async def cmd_revise(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Commit the post-plan revision, citing the previous version (reviser)."""
        prev = self.local(f"req/{msg['task']}")
        if prev is None:
            raise RuntimeError("no requirement to revise")
        rec = derive(key=prev.key, owner=self.id, seq=self.store.next_seq(), type="requirement",
                     content=msg["revision"], inputs=[prev])
        # background propagation delivers the fresh fact to every replica; the plan
        # derived from the previous version is not replaced (planfence Sec. 1)
        return (await self.publish(rec, ("planner", "retriever", "executor", "auditor"))
                ).to_dict()

    # -- retriever --------------------------------------------------------------------
    async def cmd_catalog(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Commit the task's catalog (retriever)."""
        rec = Record.create(key=f"cat/{msg['task']}", owner=self.id, seq=self.store.next_seq(),
                            type="catalog", content={"items": list(msg["catalog"])})
        return (await self.publish(rec, ("planner", "executor", "auditor"))).to_dict()

    async def cmd_shortlist(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Decide the locally eligible candidates and publish them (retriever)."""
        task = msg["task"]
        req, cat = self.local(f"req/{task}"), self.local(f"cat/{task}")
        if req is None or cat is None:
            raise RuntimeError("requirement or catalog not available locally")
        family = self.fam(msg)
        fs = FAMILY_SPECS[family]
        cands = eligible(req.content, cat.content["items"], family)
        ids = [c["id"] for c in cands]
        digest = opaque_digest(req.id)
        tool = ToolSpec("publish_shortlist",
                        f"Publish up to {MAX_CANDIDATES} {fs.item} candidates for the request.",
                        object_schema({
                            "revision": enum_prop([digest], "requirement revision"),
                            "candidates": {"type": "array", "items": enum_prop(ids),
                                           "minItems": 1, "maxItems": MAX_CANDIDATES,
                                           "uniqueItems": True}}))
        user = {"requirement": _public_req(req.content), "revision": digest,
                "candidates": cands, "handoffs": []}
        out = await self.decide(DecisionRequest("retriever", family, user, tool,
                                                {"revision": digest, "candidates": ids}))
        if not out.ok or out.args is None:
            return ShortlistReply(out.to_dict()).to_dict()
        chosen = [c for c in cands if c["id"] in set(out.args["candidates"])]
        rec = derive(key=f"short/{task}", owner=self.id, seq=self.store.next_seq(),
                     type="shortlist", content={"candidates": chosen, "revision": digest},
                     inputs=[req, cat])
        return ShortlistReply(out.to_dict(), await self.publish(
            rec, ("planner", "executor", "auditor"))).to_dict()

    # -- planner ----------------------------------------------------------------------
    def _plan_tool(self, family: str, digest: str, ids: Sequence[str]) -> ToolSpec:
        fs = FAMILY_SPECS[family]
        return ToolSpec("submit_plan", f"Submit the plan: the {fs.action} action and the "
                        f"{fs.item} to use.",
                        object_schema({"revision": enum_prop([digest], "requirement revision"),
                                       "action": enum_prop([fs.action]),
                                       "candidate": enum_prop(list(ids))}))

    async def _plan(self, family: str, task: str, req: Record, sources: Sequence[Record],
                    cands: list[dict[str, Any]], user_extra: Mapping[str, Any],
                    isolated: bool) -> PlanReply:
        fs = FAMILY_SPECS[family]
        digest = opaque_digest(req.id)
        if not cands:
            raise RuntimeError("no eligible candidate to plan with")
        ids = [c["id"] for c in cands]
        user = {"requirement": _public_req(req.content), "revision": digest,
                "candidates": cands, **user_extra}
        out = await self.decide(DecisionRequest(
            "planner", family, user, self._plan_tool(family, digest, ids),
            {"revision": digest, "action": fs.action, "candidate": ids[0]}, isolated=isolated))
        if not out.ok or out.args is None:
            return PlanReply(out.to_dict())
        args = {"task": task, "option": out.args["candidate"]}
        # the planning model's tool call is the plan: it binds the action and its
        # arguments, so the executor can run exactly these (planfence A.3 step 1)
        rec = derive(key=f"plan/{task}", owner=self.id, seq=self.store.next_seq(), type="plan",
                     content={"action": fs.action, "args": args, "revision": digest,
                              **bind_action(fs.action, args)},
                     inputs=[req, *sources])
        return PlanReply(out.to_dict(), await self.publish(rec, ("executor", "auditor")), args)

    async def cmd_plan(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Form the plan from local state, citing the exact inputs (planner)."""
        task = msg["task"]
        req, short = self.local(f"req/{task}"), self.local(f"short/{task}")
        if req is None or short is None:
            raise RuntimeError("requirement or shortlist not available locally")
        handoffs = [{"from": "retriever", "candidates": [c["id"] for c in
                                                          short.content["candidates"]]}]
        return (await self._plan(self.fam(msg), task, req, [short],
                                 list(short.content["candidates"]),
                                 {"handoffs": handoffs}, isolated=False)).to_dict()

    async def cmd_replan(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """The one replan with isolated history over the fresh records (App. A.3 step 3)."""
        task = msg["task"]
        fresh = [rec_from_b64(t) for t in msg["fresh"]]
        for r in fresh:
            self.store.install(r)
        req = next((r for r in fresh if r.key == f"req/{task}"), None) or self.local(
            f"req/{task}")
        cat = self.local(f"cat/{task}")
        if req is None or cat is None:
            raise RuntimeError("fresh requirement or catalog not available")
        family = self.fam(msg)
        cands = eligible(req.content, cat.content["items"], family)
        old = msg.get("old_args", {})
        extra = {"replan_required": True,
                 "old_action": {"action": FAMILY_SPECS[family].action,
                                "candidate": old.get("option")},
                 "handoffs": [{"from": "retriever", "candidates": [c["id"] for c in cands]}]}
        return (await self._plan(family, task, req, [cat], cands, extra,
                                 isolated=True)).to_dict()

    # -- executor ---------------------------------------------------------------------
    def _build_fence(self, task: str) -> Fence:
        """The executor's fence for one task (:func:`~icore.live._executor.executor_fence`)."""
        return executor_fence(task, agent=self.id, policy=self.policy, backend=self.backend,
                              ownership=self.ownership, patterns=list(self.cfg["ownership"]),
                              roles=self.roles, rpc_s=self.rpc_s, clock=self._clock,
                              points=self._points, log=self._log)

    async def cmd_execute(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Run the protected primary action from the plan (executor, App. A.3)."""
        assert self.loop is not None and self._points is not None
        task, plan_id = msg["task"], msg["plan"]
        plan = self.store.get(plan_id)
        if plan is None:
            raise RuntimeError("the plan is not available locally")
        family = self.fam(msg)
        fs = FAMILY_SPECS[family]
        args = dict(plan.content["args"])
        tool = ToolSpec(f"call_{fs.action}", f"Call the protected {fs.action} action of "
                        "the plan.", object_schema({"action": enum_prop([fs.action]),
                                                    "candidate": enum_prop([args["option"]])}))
        req = self.local(f"req/{task}")
        user = {"requirement": _public_req(req.content) if req else {},
                "plan": {"action": fs.action, "candidate": args["option"]},
                "handoffs": [{"from": "planner", "action": fs.action,
                              "candidate": args["option"]}]}
        out = await self.decide(DecisionRequest("executor", family, user, tool,
                                                {"action": fs.action,
                                                 "candidate": args["option"]}))
        if not out.ok:
            return ExecuteReply(out.to_dict()).to_dict()
        replans: list[PlanReply | None] = []

        async def replan(rq: ReplanRequest) -> Replan | None:
            fresh = [rec_b64(r) for r in rq.fresh.values()]
            reply: PeerReply = await asyncio.wait_for(
                self.call("planner", "replan", task=task, family=family, fresh=fresh,
                          old_args=dict(rq.old_args)), self.step_s + 5.0)
            plan = (PlanReply.from_dict(reply.result, where="replan")
                    if reply.ok and reply.result is not None else None)
            replans.append(plan)
            if plan is None or plan.record is None:
                return None
            return Replan(roots=[plan.record.id], args=plan.args)

        fence = self._build_fence(task)
        ptool = protected_tool(self.cfg.get("tools", []), fs.action, self.external)
        # async protected action: the owners of D(a) are queried concurrently
        ar = await fence.aexecute(ptool, roots=[plan.id], args=args, replan=replan)
        root_parents: dict[str, list[str]] = {}
        for rid in ar.roots:
            r = self.store.get(rid)
            if r is not None:
                root_parents[rid] = list(r.parents)
        record = None
        if ar.executed:
            root = self.store.get(ar.roots[0])
            assert root is not None
            act = derive(key=f"act/{task}", owner=self.id, seq=self.store.next_seq(),
                         type="action", content={"action": fs.action, "args": dict(ar.args),
                                                 "replanned": ar.replanned,
                                                 "result": ar.value},
                         inputs=[root])
            record = await self.publish(act, ("auditor",))
        return ExecuteReply(
            out.to_dict(), executed=ar.executed, outcome=ar.outcome.value,
            replanned=ar.replanned, roots=tuple(ar.roots), args=dict(ar.args),
            detail=ar.detail, decisions=tuple(d.entry() for d in ar.decisions),
            replan_replies=tuple(replans), root_parents=root_parents,
            record=record).to_dict()

    # -- auditor ----------------------------------------------------------------------
    async def cmd_audit(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Check the externally visible outcome against the owner's current requirement."""
        task = msg["task"]
        act = self.store.get(msg["act"]) if msg.get("act") else None
        if act is None:
            raise RuntimeError("no action record to audit")
        key = f"req/{task}"
        owner = self.ownership.require_owner(key)
        reply = await self.backend.query_heads(owner, [key])
        head = reply.heads[key]
        cur = self.store.get(head.record_id)
        if cur is None or not cur.has_content:
            got = await self.backend.fetch(owner, [head.record_id])
            cur = got[0]
            self.store.install(cur)
        cat = self.local(f"cat/{task}")
        family = self.fam(msg)
        fs = FAMILY_SPECS[family]
        option = act.content["args"]["option"]
        items: list[dict[str, Any]] = list(cat.content["items"]) if cat else []
        item: dict[str, Any] = next((c for c in items if c["id"] == option), {})
        consistent = item.get(fs.attr) == cur.content.get(fs.attr)
        digest = opaque_digest(cur.id)
        tool = ToolSpec("report_audit", "Report whether the executed action satisfies the "
                        "current requirement.",
                        object_schema({"revision": enum_prop([digest]),
                                       "verdict": enum_prop(["accept", "reject",
                                                             "repeat_action"]),
                                       "candidate": enum_prop([option])}))
        user = {"requirement": _public_req(cur.content), "revision": digest,
                "outcome": {"action": fs.action, "candidate": option,
                            fs.attr: item.get(fs.attr)},
                "handoffs": [{"from": "executor", "action": fs.action, "candidate": option,
                              "replanned": bool(act.content.get("replanned"))}]}
        out = await self.decide(DecisionRequest(
            "auditor", family, user, tool,
            {"revision": digest, "verdict": "accept" if consistent else "reject",
             "candidate": option}))
        if not out.ok or out.args is None:
            return AuditReply(out.to_dict(), consistent, cur.id).to_dict()
        rec = derive(key=f"audit/{task}", owner=self.id, seq=self.store.next_seq(),
                     type="audit", content={"verdict": out.args["verdict"],
                                            "candidate": option},
                     inputs=[act, cur])
        return AuditReply(out.to_dict(), consistent, cur.id, await self.publish(rec, ()),
                          out.args["verdict"]).to_dict()


def _public_req(content: Mapping[str, Any]) -> dict[str, Any]:
    """The requirement as a role sees it (application-level fields only)."""
    return {k: v for k, v in content.items() if k != "owner"}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m icore.live._agent_proc CONFIG.json``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m icore.live._agent_proc CONFIG.json", file=sys.stderr)
        return 2
    cfg = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s {cfg.get('agent')} %(name)s %(levelname)s "
                               "%(message)s")
    asyncio.run(LiveAgentProcess(cfg).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
