"""PlanFence controlled replay: what a replay is asked to run and what it returns.

Implements planfence Sec. 5.1, App. A.1, A.3; design.md 3.3-3.4.

The spec module under both transports of the replay (:mod:`icore_lab.bench.planfence._episode`
with the in-process virtual-time transport, :mod:`icore_lab.bench.planfence._tcp` over real
TCP): the policy variant (:class:`VariantSpec`), the network (:class:`NetSpec`), the
per-action metrics (:class:`ActionRow`), the episode result (:class:`EpisodeResult`) and
the modelled costs every policy pays alike.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

from icore.fence import DecisionEntry, Policy, Propagation, strategy
from icore.memory import DEFAULT_TIMEOUT_S
from icore.records import TraversalMode
from icore_lab.bench._errors import BadOption
from icore_lab.net import DEFAULT_BASE_DELAY_MS, LINK_NAMES, HostCost

CENTRAL = "central"
"""Agent id of the centralized-lineage service."""

SERVER_TIME_MS = 0.5
"""Modelled owner processing time per request (decode, store read, encode), in ms.
Kept equal for every policy; measured order of magnitude of one in-process
``OwnerHandler.handle`` plus an SQLite read on this machine."""

MAX_SYNC_ATTEMPTS = 20
"""Attempts of one synchronous coordination step before the replay gives up."""

HOST_MS_PER_MESSAGE = 0.02
"""End-host CPU time per message sent (encode, TLS record, syscalls), in ms: the owner's CPU
per validation on a reused connection (one message in, one out: 18.4-18.7 µs in two runs
of ``icore bench net``, 2026-12-05, after issue 27's protocol-3 owner; was 24-25 µs and
0.03 on 2026-12-01, 0.25 modelled before) rounded up."""

HANDSHAKE_CLIENT_MS = 0.86
"""Client CPU per TLS 1.3 handshake with certificates, in ms: ``icore bench net`` CPU per
validation with a new connection minus with a reused one (900 - 58 and 928 - 58 µs, two
runs, idle 2-core machine, 2026-12-01, after issue 17; was 2.7 on 2026-11-29)."""

HANDSHAKE_SERVER_MS = 0.82
"""Owner CPU per TLS 1.3 handshake with certificates, in ms (847 - 24 and 839 - 25 µs, same
runs; was 2.5)."""


# --- specs ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class VariantSpec:
    """A policy variant replayed on a schedule (formerly ``PolicySpec``, still an alias).

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
        if self.announces_every_k and (
                isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1):
            raise BadOption(f"metadata sync needs an int K >= 1, got {self.k!r}",
                            option="k", value=self.k)

    @property
    def label(self) -> str:
        """Stable row label, e.g. ``metadata_sync_k4`` or ``planfence_direct``."""
        base = self.policy.value
        if self.announces_every_k:
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
        """True for the exact-lineage (safe) policies.

        Every policy but the two unsafe baselines, metadata sync with K > 1, and the ablations.
        """
        if not self.policy.safe or self.fail_open or self.mode is not TraversalMode.FULL:
            return False
        return not (self.announces_every_k and self.k != 1)

    @property
    def announces_every_k(self) -> bool:
        """True when the policy announces heads every ``k`` updates (metadata sync).

        Then ``k`` is part of the variant.
        """
        return strategy(self.policy).propagation is Propagation.ANNOUNCE_EVERY_K


PolicySpec = VariantSpec
"""The former name of :class:`VariantSpec` ("policy" is the gate's; kept as an alias)."""


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
            coordination takes time (App. A.3); :data:`~icore_lab.workloads.UNIT_MS` models
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
        policy: :attr:`VariantSpec.label`.
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
    """Deterministic artifact content of ``size`` characters (hex, incompressible).

    Args:
        template: the template id (part of the seed).
        rev: the artifact revision.
        size: length in characters.

    Returns:
        ``size`` hex characters.
    """
    out: list[str] = []
    n = 0
    while sum(len(x) for x in out) < size:
        out.append(hashlib.sha256(f"{template}|{rev}|{n}".encode()).hexdigest())
        n += 1
    return "".join(out)[:size]


@dataclass(frozen=True)
class EpisodeResult:
    """All actions of one schedule under one policy, plus episode totals.

    Attributes:
        template / family: the workflow template and its family.
        policy: :attr:`VariantSpec.label`.
        rows: one :class:`ActionRow` per protected action, in order.
        total_stall_ms: blocking time of the whole episode, ms.
        total_bytes: wire bytes of the whole episode.
        duration_ms: episode clock at the end, ms.
        decisions: every gate decision (:class:`~icore.fence.DecisionEntry`) when asked
            for, else empty.
    """

    template: str
    family: str
    policy: str
    rows: tuple[ActionRow, ...]
    total_stall_ms: float
    total_bytes: int
    duration_ms: float
    decisions: tuple[DecisionEntry, ...] = field(default=())


__all__ = [
    "ARTIFACT_KEY",
    "CENTRAL",
    "HANDSHAKE_CLIENT_MS",
    "HANDSHAKE_SERVER_MS",
    "HOST_MS_PER_MESSAGE",
    "MAX_SYNC_ATTEMPTS",
    "SERVER_TIME_MS",
    "ActionRow",
    "EpisodeResult",
    "NetSpec",
    "PolicySpec",
    "VariantSpec",
    "artifact_blob",
]
