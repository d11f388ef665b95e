"""How a workspace agent runs one protected call (planfence App. A.3), held by the agent.

:class:`_Execution` builds the call's action record from the agent's reads of D(a) (its
exact parents), runs it through the agent's :class:`~icore.fence.Fence` and turns the
fence's result into a :class:`~icore.workspace.Call`: the fresh values of a stale call
are handed to the agent and the ticket of its one replan is kept here. It sees the agent
only through the callables it is given (reads, turn snapshot, action records).
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from icore.errors import AsyncRequired, DeclarationError, MalformedRecord
from icore.fence import (
    ActionResult,
    Fence,
    ProtectedTool,
    Reason,
    Replan,
    ReplanRequest,
)
from icore.records import JSONValue, Record, RecordId
from icore.workspace._call import (
    _CURRENT,
    ARGS_NOT_JSON,
    NOT_READ,
    REJECTED,
    Approver,
    AsyncUserReplanner,
    Call,
    Scope,
    Stale,
    UserReplanner,
    _atrampoline_for,
    _Plan,
    _Rejected,
    _Run,
    _trampoline_for,
)
from icore.workspace._errors import WorkspaceError

_MAX_TICKETS = 1024


class _Execution:
    """The protected-call side of one :class:`~icore.workspace.Agent` (thread-safe).

    Args:
        fence: the agent's fence.
        basis: ``turn`` -> the reads a call of that turn derives from.
        read_in: reads a key as part of a turn (a value handed over with a refusal).
        new_action: builds and holds an action record ``(action, args, parents)``.
        note: records reads ``(key -> record, turn)`` as the agent's.
        lock: the agent's lock.
    """

    def __init__(self, fence: Fence, *,
                 basis: Callable[[Hashable | None], dict[str, Record]],
                 read_in: Callable[[str, Hashable | None], JSONValue | None],
                 new_action: Callable[[str, Mapping[str, Any], Sequence[Record]], Record],
                 note: Callable[[Mapping[str, Record], Hashable | None], None],
                 lock: threading.RLock) -> None:
        self.fence = fence
        self._basis = basis
        self._read_in = read_in
        self._new_action = new_action
        self._note = note
        self._lock = lock
        self._tickets: OrderedDict[tuple[str, frozenset[str]], dict[str, RecordId]] = \
            OrderedDict()
        self._tools: dict[tuple[str, bool], tuple[Any, ProtectedTool]] = {}
        self._static: dict[str, tuple[Any, frozenset[str]]] = {}

    def _tool(self, action: str, depends_on: Scope, is_async: bool) -> ProtectedTool:
        key = (action, is_async)
        got = self._tools.get(key)
        if got is not None and got[0] is depends_on:
            return got[1]
        fn = _atrampoline_for(action) if is_async else _trampoline_for(action)
        tool = ProtectedTool(fn, depends_on=depends_on, name=action)
        self._tools[key] = (depends_on, tool)
        return tool

    def _prepare(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any],
                 depends_on: Scope, turn: Hashable | None, approve: Approver | None,
                 is_async: bool) -> tuple[ProtectedTool, _Plan] | Call:
        tool = self._tool(action, depends_on, is_async)
        static = self._static.get(action) if not callable(depends_on) else None
        if static is not None and static[0] is depends_on:
            deps = static[1]  # the fence checks the full declaration again
        else:
            try:
                deps = tool.scope(args)
            except DeclarationError as exc:
                return Call(action, False, reason=Reason.INCOMPLETE_DECLARATION.value,
                            args=dict(args), detail=str(exc))
            if not callable(depends_on):
                self._static[action] = (depends_on, deps)
        basis = self._basis(turn)
        missing = sorted(k for k in deps if k not in basis)
        if missing:
            got = {k: self._read_in(k, turn) for k in missing}
            return Call(action, False, reason=NOT_READ, args=dict(args), fresh=got,
                        detail=f"not read: {', '.join(missing)}")
        mine = {k: basis[k] for k in sorted(deps)}
        try:
            rec = self._new_action(action, args, list(mine.values()))
        except MalformedRecord as exc:
            return Call(action, False, reason=ARGS_NOT_JSON, args={}, detail=str(exc))
        with self._lock:
            ticket = self._tickets.get((action, deps))
        replan_call = ticket is not None and all(
            k in mine and mine[k].id == rid for k, rid in ticket.items())
        canon = rec.content[  # type: ignore[index, call-overload]
            "planfence.action"]["args"]
        plan = _Plan(action, deps, mine, rec, canon, replan_call,
                     _Run(fn, rec, mine, approve, action), turn=turn)
        return tool, plan

    def _hand_over(self, plan: _Plan) -> Callable[[ReplanRequest], Replan | None]:
        if plan.replan_call:
            # this call is the one replan: a stale decision now blocks (second_change)
            return lambda rq: Replan(roots=[plan.record.id])

        def hand_over(rq: ReplanRequest) -> None:
            plan.handed.update(rq.fresh)
            return None

        return hand_over

    def _replan_root(self, tool: ProtectedTool, plan: _Plan,
                     new: Mapping[str, Any] | None,
                     normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None
                     ) -> Replan | None:
        if new is None:
            return None
        if not isinstance(new, Mapping):
            raise WorkspaceError("a replanner returns the new call's arguments (a mapping) "
                                 "or None", got=type(new).__name__)
        args = dict(normalize(new) if normalize is not None else new)
        basis = {**plan.basis, **plan.handed}
        deps = tool.scope(args)
        mine = {k: basis[k] for k in sorted(deps) if k in basis}
        rec = self._new_action(plan.action, args, list(mine.values()))
        plan.run.root, plan.run.basis = rec, mine
        plan.replanned_args = args
        return Replan(roots=[rec.id])

    def _user_stale(self, plan: _Plan, rq: ReplanRequest) -> Stale:
        plan.handed.update(rq.fresh)
        self._note(rq.fresh, plan.turn)  # the replanner read them (in this turn)
        return Stale(plan.action, plan.args,
                     {k: r.content for k, r in rq.fresh.items()}, dict(rq.fresh))

    def _finish(self, plan: _Plan, res: ActionResult) -> Call:
        key = (plan.action, plan.deps)
        rec = plan.run.root
        if res.executed:
            if plan.replan_call:
                with self._lock:
                    self._tickets.pop(key, None)
            return Call(plan.action, True, res.value, res.final.reason.value,
                        dict(res.args), rec, res, {}, res.replanned, res.detail)
        reason = res.final.reason.value
        fresh: dict[str, JSONValue] = {}
        if (not plan.replan_call and plan.replanned_args is None and plan.handed
                and reason == Reason.STALE.value):
            # default replan: the fresh values go to the agent (it sees them in this turn's
            # answer, so they count from its next turn); its next call is the replan
            self._note(plan.handed, plan.turn)
            ticket = {k: (plan.handed.get(k) or plan.basis[k]).id for k in plan.deps}
            with self._lock:
                self._tickets[key] = ticket
                self._tickets.move_to_end(key)
                while len(self._tickets) > _MAX_TICKETS:
                    self._tickets.popitem(last=False)
            fresh = {k: r.content for k, r in plan.handed.items()}
        detail = res.detail or res.final.detail
        return Call(plan.action, False, None, reason, dict(res.args), rec, res, fresh,
                    res.replanned, detail)

    def execute(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any], *,
                depends_on: Scope, replan: UserReplanner | None,
                turn: Hashable | None,
                normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
                approve: Approver | None) -> Call:
        """:meth:`Agent.execute <icore.workspace.Agent.execute>` (its docstring)."""
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(replan):
            raise AsyncRequired("an async tool or replanner needs aexecute()", tool=action)
        prep = self._prepare(action, fn, args, depends_on, turn, approve, False)
        if isinstance(prep, Call):
            return prep
        tool, plan = prep
        rp: Callable[[ReplanRequest], Replan | None]
        if replan is None or plan.replan_call:
            rp = self._hand_over(plan)
        else:
            user = replan

            def rp(rq: ReplanRequest) -> Replan | None:
                return self._replan_root(tool, plan, user(self._user_stale(plan, rq)),
                                         normalize)

        token = _CURRENT.set(plan.run)
        try:
            res = self.fence.execute(tool, roots=[plan.record.id], args=plan.args,
                                     replan=rp)
        except _Rejected as exc:
            return Call(action, False, None, REJECTED, plan.replanned_args or plan.args,
                        plan.run.root, None, {}, plan.replanned_args is not None,
                        exc.reason)
        finally:
            _CURRENT.reset(token)
        return self._finish(plan, res)

    async def aexecute(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any],
                       *, depends_on: Scope,
                       replan: UserReplanner | AsyncUserReplanner | None,
                       turn: Hashable | None,
                       normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
                       approve: Approver | None) -> Call:
        """:meth:`Agent.aexecute <icore.workspace.Agent.aexecute>`."""
        prep = self._prepare(action, fn, args, depends_on, turn, approve, True)
        if isinstance(prep, Call):
            return prep
        tool, plan = prep
        rp: Callable[[ReplanRequest], Any]
        if replan is None or plan.replan_call:
            rp = self._hand_over(plan)
        else:
            user = replan

            async def rp(rq: ReplanRequest) -> Replan | None:
                new = user(self._user_stale(plan, rq))
                if inspect.isawaitable(new):
                    new = await new
                return self._replan_root(tool, plan, new, normalize)

        token = _CURRENT.set(plan.run)
        try:
            res = await self.fence.aexecute(tool, roots=[plan.record.id], args=plan.args,
                                            replan=rp)
        except _Rejected as exc:
            return Call(action, False, None, REJECTED, plan.replanned_args or plan.args,
                        plan.run.root, None, {}, plan.replanned_args is not None,
                        exc.reason)
        finally:
            _CURRENT.reset(token)
        return self._finish(plan, res)
