"""The executor's gate in an agent process: its fence and protected tool (planfence App. A.3).

Built per task under the policy under test, over the agent's backend
(:mod:`icore.live._backend`); the protected tool's external call is simulated (it appends
to the agent's list of external actions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from icore._clock import WallClock
from icore.fence import (
    DecisionLog,
    Fence,
    GateContext,
    PointCounter,
    ProtectedTool,
    Reads,
    TeamContext,
    make_validator,
    strategy,
)
from icore.live._backend import AgentBackend
from icore.memory import AsyncOwnerAccess, OwnerAccess, OwnershipMap


def executor_fence(task: str, *, agent: str, policy: str, backend: AgentBackend,
                   ownership: OwnershipMap, patterns: Sequence[str], roles: Mapping[str, str],
                   rpc_s: float, clock: WallClock | None, points: PointCounter | None,
                   log: DecisionLog) -> Fence:
    """The executor's fence for one task under the policy under test.

    Built by :func:`~icore.fence.make_validator`; all-key asks for every key of the task
    (``patterns``: the manifest's ownership patterns, ``*`` = the task).
    """
    strat = strategy(policy)
    owners: OwnerAccess | AsyncOwnerAccess | None = None
    if strat.reads is Reads.SYNC:
        owners = backend.owner_access()
    elif strat.reads is Reads.ASYNC:
        owners = backend.async_owner_access()
    # on NATS the engine is the one shared service; otherwise the central service
    # and the replica views are reached under their own names
    central = "central" if strat.central and backend.central_service else None
    others = sorted(a for a in set(roles.values()) if a not in (agent, "central"))
    keys = tuple(k for k in (str(p).replace("*", task) for p in patterns)
                 if ownership.owner_of(k) not in (None, agent))
    store = backend.store
    context = GateContext(lookup=store.lookup, ownership=ownership, owners=owners,
                          timeout_s=rpc_s, clock=clock, points=points, policy=policy)
    team = TeamContext(install=store, keys=keys, replicas=tuple(others), central=central)
    return Fence(validator=make_validator(policy, context, team), install=store, log=log)


def protected_tool(tools: Sequence[Mapping[str, Any]], name: str,
                   external: list[dict[str, Any]]) -> ProtectedTool:
    """The manifest's protected tool ``name``; each call appends to ``external``.

    Raises:
        RuntimeError: the manifest has no such tool.
    """
    specs = {t["name"]: t for t in tools}
    spec = specs.get(name)
    if spec is None:
        raise RuntimeError(f"no protected tool {name!r} in the manifest")
    templates = list(spec["depends_on"])

    def scope(args: Mapping[str, Any]) -> set[str]:
        return {t.replace("{task}", str(args["task"])) for t in templates}

    def act(task: str, option: str) -> dict[str, Any]:
        out = {"action": name, "task": task, "option": option}
        external.append(out)  # the external service call (simulated)
        return out

    return ProtectedTool(act, depends_on=scope, name=name)
