"""PlanFence controlled replay: one schedule under one policy (planfence Sec. 5.1, App. A.3,
A.6, B, C; design.md 3.3-3.5).

The replay drives the real components on virtual time: one :class:`~icore.memory.MemoryStore`
per agent (plus a central store for centralized lineage), the owner protocol of
:mod:`icore.net` (every request and reply is an encoded frame served by
:class:`~icore.net.OwnerHandler`), the in-process virtual-time transport with the
trace-driven link model and the TCP + TLS 1.3 handshakes of a new connection per RPC (the
paper's Table 1 setting), and the gate of :mod:`icore.fence` (:func:`~icore.fence.avalidate`
= the sans-io :class:`~icore.fence.GateRun`, with :class:`~icore.fence.Fence` giving the one
replan of App. A.3). Nothing is tuned per policy: every cost is bytes from the codec and
the TLS model, carried over the links.

Topology: every agent is a client with its own access path (a fresh
:class:`~icore.net.LinkPair` of the chosen trace at the chosen offset: requests on the
``.up`` file, replies on ``.down``); owner services answer after ``server_time_ms``. So
the RPCs one agent issues at once queue on its uplink (FIFO), as on one cellular modem.

Time: each work unit advances the clock by :data:`~icore.workloads.UNIT_MS`; coordination
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
import copy
import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icore._clock import Clock, ManualClock
from icore.bench._errors import BadOption
from icore.errors import LineageError
from icore.fence import (
    DecisionLog,
    Fence,
    GateDecision,
    LocalReplica,
    OwnerHeadFreshness,
    PointCounter,
    Policy,
    ProtectedTool,
    Replan,
    ReplanRequest,
    Validator,
    avalidate,
    bind_action,
)
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    HeadEntry,
    HeadReply,
    MemoryStore,
    OwnershipMap,
    Store,
)
from icore.net import (
    DEFAULT_BASE_DELAY_MS,
    DEFAULT_TLS_COST,
    LINK_NAMES,
    AsyncVirtualTransport,
    HeadQuery,
    HeadReplyMsg,
    HostCost,
    HostCpu,
    LinkPair,
    Loopback,
    Message,
    OwnerHandler,
    TransportError,
    VirtualTimeLoop,
    VirtualTransport,
    path_by_name,
)
from icore.records import Record, RecordId, TraversalMode, derive, frontier
from icore.workloads import ActStep, Fault, Idle, PlanStep, Schedule, Update

CENTRAL = "central"
"""Agent id of the centralized-lineage service."""

SERVER_TIME_MS = 0.5
"""Modelled owner processing time per request (decode, store read, encode), in ms.
Kept equal for every policy; measured order of magnitude of one in-process
``OwnerHandler.handle`` plus an SQLite read on this machine."""

MAX_SYNC_ATTEMPTS = 20
"""Attempts of one synchronous coordination step before the replay gives up."""

HOST_MS_PER_MESSAGE = 0.03
"""End-host CPU time per message sent (encode, TLS record, syscalls), in ms: the owner's CPU
per validation on a reused connection (one message in, one out: 24-25 µs) rounded up,
``icore bench net`` on an idle 2-core machine, 2026-12-01, after issue 17 (was 0.25,
modelled)."""

HANDSHAKE_CLIENT_MS = 0.86
"""Client CPU per TLS 1.3 handshake with certificates, in ms: ``icore bench net`` CPU per
validation with a new connection minus with a reused one (900 - 58 and 928 - 58 µs, two
runs, idle 2-core machine, 2026-12-01, after issue 17; was 2.7 on 2026-11-29)."""

HANDSHAKE_SERVER_MS = 0.82
"""Owner CPU per TLS 1.3 handshake with certificates, in ms (847 - 24 and 839 - 25 µs, same
runs; was 2.5)."""


# --- specs ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy variant replayed on a schedule.

    Attributes:
        policy: the :class:`~icore.fence.Policy`.
        k: metadata-sync cadence K (announce after every K dirty updates of an owner).
        replan: allow the one replan (App. A.3); False = validation without replanning.
        mode: lineage traversal (DIRECT = the direct-parent ablation of App. C).
        fail_open: ABLATION ONLY: blocked decisions authorize (App. C).

    Raises:
        BadOption: ``policy`` is not a :class:`~icore.fence.Policy`, or, for metadata
            sync, ``k`` is not an ``int`` >= 1 (``fields['option'] == 'k'``).
    """

    policy: Policy
    k: int = 1
    replan: bool = True
    mode: TraversalMode = TraversalMode.FULL
    fail_open: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.policy, Policy):
            raise BadOption(f"policy must be an icore.fence.Policy, got {self.policy!r}",
                            option="policy", value=self.policy)
        if self.policy is Policy.METADATA_SYNC and (
                isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1):
            raise BadOption(f"metadata sync needs an int K >= 1, got {self.k!r}",
                            option="k", value=self.k)

    @property
    def label(self) -> str:
        """Stable row label, e.g. ``metadata_sync_k4`` or ``planfence_direct``."""
        base = self.policy.value
        if self.policy is Policy.METADATA_SYNC:
            base += f"_k{self.k}"
        if self.mode is TraversalMode.DIRECT:
            base += "_direct"
        if not self.replan:
            base += "_noreplan"
        if self.fail_open:
            base += "_failopen"
        return base

    @property
    def exact_lineage(self) -> bool:
        """True for the exact-lineage (safe) policies: every policy but the two unsafe
        baselines, metadata sync with K > 1, and the ablations."""
        if not self.policy.safe or self.fail_open or self.mode is not TraversalMode.FULL:
            return False
        return not (self.policy is Policy.METADATA_SYNC and self.k != 1)


