"""PlanFence controlled replay: one schedule under one policy.

Implements planfence Sec. 5.1, App. A.3, A.6, B, C; design.md 3.3-3.5.

The replay drives the real components on virtual time: one :class:`~icore.memory.MemoryStore`
per agent (plus a central store for centralized lineage), the owner protocol of
:mod:`icore.net` (every request and reply is an encoded frame served by
:class:`~icore.net.OwnerHandler`), the in-process virtual-time transport with the
trace-driven link model and the TCP + TLS 1.3 handshakes of a new connection per RPC (the
paper's Table 1 setting), and the gate of :mod:`icore.fence` (:func:`~icore.fence.avalidate`
= the sans-io :class:`~icore.fence.GateRun`, with :class:`~icore.fence.Fence` giving the one
replan of App. A.3). Nothing is tuned per policy: every cost is bytes from the codec and
the TLS model, carried over the links.

What differs between policies comes from the policy's
:class:`~icore.fence.PolicyStrategy` (setup, how updates propagate, central service,
replica views) and :func:`~icore.fence.make_validator`; how requests travel comes from the
transport passed to :class:`Episode`
(:class:`~icore_lab.bench.planfence._inproc.InprocTransport` by default,
:class:`~icore_lab.bench.planfence._tcp.TcpTransport` for ``transport="tcp"``).

Topology: every agent is a client with its own access path (a fresh
:class:`~icore.net.LinkPair` of the chosen trace at the chosen offset: requests on the
``.up`` file, replies on ``.down``); owner services answer after ``server_time_ms``. So
the RPCs one agent issues at once queue on its uplink (FIFO), as on one cellular modem.

Time: each work unit advances the clock by :data:`~icore_lab.workloads.UNIT_MS`; coordination
that blocks (validation, synchronous announcements, central commits, quorum writes) adds
its virtual duration and is counted as stall. Background replication (local replica) is
asynchronous: its bytes count, its time does not.

Metrics per protected action (App. A.1): *invalid* = the tool ran while ``F(x) != H(x)``
for some x in the action's TRUE dependencies (frontier from the executed roots over every
record ever created; heads from the owners at issue time); *blocked* = the tool did not
run; *completed* = the tool ran; *stall* = blocking time of the action plus the proactive
blocking since the previous action; *traffic* = every byte the transports put on the wire
in the same span (TCP payload incl. TLS, see :class:`icore.net.TrafficStats`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from icore._clock import ManualClock
from icore.errors import LineageError
from icore.fence import (
    DecisionLog,
    Fence,
    GateContext,
    PointCounter,
    PolicyValidator,
    Propagation,
    ProtectedTool,
    Reads,
    Replan,
    ReplanRequest,
    TeamContext,
    bind_action,
    make_validator,
    replica_service,
    strategy,
)
from icore.memory import MemoryStore, OwnershipMap, Store
from icore.net import TransportError
from icore.records import Record, RecordId, derive, frontier
from icore_lab.bench._errors import BadOption
from icore_lab.bench.planfence._inproc import InprocTransport
from icore_lab.bench.planfence._services import ReplayTransport, ReplayWorld
from icore_lab.bench.planfence._spec import (
    ARTIFACT_KEY,
    CENTRAL,
    MAX_SYNC_ATTEMPTS,
    ActionRow,
    EpisodeResult,
    NetSpec,
    PolicySpec,
    artifact_blob,
)
from icore_lab.net import HostCpu
from icore_lab.workloads import ActStep, Fault, Idle, PlanStep, Schedule, Update


# --- the episode ------------------------------------------------------------------------
class Episode:
    """Replay one :class:`~icore_lab.workloads.Schedule` under one :class:`PolicySpec`.

    The policy's :class:`~icore.fence.PolicyStrategy` says what differs between policies
    (setup, how updates propagate, central service, replica views, the validator); the
    transport says how requests travel.

    Args:
        schedule: the schedule (identical for every policy).
        spec: the policy variant.
        net: the network.
        keep_decisions: keep every gate decision (as dicts) in the result.
        transport: how agents reach the owner services (default: a new
            :class:`~icore_lab.bench.planfence._inproc.InprocTransport` on ``net``). The
            episode owns it and closes it.
    """

    def __init__(self, schedule: Schedule, spec: PolicySpec, net: NetSpec, *,
                 keep_decisions: bool = False,
                 transport: ReplayTransport | None = None) -> None:
        self.schedule, self.spec, self.net = schedule, spec, net
        self.strategy = strategy(spec.policy)
        self.keep_decisions = keep_decisions
        self.transport: ReplayTransport = transport or InprocTransport(net)
        sched = schedule
        self.artifact_bytes = sched.params.artifact_bytes
        self.artifact_owner = sched.owners[sched.keys[0]]
        self.artifact_base: RecordId | None = None
        self.ownership = OwnershipMap(
            dict(sched.owners), {"plan/*": sched.planner, "derived/*": sched.planner,
                                 "artifact/*": self.artifact_owner})
        self.stores = {a: MemoryStore(self.ownership, a) for a in sched.agents}
        self.central = MemoryStore(self.ownership, None)
        self.truth: dict[RecordId, Record] = {}
        self.transports: list[Any] = []
        self._clients: dict[str, Any] = {}
        self._background_clients: dict[str, Any] = {}
        self.points = PointCounter()
        self.dirty: dict[str, dict[str, Record]] = {}
        self.dirty_count: dict[str, int] = {}
        self.freshness_client: Any = None
        self.sync_failures = 0
        self.shared = frozenset(schedule.keys)
        self.pending_stall = 0.0
        self.total_stall = 0.0
        self.log = DecisionLog()
        # one CPU per agent process (clients) and per memory process (owner services;
        # centralized lineage has one shared service), planfence App. A
        self.world = ReplayWorld(
            net=net, strategy=self.strategy, ownership=self.ownership, stores=self.stores,
            central=self.central, agent_cpus={a: HostCpu() for a in sched.agents},
            memory_cpus={a: HostCpu() for a in (*sched.agents, CENTRAL)})
        self._propagate: dict[Propagation, Callable[[Record, list[str]], None]] = {
            Propagation.NONE: lambda rec, others: None,
            Propagation.BACKGROUND: self._replicate_in_background,
            Propagation.CENTRAL_COMMIT: self._commit_centrally,
            Propagation.ANNOUNCE_EVERY_K: self._announce_every_k,
            Propagation.WRITE_QUORUM: self._write_quorum,
        }
        try:
            self._setup_records()
            self.transport.start(self.world)
        except BaseException:
            self.transport.close()  # a failed setup must not leak the loop or services
            raise

    @property
    def clock(self) -> ManualClock:
        """The episode clock (the transport's: virtual or wall), in ms."""
        return self.transport.clock

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the episode drives."""
        return self.transport.loop

    # -- setup -----------------------------------------------------------------------
    def _setup_records(self) -> None:
        sched = self.schedule
        replicas: Sequence[str] = (sched.executor, sched.planner)
        if self.strategy.replicated_setup:
            replicas = sched.agents
        for key in sched.keys:
            owner = sched.owners[key]
            rec = Record.create(key=key, owner=owner, seq=self.stores[owner].next_seq(),
                                type=key.split("/")[1].rsplit("-", 1)[0],
                                content={"value": sched.initial[key], "rev": 0})
            self._commit_local(rec)
            # every replica starts from the same installed state (paired setup, App. A);
            # replicas no policy step ever reads are skipped (saves verification time)
            for a in replicas:
                if a != owner:
                    self.stores[a].install(rec)
            if self.strategy.central:
                self.central.commit(rec, writer=owner)
        if self.artifact_bytes:
            self._setup_artifact()

    def _setup_artifact(self) -> None:
        """Set up the large-artifact control, so that every policy must fetch v1.

        The owner publishes v0 (the executor holds it), then changes it to v1 before the episode.
        """
        sched, owner, size = self.schedule, self.artifact_owner, self.artifact_bytes
        store = self.stores[owner]
        v0 = Record.create(key=ARTIFACT_KEY, owner=owner, seq=store.next_seq(),
                           type="artifact",
                           content={"blob": artifact_blob(sched.template.id, 0, size),
                                    "rev": 0})
        self._commit_local(v0)
        self.stores[sched.executor].install(v0)
        v1 = derive(key=ARTIFACT_KEY, owner=owner, seq=store.next_seq(), type="artifact",
                    content={"blob": artifact_blob(sched.template.id, 1, size), "rev": 1},
                    inputs=[v0])
        self._commit_local(v1)
        if self.strategy.central:
            self.central.commit(v0, writer=owner)
            self.central.commit(v1, writer=owner)
        self.artifact_base = v0.id

    def _fetch_artifact(self, tally: dict[str, int]) -> None:
        """Fetch the artifact's current version from its owner (head, then content) and verify it.

        Verification checks the owner's head, a matching content address, the exact parent.
        """
        owner, n = self.artifact_owner, self.net
        cl = self.client(self.schedule.executor)
        got: list[Any] = []

        async def go() -> None:
            got.clear()
            rep = await cl.query_heads(owner, [ARTIFACT_KEY], timeout_s=n.timeout_s)
            h = rep.heads.get(ARTIFACT_KEY)
            recs = [] if h is None else await cl.fetch(owner, [h.record_id],
                                                        timeout_s=n.timeout_s)
            got.extend([h, recs])

        self._block(go, self.schedule.executor)
        h, recs = got
        truth = self.stores[owner].head(ARTIFACT_KEY)
        ok = (h is not None and truth is not None and len(recs) == 1
              and recs[0].id == h.record_id == truth.record_id
              and self.artifact_base in recs[0].parents
              and len(str((recs[0].content or {}).get("blob", ""))) == self.artifact_bytes)
        if ok:
            try:
                recs[0].verify()
            except Exception:
                ok = False
        tally["artifact_fetches" if ok else "artifact_violations"] += 1

    def _commit_local(self, rec: Record) -> None:
        self.stores[rec.owner].commit(rec, writer=rec.owner)
        self.truth[rec.id] = rec

    def client(self, agent: str) -> Any:
        """The async client of ``agent`` (its own access path; made once)."""
        t = self._clients.get(agent)
        if t is None:
            t = self.transport.client(agent)
            self._clients[agent] = t
            self.transports.append(t)
        return t

    def _background(self, agent: str) -> Any:
        t = self._background_clients.get(agent)
        if t is None:
            t = self.transport.background(agent)
            self._background_clients[agent] = t
            self.transports.append(t)
        return t

    def _sync_client(self, agent: str) -> Any:
        """A synchronous client of ``agent`` on the episode clock (owner-head freshness)."""
        sync = self.transport.sync_client(agent)
        self.transports.append(sync)
        return sync

    def wire_bytes(self) -> tuple[int, int]:
        """Total (bytes, rpcs) over every transport of the episode."""
        b = r = 0
        for t in self.transports:
            b += t.stats.total_bytes
            r += t.stats.rpcs
        return b, r

    def _block(self, make: Any, agent: str) -> None:
        """Run a synchronous coordination step until it succeeds; ``make()`` builds its coroutine.

        Proactive synchronization cannot skip a replica without losing its guarantee, so a
        timed-out attempt is retried (up to :data:`MAX_SYNC_ATTEMPTS`) and its whole duration is
        stall.
        """
        t0 = self.clock.now_ms()
        for attempt in range(MAX_SYNC_ATTEMPTS):
            try:
                self.loop.run_until_complete(make())
                break
            except TransportError:
                self.sync_failures += 1
                if attempt == MAX_SYNC_ATTEMPTS - 1:
                    raise
        self.pending_stall += self.clock.now_ms() - t0

    # -- updates -----------------------------------------------------------------------
    def _revise(self, u: Update) -> Record:
        store = self.stores[u.owner]
        head = store.head(u.key)
        assert head is not None
        prev = self.truth[head.record_id]
        rev = int(prev.content["rev"]) + 1
        rec = derive(key=u.key, owner=u.owner, seq=store.next_seq(), type=prev.type,
                     content={"value": u.value, "rev": rev}, inputs=[prev])
        self._commit_local(rec)
        self._on_update(rec)
        return rec

    def _on_update(self, rec: Record) -> None:
        others = [a for a in self.schedule.agents if a != rec.owner]
        self._propagate[self.strategy.propagation](rec, others)

    def _replicate_in_background(self, rec: Record, others: list[str]) -> None:
        """Asynchronous background replication: bytes count, nobody waits."""
        bg = self._background(rec.owner)
        self.transport.sync_background_clock()
        for a in others:
            try:
                bg.replicate(a, [rec], timeout_s=self.net.timeout_s)
            except TransportError:
                self.sync_failures += 1  # background: the replica stays behind

    def _commit_centrally(self, rec: Record, others: list[str]) -> None:
        cl = self.client(rec.owner)
        self._block(lambda: cl.commit(CENTRAL, rec, timeout_s=self.net.timeout_s),
                    rec.owner)

    def _announce_every_k(self, rec: Record, others: list[str]) -> None:
        dirty = self.dirty.setdefault(rec.owner, {})
        dirty[rec.key] = rec
        self.dirty_count[rec.owner] = self.dirty_count.get(rec.owner, 0) + 1
        if self.dirty_count[rec.owner] >= self.spec.k:
            self._announce(rec.owner, list(dirty.values()), others)
            dirty.clear()
            self.dirty_count[rec.owner] = 0

    def _write_quorum(self, rec: Record, others: list[str]) -> None:
        """Write quorum: the owner plus floor(N/2) replicas hold the new head.

        The replicas are taken in ring order, the executor's first.
        """
        ring = sorted(others, key=lambda a: (a != self.schedule.executor, a))
        self._announce(rec.owner, [rec], ring[: len(self.schedule.agents) // 2])

    def _announce(self, owner: str, recs: list[Record], to: Sequence[str]) -> None:
        cl = self.client(owner)
        envelopes = tuple(r.without_content() for r in recs)
        left = set(to)

        async def go() -> None:
            order = sorted(left)
            res = await asyncio.gather(*(self._announce_one(cl, a, envelopes)
                                         for a in order), return_exceptions=True)
            for a, r in zip(order, res, strict=True):
                if not isinstance(r, BaseException):
                    left.discard(a)
            failed = [r for r in res if isinstance(r, BaseException)]
            if failed:
                raise failed[0]

        self._block(go, owner)

    async def _announce_one(self, cl: Any, to: str, envelopes: tuple[Record, ...]) -> None:
        await cl.announce(to, envelopes, timeout_s=self.net.timeout_s)

    # -- plans ---------------------------------------------------------------------------
    def _plan(self, step: PlanStep, sources: Mapping[str, Record],
              skip_install: bool = False) -> Record:
        """Form (or re-form) the plan of ``step`` from ``sources`` (key -> record)."""
        planner = self.stores[self.schedule.planner]
        inputs: list[Record] = [sources[k] for k in step.cited]
        chain: list[Record] = []
        for level in range(1, step.depth):
            rec = derive(key=f"derived/{step.action}/{level}", owner=self.schedule.planner,
                         seq=planner.next_seq(), type="derived",
                         content={"level": level, "of": step.action}, inputs=inputs)
            _replace_head(planner, rec, self.schedule.planner)
            self.truth[rec.id] = rec
            chain.append(rec)
            inputs = [rec]
        args = {k: sources[k].content["value"][:24] if sources[k].content else None
                for k in step.cited}
        # the plan binds the call it authorizes: the action and its arguments
        plan = derive(key=f"plan/{step.action}", owner=self.schedule.planner,
                      seq=planner.next_seq(), type="plan",
                      content={"action": self.schedule.action_name, "args": args,
                               **bind_action(self.schedule.action_name, args)}, inputs=inputs)
        _replace_head(planner, plan, self.schedule.planner)
        self.truth[plan.id] = plan
        # handoff of the plan (and what it cites) to the executor: identical under every
        # policy and not coordination, so it is not charged
        ex = self.stores[self.schedule.executor]
        # with the ancestry of the cited records (owners' earlier versions), so the
        # executor's lineage is complete: a lineage-incomplete record never authorizes
        withheld = chain[0].id if skip_install and chain else None
        for rec in _ancestry([sources[k] for k in step.cited], self.truth, ex):
            ex.install(rec)
        for rec in chain:
            if rec.id == withheld:
                continue  # App. C "missing lineage": an intermediate never arrives
            ex.install(rec)
        ex.install(plan)
        return plan

    def _current(self, keys: Sequence[str]) -> dict[str, Record]:
        out = {}
        for k in keys:
            h = self.stores[self.schedule.owners[k]].head(k)
            assert h is not None
            out[k] = self.truth[h.record_id]
        return out

    # -- validators ----------------------------------------------------------------------
    def _validator(self) -> PolicyValidator:
        """The policy's validator (:func:`~icore.fence.make_validator`) over the access it reads.

        The access its strategy reads: none, a sync client (kept for outage injection) or the
        executor's async client on the episode loop.
        """
        sched, strat = self.schedule, self.strategy
        owners: Any = None
        if strat.reads is Reads.SYNC:
            owners = self.freshness_client = self._sync_client(sched.executor)
        elif strat.reads is Reads.ASYNC:
            owners = self.client(sched.executor)
        # gate decisions carry the variant's label; the unsafe baselines' carry the
        # policy's name (they validate nothing a variant could change)
        name = self.spec.label if self.spec.policy.safe else self.spec.policy.value
        context = GateContext(lookup=self._lookup, ownership=self.ownership, owners=owners,
                              timeout_s=self.net.timeout_s, mode=self.spec.mode,
                              clock=self.clock, points=self.points, policy=name)
        team = TeamContext(install=self.stores[sched.executor], keys=tuple(sched.keys),
                           replicas=tuple(replica_service(a) for a in sched.agents
                                          if a != sched.executor),
                           loop=self.loop)
        return make_validator(self.spec.policy, context, team)

    def _lookup(self, rid: RecordId) -> Record | None:
        """The executor's lineage lookup (:meth:`~icore.memory.Store.lookup`)."""
        return self.stores[self.schedule.executor].lookup(rid)

    # -- truth ---------------------------------------------------------------------------
    def _is_invalid(self, roots: Sequence[RecordId], true_deps: Sequence[str]) -> bool:
        try:
            fr = frontier(roots, true_deps, self.truth.get)
        except LineageError:
            return True
        for k in true_deps:
            h = self.stores[self.schedule.owners[k]].head(k)
            if h is None or fr.versions.get(k) != h.record_id:
                return True
        return False

    # -- run ---------------------------------------------------------------------------
    def run(self) -> EpisodeResult:
        """Replay every step; return the per-action rows and totals."""
        try:
            return self._run()
        finally:
            self.close()

    def close(self) -> None:
        """Release the transport: its event loop (and, over TCP, clients and services)."""
        self.transport.close()

    def _run(self) -> EpisodeResult:
        sched, spec = self.schedule, self.spec
        validator = self._validator()
        fence = Fence(validator=validator, install=self.stores[sched.executor], log=self.log,
                      unsafe_fail_open_ablation=spec.fail_open)
        plans: dict[int, tuple[PlanStep, Record]] = {}
        rows: list[ActionRow] = []
        last_bytes, last_rpcs = 0, 0
        for step in sched.steps:
            if self.net.unit_ms:
                self.clock.advance(self.net.unit_ms)
            if isinstance(step, Idle):
                continue
            if isinstance(step, Update):
                self._revise(step)
                continue
            if isinstance(step, PlanStep):
                plans[step.action] = (step, self._plan(step, self._current(step.cited)))
                continue
            assert isinstance(step, ActStep)
            pstep, plan = plans.pop(step.action)
            if step.fault is Fault.MISSING_LINEAGE:
                # re-form the plan so its first intermediate never reaches the executor
                plan = self._plan(pstep, self._plan_sources(plan, pstep), True)
            row, n_dec = self._act(fence, validator, step, pstep, plan)
            b, r = self.wire_bytes()
            rows.append(ActionRow(
                template=sched.template.id, family=sched.template.family,
                policy=spec.label,
                action=step.action, raced=step.raced, fault=step.fault.value,
                executed=row["executed"], invalid=row["invalid"],
                replanned=row["replanned"], reason=row["reason"],
                stall_ms=self.pending_stall, bytes=b - last_bytes, rpcs=r - last_rpcs,
                heads_checked=row["heads_checked"], validations=n_dec,
                artifact_fetches=row["artifact_fetches"],
                artifact_violations=row["artifact_violations"]))
            self.total_stall += self.pending_stall
            self.pending_stall = 0.0
            last_bytes, last_rpcs = b, r
        # proactive cost after the last action still belongs to the episode
        b, r = self.wire_bytes()
        if rows and (self.pending_stall or b != last_bytes):
            rows[-1] = _bump(rows[-1], self.pending_stall, b - last_bytes, r - last_rpcs)
            self.total_stall += self.pending_stall
            self.pending_stall = 0.0
        decisions = tuple(d.to_dict() for d in self.log) if self.keep_decisions else ()
        return EpisodeResult(template=sched.template.id, family=sched.template.family,
                             policy=spec.label, rows=tuple(rows),
                             total_stall_ms=self.total_stall, total_bytes=b,
                             duration_ms=self.clock.now_ms(), decisions=decisions)

    def _plan_sources(self, plan: Record, pstep: PlanStep) -> dict[str, Record]:
        fr = frontier([plan.id], pstep.cited, self.truth.get)
        return dict(fr.records)

    def _act(self, fence: Fence, validator: PolicyValidator, step: ActStep, pstep: PlanStep,
             plan: Record) -> tuple[dict[str, Any], int]:
        sched, spec = self.schedule, self.spec
        art = {"artifact_fetches": 0, "artifact_violations": 0}

        def run_tool(**kw: Any) -> bool:
            if self.artifact_bytes:
                self._fetch_artifact(art)  # the second fetch: verified again at use
            return True

        if self.artifact_bytes:
            self._fetch_artifact(art)  # the first fetch: staged before validation
        tool = ProtectedTool(run_tool, depends_on=pstep.declared, name=sched.action_name)
        fault_owner = sched.owners[step.fault_key] if step.fault_key else None
        if step.fault is Fault.OUTAGE and fault_owner is not None:
            for t in self._executor_transports():
                t.unavailable.add(fault_owner)
        if step.fault is Fault.MALFORMED_HEAD and fault_owner is not None:
            self.world.owner_handler(fault_owner).corrupt.add(step.fault_key or "")
        n_before = len(self.log)
        heads_before = validator.heads_queried

        def replan(req: ReplanRequest) -> Replan:
            # the recorded fresh public decision (App. A.3): the same plan re-derived from
            # the fresh records the gate verified, the old inputs for everything else
            if step.fault is Fault.SECOND_CHANGE and step.fault_key is not None:
                self._revise(Update(step.fault_key, sched.owners[step.fault_key],
                                    f"second-change:{step.action}"))
            sources = self._plan_sources(plan, pstep)
            sources.update({k: r for k, r in req.fresh.items() if k in sources})
            new = self._plan(pstep, sources)
            return Replan(roots=[new.id])  # executes the fresh plan's bound arguments

        t0 = self.clock.now_ms()
        res = fence.execute(tool, roots=[plan.id], args=dict(plan.content["args"]),
                            replan=replan if spec.replan else None)
        self.pending_stall += self.clock.now_ms() - t0
        if step.fault is Fault.OUTAGE and fault_owner is not None:
            for t in self._executor_transports():
                t.unavailable.discard(fault_owner)
        if step.fault is Fault.MALFORMED_HEAD and fault_owner is not None:
            self.world.owner_handler(fault_owner).corrupt.clear()
        decisions = list(self.log)[n_before:]
        invalid = res.executed and self._is_invalid(res.roots, pstep.true_deps)
        return ({"executed": res.executed, "invalid": invalid, "replanned": res.replanned,
                 "reason": decisions[-1].reason.value if decisions else "none",
                 "heads_checked": validator.heads_queried - heads_before, **art},
                len(decisions))

    def _executor_transports(self) -> list[Any]:
        out: list[Any] = []
        cl = self._clients.get(self.schedule.executor)
        if cl is not None:
            out.append(cl)
        if self.freshness_client is not None:
            out.append(self.freshness_client)
        return out


def _ancestry(recs: Sequence[Record], truth: Mapping[RecordId, Record], have: Store
              ) -> list[Record]:
    """``recs`` and their ancestors that ``have`` lacks or holds lineage incomplete.

    Ordered parents before children.
    """
    out: list[Record] = []
    seen: set[RecordId] = set()
    stack: list[tuple[Record, bool]] = [(r, False) for r in reversed(recs)]
    while stack:
        rec, expanded = stack.pop()
        if expanded:
            out.append(rec)
            continue
        if rec.id in seen or have.lookup(rec.id) is not None:
            continue  # already held with complete lineage
        seen.add(rec.id)
        stack.append((rec, True))
        stack.extend((truth[p], False) for p in rec.parents if p not in seen)
    return out


def _replace_head(store: Store, rec: Record, writer: str) -> None:
    """Commit a re-derived record as the new head of its key, naming the head it replaces.

    The record cites fresh inputs, not its previous version.
    """
    head = store.head(rec.key)
    store.commit(rec, writer=writer, expected_head=None if head is None else head.record_id)


def _bump(row: ActionRow, stall: float, nbytes: int, rpcs: int) -> ActionRow:
    return replace(row, stall_ms=row.stall_ms + stall, bytes=row.bytes + nbytes,
                   rpcs=row.rpcs + rpcs)


def replay(schedule: Schedule, spec: PolicySpec, net: NetSpec | None = None, *,
           keep_decisions: bool = False, transport: str = "inproc") -> EpisodeResult:
    """Replay ``schedule`` under ``spec`` on ``net`` and return the per-action metrics.

    ``net`` defaults to AT&T, offset 0, a new TCP + TLS connection per RPC.

    Args:
        schedule: the recorded schedule to replay.
        spec: the policy variant.
        net: the network (default ``NetSpec()``).
        keep_decisions: keep every gate decision in the result.
        transport: ``inproc`` (virtual time, the default) or ``tcp`` (real loopback TCP
            with mutual TLS, wall-clock time; see :mod:`icore_lab.bench.planfence._tcp`).

    Raises:
        BadOption: ``schedule`` is not a :class:`~icore_lab.workloads.Schedule`, ``spec`` not
            a :class:`PolicySpec`, ``net`` neither ``None`` nor a :class:`NetSpec`, or
            ``transport`` not ``inproc``/``tcp`` (``fields['option']`` names it). Field
            values are checked when the specs are built (see their ``Raises``).
    """
    if not isinstance(schedule, Schedule):
        raise BadOption("schedule must be an icore_lab.workloads.Schedule",
                        option="schedule", value=type(schedule).__name__)
    if not isinstance(spec, PolicySpec):
        raise BadOption("spec must be a PolicySpec", option="spec",
                        value=type(spec).__name__)
    if net is not None and not isinstance(net, NetSpec):
        raise BadOption("net must be a NetSpec or None", option="net",
                        value=type(net).__name__)
    if transport not in ("inproc", "tcp"):
        raise BadOption(f"transport must be 'inproc' or 'tcp', got {transport!r}",
                        option="transport", value=transport)
    net = net or NetSpec()
    carrier: ReplayTransport | None = None
    if transport == "tcp":
        from icore_lab.bench.planfence._tcp import TcpTransport

        carrier = TcpTransport(schedule, net)
    return Episode(schedule, spec, net, keep_decisions=keep_decisions,
                   transport=carrier).run()


__all__ = ["Episode", "replay"]
