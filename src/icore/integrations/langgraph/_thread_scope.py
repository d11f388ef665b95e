"""The run scope of a LangGraph / LangChain run: its conversation (issue 28, reads per run).

A graph run with a checkpointer names its conversation in ``config["configurable"]
["thread_id"]``; code of the run (a tool of a ``ToolNode``, a node) finds it in the
config LangChain keeps in a context variable. Reads and calls of a workspace agent are
kept per scope, so a read made in one conversation never authorizes a call made in
another:

- a thread of a checkpointer: ``("langgraph", saver, thread_id)``, the saver numbered by
  identity (two graphs with their own checkpointers that both use the tutorial
  ``thread_id "1"`` are two conversations, QA qa-fw7 S1); the turns of one conversation
  (invocations on one thread of one checkpointer) share their reads;
- otherwise (no ``thread_id``, or no checkpointer: LangGraph keeps no conversation) the
  root invocation is its own scope, ``("langgraph", "run", n)``, as the Agents SDK
  integration scopes each ``Runner.run``. The root is told by the run's
  ``Runtime.control`` (one per root invocation, shared by its subgraphs).

Reads of one thread may back a call only along the call's own checkpoint line (review of
#28): each use of a thread scope (a read, a protected call) is tagged with the root
checkpoint its step runs from (``checkpoint_map[""]``); :func:`check_graph_scope` lets a
protected call run only when every use of its thread since the last verified call lies
on the call's line: the call's checkpoint or an ancestor (walked through the saver's
``get_tuple(...).parent_config``) left by running a step, not by a new input or a fork.
Two invocations at once on one thread (or a fork of an old checkpoint) that used the
thread off each other's line are refused; a walk past its bound, a saver that cannot
answer, or a thread whose use history overflowed off one line refuses too
(fail closed). A use another invocation made at a checkpoint of the line that has two
next checkpoints (two invocations ran the step from it: concurrent
``Command(resume=...)``, a replay) refuses too: its results may not be this line's.

Parallel branches of one step share its checkpoint: :mod:`._branches` keeps their reads
apart (the read stamps), using :func:`ran_step` (which invocations used a checkpoint) and
:func:`is_ancestor` (a graph's saved line inside a task).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config

from icore.errors import IntegrationError
from icore.integrations.langgraph._save_wait import Unsaved, await_saved
from icore.integrations.langgraph._save_wait import link as _link

_numbers: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_count = itertools.count(1)
_ticks = itertools.count(1)
_lock = threading.Lock()
_roots: OrderedDict[int, tuple[Any, int]] = OrderedDict()
"""id(control) -> (control, number) of the latest root invocations (held: ids not reused)."""
_ROOTS_KEPT = 4096
_threads: weakref.WeakKeyDictionary[Any, dict[Hashable, _Thread]] = \
    weakref.WeakKeyDictionary()
"""Per checkpointer (held weakly: a thread's history lives as long as its saver),
per thread_id: the uses of the thread not yet verified by a protected call."""
_ran: OrderedDict[tuple[tuple[Any, ...], str], set[int | None]] = OrderedDict()
"""(thread scope, root checkpoint) -> the root invocations that used the thread in a
step run from it (the newest :data:`_RAN_KEPT`; an evicted one: its reads count as
before, placed by the line check)."""
_RAN_KEPT = 16384
_USES_KEPT = 1024
"""Distinct checkpoints with a use kept per thread between verified calls; past it they
are verified against the newest use's line and collapsed, or (off that line) the
thread's history is lost and its protected calls are refused."""
_WALK = 4096
"""Checkpoints walked up a call's line at most (past it: refused)."""
_BRANCH_WAIT_S = 2.0
"""How long :func:`is_ancestor` and :func:`saved_by` wait for a checkpoint to be saved
(seconds; placing a branch's read, not refusing a call: a protected call's own
checkpoint is waited for up to :data:`~._save_wait.SAVE_WAIT_S`)."""
_LINE = frozenset({"loop"})
"""Sources of a checkpoint that carries its parent's step results (not ``input``, ``fork``,
``update``: those start from the parent's state, its running step's reads unseen)."""


class _Thread:
    """The unverified uses of one thread: checkpoint id -> tick of its latest use."""

    __slots__ = ("base", "lost", "uses")

    def __init__(self) -> None:
        self.base: str | None = None  # the checkpoint of the last verified call
        self.uses: dict[str, int] = {}
        self.lost = False


def _number(obj: Any) -> int | None:
    """A number for ``obj`` while it lives (identity, never reused); None if not weak."""
    try:
        with _lock:
            n = _numbers.get(obj)
            if n is None:
                n = _numbers[obj] = next(_count)
    except TypeError:
        return None
    return n


def _conf() -> Mapping[str, Any] | None:
    try:
        config = get_config()
    except RuntimeError:  # not in a runnable context
        return None
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    return conf if isinstance(conf, Mapping) else None


def _root(conf: Mapping[str, Any]) -> int | None:
    """The number of the root invocation this code runs in; None outside a graph.

    ``RunControl`` takes no weak reference: the latest ones are held (so an id is never
    reused while its number is known); one evicted after 4096 newer invocations and
    still running gets a new number (its later reads then back none of its earlier ones:
    fail closed).
    """
    control = getattr(conf.get("__pregel_runtime"), "control", None)
    if control is None:
        return None
    with _lock:
        got = _roots.get(id(control))
        if got is not None and got[0] is control:
            _roots.move_to_end(id(control))
            return got[1]
        n = next(_count)
        _roots[id(control)] = (control, n)
        while len(_roots) > _ROOTS_KEPT:
            _roots.popitem(last=False)
    return n


def root_of(conf: Mapping[str, Any]) -> int | None:
    """The number of the root invocation a task's ``configurable`` runs in (None: none)."""
    return _root(conf)


def thread_of(conf: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The thread scope ``("langgraph", saver number, thread_id)`` of ``conf``.

    None without a thread_id or a checkpointer.
    """
    thread, saver = conf.get("thread_id"), conf.get("__pregel_checkpointer")
    if thread is None or saver is None:
        return None
    n = _number(saver)
    return ("langgraph", n if n is not None else id(saver),
            thread if isinstance(thread, str | int) else str(thread))


def ran_step(thread: tuple[Any, ...], ckpt: str, root: int | None) -> bool:
    """Whether root invocation ``root`` used ``thread`` in a step run from ``ckpt``."""
    with _lock:
        got = _ran.get((thread, ckpt))
        return got is not None and root in got


def _where() -> tuple[tuple[Any, ...] | None, int | None, Mapping[str, Any] | None]:
    """(scope, root, configurable) of the code running now (all None outside any run)."""
    conf = _conf()
    if conf is None:
        return None, None, None
    root = _root(conf)
    scope = thread_of(conf)
    if scope is not None:
        return scope, root, conf
    thread = conf.get("thread_id")
    if thread is not None and root is None:  # a tool invoked with a config, no graph
        return ("langgraph", "thread",
                thread if isinstance(thread, str | int) else str(thread)), None, conf
    if root is None:
        return None, None, None
    return ("langgraph", "run", root), root, conf


def _checkpoint(conf: Mapping[str, Any]) -> str | None:
    """The root-namespace checkpoint the running step belongs to (None: not known)."""
    cmap = conf.get("checkpoint_map")
    got = cmap.get("") if isinstance(cmap, Mapping) else None
    if got is None and not conf.get("checkpoint_ns"):
        got = conf.get("checkpoint_id")
    return got if isinstance(got, str) else None


def _thread(conf: Mapping[str, Any], tid: Hashable) -> _Thread | None:
    """The use history of ``tid`` of the run's checkpointer; call with the lock held.

    None: the saver is not weakly referable, so no history can be kept.
    """
    try:
        per = _threads.get(conf["__pregel_checkpointer"])
        if per is None:
            per = _threads[conf["__pregel_checkpointer"]] = {}
    except TypeError:
        return None
    th = per.get(tid)
    if th is None:
        th = per[tid] = _Thread()
    return th


def _use(scope: tuple[Any, ...], conf: Mapping[str, Any]) -> None:
    """Note a use of the thread ``scope`` at the running step's checkpoint.

    Past :data:`_USES_KEPT` unverified checkpoints the history is verified against
    this use's line (as a protected call would) and collapsed; if that fails, the
    thread's history is lost (its protected calls refused: forgetting could fail open).
    """
    ckpt = _checkpoint(conf)
    tick = next(_ticks)
    root = _root(conf)
    with _lock:
        if ckpt is not None:  # which invocations ran a step from ckpt (see ran_step)
            ran = _ran.get((scope, ckpt))
            if ran is None:
                ran = _ran[(scope, ckpt)] = set()
                while len(_ran) > _RAN_KEPT:
                    _ran.popitem(last=False)
            ran.add(root)
        th = _thread(conf, scope[2])
        if th is None:
            return
        if ckpt is None:  # a use nowhere on any line: no call may rely on it
            th.lost = True
            return
        th.uses[ckpt] = tick
        full = len(th.uses) > _USES_KEPT
    if full and _verify(conf, scope[2], th, ckpt) is not None:
        with _lock:
            th.lost, th.uses = True, {}


def _verify(conf: Mapping[str, Any], tid: Hashable, th: _Thread, at: str
            ) -> str | Unsaved | None:
    """Check every unverified use of ``th`` lies on ``at``'s line (then ``at`` is the base).

    None when they do, else the reason why not.
    """
    with _lock:
        base, uses, lost = th.base, dict(th.uses), th.lost
    if lost:
        return "the thread's use history was lost"
    saver, want = conf["__pregel_checkpointer"], set(uses) | ({base} if base else set())
    why = _on_line(saver, tid, at, want, conf.get("__pregel_durability"), conf)
    if why is not None:
        return why
    scope, root = thread_of(conf), _root(conf)
    with _lock:  # uses another invocation made in a step it ran from an earlier checkpoint
        others = [] if scope is None else [
            c for c in set(uses) - {at} if _ran.get((scope, c), {root}) - {root}]
    for c in others:  # ... whose results this line carries only if no one else ran it
        n = _children(saver, tid, c)
        if n is None or n > 1:
            return (f"checkpoint {c} has {n or 'an unknown number of'} next checkpoints: "
                    "two invocations ran the step from it (concurrent Command(resume=...) "
                    "of one thread, or a replay), so another invocation's use there may "
                    "not be this line's")
    with _lock:  # verified: the line up to ``at`` holds every use seen so far
        if th.base == base and not th.lost:
            th.base = at
            for c, t in uses.items():
                if th.uses.get(c) == t:
                    del th.uses[c]
    return None


def graph_scope() -> Hashable | None:
    """The scope of the graph run this code runs in (see the module doc); None outside.

    Each time it names a thread scope it notes the use at the running step's
    checkpoint (for :func:`check_graph_scope`).
    """
    scope, root, conf = _where()
    if scope is not None and root is not None and conf is not None and scope[1] != "run":
        _use(scope, conf)
    return scope


def _refuse(tool: str, scope: tuple[Any, ...], why: str) -> IntegrationError:
    return IntegrationError(
        "reads of this thread_id cannot all be placed on this call's checkpoint line "
        f"({why}): a read another invocation made may back a plan this run's model never "
        "saw, so this protected call is refused (fail closed)", framework="langgraph",
        tool=tool, thread_id=str(scope[2]),
        fix="give each concurrent conversation its own thread_id, or run the turns "
            "(and the resumes) of one thread one after another")


def _on_line(saver: Any, tid: Hashable, at: str, want: set[str],
             durability: Any = None, conf: Mapping[str, Any] | None = None
             ) -> str | Unsaved | None:
    """Walk up from checkpoint ``at`` of thread ``tid``: None when all of ``want`` lie on it.

    Each id of ``want`` must be ``at`` or an ancestor whose child on the line carries
    its step's results; else the reason why not (:class:`~._save_wait.Unsaved` when
    ``at`` itself is not saved).
    """
    want = want - {at}
    for step in range(_WALK):
        if not want:
            return None
        try:
            # durability "async" (the default) saves a step's checkpoint in the
            # background while its tasks run: wait for that save (bounded, generous);
            # earlier ones are saved in order before it
            got: Any = _link(saver, tid, at) if step or durability == "exit" else \
                await_saved(saver, tid, at, conf=conf)
        except Exception as exc:  # an async-only saver, a closed database
            return f"the checkpointer cannot answer: {type(exc).__name__}"
        if isinstance(got, Unsaved):
            return got
        if got is None and step == 0:
            return Unsaved(0.0)  # durability="exit": no step checkpoint is saved
        if got is None or got[0] is None:
            return "a use lies off this call's checkpoint line"
        at = got[0]
        if at in want:
            if got[1] not in _LINE:
                return "a use lies on a checkpoint this line forked from"
            want.discard(at)
    return f"the line is longer than {_WALK} checkpoints"


def _children(saver: Any, tid: Hashable, at: str) -> int | None:
    """How many saved root checkpoints of ``tid`` have ``at`` as parent (None: unknown).

    Checkpoint ids sort by time, so only those newer than ``at`` are read, newest first,
    at most :data:`_WALK`: ``InMemorySaver`` from its index (no values loaded), another
    saver through ``list``.
    """
    try:
        n = 0
        if type(saver) is InMemorySaver:
            per: Any = saver.storage.get(tid)  # type: ignore[call-overload]
            saved = (per or {}).get("", {})
            for i, cid in enumerate(sorted(saved, reverse=True)):
                if i >= _WALK or cid <= at:
                    return n if cid <= at else None
                n += saved[cid][2] == at
            return n
        for i, t in enumerate(saver.list({"configurable": {"thread_id": tid,
                                                           "checkpoint_ns": ""}})):
            cid = t.config["configurable"]["checkpoint_id"]
            if i >= _WALK or cid <= at:
                return n if cid <= at else None
            parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            n += parent == at
        return n
    except Exception:  # an async-only saver, a closed database
        return None


def is_ancestor(saver: Any, tid: Hashable, ns: str, older: str, newer: str) -> bool:
    """Whether checkpoint ``older`` lies up the line of ``newer`` in graph namespace ``ns``.

    At most :data:`_WALK` checkpoints are walked; ``newer`` not saved within
    :data:`_BRANCH_WAIT_S` (it is saved in the background while its step runs), a saver
    that raises or a longer line
    answer False (the caller then does not count the use).
    """
    at: str | None = newer
    for step in range(_WALK):
        try:
            got: Any = await_saved(saver, tid, newer, ns, limit_s=_BRANCH_WAIT_S) \
                if step == 0 else _link(saver, tid, at, ns) if at is not None else None
        except Exception:  # an async-only saver, a closed database: not placed
            return False
        if got is None or isinstance(got, Unsaved) or got[0] is None:
            return False
        at = got[0]
        if at == older:
            return True
    return False


def saved_by(saver: Any, tid: Hashable, older: str, newer: str) -> Any:
    """The ``run_id`` that saved the root checkpoint after ``older`` on ``newer``'s line.

    The metadata ``run_id`` of the checkpoint whose parent is ``older``, walking up from
    ``newer`` (at most :data:`_WALK`; ``newer`` waited for up to
    :data:`_BRANCH_WAIT_S`, as it is saved in the background); None when not
    found, not stamped, or the saver raises.
    """
    at: str | None = newer
    for step in range(_WALK):
        try:
            got: Any = await_saved(saver, tid, newer, limit_s=_BRANCH_WAIT_S) \
                if step == 0 else _link(saver, tid, at) if at is not None else None
        except Exception:  # an async-only saver, a closed database: not known
            return None
        if got is None or isinstance(got, Unsaved) or got[0] is None:
            return None
        if got[0] == older:
            return got[2]
        at = got[0]
    return None


def check_graph_scope(tool: str, args: Any = None) -> None:
    """Refuse a protected call a use off its own checkpoint line could back.

    Every use of the call's thread (reads and protected calls of any invocation on
    that ``thread_id`` of that checkpointer) since the last call verified here must be
    at the call's checkpoint or an ancestor on its line; then this call's checkpoint
    becomes the verified base. Outside a thread scope (no checkpointer or no
    thread_id) it does nothing: each root invocation is its own scope.

    ``args``: the call's arguments (their JSON size is named when the checkpoint is
    not saved in time).

    Raises:
        IntegrationError: the call's own checkpoint is not saved (the checkpointer
            failed, did not finish within :data:`~._save_wait.SAVE_WAIT_S` seconds, or
            ``durability="exit"``: fields ``checkpoint_id``, ``waited_s``; its own
            message, not a concurrency one), a use lies off the line (two invocations on
            one thread at once, a fork of an old checkpoint), another invocation's use lies at a
            checkpoint of the line with two next checkpoints (two resumes of it at
            once, a replay), the walk passed :data:`_WALK`
            checkpoints, the checkpointer raised, or the thread's use history was lost
            (more than :data:`_USES_KEPT` checkpoints used between verified calls).
            Names the tool, the thread and the fix.
    """
    scope, root, conf = _where()
    if scope is None or root is None or conf is None or scope[1] == "run":
        return
    at = _checkpoint(conf)
    if at is None:
        raise _refuse(tool, scope, "the step's checkpoint is not known")
    _use(scope, conf)  # this call is a use too
    with _lock:
        th = _thread(conf, scope[2])
    if th is None:
        raise _refuse(tool, scope, "the checkpointer cannot be tracked")
    why = _verify(conf, scope[2], th, at)
    if isinstance(why, Unsaved):  # no concurrency problem: the save did not end in time
        raise why.error(tool, scope[2], at, args, conf.get("__pregel_durability"))
    if why is not None:
        raise _refuse(tool, scope, why)


__all__ = ["check_graph_scope", "graph_scope", "is_ancestor", "ran_step", "root_of",
           "saved_by", "thread_of"]
