"""One agent process of a live run (``python -m icore.live._agent_proc CONFIG``).

The process hosts the agent's durable SQLite memory behind its own owner service
(mutually authenticated TCP on 127.0.0.1, :class:`icore.net` owner server), reaches the
other owners through an :class:`icore.net` owner client, and performs its role's steps
when the run coordinator asks (control plane: JSON lines on stdin/stdout; data plane:
records, heads and fetches over TLS).

Control messages::

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
import contextlib
import json
import logging
import os
import sys
import threading
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
    GateContext,
    LoopOwners,
    PointCounter,
    ProtectedTool,
    Reads,
    Replan,
    ReplanRequest,
    TeamContext,
    bind_action,
    installed_heads,
    make_validator,
    strategy,
)
from icore.live._workflow import FAMILY_SPECS, MAX_CANDIDATES, eligible, opaque_digest
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    AsyncOwnerAccess,
    OwnerAccess,
    OwnershipMap,
    SQLiteStore,
    Store,
)
from icore.net import (
    HeadQuery,
    HeadReplyMsg,
    Message,
    OwnerClient,
    OwnerHandler,
    OwnerServer,
    client_context,
    server_context,
)
from icore.records import Record, decode_record, derive, encode_record

log = logging.getLogger("icore.live")


def rec_b64(rec: Record) -> str:
    """A record in the control-plane form (base64 of the canonical binary encoding)."""
    return base64.b64encode(encode_record(rec)).decode("ascii")


def rec_from_b64(text: str) -> Record:
    """Decode and verify a control-plane record."""
    return decode_record(base64.b64decode(text))


def rec_info(rec: Record) -> dict[str, Any]:
    """JSON summary of a record for the coordinator (ids stay out of model prompts)."""
    out = {"id": rec.id, "key": rec.key, "owner": rec.owner, "seq": rec.seq,
           "parents": list(rec.parents), "type": rec.type, "content": rec.content}
    if rec.supersedes is not None:
        out["supersedes"] = rec.supersedes
    return out


class _ReplicaView(OwnerHandler):
    """This agent's owner service, also serving its installed view of other owners' keys.

    Quorum policies read a quorum of replica views (planfence Sec. 5.1). Own keys are
    answered as the owner answers them.
    """

    def handle(self, msg: Message, peer: str) -> Message:
        """Answer as the owner; add installed heads of asked keys owned by others."""
        reply = super().handle(msg, peer)
        if isinstance(msg, HeadQuery) and isinstance(reply, HeadReplyMsg):
            ownership = self.store.ownership
            others = [k for k in msg.keys if ownership.owner_of(k) != self.agent]
            extra = installed_heads(self.store, others)
            if extra:
                reply = HeadReplyMsg(reply.rid, reply.owner,
                                     reply.heads + tuple(extra.values()), reply.same)
        return reply


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
        central = self.role == "central"
        memory = cfg.get("memory") or {}
        self.nats: Any = None
        """This agent's :class:`icore.net.nats.NatsStore` when owner memory is on NATS."""
        if memory.get("backend") == "nats":
            from icore.net.nats import NatsStore

            self.nats = NatsStore(memory["servers"], certs_dir=cfg["certs"],
                                  ownership=self.ownership, agent=self.id,
                                  prefix=memory.get("prefix", "icore"), timeout_s=self.rpc_s)
            self.store: Store = self.nats
        else:
            self.store = SQLiteStore(cfg["db"], self.ownership, None if central else self.id,
                                     synchronous=cfg.get("synchronous", "NORMAL"))
        self.client: OwnerClient | None = None
        self.server: OwnerServer | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._out_lock = threading.Lock()
        self._calls: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_call = 0
        self._decider: Decider | None = None
        self._transcript: list[dict[str, Any]] = []
        self._clock: WallClock | None = None
        self._points: PointCounter | None = None
        self._log = DecisionLog()
        self.external: list[dict[str, Any]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._central_lock = asyncio.Lock()

    # -- control plane --------------------------------------------------------------
    def send(self, obj: Mapping[str, Any]) -> None:
        """Write one control message to stdout."""
        line = json.dumps(obj, sort_keys=True, default=str)
        with self._out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    async def call(self, to_role: str, cmd: str, **args: Any) -> dict[str, Any]:
        """Ask another agent (through the coordinator); bounded by the step timeout."""
        assert self.loop is not None
        self._next_call += 1
        n = self._next_call
        fut: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self._calls[n] = fut
        self.send({"call": n, "to": to_role, "cmd": cmd, **args})
        try:
            return await asyncio.wait_for(fut, self.step_s)
        finally:
            self._calls.pop(n, None)

    async def run(self) -> None:
        """Serve until stdin closes or ``shutdown``."""
        self.loop = asyncio.get_running_loop()
        certs = self.cfg["certs"]
        if self.nats is not None:
            # no owner service of our own: the engine holds our heads; metadata sync of
            # every other owner's heads through a KV watcher fills the replica cache
            port = 0
            self.nats.watch_heads()
        else:
            self.server = OwnerServer(self.store, agent=self.id,
                                      ssl_context=server_context(certs, self.id))
            if strategy(self.policy).replica_views:
                self.server.handler = _ReplicaView(self.store, agent=self.id)
            port = await self.server.start()
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        loop = self.loop

        def pump() -> None:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=pump, name="icore-stdin", daemon=True).start()
        self.send({"ready": port, "pid": os.getpid(), "agent": self.id})
        try:
            while True:
                line = await queue.get()
                if line is None:
                    break
                try:
                    msg = json.loads(line)
                except ValueError:
                    log.warning("undecodable control line: %r", line[:200])
                    continue
                if "reply" in msg:
                    fut = self._calls.get(int(msg["reply"]))
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                    continue
                if msg.get("cmd") == "shutdown":
                    self.send({"id": msg.get("id"), "ok": True, "result": {}})
                    break
                t = asyncio.create_task(self._handle(msg))
                self._tasks.add(t)
                t.add_done_callback(self._tasks.discard)
        finally:
            await self._close()

    async def _close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 5)
        if self.client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.client.close(), 5)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.close(), 5)
        with contextlib.suppress(Exception):
            self.store.close()
        self._flush_transcript()

    async def _handle(self, msg: Mapping[str, Any]) -> None:
        mid = msg.get("id")
        cmd = str(msg.get("cmd"))
        fn = getattr(self, f"cmd_{cmd}", None)
        if fn is None:
            self.send({"id": mid, "ok": False, "error": f"unknown command {cmd!r}"})
            return
        try:
            result = await fn(msg)
            self.send({"id": mid, "ok": True, "result": result})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("command %s failed", cmd)
            self.send({"id": mid, "ok": False, "error": f"{type(exc).__name__}: {exc}"})

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
        if h is None and self.nats is not None:
            return self.nats.pull(key)  # type: ignore[no-any-return]
        return None if h is None else self.store.get(h.record_id)

    def owner_access(self) -> OwnerAccess:
        """A sync owner access for the fence.

        The engine on NATS, else the owner client driven on this agent's loop from the
        fence's worker thread.
        """
        if self.nats is not None:
            return self.nats.owner_access()  # type: ignore[no-any-return]
        assert self.client is not None and self.loop is not None
        return LoopOwners(self.client, self.loop)

    def async_owner_access(self) -> AsyncOwnerAccess:
        """The gate's async owner access on this agent's loop.

        The engine on NATS (its calls run on the store's connection loop), else the owner
        client.
        """
        if self.nats is not None:
            return self.nats.async_owner_access()  # type: ignore[no-any-return]
        assert self.client is not None
        return self.client

    async def publish(self, rec: Record, to_roles: Sequence[str]) -> dict[str, Any]:
        """Commit an own record (and at the central service), then replicate it.

        The record replaces this agent's current head of its key, named explicitly
        (compare-and-set): a re-derived plan or shortlist need not cite the version it
        replaces, and a lost race is a typed HeadConflict instead of a lost update.
        On NATS the commit is the publication: the engine's KV watchers deliver it.
        """
        head = self.store.head(rec.key)
        base = None if head is None else head.record_id
        if self.nats is not None:
            # synchronous, as with SQLite: the record's sequence came from next_seq() in
            # this same loop turn, so concurrent workflows never race on it
            self.store.commit(rec, writer=self.id, expected_head=base)
            info = rec_info(rec)
            info["replication_failed"] = []
            return info
        assert self.client is not None
        self.store.commit(rec, writer=self.id, expected_head=base)
        if strategy(self.policy).central:
            # the central service serializes every commit: keep this owner's sequence
            # order (FIFO lock, taken right after the local commit)
            async with self._central_lock:
                await self.client.commit("central", rec, expected_head=base,
                                         timeout_s=self.rpc_s)
        targets = [self.roles[r] for r in to_roles if r in self.roles and self.roles[r] != self.id]
        results = await asyncio.gather(*(self.client.replicate(t, [rec], timeout_s=self.rpc_s)
                                         for t in targets), return_exceptions=True)
        failed = [t for t, r in zip(targets, results, strict=True) if isinstance(r, BaseException)]
        info = rec_info(rec)
        info["replication_failed"] = failed
        return info

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
        if self.nats is None:
            self.client = OwnerClient(addrs, identity=self.id,
                                      ssl_context=client_context(self.cfg["certs"], self.id))
        if self.role == "executor":
            self._clock, self._points = WallClock(), PointCounter()
        if self.role in ("planner", "retriever", "executor", "auditor"):
            # build the backend now (the llm one imports openai), in parallel across the
            # team's processes rather than on each role's first decision
            await asyncio.to_thread(self.decider)
        return {"peers": len(addrs)}

    async def cmd_ping(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Liveness."""
        return {"agent": self.id, "role": self.role}

    async def cmd_stats(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Traffic and memory counters."""
        out: dict[str, Any] = {"agent": self.id, "external_actions": len(self.external)}
        if self.server is not None:
            out["server"] = self.server.stats.as_dict()
        if self.client is not None:
            out["client"] = self.client.stats.as_dict()
        if isinstance(self.store, SQLiteStore):
            out["records"] = self.store.record_count()
        if self.nats is not None:
            st = self.nats.memory.stats
            out["nats"] = {"gets": st.gets, "puts": st.puts, "cas_conflicts": st.cas_conflicts,
                           "permission_denied": st.permission_denied}
        return out

    # -- reviser ----------------------------------------------------------------------
    async def cmd_seed(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Commit the task's initial requirement (reviser)."""
        rec = Record.create(key=f"req/{msg['task']}", owner=self.id, seq=self.store.next_seq(),
                            type="requirement", content=msg["requirement"])
        return await self.publish(rec, ("planner", "retriever", "executor", "auditor"))

    async def cmd_revise(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Commit the post-plan revision, citing the previous version (reviser)."""
        prev = self.local(f"req/{msg['task']}")
        if prev is None:
            raise RuntimeError("no requirement to revise")
        rec = derive(key=prev.key, owner=self.id, seq=self.store.next_seq(), type="requirement",
                     content=msg["revision"], inputs=[prev])
        # background propagation delivers the fresh fact to every replica; the plan
        # derived from the previous version is not replaced (planfence Sec. 1)
        return await self.publish(rec, ("planner", "retriever", "executor", "auditor"))

    # -- retriever --------------------------------------------------------------------
    async def cmd_catalog(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Commit the task's catalog (retriever)."""
        rec = Record.create(key=f"cat/{msg['task']}", owner=self.id, seq=self.store.next_seq(),
                            type="catalog", content={"items": list(msg["catalog"])})
        return await self.publish(rec, ("planner", "executor", "auditor"))

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
        res: dict[str, Any] = {"decision": out.to_dict()}
        if not out.ok or out.args is None:
            return res
        chosen = [c for c in cands if c["id"] in set(out.args["candidates"])]
        rec = derive(key=f"short/{task}", owner=self.id, seq=self.store.next_seq(),
                     type="shortlist", content={"candidates": chosen, "revision": digest},
                     inputs=[req, cat])
        res["record"] = await self.publish(rec, ("planner", "executor", "auditor"))
        return res

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
                    isolated: bool) -> dict[str, Any]:
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
        res: dict[str, Any] = {"decision": out.to_dict()}
        if not out.ok or out.args is None:
            return res
        args = {"task": task, "option": out.args["candidate"]}
        # the planning model's tool call is the plan: it binds the action and its
        # arguments, so the executor can run exactly these (planfence A.3 step 1)
        rec = derive(key=f"plan/{task}", owner=self.id, seq=self.store.next_seq(), type="plan",
                     content={"action": fs.action, "args": args, "revision": digest,
                              **bind_action(fs.action, args)},
                     inputs=[req, *sources])
        res["record"] = await self.publish(rec, ("executor", "auditor"))
        res["args"] = args
        return res

    async def cmd_plan(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Form the plan from local state, citing the exact inputs (planner)."""
        task = msg["task"]
        req, short = self.local(f"req/{task}"), self.local(f"short/{task}")
        if req is None or short is None:
            raise RuntimeError("requirement or shortlist not available locally")
        handoffs = [{"from": "retriever", "candidates": [c["id"] for c in
                                                          short.content["candidates"]]}]
        return await self._plan(self.fam(msg), task, req, [short],
                                list(short.content["candidates"]),
                                {"handoffs": handoffs}, isolated=False)

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
        return await self._plan(family, task, req, [cat], cands, extra, isolated=True)

    # -- executor ---------------------------------------------------------------------
    def _build_fence(self, task: str) -> Fence:
        """The executor's fence for one task under the policy under test.

        Built by :func:`~icore.fence.make_validator`; all-key asks for every key of the
        task.
        """
        strat = strategy(self.policy)
        owners: OwnerAccess | AsyncOwnerAccess | None = None
        if strat.reads is Reads.SYNC:
            owners = self.owner_access()
        elif strat.reads is Reads.ASYNC:
            owners = self.async_owner_access()
        # on NATS the engine is the one shared service; otherwise the central service
        # and the replica views are reached under their own names
        central = "central" if strat.central and self.nats is None else None
        others = sorted(a for a in set(self.roles.values()) if a not in (self.id, "central"))
        keys = tuple(k for k in (str(p).replace("*", task) for p in self.cfg["ownership"])
                     if self.ownership.owner_of(k) not in (None, self.id))
        context = GateContext(lookup=self.store.lookup, ownership=self.ownership,
                              owners=owners, timeout_s=self.rpc_s, clock=self._clock,
                              points=self._points, policy=self.policy)
        team = TeamContext(install=self.store, keys=keys, replicas=tuple(others), central=central)
        return Fence(validator=make_validator(self.policy, context, team),
                     install=self.store, log=self._log)

    def _tool(self, name: str) -> ProtectedTool:
        specs = {t["name"]: t for t in self.cfg.get("tools", [])}
        spec = specs.get(name)
        if spec is None:
            raise RuntimeError(f"no protected tool {name!r} in the manifest")
        templates = list(spec["depends_on"])

        def scope(args: Mapping[str, Any]) -> set[str]:
            return {t.replace("{task}", str(args["task"])) for t in templates}

        def act(task: str, option: str) -> dict[str, Any]:
            out = {"action": name, "task": task, "option": option}
            self.external.append(out)  # the external service call (simulated)
            return out

        return ProtectedTool(act, depends_on=scope, name=name)

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
        res: dict[str, Any] = {"decision": out.to_dict(), "executed": False}
        if not out.ok:
            return res
        replans: list[dict[str, Any]] = []

        async def replan(rq: ReplanRequest) -> Replan | None:
            fresh = [rec_b64(r) for r in rq.fresh.values()]
            reply = await asyncio.wait_for(
                self.call("planner", "replan", task=task, family=family, fresh=fresh,
                          old_args=dict(rq.old_args)), self.step_s + 5.0)
            replans.append(reply)
            if not reply.get("ok"):
                return None
            result = reply.get("result") or {}
            rec = result.get("record")
            if rec is None:
                return None
            return Replan(roots=[rec["id"]], args=result["args"])

        fence = self._build_fence(task)
        ptool = self._tool(fs.action)
        # async protected action: the owners of D(a) are queried concurrently
        ar = await fence.aexecute(ptool, roots=[plan.id], args=args, replan=replan)
        res.update({
            "executed": ar.executed, "replanned": ar.replanned, "roots": list(ar.roots),
            "args": dict(ar.args), "detail": ar.detail, "outcome": ar.outcome.value,
            "decisions": [d.to_dict() for d in ar.decisions],
            "replan_replies": [r.get("result") for r in replans],
            "root_parents": {},
        })
        for rid in ar.roots:
            r = self.store.get(rid)
            if r is not None:
                res["root_parents"][rid] = list(r.parents)
        if ar.executed:
            root = self.store.get(ar.roots[0])
            assert root is not None
            act = derive(key=f"act/{task}", owner=self.id, seq=self.store.next_seq(),
                         type="action", content={"action": fs.action, "args": dict(ar.args),
                                                 "replanned": ar.replanned,
                                                 "result": ar.value},
                         inputs=[root])
            res["record"] = await self.publish(act, ("auditor",))
        return res

    # -- auditor ----------------------------------------------------------------------
    async def cmd_audit(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Check the externally visible outcome against the owner's current requirement."""
        task = msg["task"]
        act = self.store.get(msg["act"]) if msg.get("act") else None
        if act is None:
            raise RuntimeError("no action record to audit")
        key = f"req/{task}"
        owner = self.ownership.require_owner(key)
        if self.nats is not None:
            access = self.owner_access()
            reply = await asyncio.to_thread(access.query_heads, owner, [key],
                                            timeout_s=self.rpc_s)
        else:
            assert self.client is not None
            reply = await self.client.query_heads(owner, [key], timeout_s=self.rpc_s)
        head = reply.heads[key]
        cur = self.store.get(head.record_id)
        if cur is None or not cur.has_content:
            if self.nats is not None:
                got = await asyncio.to_thread(self.owner_access().fetch, owner,
                                              [head.record_id], timeout_s=self.rpc_s)
            else:
                assert self.client is not None
                got = await self.client.fetch(owner, [head.record_id], timeout_s=self.rpc_s)
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
        res: dict[str, Any] = {"decision": out.to_dict(), "consistent": consistent,
                               "current_requirement": cur.id}
        if not out.ok or out.args is None:
            return res
        rec = derive(key=f"audit/{task}", owner=self.id, seq=self.store.next_seq(),
                     type="audit", content={"verdict": out.args["verdict"],
                                            "candidate": option},
                     inputs=[act, cur])
        res["record"] = await self.publish(rec, ())
        res["verdict"] = out.args["verdict"]
        return res


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