@dataclass(frozen=True, slots=True)
class NetSpec:
    """The network a replay runs on (design.md 3.4).

    Attributes:
        link: ``loopback``, ``att``, ``att-2016``, ``tmobile`` or ``verizon``.
        offset_ms: trace start offset.
        new_connection_per_rpc: pay TCP + TLS handshakes per RPC (paper Table 1 setting).
        tls: count TLS 1.3 bytes (mutual certificates).
        base_delay_ms: one-way base propagation delay of trace links.
        server_time_ms: owner CPU time per request.
        host_ms: CPU time per message sent, on the sending host.
        handshake_client_ms: client CPU per TLS handshake (agent process).
        handshake_server_ms: owner CPU per TLS handshake (memory process).
        timeout_s: per-RPC timeout (default 2 s).
        unit_ms: virtual duration of one work unit besides coordination. 0 (default):
            the controlled replay runs the recorded decisions back to back, so only
            coordination takes time (App. A.3); :data:`~icore.workloads.UNIT_MS` models
            live role calls.

    Raises:
        BadOption: at construction (``fields['option']`` names the field): ``link`` is
            not one of :data:`~icore.net.LINK_NAMES`; ``offset_ms``, ``base_delay_ms``,
            ``server_time_ms``, ``host_ms``, ``handshake_client_ms``,
            ``handshake_server_ms`` or ``unit_ms`` is not a finite number >= 0; or
            ``timeout_s`` is not a finite number > 0.
    """

    link: str = "att"
    offset_ms: float = 0.0
    new_connection_per_rpc: bool = True
    tls: bool = True
    base_delay_ms: float = DEFAULT_BASE_DELAY_MS
    server_time_ms: float = SERVER_TIME_MS
    host_ms: float = HOST_MS_PER_MESSAGE
    handshake_client_ms: float = HANDSHAKE_CLIENT_MS
    handshake_server_ms: float = HANDSHAKE_SERVER_MS
    timeout_s: float = DEFAULT_TIMEOUT_S
    unit_ms: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.link, str) or self.link not in LINK_NAMES:
            raise BadOption(f"unknown link {self.link!r}; expected one of "
                            f"{', '.join(LINK_NAMES)}", option="link", value=self.link)
        for name in ("offset_ms", "base_delay_ms", "server_time_ms", "host_ms",
                     "handshake_client_ms", "handshake_server_ms", "unit_ms", "timeout_s"):
            v = getattr(self, name)
            ok = (isinstance(v, int | float) and not isinstance(v, bool)
                  and math.isfinite(v) and (v > 0 if name == "timeout_s" else v >= 0))
            if not ok:
                need = "> 0" if name == "timeout_s" else ">= 0"
                raise BadOption(f"{name} must be a finite number {need}, got {v!r}",
                                option=name, value=v)

    @property
    def host_cost(self) -> HostCost:
        """The end-host CPU costs of this network."""
        return HostCost(message_ms=self.host_ms, handshake_client_ms=self.handshake_client_ms,
                        handshake_server_ms=self.handshake_server_ms)

    @property
    def label(self) -> str:
        """Short label, e.g. ``att@5s``."""
        if self.link == "loopback":
            return "loopback"
        return f"{self.link}@{self.offset_ms / 1000:g}s"


@dataclass(frozen=True, slots=True)
class ActionRow:
    """Metrics of one protected action under one policy.

    Attributes:
        template / family: the workflow template and its family.
        policy: :attr:`PolicySpec.label`.
        action: action index in the episode.
        raced: a revision was staged between plan and action.
        fault: fault injected at this action.
        executed: the tool ran (completed).
        invalid: the tool ran while some true dependency's frontier was not its head.
        replanned: the one replan happened.
        reason: final gate reason.
        stall_ms: blocking time attributed to this action, ms.
        bytes: wire bytes attributed to this action.
        rpcs: RPCs attributed to this action.
        heads_checked: head items queried by this action's validations (owner-side).
        validations: gate validations run.
        artifact_fetches: verified fetches of the public artifact (large-artifact
            control: two per action, one before validation and one at use).
        artifact_violations: artifact fetches that failed verification: not the owner's
            current version, a content address that does not match, or a version whose
            exact parent is not the previous one.
    """

    template: str
    family: str
    policy: str
    action: int
    raced: bool
    fault: str
    executed: bool
    invalid: bool
    replanned: bool
    reason: str
    stall_ms: float
    bytes: int
    rpcs: int
    heads_checked: int
    validations: int
    artifact_fetches: int = 0
    artifact_violations: int = 0


