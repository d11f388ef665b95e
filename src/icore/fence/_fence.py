"""The protected action of planfence App. A.3.

Validate, refresh, replan once, revalidate, execute only when authorized, log every
decision with its inputs.

One protocol (:meth:`Fence._protocol`, a generator of the steps to take) is driven by the
sync :meth:`Fence.execute` and the async :meth:`Fence.aexecute`, so both paths decide
identically. Every call's arguments must be the ones its roots bind (``_binding``).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Collection, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from icore._clock import Clock
from icore.errors import (
    ActionBlocked,
    AsyncRequired,
    DeclarationError,
    FenceCallError,
    MalformedRecord,
)
from icore.fence._authorizing import running
from icore.fence._binding import args_digest, binding_of
from icore.fence._decision import GateDecision, Outcome, Reason
from icore.fence._gate import GateContext, PointCounter, apply_fail_open
from icore.fence._policies import GateCheck, PlanFenceCheck
from icore.fence._tool import ProtectedTool, is_coroutine_callable
from icore.memory import DEFAULT_TIMEOUT_S, AsyncOwnerAccess, OwnerAccess, Store
from icore.records import Lookup, Record, RecordId, TraversalMode


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
    """A fresh plan: new roots (citing the fresh records) and, optionally, arguments.

    The executed arguments are the ones the fresh root binds: with ``args`` None they
    are read from that root; given ``args`` must equal them (else ``args_mismatch``).
    """

    roots: Sequence[RecordId]
    args: Mapping[str, Any] | None = None


Replanner: TypeAlias = Callable[[ReplanRequest], Replan | None]
"""Called at most once per protected action; returning None declines (blocked)."""

AsyncReplanner: TypeAlias = Callable[[ReplanRequest], Awaitable[Replan | None]]
"""An ``async def`` replanner (only for :meth:`Fence.aexecute`)."""


@dataclass(frozen=True, slots=True)
class _Check:
    roots: tuple[RecordId, ...]
    args: Mapping[str, Any]
    replanned: bool


@dataclass(frozen=True, slots=True)
class _Replan:
    request: ReplanRequest


@dataclass(frozen=True, slots=True)
class _Run:
    args: Mapping[str, Any]
    decisions: tuple[GateDecision, ...] = ()


_Step: TypeAlias = _Check | _Replan | _Run


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

    def since(self, start: int) -> list[GateDecision]:
        """The decisions appended from index ``start`` on (``start`` = an earlier ``len``)."""
        with self._lock:
            return self._entries[start:]

    def counts(self) -> dict[str, int]:
        """Return decision counts by ``outcome/reason``."""
        out: dict[str, int] = {}
        for d in self:
            k = f"{d.outcome.value}/{d.reason.value}"
            out[k] = out.get(k, 0) + 1
        return out


_MAX_BINDINGS = 4096
"""Most remembered root bindings per fence (then forgotten all at once)."""


def _check_call(tool: Any, roots: Any, args: Any, replan: Any, raise_on_block: Any) -> None:
    """Refuse wrong argument types of execute/aexecute at the call (issue 29).

    Raises:
        FenceCallError: naming the argument, what was given and what is expected.
    """
    def bad(argument: str, expected: str, got: Any) -> FenceCallError:
        return FenceCallError(f"{argument} must be {expected}, not {type(got).__name__}",
                              argument=argument, got=type(got).__name__)

    if not isinstance(tool, ProtectedTool):
        raise bad("tool", "a ProtectedTool (wrap the function with @protected(...) or "
                  "ProtectedTool(fn, depends_on=...))", tool)
    if isinstance(roots, str | bytes):
        raise FenceCallError("roots must be a list of record ids, not one id as a string "
                             "(write roots=[rid])", argument="roots", got="str")
    if not isinstance(roots, Sequence):
        raise bad("roots", "a list or tuple of record ids (L(a))", roots)
    for i, r in enumerate(roots):
        if not isinstance(r, str):
            raise FenceCallError(f"roots[{i}] must be a record id string, not "
                                 f"{type(r).__name__}", argument=f"roots[{i}]",
                                 got=type(r).__name__)
    if not isinstance(args, Mapping):
        raise bad("args", "a mapping of argument names to values (a dict)", args)
    if not all(isinstance(k, str) for k in args):
        raise FenceCallError("args keys must be argument names (strings)", argument="args",
                             got="non-str key")
    if replan is not None and not callable(replan):
        raise bad("replan", "a callable (or None)", replan)
    if not isinstance(raise_on_block, bool):  # "no" would mean True
        raise bad("raise_on_block", "True or False", raise_on_block)


@dataclass
class Fence:
    """An executor's action boundary (planfence Sec. 4, App. A.3).

    Args:
        validator: the policy that validates (default: PlanFence over ``owners``). A
            validator with an ``avalidate`` coroutine method is awaited by
            :meth:`aexecute`; others run in a worker thread there.
        install: where fresh verified records are installed before the replan (the
            executor's replica cache), usually the executor's store.
        log: receives every decision.
        lookup: reads the roots' records to check the arguments they bind (default:
            ``install.get``: any held record, lineage complete or not - completeness is
            the gate's check); without either every call is blocked ``args_mismatch``.
        unsafe_fail_open_ablation: ABLATION ONLY (planfence App. C). When True, blocked
            decisions authorize the action. Never set it for real tools.

    Use :meth:`for_store` to build the usual PlanFence executor.
    """

    validator: GateCheck
    install: Store | None = None
    log: Callable[[GateDecision], None] = field(default_factory=DecisionLog)
    unsafe_fail_open_ablation: bool = False
    lookup: Lookup | None = None
    _bindings: dict[RecordId, tuple[Record, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    """Record id -> (the record read, what it binds): a record read again as the same
    object is not decoded and digested again (records are immutable)."""

    @classmethod
    def for_store(cls, store: Store, owners: OwnerAccess | AsyncOwnerAccess, *,
                  clock: Clock | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                  log: Callable[[GateDecision], None] | None = None,
                  mode: TraversalMode = TraversalMode.FULL) -> Fence:
        """PlanFence for an executor whose replica is ``store``.

        Over ``owners`` (sync or async access).

        Raises:
            FenceCallError: ``store`` is not a store (no ``lookup``/``ownership``/
                ``install``), or ``owners`` has no ``query_heads`` and ``fetch`` (an
                owner access); raised here, not at the first call.
        """
        for name, obj, needs in (("store", store, ("lookup", "ownership", "install")),
                                 ("owners", owners, ("query_heads", "fetch"))):
            missing = [m for m in needs if not hasattr(obj, m)]
            if missing:
                raise FenceCallError(
                    f"{name} must be {'a Store' if name == 'store' else 'an owner access'}"
                    f" (it has no {', '.join(missing)}), not {type(obj).__name__}",
                    argument=name, got=type(obj).__name__)
        v = PlanFenceCheck(GateContext(lookup=store.lookup, ownership=store.ownership,
                                      owners=owners, clock=clock, points=PointCounter(),
                                      timeout_s=timeout_s, mode=mode))
        return cls(validator=v, install=store, log=log if log is not None else DecisionLog())

    def _record(self, d: GateDecision) -> GateDecision:
        if self.unsafe_fail_open_ablation:
            d = apply_fail_open(d)
        self.log(d)
        return d

    def _pre_block(self, tool: ProtectedTool, roots: tuple[RecordId, ...], reason: Reason,
                   detail: str, replanned: bool, deps: Collection[str] = ()) -> GateDecision:
        return self._record(GateDecision(
            outcome=Outcome.BLOCKED, reason=reason, action=tool.name, roots=roots,
            deps=tuple(sorted(deps)), replanned=replanned, policy=self.validator.name,
            detail=detail))

    def _lookup(self) -> Lookup | None:
        if self.lookup is not None:
            return self.lookup
        return self.install.get if self.install is not None else None

    def _bound(self, tool: ProtectedTool, roots: tuple[RecordId, ...]
               ) -> tuple[str, dict[str, Any] | None, str] | str:
        """The binding of the one root that binds an action, or why there is none.

        Fails closed: an unreadable root binds nothing.
        """
        lookup = self._lookup()
        if lookup is None:
            return "the fence has no lookup to read what the roots bind"
        found, missing = [], 0
        for rid in roots:
            rec = lookup(rid)
            if rec is None:
                missing += 1
                continue
            b = self._binding(rid, rec)
            if b is not None:
                found.append(b)
        if not found:
            if missing:
                return f"no readable root binds the action ({missing} root(s) not held)"
            return "no root binds the action and its arguments"
        if len(found) > 1:
            return f"{len(found)} roots bind an action; exactly one must"
        b = found[0]
        if b[0] != tool.name:
            return f"the root binds action {b[0]!r}, not {tool.name!r}"
        return b

    def _binding(self, rid: RecordId, rec: Record
                 ) -> tuple[str, dict[str, Any] | None, str] | None:
        """:func:`binding_of` ``rec``, remembered while the lookup hands back that object."""
        hit = self._bindings.get(rid)
        if hit is not None and hit[0] is rec:
            b: tuple[str, dict[str, Any] | None, str] | None = hit[1]
            return b
        b = binding_of(rec)
        if len(self._bindings) >= _MAX_BINDINGS:
            self._bindings.clear()
        self._bindings[rid] = (rec, b)
        return b

    def _args_problem(self, tool: ProtectedTool, roots: tuple[RecordId, ...],
                      args: Mapping[str, Any]) -> str | None:
        b = self._bound(tool, roots)
        if isinstance(b, str):
            return b
        try:
            got = args_digest(args)
        except MalformedRecord as exc:
            return f"the call's arguments are not JSON: {exc}"
        if got != b[2]:
            return "the call's arguments differ from the ones its root binds"
        return None

    def bound_args(self, tool: ProtectedTool, roots: Sequence[RecordId]
                   ) -> dict[str, Any] | None:
        """Return the arguments the one binding root of ``roots`` binds for ``tool``.

        None when no root binds them in full, e.g. a digest-only binding.
        """
        b = self._bound(tool, tuple(roots))
        return None if isinstance(b, str) or b[1] is None else dict(b[1])

    def _replan_args(self, tool: ProtectedTool, roots: tuple[RecordId, ...],
                     given: Mapping[str, Any] | None
                     ) -> tuple[Mapping[str, Any], str | None]:
        """The arguments to revalidate after a replan, or why there are none."""
        if given is not None:
            return given, None
        b = self._bound(tool, roots)
        if isinstance(b, str):
            return {}, b
        if b[1] is None:
            return {}, "the fresh root binds only an argument digest; Replan must pass args"
        return dict(b[1]), None

    def _pre_check(self, tool: ProtectedTool, roots: tuple[RecordId, ...],
                   args: Mapping[str, Any], replanned: bool
                   ) -> GateDecision | frozenset[str]:
        try:
            deps = tool.scope(args)
        except DeclarationError as exc:
            return self._pre_block(tool, roots, Reason.INCOMPLETE_DECLARATION, str(exc),
                                   replanned)
        problem = self._args_problem(tool, roots, args)
        if problem is not None:
            return self._pre_block(tool, roots, Reason.ARGS_MISMATCH, problem, replanned,
                                   deps)
        return deps

    def check(self, tool: ProtectedTool, *, roots: Sequence[RecordId],
              args: Mapping[str, Any], replanned: bool = False) -> GateDecision:
        """Validate once (no replan, no execution) and log the decision.

        Blocked ``incomplete_declaration`` when D(a) is invalid, ``args_mismatch`` when
        the arguments are not the ones exactly one root binds for this tool; else the
        validator's decision.

        Raises:
            AsyncRequired: the validator's owners are async (use :meth:`acheck`).
        """
        roots_t = tuple(roots)
        pre = self._pre_check(tool, roots_t, args, replanned)
        if isinstance(pre, GateDecision):
            return pre
        d = self.validator.validate(action=tool.name, roots=roots_t, deps=pre,
                                    replanned=replanned)
        return self._record(d)

    async def acheck(self, tool: ProtectedTool, *, roots: Sequence[RecordId],
                     args: Mapping[str, Any], replanned: bool = False) -> GateDecision:
        """Async :meth:`check`: owners of D(a) are queried concurrently."""
        roots_t = tuple(roots)
        pre = self._pre_check(tool, roots_t, args, replanned)
        if isinstance(pre, GateDecision):
            return pre
        av = getattr(self.validator, "avalidate", None)
        if av is not None:
            d = await av(action=tool.name, roots=roots_t, deps=pre, replanned=replanned)
        else:
            d = await asyncio.to_thread(self.validator.validate, action=tool.name,
                                        roots=roots_t, deps=pre, replanned=replanned)
        return self._record(d)

    # -- the protected action (App. A.3) ------------------------------------------------
    def _protocol(self, tool: ProtectedTool, roots: Sequence[RecordId],
                  args: Mapping[str, Any], can_replan: bool, raise_on_block: bool
                  ) -> Generator[_Step, Any, ActionResult]:
        roots_t, decisions = tuple(roots), []
        d1 = yield _Check(roots_t, args, False)
        decisions.append(d1)
        if d1.authorized:
            value = yield _Run(args, tuple(decisions))
            return ActionResult(Outcome.AUTHORIZED, True, value, tuple(decisions), False,
                                roots_t, dict(args))
        if d1.outcome is Outcome.REPLAN_REQUIRED and can_replan:
            if self.install is not None:
                for rec in d1.fresh.values():
                    self.install.install(rec)
            try:
                new = yield _Replan(ReplanRequest(tool.name, roots_t, dict(args),
                                                  dict(d1.fresh), d1))
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
            args2, why = self._replan_args(tool, roots2, new.args)
            if why is not None:
                d2 = self._pre_block(tool, roots2, Reason.ARGS_MISMATCH, why, True)
            else:
                d2 = yield _Check(roots2, args2, True)
            decisions.append(d2)
            if d2.authorized:
                value = yield _Run(args2, tuple(decisions))
                return ActionResult(Outcome.AUTHORIZED, True, value, tuple(decisions), True,
                                    roots2, dict(args2))
            return self._blocked(decisions, roots2, args2, True, d2.detail, raise_on_block)
        if d1.outcome is Outcome.REPLAN_REQUIRED:
            # validation without replanning: a detected change blocks (App. C)
            blocked = replace(d1, outcome=Outcome.BLOCKED, detail=d1.detail + "; no replanner")
            decisions[-1] = blocked
        return self._blocked(decisions, roots_t, args, False, decisions[-1].detail,
                             raise_on_block)

    def execute(self, tool: ProtectedTool, *, roots: Sequence[RecordId],
                args: Mapping[str, Any], replan: Replanner | None = None,
                raise_on_block: bool = False) -> ActionResult:
        """Run a protected action: validate, replan once on a change, revalidate, execute.

        Args:
            tool: the protected tool (a sync function).
            roots: L(a); exactly one of them binds this action and ``args``
                (:func:`~icore.fence.action_record`, :func:`~icore.fence.bind_action`).
            args: keyword arguments for the tool.
            replan: called once with a :class:`ReplanRequest` when a dependency changed;
                without it a changed dependency blocks (validation without replanning).
                After a replan the arguments the fresh root binds are executed.
            raise_on_block: raise :class:`~icore.errors.ActionBlocked` instead of returning
                a blocked result.

        Returns:
            :class:`ActionResult`. The tool runs only on an authorized decision.

        Raises:
            FenceCallError: ``tool`` is not a :class:`ProtectedTool`, ``roots`` is not a
                list or tuple of record-id strings (None, one id as a bare string, a dict
                inside), ``args`` is not a mapping with string keys, ``replan`` is
                not callable, or ``raise_on_block`` is not a bool; raised at the call,
                nothing was asked or executed.
            AsyncRequired: the tool or the replanner is a coroutine function (or returned
                an awaitable); nothing was awaited - use :meth:`aexecute`.
            ActionBlocked: when blocked and ``raise_on_block``.
            Exception: whatever the tool itself raises once authorized.
        """
        _check_call(tool, roots, args, replan, raise_on_block)
        if tool.is_async:
            raise AsyncRequired("an async tool runs only through Fence.aexecute()",
                                tool=tool.name)
        if replan is not None and is_coroutine_callable(replan):
            raise AsyncRequired("an async replanner runs only through Fence.aexecute()",
                                tool=tool.name)
        gen = self._protocol(tool, roots, args, replan is not None, raise_on_block)
        step = next(gen)
        while True:
            try:
                if isinstance(step, _Check):
                    step = gen.send(self.check(tool, roots=step.roots, args=step.args,
                                               replanned=step.replanned))
                elif isinstance(step, _Replan):
                    assert replan is not None
                    try:
                        new = replan(step.request)
                    except Exception as exc:
                        step = gen.throw(exc)
                        continue
                    _refuse_awaitable(new, tool, "replanner")
                    step = gen.send(new)
                else:
                    with running(step.decisions):  # authorizing() in the body
                        value = tool._invoke(step.args)
                    _refuse_awaitable(value, tool, "tool")
                    step = gen.send(value)
            except StopIteration as stop:
                result: ActionResult = stop.value
                return result

    async def aexecute(self, tool: ProtectedTool, *, roots: Sequence[RecordId],
                       args: Mapping[str, Any],
                       replan: Replanner | AsyncReplanner | None = None,
                       raise_on_block: bool = False) -> ActionResult:
        """Async :meth:`execute`: the same protocol and decisions, with async tools and replanners.

        Async tools and replanners are awaited, and the owners of D(a) queried concurrently
        (design.md 3.2 step 2). A sync tool is called directly (it runs on the event loop's
        thread).

        Raises:
            FenceCallError: as :meth:`execute`.
            ActionBlocked: when blocked and ``raise_on_block``.
            Exception: whatever the tool itself raises once authorized.
        """
        _check_call(tool, roots, args, replan, raise_on_block)
        gen = self._protocol(tool, roots, args, replan is not None, raise_on_block)
        step = next(gen)
        while True:
            try:
                if isinstance(step, _Check):
                    step = gen.send(await self.acheck(tool, roots=step.roots, args=step.args,
                                                      replanned=step.replanned))
                elif isinstance(step, _Replan):
                    assert replan is not None
                    try:
                        new = replan(step.request)
                        if inspect.isawaitable(new):
                            new = await new
                    except Exception as exc:
                        step = gen.throw(exc)
                        continue
                    step = gen.send(new)
                else:
                    with running(step.decisions):  # authorizing() in the body
                        value = tool._invoke(step.args)
                        if inspect.isawaitable(value):
                            value = await value
                    step = gen.send(value)
            except StopIteration as stop:
                result: ActionResult = stop.value
                return result

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


def _refuse_awaitable(value: Any, tool: ProtectedTool, what: str) -> None:
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if close is not None:
            close()  # never leave an un-awaited coroutine behind
        raise AsyncRequired(f"the {what} returned an awaitable; use Fence.aexecute()",
                            tool=tool.name)
