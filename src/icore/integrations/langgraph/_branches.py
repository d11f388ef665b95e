"""Where in a LangGraph run a read or a call happens: its step and its branch (#28).

Parallel branches of one invocation (``Send`` fan-out, parallel nodes, a ``batch`` of
graphs inside a node) run from one checkpoint, so the checkpoint line alone cannot tell
their reads apart (:mod:`._thread_scope`). LangGraph gives each task of a step its own
task id, and each graph run inside a task its own namespace: a task runs in
``configurable["checkpoint_ns"]`` (``"worker:<task id>"``, nested ``"worker:<id>|agent:
<id>"``, a second run of a graph inside one task ``"worker:<id>|1|..."``) and
``checkpoint_map`` names the checkpoint each enclosing graph's step runs from.

A :class:`Step` is that position, plus the root invocation (``Runtime.control``). It is
the stamp of a read and the turn of a protected call (``Agent.execute(turn=...)``): the
workspace asks :meth:`Step.counts` which reads the call may derive from. A read counts
for a call unless, in some enclosing graph, both ran in the same step but in different
tasks (sibling branches: the call's model never saw the read), or both ran in the same
root step but in different root invocations (two resumes of one checkpoint, or an earlier
interrupted attempt of the step: the call's model saw its own invocation's results).
Reads in the same position as the call (its own model message) never count. Whether
reads of earlier steps lie on the call's checkpoint line is checked by
:func:`~._thread_scope.check_graph_scope`.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from icore.integrations.langgraph._thread_scope import (
    is_ancestor,
    ran_step,
    root_of,
    saved_by,
    thread_of,
)

_SEP, _END = "|", ":"


def _units(ns: str) -> tuple[str, ...]:
    """The task units of a namespace: each task segment with the run counters after it.

    ``"worker:a|1|agent:b"`` -> ``("worker:a|1", "agent:b")``: the graph the second
    unit's task runs in has namespace ``"worker:a|1"`` (its ``checkpoint_map`` key).
    """
    out: list[str] = []
    for part in ns.split(_SEP) if ns else ():
        if out and _END not in part:  # a counter: a further run of a graph in that task
            out[-1] = f"{out[-1]}{_SEP}{part}"
        else:
            out.append(part)
    return tuple(out)


class Step:
    """The position of a read or call in a graph run (hashable; see the module doc).

    Equal (the same model turn) when thread, enclosing steps and task namespace are;
    the root invocation and the checkpointer are carried but not compared, so a resumed
    step is the same turn (the approval ledger and the turn's read snapshot survive
    ``Command(resume=...)``).

    Attributes:
        thread: the run's ``thread_id`` (None without one).
        cmap: ``checkpoint_map`` items, sorted: graph namespace -> checkpoint id.
        units: the task units of ``checkpoint_ns`` (:func:`_units`).
        root: the number of the root invocation (None: not known).
        scope: the thread scope (:func:`~._thread_scope.thread_of`; None: no
            checkpointer or no thread_id).
        run: the invocation's own ``run_id`` (its ``config["metadata"]["run_id"]``, as
            LangGraph Server gives every run; None: not given). Carried, not compared.
    """

    __slots__ = ("_hash", "_saver", "cmap", "root", "run", "scope", "thread", "units")

    def __init__(self, thread: Hashable | None, cmap: tuple[tuple[str, str], ...],
                 ns: str, root: int | None, scope: tuple[Any, ...] | None = None,
                 saver: Any = None, run: Any = None) -> None:
        self.thread = thread
        self.cmap = cmap
        self.units = _units(ns)
        self.root = root
        self.run = run if isinstance(run, str) and run else None
        self.scope = scope
        try:  # held weakly: a stamp never keeps a checkpointer alive
            self._saver: Callable[[], Any] | None = (
                weakref.ref(saver) if saver is not None else None)
        except TypeError:
            self._saver = None
        self._hash = hash(("langgraph", thread, cmap, self.units))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Step) and (self.thread, self.cmap, self.units) == (
            other.thread, other.cmap, other.units)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Step({self.thread!r}, {_SEP.join(self.units) or '<root>'})"

    def counts(self, stamp: Hashable | None) -> bool:
        """Whether a read stamped ``stamp`` may back a call of this turn.

        None (a read outside any graph step) counts; another kind of stamp counts when
        it differs from this turn; a :class:`Step` counts unless it is this turn, a
        sibling task's in some enclosing graph's step, or another root invocation's
        made in a step this call's invocation ran too (a resume of that step), unless
        in a graph step whose checkpoint the call's line in that graph descends from.
        """
        if stamp is None:
            return True
        if not isinstance(stamp, Step):
            return stamp != self
        if stamp == self:
            return False
        return _visible(stamp, self)

    def replans(self, earlier: Hashable | None) -> bool:
        """Whether a call of this turn may replan a call refused in turn ``earlier``.

        Only on the refused call's branch, after it (:meth:`counts`: the refusal handed
        its fresh values to that branch's model alone); a turn of another kind: when it
        differs from this one.
        """
        return self.counts(earlier) if isinstance(earlier, Step) else earlier != self

    def _next_saved_by(self, older: str, newer: str) -> Any:
        """The ``run_id`` that saved the root checkpoint after ``older`` on this line."""
        saver = self._saver() if self._saver is not None else None
        if saver is None or self.thread is None:
            return None
        return saved_by(saver, str(self.thread), older, newer)

    def _ancestor(self, ns: str, older: str, newer: str) -> bool:
        saver = self._saver() if self._saver is not None else None
        if saver is None or self.thread is None:
            return False
        return is_ancestor(saver, str(self.thread), ns, older, newer)


def _visible(read: Step, call: Step) -> bool:
    """Whether ``read`` lies before ``call`` on the call's branch (not a sibling's)."""
    got, want = dict(read.cmap), dict(call.cmap)
    same = read.root == call.root
    i = 0
    while True:
        loop = _SEP.join(call.units[:i])
        a, b = got.get(loop), want.get(loop)
        if a is None or b is None:
            # one of them ran in the enclosing task itself; another invocation re-ran it
            return same
        if a != b:
            if same:  # steps of one invocation: the line check places root steps
                return True
            if i == 0:  # another invocation's earlier root step: counts unless the
                # call's invocation ran that step too (it re-ran it: its own results)
                if call.scope is not None and ran_step(call.scope, a, call.root):
                    return False
                # ... or, the reader's run_id known, another invocation saved the step's
                # result on the call's line (a rival still inside that step)
                return read.run is None or call._next_saved_by(a, b) == read.run
            return call._ancestor(loop, a, b)  # a resumed graph's saved earlier step
        if i >= len(read.units) or i >= len(call.units):
            return same
        if read.units[i] != call.units[i]:
            return False  # sibling tasks of one step: the call's model never saw it
        i += 1


def step_of(config: Any) -> Step | None:
    """The :class:`Step` a task's config names (None: not in a graph step)."""
    if not isinstance(config, Mapping):
        return None
    conf = config.get("configurable") or {}
    cmap = conf.get("checkpoint_map")
    if not isinstance(cmap, Mapping) or not cmap:
        return None
    ns = conf.get("checkpoint_ns")
    md = config.get("metadata")
    return Step(conf.get("thread_id"), tuple(sorted(cmap.items())),
                ns if isinstance(ns, str) else "", root_of(conf), thread_of(conf),
                conf.get("__pregel_checkpointer"),
                md.get("run_id") if isinstance(md, Mapping) else None)