ARTIFACT_KEY = "artifact/public"
"""Key of the public artifact of the large-artifact control (owned by the owner of the
first shared key)."""


def artifact_blob(template: str, rev: int, size: int) -> str:
    """Deterministic artifact content of ``size`` characters (hex, incompressible)."""
    import hashlib

    out: list[str] = []
    n = 0
    while sum(len(x) for x in out) < size:
        out.append(hashlib.sha256(f"{template}|{rev}|{n}".encode()).hexdigest())
        n += 1
    return "".join(out)[:size]


@dataclass(frozen=True)
class EpisodeResult:
    """All actions of one schedule under one policy, plus episode totals."""

    template: str
    family: str
    policy: str
    rows: tuple[ActionRow, ...]
    total_stall_ms: float
    total_bytes: int
    duration_ms: float
    decisions: tuple[dict[str, Any], ...] = field(default=())


# --- owner handlers used by controls ----------------------------------------------------
class ReplicaHandler(OwnerHandler):
    """Answers head queries from this replica's *installed* view (quorum controls)."""

    def handle(self, msg: Message, peer: str) -> Message:
        """Serve head queries from installed heads; everything else as an owner."""
        if isinstance(msg, HeadQuery):
            self.requests += 1
            heads = []
            for k in msg.keys:
                h = self.store.installed_head(k)
                if h is not None:
                    heads.append(HeadEntry(h.key, h.record_id, h.seq))
            return HeadReplyMsg(msg.rid, self.agent, tuple(heads))
        return super().handle(msg, peer)


class FaultyHandler(OwnerHandler):
    """An owner whose head replies for ``corrupt`` keys are malformed (sequence 0)."""

    def __init__(self, store: MemoryStore, *, agent: str) -> None:
        super().__init__(store, agent=agent)
        self.corrupt: set[str] = set()

    def handle(self, msg: Message, peer: str) -> Message:
        """Answer, then corrupt the head entries of :attr:`corrupt` keys."""
        reply = super().handle(msg, peer)
        if self.corrupt and isinstance(reply, HeadReplyMsg) and isinstance(msg, HeadQuery):
            heads = tuple(HeadEntry(h.key, h.record_id, 0) if h.key in self.corrupt else h
                          for h in reply.heads)
            # an unchanged head (answered "same") is corrupted into a full entry too
            heads += tuple(HeadEntry(k, msg.known[k], 0) for k, _q in reply.same
                           if k in self.corrupt)
            same = tuple(e for e in reply.same if e[0] not in self.corrupt)
            return HeadReplyMsg(reply.rid, reply.owner, heads, same)
        return reply


_PROTO_PATHS: dict[tuple[str, str, str, float, float], LinkPair] = {}


def make_path(net: NetSpec) -> LinkPair:
    """Return a fresh access path for one agent under ``net``.

    Trace links are built once per process and copied (a copy shares the immutable
    opportunity table and starts with an empty queue): building a
    :class:`~icore.net.TraceLink` re-checks every trace line, ~0.2 s each.
    """
    if net.link == "loopback":
        pair = LinkPair(Loopback(), Loopback(), "loopback")
    else:
        # the trace folder is named by the environment; re-resolve only when it changes
        key = (os.environ.get("ICORE_TRACES", ""), os.environ.get("ICORE_SHARED_DATA", ""),
               net.link, net.offset_ms, net.base_delay_ms)
        proto = _PROTO_PATHS.get(key)
        if proto is None:
            proto = path_by_name(net.link, offset_ms=net.offset_ms,
                                 base_delay_ms=net.base_delay_ms)
            _PROTO_PATHS[key] = proto
        pair = LinkPair(copy.copy(proto.up), copy.copy(proto.down), proto.name)
    return pair


def replica_name(agent: str) -> str:
    """Service name of ``agent``'s replica view (quorum controls)."""
    return f"replica-{agent}"


# --- validators -------------------------------------------------------------------------
class LoopGate:
    """A :class:`~icore.fence.Validator` running the gate (:func:`avalidate`, Alg. 1) on
    the episode's virtual-time loop, so queries to several owners overlap in time."""

    def __init__(self, *, name: str, loop: asyncio.AbstractEventLoop, lookup: Any,
                 ownership: OwnershipMap, access: Any, clock: Clock,
                 points: PointCounter, timeout_s: float, mode: TraversalMode) -> None:
        self.name, self.loop, self.lookup, self.ownership = name, loop, lookup, ownership
        self.access, self.clock, self.points = access, clock, points
        self.timeout_s, self.mode = timeout_s, mode

    def validate(self, *, action: str, roots: Sequence[RecordId], deps: Collection[str],
                 replanned: bool) -> GateDecision:
        """Run Alg. 1 once."""
        if hasattr(self.access, "begin"):
            self.access.begin()
        return self.loop.run_until_complete(avalidate(
            roots=roots, deps=deps, lookup=self.lookup, ownership=self.ownership,
            owners=self.access, replanned=replanned, action=action,
            timeout_s=self.timeout_s, mode=self.mode, clock=self.clock, points=self.points,
            policy=self.name))


