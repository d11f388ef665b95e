"""How a workspace agent runs one protected call (planfence App. A.3), held by the agent.

:class:`_Execution` builds the call's action record from the agent's reads of D(a) (its
exact parents), runs it through the agent's :class:`~icore.fence.Fence` and turns the
fence's result into a :class:`~icore.workspace.Call`: the fresh values of a stale call
are handed to the agent and the ticket of its one replan is kept here. It sees the agent
only through the callables it is given (reads, turn snapshot, action records).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from icore.errors import AsyncRequired, DeclarationError, IcoreError, MalformedRecord
from icore.fence import (
    INVALID_ARGUMENTS,
    NOT_FINITE,
    ActionResult,
    DecisionLog,
    Fence,
    GateDecision,
    Outcome,
    ProtectedTool,
    Reason,
    Replan,
    ReplanRequest,
    non_finite_paths,
)
from icore.records import JSONValue, Lookup, Record, RecordId, canonical_json
from icore.workspace._approval import check_hooks
from icore.workspace._call import (
    _CURRENT,
    ARGS_NOT_JSON,
    ARGS_TOO_LARGE,
    DECLINE,
    NOT_READ,
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
from icore.workspace._call_checks import check_call as _check_call
from icore.workspace._durable_calls import CALL_RUNNING, EARLIER_UNKNOWN, STOPPED, Claim
from icore.workspace._errors import ReplanFailed
from icore.workspace._keys import (
    arg_fault,
    detached,
    detached_map,
    key_args,
)
from icore.workspace._unknown import (
    RUNNING_ELSEWHERE,
    Spent,
    error_text,
    failure_of,
    leaves_effect_open,
    spent_detail,
)

_MAX_TICKETS = 1024
_ID = re.compile(r"\b[0-9a-f]{64}\b")
_RAISED_FIX = ("fix the replanner (its exception is this error's __cause__); when it cannot "
               "decide, return icore.workspace.DECLINE")
_REPLAN_FIX = ("return the tool's arguments as a dict (keys: the tool's parameters), or "
               "icore.workspace.DECLINE to hand the fresh values to the model")


def _named_ids(text: str, lookup: Lookup | None) -> str:
    """``text`` with each 64-hex record id named ``key seq <n>`` (the owner sequence).

    An action record is named ``the <tool> call's action record``; an id ``lookup`` does
    not find, ``an unknown version``.
    """
    def name(m: re.Match[str]) -> str:
        r = lookup(m.group(0)) if lookup is not None else None
        if r is None:
            return "an unknown version"
        if r.type == "action":
            return f"the {r.key.rsplit('/', 1)[-1]} call's action record"
        return f"{r.key} seq {r.seq}"
    return _ID.sub(name, text)


class _Execution:
    """The protected-call side of one :class:`~icore.workspace.Agent` (thread-safe).

    Args:
        fence: the agent's fence.
        basis: ``(turn, scope)`` -> the reads a call of that turn and run scope
            derives from.
        read_in: reads a key as part of a turn and scope (a value handed over with a
            refusal); None when the fact was never written.
        new_action: builds and holds an action record ``(action, args, parents)``.
        note: records reads ``(key -> record, turn, scope)`` as the agent's.
        lock: the agent's lock.
        lookup: record id -> record (names versions in a refusal's detail).
        scope: the run scope a call is made in now (read once per call).
        spent: the reads calls with an unknown outcome consumed (:mod:`._unknown`);
            a call depending on one is refused :data:`NOT_READ` until read again.
        claims: ``(action, call_id, args)`` -> the call's durable claim
            (:mod:`._durable_calls`), None when its attempts are not kept on disk.
    """

    def __init__(self, fence: Fence, *,
                 basis: Callable[[Hashable | None, Hashable | None], dict[str, Record]],
                 read_in: Callable[[str, Hashable | None, Hashable | None], Record | None],
                 new_action: Callable[[str, Mapping[str, Any], Sequence[Record]], Record],
                 note: Callable[[Mapping[str, Record], Hashable | None, Hashable | None],
                                None],
                 lock: threading.RLock,
                 lookup: Callable[[RecordId], Record | None] | None = None,
                 scope: Callable[[], Hashable | None] = lambda: None,
                 spent: Spent | None = None,
                 claims: Callable[[str, Any, Mapping[str, Any]], Claim | None]
                 = lambda *_: None
                 ) -> None:
        self.fence = fence
        self._claims = claims
        self.spent = spent if spent is not None else Spent({}, {}, lock)
        self._lookup = lookup
        self._basis = basis
        self._read_in = read_in
        self._new_action = new_action
        self._note = note
        self._lock = lock
        self._scope = scope
        self._tickets: OrderedDict[tuple[Hashable | None, str, frozenset[str]],
                                   dict[str, RecordId]] = OrderedDict()
        self._tools: dict[tuple[str, bool], tuple[Any, ProtectedTool]] = {}
        self._static: dict[str, tuple[Any, frozenset[str]]] = {}

    def forget(self, keys: frozenset[str] | None,
               why: tuple[str, str] | None = None) -> None:
        """Drop the one-replan tickets of calls depending on ``keys`` (all when None).

        The agent forgot those reads: its next read of them is a new plan, not the replan.
        ``why``: ``(tool, error)`` that spent them (:meth:`Spent.everywhere`).
        """
        with self._lock:
            if why is not None and keys:
                self.spent.everywhere(keys, *why)
            if keys is None:
                self._tickets.clear()
                return
            for key in [t for t in self._tickets if t[2] & keys]:
                del self._tickets[key]

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
        scope = self._scope()  # a call derives only from its own run scope's reads
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
        faults = {k: f for k in deps if (f := arg_fault(k, args)) is not None}
        if faults:  # the model's text in a key: refused to it, never a pattern (QA r8 D5)
            return Call(action, False, reason=NOT_READ, args=dict(args),
                        detail="argument values name no fact: " + ", ".join(sorted(faults)),
                        unwritten=tuple(sorted(faults)),
                        bad_args=dict(f for f in faults.values()))
        basis = self._basis(turn, scope)
        missing = sorted(k for k in deps if k not in basis)
        why = self.spent.why(scope, missing) if missing else {}
        if why:  # read by a call whose outcome is unknown: not handed over, read again
            first, error = next(iter(why.values()))
            return Call(action, False, reason=NOT_READ, args=dict(args),
                        detail=spent_detail(first, error, why), spent=tuple(sorted(why)))
        if missing:
            got = {k: self._read_in(k, turn, scope) for k in missing}
            unwritten = tuple(k for k, r in got.items() if r is None)
            detail = (f"no value yet (never written): {', '.join(unwritten)}" if unwritten
                      else f"not read in this run scope: {', '.join(missing)} (reads "
                      "count only in the run or conversation that made them; a chat over "
                      "several runs shares one scope: docs/workspace.md#runs-and-scopes)")
            return Call(action, False, reason=NOT_READ, args=dict(args),
                        fresh={k: None if r is None else detached(r.content)
                               for k, r in got.items()},
                        detail=detail, unwritten=unwritten, key_args=key_args(
                            unwritten, args) if unwritten and callable(depends_on) else {})
        mine = {k: basis[k] for k in sorted(deps)}
        if bad := non_finite_paths(args):  # the model's NaN: one reason, named (#29)
            return Call(action, False, reason=INVALID_ARGUMENTS, args={},
                        detail="; ".join(f"{at}: {NOT_FINITE}" for at in bad))
        try:
            rec = self._new_action(action, args, list(mine.values()))
        except MalformedRecord as exc:
            if exc.message.startswith("too large: content is "):  # no record key named
                return Call(action, False, reason=ARGS_TOO_LARGE, args={}, detail=(
                    "the call's arguments are too large to record ("
                    + exc.message.removeprefix("too large: content is ") + ")"))
            return Call(action, False, reason=ARGS_NOT_JSON, args={}, detail=str(exc))
        with self._lock:
            ticket = self._tickets.get((scope, action, deps))
        replan_call = ticket is not None and all(
            k in mine and mine[k].id == rid for k, rid in ticket.items())
        canon = rec.content[  # type: ignore[index, call-overload]
            "planfence.action"]["args"]
        plan = _Plan(action, deps, mine, rec, canon, replan_call,
                     _Run(fn, rec, mine, approve, action), turn=turn, scope=scope)
        return tool, plan

    def _hand_over(self, plan: _Plan) -> Callable[[ReplanRequest], Replan | None]:
        if plan.replan_call:
            # this call is the one replan: a stale decision now blocks (second_change)
            return lambda rq: Replan(roots=[plan.record.id])

        def hand_over(rq: ReplanRequest) -> None:
            plan.handed.update(rq.fresh)
            return None

        return hand_over

    def _failed(self, plan: _Plan, message: str, cause: BaseException | None = None,
                **fields: Any) -> ReplanFailed:
        """Note a broken replanner on the plan; the error to raise (the fence blocks)."""
        err = ReplanFailed(message, action=plan.action, **fields)
        err.__cause__ = cause
        plan.failure = err
        return err

    def _replan_root(self, tool: ProtectedTool, plan: _Plan, new: Any,
                     normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None
                     ) -> Replan | None:
        if new is DECLINE:
            plan.declined = True
            return None
        if not isinstance(new, Mapping):
            raise self._failed(plan, "the replanner returned no arguments (a forgotten "
                               "return?)" if new is None else "the replanner returned "
                               "something other than the tool's arguments",
                               got=type(new).__name__, fix=_REPLAN_FIX)
        try:
            args = dict(normalize(new) if normalize is not None else new)
        except Exception as exc:
            raise self._failed(plan, "the replanner's arguments do not fit the tool's "
                               "schema", cause=exc, error=_short(exc), got=sorted(map(str, new)),
                               fix=_REPLAN_FIX) from exc
        try:
            deps = tool.scope(args)
        except DeclarationError as exc:
            raise self._failed(plan, "the tool's depends_on fails on the replanner's "
                               "arguments", cause=exc, error=_short(exc),
                               fix=_REPLAN_FIX) from exc
        basis = {**plan.basis, **plan.handed}
        mine = {k: basis[k] for k in sorted(deps) if k in basis}
        plan.unread = tuple(sorted(k for k in deps if k not in basis))
        try:
            rec = self._new_action(plan.action, args, list(mine.values()))
        except MalformedRecord as exc:
            raise self._failed(plan, "the replanner's arguments are not JSON", cause=exc,
                               error=_short(exc), fix=_REPLAN_FIX) from exc
        plan.run.root, plan.run.basis = rec, mine
        plan.replanned_args = args
        self._note(plan.handed, plan.turn, plan.scope)  # the replanner read them
        return Replan(roots=[rec.id])

    def _user(self, tool: ProtectedTool, plan: _Plan, user: Any,
              normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None
              ) -> Callable[[ReplanRequest], Replan | None]:
        def rp(rq: ReplanRequest) -> Replan | None:
            try:
                new = user(self._user_stale(plan, rq))
            except Exception as exc:
                raise self._failed(plan, "the replanner raised", cause=exc,
                                   error=_short(exc), fix=_RAISED_FIX) from exc
            if inspect.isawaitable(new):
                close = getattr(new, "close", None)
                if close is not None:
                    close()  # never leave an un-awaited coroutine behind
                raise self._failed(plan, "the replanner returned an awaitable: an async "
                                   "replanner needs the async path (aexecute / ainvoke)",
                                   fix="make it a plain def, or run the tool async")
            return self._replan_root(tool, plan, new, normalize)

        return rp

    def _auser(self, tool: ProtectedTool, plan: _Plan, user: Any,
               normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None
               ) -> Callable[[ReplanRequest], Any]:
        async def rp(rq: ReplanRequest) -> Replan | None:
            try:
                new = user(self._user_stale(plan, rq))
                if inspect.isawaitable(new):
                    new = await new
            except Exception as exc:
                raise self._failed(plan, "the replanner raised", cause=exc,
                                   error=_short(exc), fix=_RAISED_FIX) from exc
            return self._replan_root(tool, plan, new, normalize)

        return rp

    def _user_stale(self, plan: _Plan, rq: ReplanRequest) -> Stale:
        # what the replanner is handed; they become the agent's reads only once it
        # returned arguments (a failed replanner hands nothing to the agent)
        plan.handed.update(rq.fresh)
        return Stale(plan.action, detached_map(plan.args),
                     {k: detached(r.content) for k, r in rq.fresh.items()},
                     {k: dataclasses.replace(r, content=detached(r.content))
                      for k, r in rq.fresh.items()})

    def _detail(self, plan: _Plan, res: ActionResult, handed_over: bool) -> str:
        """A refusal's detail in agent terms (no planner, no record ids)."""
        if plan.failure is not None:
            return f"replan failed: {plan.failure.message}"
        if handed_over:
            who = "the replanner declined; " if plan.declined else ""
            return (f"{who}{', '.join(sorted(plan.handed))} changed since read; the fresh "
                    "values were handed to the agent (its next call is the one replan)")
        if plan.unread and res.final.reason is Reason.MISSING_BOUNDARY:
            return (f"the replanned call depends on {', '.join(plan.unread)}, which this "
                    "agent has not read (a replanner gets only the facts that changed)")
        return _named_ids(res.detail or res.final.detail, self._lookup)

    def _raised(self, plan: _Plan, exc: BaseException) -> None:
        """The tool function raised: a started body's reads are spent unless ``NoEffect``.

        The rule of the integrations (:mod:`._unknown`, #30): it may have acted, so its
        reads back no further call of their keys until read again.
        """
        if plan.run.started and leaves_effect_open(exc):
            self.spent.spend(plan.scope, plan.run.basis, plan.action, error_text(exc))

    def _finish(self, plan: _Plan, res: ActionResult) -> Call:
        key = (plan.scope, plan.action, plan.deps)
        rec = plan.run.root
        if res.executed:
            error = failure_of(res.value)
            if error is not None:  # it may have run: its reads back no other call
                self.spent.spend(plan.scope, plan.run.basis, plan.action, error)
            if plan.replan_call:
                with self._lock:
                    self._tickets.pop(key, None)
            return Call(plan.action, True, res.value, res.final.reason.value,
                        dict(res.args), rec, res, {}, res.replanned, res.detail,
                        turn=plan.turn)
        reason = res.final.reason.value
        fresh: dict[str, JSONValue] = {}
        handed_over = (not plan.replan_call and plan.replanned_args is None
                       and plan.failure is None and bool(plan.handed)
                       and reason == Reason.STALE.value)
        if handed_over:
            # default replan: the fresh values go to the agent (it sees them in this turn's
            # answer, so they count from its next turn); its next call is the replan
            self._note(plan.handed, plan.turn, plan.scope)
            ticket = {k: (plan.handed.get(k) or plan.basis[k]).id for k in plan.deps}
            with self._lock:
                self._tickets[key] = ticket
                self._tickets.move_to_end(key)
                while len(self._tickets) > _MAX_TICKETS:
                    self._tickets.popitem(last=False)
            fresh = {k: detached(r.content) for k, r in plan.handed.items()}
        detail = self._detail(plan, res, handed_over)
        res = dataclasses.replace(res, detail=detail)
        same = tuple(sorted(k for k, r in plan.handed.items() if handed_over
                            and k in plan.basis and _json(r) == _json(plan.basis[k])))
        call = Call(plan.action, False, None, reason, dict(res.args), rec, res, fresh,
                    res.replanned, detail, turn=plan.turn, same_value=same)
        if plan.failure is not None:
            plan.failure.call = call
            raise plan.failure
        return call

    def _rejected(self, plan: _Plan, exc: _Rejected) -> Call:
        """An authorized call an approver refused: the gate's decisions kept.

        Its :class:`~icore.fence.ActionResult` holds this call's decisions (its original
        action record's and, after a replan, the fresh one's, found in the fence's log),
        so a recorder writes them, the replan and the refusal like any blocked call.
        """
        args = plan.replanned_args or plan.args
        _spend_refused(self.spent, plan.action, plan.run.claim, lambda: plan.deps, plan.scope)
        ids = {plan.record.id, plan.run.root.id}
        found: list[GateDecision] = []
        log = self.fence.log
        for d in reversed(list(log)) if isinstance(log, DecisionLog) else ():
            if d.action == plan.action and d.roots and set(d.roots) <= ids:
                found.append(d)
                if d.roots == (plan.record.id,) or len(found) == 2:
                    break
        res = None
        if found:
            res = ActionResult(Outcome.BLOCKED, False, None, tuple(reversed(found)),
                               plan.replanned_args is not None, (plan.run.root.id,),
                               dict(args), exc.reason)
        return Call(plan.action, False, None, exc.code, args, plan.run.root, res, {},
                    plan.replanned_args is not None, exc.reason, turn=plan.turn)

    def execute(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any], *,
                depends_on: Scope, replan: UserReplanner | None,
                turn: Hashable | None,
                normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
                approve: Approver | None, call_id: str | None = None) -> Call:
        """:meth:`Agent.execute <icore.workspace.Agent.execute>` (its docstring)."""
        args = _check_call(action, fn, args, turn, replan)  # read once, here
        check_hooks(action, None, approve)  # the user's check= (approve= is wrapped)
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(replan):
            raise AsyncRequired("an async tool or replanner needs aexecute()", tool=action)
        claim = self._claims(action, call_id, args)
        if claim is not None and (earlier := claim.refused(args)) is not None:
            _spend_refused(self.spent, action, claim, lambda: self._tool(
                action, depends_on, False).scope(args), self._scope())
            return earlier  # the same call ran, runs or may have run (kept on disk)
        prep = self._prepare(action, fn, args, depends_on, turn, approve, False)
        if isinstance(prep, Call):
            return prep
        tool, plan = prep
        plan.run.claim = claim
        rp: Callable[[ReplanRequest], Replan | None]
        if replan is None or plan.replan_call:
            rp = self._hand_over(plan)
        else:
            rp = self._user(tool, plan, replan, normalize)

        token = _CURRENT.set(plan.run)
        try:
            res = self.fence.execute(tool, roots=[plan.record.id], args=plan.args,
                                     replan=rp)
        except _Rejected as exc:
            return self._rejected(plan, exc)
        except BaseException as exc:
            self._raised(plan, exc)
            raise
        finally:
            _CURRENT.reset(token)
        return self._finish(plan, res)

    async def aexecute(self, action: str, fn: Callable[..., Any], args: Mapping[str, Any],
                       *, depends_on: Scope,
                       replan: UserReplanner | AsyncUserReplanner | None,
                       turn: Hashable | None,
                       normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
                       approve: Approver | None, call_id: str | None = None) -> Call:
        """:meth:`Agent.aexecute <icore.workspace.Agent.aexecute>`."""
        args = _check_call(action, fn, args, turn, replan)  # read once, here
        check_hooks(action, None, approve)  # the user's check= (approve= is wrapped)
        claim = self._claims(action, call_id, args)
        if claim is not None and (earlier := claim.refused(args)) is not None:
            _spend_refused(self.spent, action, claim, lambda: self._tool(
                action, depends_on, True).scope(args), self._scope())
            return earlier
        prep = self._prepare(action, fn, args, depends_on, turn, approve, True)
        if isinstance(prep, Call):
            return prep
        tool, plan = prep
        plan.run.claim = claim
        rp: Callable[[ReplanRequest], Any]
        if replan is None or plan.replan_call:
            rp = self._hand_over(plan)
        else:
            rp = self._auser(tool, plan, replan, normalize)

        token = _CURRENT.set(plan.run)
        try:
            res = await self.fence.aexecute(tool, roots=[plan.record.id], args=plan.args,
                                            replan=rp)
        except _Rejected as exc:
            return self._rejected(plan, exc)
        except BaseException as exc:
            self._raised(plan, exc)
            raise
        finally:
            _CURRENT.reset(token)
        return self._finish(plan, res)