_PUSH = "__pregel_push"
_LABELS: OrderedDict[str, tuple[str, bool]] = OrderedDict()
"""Task namespace (``"worker:<task id>"``, nested ``"...|tools:<id>"``) -> the task's own
label and whether it is a ``Send`` task: the newest :data:`_LABELS_KEPT`."""
_LABELS_KEPT = 4096
_labels_lock = threading.Lock()


def note_task(metadata: Any) -> None:
    """Remember the label of the task a run's metadata names (LangGraph's task metadata).

    ``langgraph_checkpoint_ns`` names the task, ``langgraph_node`` its node and
    ``langgraph_path`` its place: ``("__pregel_push", i, ...)`` for the ``i``-th
    ``Send`` of its step (label ``"worker[i]"``), else the node (``"tools"``).
    """
    if not isinstance(metadata, Mapping):
        return
    ns, node = metadata.get("langgraph_checkpoint_ns"), metadata.get("langgraph_node")
    path = metadata.get("langgraph_path")
    if not (isinstance(ns, str) and ns and isinstance(node, str)):
        return
    index = None
    if isinstance(path, tuple | list) and path and path[0] == _PUSH:
        index = next((p for p in reversed(path) if type(p) is int), None)
    own = (f"{node}[{index}]", True) if index is not None else (node, False)
    with _labels_lock:
        if _LABELS.get(ns) != own:
            _LABELS[ns] = own
            while len(_LABELS) > _LABELS_KEPT:
                _LABELS.popitem(last=False)


def branch_of(ns: Any) -> str | None:
    """The stable name of the parallel branch a task namespace lies in, else None.

    Each enclosing task by its label (:func:`note_task`), joined by ``/``:
    ``"worker[1]"``, ``"worker[0]/tools"``, ``"fan[2]/worker[0]"``; a further run of a
    graph inside one task (a ``batch``) adds ``#<n>`` (``"fan#1/agent"``). None when no
    enclosing task is a ``Send`` task or such a run (not a branch: a plain node, told
    apart by its name). A task never noted (no :class:`RecordingHandler` saw it start)
    is named by its node alone.
    """
    if not isinstance(ns, str) or not ns:
        return None
    parts: list[str] = []
    branched = False
    prefix = ""
    for unit in _units(ns):
        seg, _, counter = unit.partition(_SEP)
        task_ns = f"{prefix}{_SEP}{seg}" if prefix else seg
        with _labels_lock:
            own, push = _LABELS.get(task_ns, (seg.partition(_END)[0], False))
        branched = branched or push or bool(counter)
        parts.append(f"{own}#{counter}" if counter else own)
        prefix = f"{prefix}{_SEP}{unit}" if prefix else unit
    return "/".join(parts) if branched else None


def branch_here(config: Any) -> str | None:
    """The branch (:func:`branch_of`) of the task a run's config belongs to, else None."""
    if not isinstance(config, Mapping):
        return None
    md = config.get("metadata")
    note_task(md)
    conf = config.get("configurable")
    return branch_of(conf.get("checkpoint_ns") if isinstance(conf, Mapping) else None)


class BranchRuns:
    """The parallel branch of each run a callback handler follows (thread-safe).

    A run (a node, a model call, a tool) started in a branch (its task's metadata:
    :func:`note_task`, :func:`branch_of`) is remembered until it ends.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[Hashable, str] = {}

    def started(self, run_id: Hashable, metadata: Any) -> None:
        """Note the branch a run starts in, if it is in one."""
        note_task(metadata)
        md = metadata if isinstance(metadata, Mapping) else {}
        b = branch_of(md.get("langgraph_checkpoint_ns"))
        if b is not None:
            with self._lock:
                self._runs[run_id] = b

    def ended(self, run_id: Hashable) -> str | None:
        """The branch a run that ends ran in (then forgotten), else None."""
        with self._lock:
            return self._runs.pop(run_id, None)


__all__ = ["BranchRuns", "Step", "branch_here", "branch_of", "note_task", "step_of"]