class AnnouncedAccess:
    """Metadata sync: heads from this replica's installed (announced) view, content
    fetched from the owner only after a mismatch (App. A)."""

    def __init__(self, store: MemoryStore, transport: AsyncVirtualTransport) -> None:
        self.store, self.transport = store, transport

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Installed heads (no network)."""
        out = {}
        for k in keys:
            h = self.store.installed_head(k)
            if h is not None:
                out[k] = HeadEntry(h.key, h.record_id, h.seq)
        return HeadReply(owner, out)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch content from the owner."""
        return await self.transport.fetch(owner, ids, timeout_s=timeout_s)


class AllKeyAccess:
    """All-key validation: every validation queries the heads of *every* shared key, in
    one request per owner (batched) or one request per key (per-key); the gate decides
    on D(a) (Sec. 4.3: the all-key check serializes |X| heads)."""

    def __init__(self, transport: AsyncVirtualTransport, ownership: OwnershipMap,
                 keys: Sequence[str], *, batched: bool) -> None:
        self.transport, self.ownership, self.batched = transport, ownership, batched
        self.groups = ownership.group_by_owner(keys)
        self._task: asyncio.Future[dict[str, HeadReply | BaseException]] | None = None
        self.heads_checked = 0

    def begin(self) -> None:
        """Start a new validation."""
        self._task = None

    async def _fan_out(self, known: Mapping[str, RecordId], timeout_s: float
                       ) -> dict[str, HeadReply | BaseException]:
        jobs: list[tuple[str, list[str]]] = []
        for owner, ks in self.groups.items():
            if self.batched:
                jobs.append((owner, ks))
            else:
                jobs.extend((owner, [k]) for k in ks)
        self.heads_checked += sum(len(ks) for _, ks in jobs)
        res = await asyncio.gather(*(self.transport.query_heads(o, ks, known=known,
                                                                timeout_s=timeout_s)
                                     for o, ks in jobs), return_exceptions=True)
        merged: dict[str, HeadReply | BaseException] = {}
        for (owner, _), r in zip(jobs, res, strict=True):
            if isinstance(r, BaseException):
                merged[owner] = r
                continue
            prev = merged.get(owner)
            if isinstance(prev, BaseException):
                continue
            heads = dict(prev.heads) if prev is not None else {}
            heads.update(r.heads)
            merged[owner] = HeadReply(r.owner, heads)
        return merged

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Return ``owner``'s heads of ``keys`` out of the all-key fan-out."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._fan_out(dict(known or {}), timeout_s))
        merged = await asyncio.shield(self._task)
        r = merged.get(owner)
        if isinstance(r, BaseException):
            raise r
        if r is None:
            return HeadReply(owner, {})
        return HeadReply(r.owner, {k: v for k, v in r.heads.items() if k in keys})

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch changed records from the owner."""
        return await self.transport.fetch(owner, ids, timeout_s=timeout_s)


class QuorumAccess:
    """Replica-quorum validation: read the installed head of each key from ``read``
    replicas (the executor's own replica is read locally), keep the highest owner
    sequence; fetch content from the owner."""

    def __init__(self, transport: AsyncVirtualTransport, local: MemoryStore,
                 remote: Sequence[str]) -> None:
        self.transport, self.local, self.remote = transport, local, list(remote)

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Highest-sequence head per key over the read quorum."""
        best: dict[str, HeadEntry] = {}
        for k in keys:
            h = self.local.installed_head(k)
            if h is not None:
                best[k] = HeadEntry(h.key, h.record_id, h.seq)
        replies = await asyncio.gather(*(self.transport.query_heads(
            replica_name(r), keys, timeout_s=timeout_s) for r in self.remote))
        for rep in replies:
            for k, h in rep.heads.items():
                if k in keys and (k not in best or h.seq > best[k].seq):
                    best[k] = h
        return HeadReply(owner, best)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Fetch changed records from the owner."""
        return await self.transport.fetch(owner, ids, timeout_s=timeout_s)


# --- the episode ------------------------------------------------------------------------
class Episode:
    """Replay one :class:`~icore.workloads.Schedule` under one :class:`PolicySpec`.

    Args:
        schedule: the schedule (identical for every policy).
        spec: the policy variant.
        net: the network.
        keep_decisions: keep every gate decision (as dicts) in the result.
    """

    def __init__(self, schedule: Schedule, spec: PolicySpec, net: NetSpec, *,
                 keep_decisions: bool = False) -> None:
        self.s, self.spec, self.net = schedule, spec, net
        self.keep_decisions = keep_decisions
        self.clock = ManualClock(0.0)
        self.loop: asyncio.AbstractEventLoop = VirtualTimeLoop(self.clock)
        s = schedule
        self.artifact_bytes = int(getattr(s.params, "artifact_bytes", 0) or 0)
        self.artifact_owner = s.owners[s.keys[0]]
        self.artifact_base: RecordId | None = None
        self.ownership = OwnershipMap(
            dict(s.owners), {"plan/*": s.planner, "derived/*": s.planner,
                             "artifact/*": self.artifact_owner})
        self.stores = {a: MemoryStore(self.ownership, a) for a in s.agents}
        self.central = MemoryStore(self.ownership, None)
        self.truth: dict[RecordId, Record] = {}
        self.transports: list[Any] = []
        self._clients: dict[str, Any] = {}
        self._bg: dict[str, Any] = {}
        self._bg_clock = ManualClock(0.0)
        self.points = PointCounter()
        self.dirty: dict[str, dict[str, Record]] = {}
        self.dirty_count: dict[str, int] = {}
        self.faulty_sync: Any = None
        self.sync_failures = 0
        self._paths: dict[str, list[LinkPair]] = {}
        self.shared = frozenset(schedule.keys)
        self.pending_stall = 0.0
        self.total_stall = 0.0
        self.faulty: dict[str, FaultyHandler] = {}
        self.log = DecisionLog()
        # one CPU per agent process (clients) and per memory process (owner services;
        # centralized lineage has one shared service), planfence App. A
        self.agent_cpus = {a: HostCpu() for a in s.agents}
        self.memory_cpus = {a: HostCpu() for a in (*s.agents, CENTRAL)}
        try:
            self._setup_records()
        except BaseException:
            self.loop.close()  # a failed setup must not leak the episode's event loop
            raise

    # -- setup -----------------------------------------------------------------------
    def _setup_records(self) -> None:
        s = self.s
        replicas: Sequence[str] = (s.executor, s.planner)
        if self.spec.policy in (Policy.LOCAL_REPLICA, Policy.METADATA_SYNC,
                                Policy.MAJORITY_REPLICA, Policy.ALL_REPLICA):
            replicas = s.agents
        for key in s.keys:
            owner = s.owners[key]
            rec = Record.create(key=key, owner=owner, seq=self.stores[owner].next_seq(),
                                type=key.split("/")[1].rsplit("-", 1)[0],
                                content={"value": s.initial[key], "rev": 0})
            self._commit_local(rec)
            # every replica starts from the same installed state (paired setup, App. A);
            # replicas no policy step ever reads are skipped (saves verification time)
            for a in replicas:
                if a != owner:
                    self.stores[a].install(rec)
            if self.spec.policy is Policy.CENTRALIZED_LINEAGE:
                self.central.commit(rec, writer=owner)
        if self.artifact_bytes:
            self._setup_artifact()

    def _setup_artifact(self) -> None:
        """The large-artifact control: the owner publishes v0 (the executor holds it),
        then changes it to v1 before the episode, so every policy must fetch v1."""
        s, owner, size = self.s, self.artifact_owner, self.artifact_bytes
        store = self.stores[owner]
        v0 = Record.create(key=ARTIFACT_KEY, owner=owner, seq=store.next_seq(),
                           type="artifact",
                           content={"blob": artifact_blob(s.template.id, 0, size), "rev": 0})
        self._commit_local(v0)
        self.stores[s.executor].install(v0)
        v1 = derive(key=ARTIFACT_KEY, owner=owner, seq=store.next_seq(), type="artifact",
                    content={"blob": artifact_blob(s.template.id, 1, size), "rev": 1},
                    inputs=[v0])
        self._commit_local(v1)
        if self.spec.policy is Policy.CENTRALIZED_LINEAGE:
            self.central.commit(v0, writer=owner)
            self.central.commit(v1, writer=owner)
        self.artifact_base = v0.id

    def _fetch_artifact(self, tally: dict[str, int]) -> None:
        """Fetch the artifact's current version from its owner (head, then content) and
        verify it: the owner's head, a matching content address, the exact parent."""
        owner, n = self.artifact_owner, self.net
        cl = self.client(self.s.executor)
        got: list[Any] = []

        async def go() -> None:
            got.clear()
            rep = await cl.query_heads(owner, [ARTIFACT_KEY], timeout_s=n.timeout_s)
            h = rep.heads.get(ARTIFACT_KEY)
            recs = [] if h is None else await cl.fetch(owner, [h.record_id],
                                                        timeout_s=n.timeout_s)
            got.extend([h, recs])

        self._block(go, self.s.executor)
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

    def _handlers(self, agent: str) -> dict[str, OwnerHandler]:
        pol = self.spec.policy
        hs: dict[str, OwnerHandler] = {}
        if pol is Policy.CENTRALIZED_LINEAGE:
            # one shared service; it answers for every owner (replies name that owner)
            for o in self.ownership.owners():
                hs[o] = OwnerHandler(self.central, agent=o)
            hs[CENTRAL] = OwnerHandler(self.central, agent=CENTRAL)
            return hs
        for a, st in self.stores.items():
            if a == agent:
                continue
            if a not in self.faulty:
                self.faulty[a] = FaultyHandler(st, agent=a)
            hs[a] = self.faulty[a]
            if pol in (Policy.MAJORITY_REPLICA, Policy.ALL_REPLICA):
                hs[replica_name(a)] = ReplicaHandler(st, agent=a)
        return hs

    def _owner_cpus(self, handlers: Mapping[str, OwnerHandler]) -> dict[str, HostCpu]:
        """Service name -> the CPU of the memory process that serves it."""
        if self.spec.policy is Policy.CENTRALIZED_LINEAGE:
            return {name: self.memory_cpus[CENTRAL] for name in handlers}
        return {name: self.memory_cpus[h.agent or CENTRAL] for name, h in handlers.items()}

    def client(self, agent: str) -> Any:
        """The async virtual transport of ``agent`` (its own access path)."""
        t = self._clients.get(agent)
        if t is None:
            n = self.net
            hs = self._handlers(agent)
            t = AsyncVirtualTransport(
                hs, clock=self.clock, path=self._path(agent), identity=agent,
                new_connection_per_rpc=n.new_connection_per_rpc,
                tls=DEFAULT_TLS_COST if n.tls else None, server_time_ms=n.server_time_ms,
                host_cost=n.host_cost, cpu=self.agent_cpus[agent],
                owner_cpus=self._owner_cpus(hs))
            self._clients[agent] = t
            self.transports.append(t)
        return t

    def _background(self, agent: str) -> Any:
        t = self._bg.get(agent)
        if t is None:
            n = self.net
            # background replication runs on its own clock: private CPUs
            t = VirtualTransport(
                self._handlers(agent), clock=self._bg_clock, path=self._path(agent),
                identity=agent, new_connection_per_rpc=n.new_connection_per_rpc,
                tls=DEFAULT_TLS_COST if n.tls else None, server_time_ms=n.server_time_ms,
                host_cost=n.host_cost)
            self._bg[agent] = t
            self.transports.append(t)
        return t

    def _path(self, agent: str) -> LinkPair:
        pair = make_path(self.net)
        self._paths.setdefault(agent, []).append(pair)
        return pair

    def _sync_client(self, agent: str) -> Any:
        """A synchronous client of ``agent`` on the episode clock (owner-head freshness)."""
        n = self.net
        hs = self._handlers(agent)
        sync = VirtualTransport(
            hs, clock=self.clock, path=self._path(agent),
            identity=agent, new_connection_per_rpc=n.new_connection_per_rpc,
            tls=DEFAULT_TLS_COST if n.tls else None, server_time_ms=n.server_time_ms,
            host_cost=n.host_cost, cpu=self.agent_cpus[agent], owner_cpus=self._owner_cpus(hs))
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
        """Run a synchronous coordination step (``make()`` builds its coroutine) until
        it succeeds: proactive synchronization cannot skip a replica without losing its
        guarantee, so a timed-out attempt is retried (up to :data:`MAX_SYNC_ATTEMPTS`)
        and its whole duration is stall."""
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
        pol, spec, n = self.spec.policy, self.spec, self.net
        others = [a for a in self.s.agents if a != rec.owner]
        if pol is Policy.LOCAL_REPLICA:
            # asynchronous background replication: bytes count, nobody waits
            bg = self._background(rec.owner)
            self._bg_clock.set(max(self._bg_clock.now_ms(), self.clock.now_ms()))
            for a in others:
                try:
                    bg.replicate(a, [rec], timeout_s=n.timeout_s)
                except TransportError:
                    self.sync_failures += 1  # background: the replica stays behind
        elif pol is Policy.CENTRALIZED_LINEAGE:
            cl = self.client(rec.owner)
            self._block(lambda: cl.commit(CENTRAL, rec, timeout_s=n.timeout_s), rec.owner)
        elif pol is Policy.METADATA_SYNC:
            d = self.dirty.setdefault(rec.owner, {})
            d[rec.key] = rec
            self.dirty_count[rec.owner] = self.dirty_count.get(rec.owner, 0) + 1
            if self.dirty_count[rec.owner] >= spec.k:
                self._announce(rec.owner, list(d.values()), others)
                d.clear()
                self.dirty_count[rec.owner] = 0
        elif pol is Policy.MAJORITY_REPLICA:
            # write quorum: the owner plus floor(N/2) replicas hold the new head
            ring = sorted(others, key=lambda a: (a != self.s.executor, a))
            self._announce(rec.owner, [rec], ring[: len(self.s.agents) // 2])

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
        planner = self.stores[self.s.planner]
        inputs: list[Record] = [sources[k] for k in step.cited]
        chain: list[Record] = []
        for level in range(1, step.depth):
            rec = derive(key=f"derived/{step.action}/{level}", owner=self.s.planner,
                         seq=planner.next_seq(), type="derived",
                         content={"level": level, "of": step.action}, inputs=inputs)
            _replace_head(planner, rec, self.s.planner)
            self.truth[rec.id] = rec
            chain.append(rec)
            inputs = [rec]
        args = {k: sources[k].content["value"][:24] if sources[k].content else None
                for k in step.cited}
        # the plan binds the call it authorizes: the action and its arguments
        plan = derive(key=f"plan/{step.action}", owner=self.s.planner,
                      seq=planner.next_seq(), type="plan",
                      content={"action": self.s.action_name, "args": args,
                               **bind_action(self.s.action_name, args)}, inputs=inputs)
        _replace_head(planner, plan, self.s.planner)
        self.truth[plan.id] = plan
        # handoff of the plan (and what it cites) to the executor: identical under every
        # policy and not coordination, so it is not charged
        ex = self.stores[self.s.executor]
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
            h = self.stores[self.s.owners[k]].head(k)
            assert h is not None
            out[k] = self.truth[h.record_id]
        return out

    # -- validators ----------------------------------------------------------------------
    def _validator(self) -> Validator:
        spec, n, s = self.spec, self.net, self.s
        pol = spec.policy
        ex = self.stores[s.executor]
        name = spec.label
        if pol is Policy.LOCAL_REPLICA:
            return LocalReplica(clock=self.clock, points=self.points)
        if pol is Policy.OWNER_HEAD_FRESHNESS:
            sync = self._sync_client(s.executor)
            self.faulty_sync = sync
            return OwnerHeadFreshness(ownership=self.ownership, owners=sync, install=ex,
                                      clock=self.clock, points=self.points,
                                      timeout_s=n.timeout_s)
        cl = self.client(s.executor)
        access: Any = cl
        if pol is Policy.METADATA_SYNC:
            access = AnnouncedAccess(ex, cl)
        elif pol in (Policy.PER_KEY_ALL_KEY, Policy.BATCHED_ALL_KEY):
            access = AllKeyAccess(cl, self.ownership, s.keys,
                                  batched=pol is Policy.BATCHED_ALL_KEY)
        elif pol is Policy.MAJORITY_REPLICA:
            others = [a for a in s.agents if a != s.executor]
            access = QuorumAccess(cl, ex, others[: len(s.agents) // 2])
        elif pol is Policy.ALL_REPLICA:
            access = QuorumAccess(cl, ex, [a for a in s.agents if a != s.executor])
        return LoopGate(name=name, loop=self.loop, lookup=self._lookup,
                        ownership=self.ownership, access=access, clock=self.clock,
                        points=self.points, timeout_s=n.timeout_s, mode=spec.mode)

    def _lookup(self, rid: RecordId) -> Record | None:
        """The executor's lineage lookup (:meth:`~icore.memory.Store.lookup`)."""
        return self.stores[self.s.executor].lookup(rid)

    # -- truth ---------------------------------------------------------------------------
    def _is_invalid(self, roots: Sequence[RecordId], true_deps: Sequence[str]) -> bool:
        try:
            fr = frontier(roots, true_deps, self.truth.get)
        except LineageError:
            return True
        for k in true_deps:
            h = self.stores[self.s.owners[k]].head(k)
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
        """Release the episode's event loop (and, over TCP, its services)."""
        self.loop.close()

    def _run(self) -> EpisodeResult:
        s, spec = self.s, self.spec
        validator = self._validator()
        fence = Fence(validator=validator, install=self.stores[s.executor], log=self.log,
                      unsafe_fail_open_ablation=spec.fail_open)
        plans: dict[int, tuple[PlanStep, Record]] = {}
        rows: list[ActionRow] = []
        last_bytes, last_rpcs = 0, 0
        for step in s.steps:
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
            row, n_dec = self._act(fence, step, pstep, plan)
            b, r = self.wire_bytes()
            rows.append(ActionRow(
                template=s.template.id, family=s.template.family, policy=spec.label,
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
        return EpisodeResult(template=s.template.id, family=s.template.family,
                             policy=spec.label, rows=tuple(rows),
                             total_stall_ms=self.total_stall, total_bytes=b,
                             duration_ms=self.clock.now_ms(), decisions=decisions)

    def _plan_sources(self, plan: Record, pstep: PlanStep) -> dict[str, Record]:
        fr = frontier([plan.id], pstep.cited, self.truth.get)
        return dict(fr.records)

    def _act(self, fence: Fence, step: ActStep, pstep: PlanStep, plan: Record
             ) -> tuple[dict[str, Any], int]:
        s, spec = self.s, self.spec
        art = {"artifact_fetches": 0, "artifact_violations": 0}

        def run_tool(**kw: Any) -> bool:
            if self.artifact_bytes:
                self._fetch_artifact(art)  # the second fetch: verified again at use
            return True

        if self.artifact_bytes:
            self._fetch_artifact(art)  # the first fetch: staged before validation
        tool = ProtectedTool(run_tool, depends_on=pstep.declared, name=s.action_name)
        fault_owner = s.owners[step.fault_key] if step.fault_key else None
        if step.fault is Fault.OUTAGE and fault_owner is not None:
            for t in self._executor_transports():
                t.unavailable.add(fault_owner)
        if step.fault is Fault.MALFORMED_HEAD and fault_owner is not None:
            self.faulty[fault_owner].corrupt.add(step.fault_key or "")
        n_before = len(self.log)
        all_key = getattr(fence.validator, "access", None)
        hc0 = all_key.heads_checked if isinstance(all_key, AllKeyAccess) else 0

        def replan(req: ReplanRequest) -> Replan:
            # the recorded fresh public decision (App. A.3): the same plan re-derived from
            # the fresh records the gate verified, the old inputs for everything else
            if step.fault is Fault.SECOND_CHANGE and step.fault_key is not None:
                self._revise(Update(step.fault_key, s.owners[step.fault_key],
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
            self.faulty[fault_owner].corrupt.clear()
        decisions = list(self.log)[n_before:]
        invalid = res.executed and self._is_invalid(res.roots, pstep.true_deps)
        hc = sum(d.heads_checked for d in decisions)
        if isinstance(all_key, AllKeyAccess):
            hc = all_key.heads_checked - hc0
        return ({"executed": res.executed, "invalid": invalid, "replanned": res.replanned,
                 "reason": decisions[-1].reason.value if decisions else "none",
                 "heads_checked": hc, **art}, len(decisions))

    def _executor_transports(self) -> list[Any]:
        out: list[Any] = []
        cl = self._clients.get(self.s.executor)
        if cl is not None:
            out.append(cl)
        if self.faulty_sync is not None:
            out.append(self.faulty_sync)
        return out


def _ancestry(recs: Sequence[Record], truth: Mapping[RecordId, Record], have: Store
              ) -> list[Record]:
    """``recs`` and their ancestors that ``have`` lacks or holds lineage incomplete,
    parents before children."""
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
    """Commit a re-derived record as the new head of its key, naming the head it replaces
    (it cites fresh inputs, not its previous version)."""
    head = store.head(rec.key)
    store.commit(rec, writer=writer, expected_head=None if head is None else head.record_id)


def _bump(row: ActionRow, stall: float, nbytes: int, rpcs: int) -> ActionRow:
    from dataclasses import replace
    return replace(row, stall_ms=row.stall_ms + stall, bytes=row.bytes + nbytes,
                   rpcs=row.rpcs + rpcs)


def replay(schedule: Schedule, spec: PolicySpec, net: NetSpec | None = None, *,
           keep_decisions: bool = False, transport: str = "inproc") -> EpisodeResult:
    """Replay ``schedule`` under ``spec`` on ``net`` (default: AT&T, offset 0, a new
    TCP + TLS connection per RPC) and return the per-action metrics.

    Args:
        schedule: the recorded schedule to replay.
        spec: the policy variant.
        net: the network (default ``NetSpec()``).
        keep_decisions: keep every gate decision in the result.
        transport: ``inproc`` (virtual time, the default) or ``tcp`` (real loopback TCP
            with mutual TLS, wall-clock time; see :mod:`icore.bench._planfence_tcp`).

    Raises:
        BadOption: ``schedule`` is not a :class:`~icore.workloads.Schedule`, ``spec`` not
            a :class:`PolicySpec`, ``net`` neither ``None`` nor a :class:`NetSpec`, or
            ``transport`` not ``inproc``/``tcp`` (``fields['option']`` names it). Field
            values are checked when the specs are built (see their ``Raises``).
    """
    if not isinstance(schedule, Schedule):
        raise BadOption("schedule must be an icore.workloads.Schedule",
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
    if transport == "tcp":
        from icore.bench._planfence_tcp import TcpEpisode

        return TcpEpisode(schedule, spec, net or NetSpec(),
                          keep_decisions=keep_decisions).run()
    return Episode(schedule, spec, net or NetSpec(), keep_decisions=keep_decisions).run()


__all__ = [
    "ARTIFACT_KEY",
    "CENTRAL",
    "HANDSHAKE_CLIENT_MS",
    "HANDSHAKE_SERVER_MS",
    "HOST_MS_PER_MESSAGE",
    "SERVER_TIME_MS",
    "ActionRow",
    "AllKeyAccess",
    "AnnouncedAccess",
    "Episode",
    "EpisodeResult",
    "FaultyHandler",
    "LoopGate",
    "NetSpec",
    "PolicySpec",
    "QuorumAccess",
    "ReplicaHandler",
    "artifact_blob",
    "make_path",
    "replay",
    "replica_name",
]