def _spend_refused(spent: Spent, action: str, claim: Claim | None,
                   deps: Callable[[], Any], scope: Hashable | None) -> None:
    """A call refused because an attempt of it may have acted spends its reads (17b #1).

    Refused :data:`EARLIER_UNKNOWN` (an attempt before a restart died mid-body or raised)
    or :data:`CALL_RUNNING` (it runs now elsewhere): as for an unknown outcome in this
    process (:meth:`_Execution._raised`), the agent's reads of the call's dependency
    scope D(a) stop backing any protected call of those keys until read again, so the
    model's next message repeating the call blind is refused ``not_read`` (planfence: an
    action is planned from current facts; the effect may have happened). ``deps`` gives
    D(a); a declaration that fails spends nothing (the next call fails on it again).
    """
    found = claim.found if claim is not None else None
    if found is None or found.how not in (EARLIER_UNKNOWN, CALL_RUNNING):
        return
    try:
        keys = frozenset(deps())
    except Exception:  # the call is refused anyway; its declaration fails again
        return
    spent.spend(scope, keys, action,
                RUNNING_ELSEWHERE if found.how == CALL_RUNNING else found.value or STOPPED)


def _json(rec: Record) -> bytes:
    """A record's value as canonical JSON (``1`` and ``1.0`` differ)."""
    return canonical_json(rec.content)


def _problems(exc: BaseException) -> list[str]:
    """``field: why`` of a schema error (pydantic's ``errors()``, on it or its context)."""
    for e in (exc, exc.__cause__, exc.__context__):
        errors = getattr(e, "errors", None)
        if callable(errors):
            try:
                return [f"{'.'.join(map(str, d.get('loc', ()))) or '(root)'}: {d.get('msg')}"
                        for d in errors()][:8]
            except Exception:  # not pydantic's shape
                continue
    return []


def _short(exc: BaseException) -> str:
    """``Type: message`` of an exception, its first line (for an error's field).

    A schema error names each field and why instead.
    """
    text = exc.message if isinstance(exc, IcoreError) else str(exc)
    probs = _problems(exc)
    if probs:
        return "; ".join(probs)[:300]
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:300]
