"""The protected action of planfence App. A.3: validate, refresh, replan once, revalidate,
execute only when authorized, log every decision with its inputs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from icore._clock import Clock
from icore.errors import ActionBlocked, DeclarationError
from icore.fence._decision import GateDecision, Outcome, Reason
from icore.fence._gate import PointCounter, apply_fail_open
from icore.fence._policies import GateValidator, Validator
from icore.fence._tool import ProtectedTool
from icore.memory import DEFAULT_TIMEOUT_S, OwnerAccess, Store
from icore.records import Record, RecordId, TraversalMode


@dataclass(frozen=True, slots=True)
class ReplanRequest:
    """What the planner gets for the one replan (isolated history, App. A.3 step 3).

    Attributes:
        action: action name.
        old_roots: the roots of the rejected plan.
        old_args: the rejected action's arguments.
        fresh: key -> verified current record for every changed dependency.
        decision: the replan-required decision.
    """

    action: str
    old_roots: tuple[RecordId, ...]
    old_args: Mapping[str, Any]
    fresh: Mapping[str, Record]
    decision: GateDecision


@dataclass(frozen=True, slots=True)
class Replan:
    """A fresh plan: new roots (citing the fresh records) and new arguments."""

    roots: Sequence[RecordId]
    args: Mapping[str, Any]


Replanner = Callable[[ReplanRequest], Replan | None]
"""Called at most once per protected action; returning None declines (blocked)."""


@dataclass(frozen=True, slots=True)
class ActionResult:
    """Outcome of one protected action.

    Attributes:
        outcome: AUTHORIZED when the tool ran, else BLOCKED.
        executed: whether the tool function ran.
        value: what the tool returned (None when not executed).
        decisions: every gate decision made (one or two).
        replanned: whether the one replan happened.
        roots / args: the roots and arguments the tool ran with (or was refused with).
        detail: why it was blocked, when it was.
    """

    outcome: Outcome
    executed: bool
    value: Any
    decisions: tuple[GateDecision, ...]
    replanned: bool
    roots: tuple[RecordId, ...]
    args: Mapping[str, Any]
    detail: str = ""

    @property
    def final(self) -> GateDecision:
        """The last gate decision."""
        return self.decisions[-1]


class DecisionLog:
    """Thread-safe in-memory log of gate decisions, with an optional extra sink.

    Args:
        sink: called with each decision's dict (e.g. a JSONL or SQLite writer).
    """

    def __init__(self, sink: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._entries: list[GateDecision] = []
        self._lock = threading.Lock()
        self._sink = sink

    def __call__(self, decision: GateDecision) -> None:
        """Append a decision."""
        with self._lock:
            self._entries.append(decision)
        if self._sink is not None:
            self._sink(decision.to_dict())

    def __iter__(self) -> Iterator[GateDecision]:
        with self._lock:
            return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def counts(self) -> dict[str, int]:
        """Return decision counts by ``outcome/reason``."""
        out: dict[str, int] = {}
        for d in self:
            k = f"{d.outcome.value}/{d.reason.value}"
            out[k] = out.get(k, 0) + 1
        return out


@dataclass
class Fence:
    """An executor's action boundary (planfence Sec. 4, App. A.3).

    Args:
        validator: the policy that validates (default: PlanFence over ``owners``).
        install: where fresh verified records are installed before the replan (the
            executor's replica cache), usually the executor's store.
        log: receives every decision.
        unsafe_fail_open_ablation: ABLATION ONLY (planfence App. C). When True, blocked
            decisions authorize the action. Never set it for real tools.

    Use :meth:`for_store` to build the usual PlanFence executor.
    """

    validator: Validator
    install: Store | None = None
    log: Callable[[GateDecision], None] = field(default_factory=DecisionLog)
    unsafe_fail_open_ablation: bool = False

    @classmethod
    def for_store(cls, store: Store, owners: OwnerAccess, *, clock: Clock | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S, log: Callable[[GateDecision], None]
                  | None = None, mode: TraversalMode = TraversalMode.FULL) -> Fence:
        """PlanFence over ``owners`` for an executor whose replica is ``store``."""
        v = GateValidator(lookup=store.lookup, ownership=store.ownership, owners=owners,
                          clock=clock, points=PointCounter(), timeout_s=timeout_s, mode=mode)
        return cls(validator=v, install=store, log=log if log is not None else DecisionLog())

    def _record(self, d: GateDecision) -> GateDecision:
        if self.unsafe_fail_open_ablation:
            d = apply_fail_open(d)
        self.log(d)
        return d

    def _declaration_blocked(self, tool: ProtectedTool, roots: tuple[RecordId, ...],
                             exc: DeclarationError, replanned: bool) -> GateDecision:
        return self._record(GateDecision(
            outcome=Outcome.BLOCKED, reason=Reason.INCOMPLETE_DECLARATION, action=tool.name,
            roots=roots, deps=(), replanned=replanned, policy=self.validator.name,
            detail=str(exc)))

    def check(self, tool: ProtectedTool, *, roots: Sequence[RecordId],
              args: Mapping[str, Any], replanned: bool = False) -> GateDecision:
        """Validate once (no replan, no execution) and log the decision."""
        roots_t = tuple(roots)
        try:
            deps = tool.scope(args)
        except DeclarationError as exc:
            return self._declaration_blocked(tool, roots_t, exc, replanned)
        d = self.validator.validate(action=tool.name, roots=roots_t, deps=deps,
                                    replanned=replanned)
        return self._record(d)

    def execute(self, tool: ProtectedTool, *, roots: Sequence[RecordId],
                args: Mapping[str, Any], replan: Replanner | None = None,
                raise_on_block: bool = False) -> ActionResult:
        """Run a protected action: validate, replan once on a change, revalidate, execute.

        Args:
            tool: the protected tool.
            roots: L(a), the plan roots authorizing ``args``.
            args: keyword arguments for the tool.
            replan: called once with a :class:`ReplanRequest` when a dependency changed;
                without it a changed dependency blocks (validation without replanning).
            raise_on_block: raise :class:`~icore.errors.ActionBlocked` instead of returning
                a blocked result.

        Returns:
            :class:`ActionResult`. The tool runs only on an authorized decision.

        Raises:
            ActionBlocked: when blocked and ``raise_on_block``.
            Exception: whatever the tool itself raises once authorized.
        """
        roots_t, decisions = tuple(roots), []
        d1 = self.check(tool, roots=roots_t, args=args)
        decisions.append(d1)
        if d1.authorized:
            return self._run(tool, roots_t, args, decisions, replanned=False)
        if d1.outcome is Outcome.REPLAN_REQUIRED and replan is not None:
            if self.install is not None:
                for rec in d1.fresh.values():
                    self.install.install(rec)
            try:
                new = replan(ReplanRequest(tool.name, roots_t, dict(args), dict(d1.fresh), d1))
            except Exception as exc:
                return self._blocked(decisions, roots_t, args, True,
                                     f"replan failed: {type(exc).__name__}: {exc}",
                                     raise_on_block)
            if new is None:
                return self._blocked(decisions, roots_t, args, True, "planner declined",
                                     raise_on_block)
            if not isinstance(new, Replan):
                return self._blocked(decisions, roots_t, args, True,
                                     f"replan failed: returned {type(new).__name__}, "
                                     "not a Replan", raise_on_block)
            roots2 = tuple(new.roots)
            d2 = self.check(tool, roots=roots2, args=new.args, replanned=True)
            decisions.append(d2)
            if d2.authorized:
                return self._run(tool, roots2, new.args, decisions, replanned=True)
            return self._blocked(decisions, roots2, new.args, True, d2.detail, raise_on_block)
        if d1.outcome is Outcome.REPLAN_REQUIRED:
            # validation without replanning: a detected change blocks (App. C)
            blocked = replace(d1, outcome=Outcome.BLOCKED, detail=d1.detail + "; no replanner")
            decisions[-1] = blocked
        return self._blocked(decisions, roots_t, args, False, decisions[-1].detail,
                             raise_on_block)

    def _run(self, tool: ProtectedTool, roots: tuple[RecordId, ...], args: Mapping[str, Any],
             decisions: list[GateDecision], *, replanned: bool) -> ActionResult:
        value = tool.run(args)
        return ActionResult(Outcome.AUTHORIZED, True, value, tuple(decisions), replanned,
                            roots, dict(args))

    def _blocked(self, decisions: list[GateDecision], roots: tuple[RecordId, ...],
                 args: Mapping[str, Any], replanned: bool, detail: str,
                 raise_on_block: bool) -> ActionResult:
        res = ActionResult(Outcome.BLOCKED, False, None, tuple(decisions), replanned, roots,
                           dict(args), detail)
        if raise_on_block:
            last = decisions[-1]
            raise ActionBlocked("protected action blocked", action=last.action,
                                reason=last.reason.value, detail=detail)
        return res
