"""``icore bench integrations``: the cost of the PlanFence seam (issue 28 item 8).

Each :class:`SeamCase` is a pair of calls doing the same work, one through the fence and
one without it (or, for the bare fence, ``Fence.execute`` against ``Fence.aexecute``):
:func:`measure` times both in alternating rounds (so drift on a shared machine hits both
sides alike) and reports the median per-call time of each side over the rounds, their
ratio and the target it is held to. :class:`SeamWorld` is the in-process team every case
gates against: an order owned by a customer, a planner's plan binding ``ship(city=...)``
derived from it, an executor replica and :class:`~icore.memory.LocalOwners` over
in-memory stores (planfence App. A.3; owners reached in process).

The framework cases (LangGraph, OpenAI Agents SDK, AG2) are built by
:func:`icore.integrations.cost.seam_cases` on a :class:`SeamWorld` it is handed
(integrations sit above bench and import none of it); this module holds the harness and
the bare-fence cases. Figures are printed; nothing asserts a time.
"""

from __future__ import annotations

import asyncio
import inspect
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from icore.fence import Fence, ProtectedTool, bind_action
from icore.memory import LocalOwners, MemoryStore, OwnershipMap, Store
from icore.records import Record, RecordId, derive
from icore_lab.bench._checks import check_count

Call = Callable[[], Any] | Callable[[], Awaitable[Any]]
"""One call of a side of a case: a sync function, or an ``async def`` one (awaited)."""

ORDER, PLAN = "req/order-7", "plan/order-7"


class Pair(Protocol):
    """What :func:`measure` times: any object with a :class:`SeamCase`'s fields.

    The framework cases of :mod:`icore.integrations.cost` are their own dataclass.
    """

    @property
    def name(self) -> str:
        """The row's label."""
        ...

    @property
    def base_label(self) -> str:
        """What the base side calls."""
        ...

    @property
    def fenced_label(self) -> str:
        """What the measured side calls."""
        ...

    @property
    def base(self) -> Call:
        """One call of the base side."""
        ...

    @property
    def fenced(self) -> Call:
        """One call of the measured side."""
        ...

    @property
    def target(self) -> float | None:
        """The highest acceptable ratio (None: no target)."""
        ...


@dataclass(frozen=True)
class SeamCase:
    """Two ways of making the same call, timed against each other.

    Attributes:
        name: the row's label (``LangGraph tool.invoke``).
        base_label: what the base side calls (``unfenced``, ``Fence.execute``).
        fenced_label: what the measured side calls.
        base: one call of the base side (sync, or a coroutine function).
        fenced: one call of the measured side.
        target: the highest acceptable ratio fenced / base (None: no target, shown for
            context).
    """

    name: str
    base_label: str
    fenced_label: str
    base: Call
    fenced: Call
    target: float | None = None


@dataclass(frozen=True)
class SeamFigure:
    """One measured case.

    Attributes:
        name / base_label / fenced_label / target: as in :class:`SeamCase`.
        base_us: median over rounds of the mean µs per base call.
        fenced_us: the same for the measured side.
        calls: calls per side (over all rounds).
    """

    name: str
    base_label: str
    fenced_label: str
    base_us: float
    fenced_us: float
    calls: int
    target: float | None

    @property
    def ratio(self) -> float:
        """fenced_us / base_us."""
        return self.fenced_us / self.base_us if self.base_us > 0 else float("inf")

    @property
    def met(self) -> bool | None:
        """Whether the ratio is within the target (None without a target)."""
        return None if self.target is None else self.ratio <= self.target


class SeamWorld:
    """The in-process team the cases gate against (in-memory stores, LocalOwners).

    ``customer`` owns the order ``req/order-7``; ``planner`` owns ``plan/order-7``, derived
    from the order and binding ``ship(city=...)`` (``bind_action``); the executor holds
    replicas of both. :attr:`fence` is the executor's PlanFence over the owners; every
    call with :attr:`args` and :attr:`roots` is authorized.

    Args:
        city: the plan's destination.
    """

    tool_name = "ship"

    def __init__(self, city: str = "Berlin") -> None:
        om = OwnershipMap({ORDER: "customer", PLAN: "planner"})
        self.stores: dict[str, Store] = {a: MemoryStore(om, a)
                                         for a in ("customer", "planner", "executor")}
        order = Record.create(key=ORDER, owner="customer", seq=1, type="order",
                              content={"city": city})
        self.stores["customer"].commit(order, writer="customer")
        self.args: dict[str, Any] = {"city": city}
        plan = derive(key=PLAN, owner="planner", seq=1,
                      content=bind_action(self.tool_name, self.args), inputs=[order])
        self.stores["planner"].install(order)
        self.stores["planner"].commit(plan, writer="planner")
        for rec in (order, plan):
            self.stores["executor"].install(rec)
        self.owners = LocalOwners({"customer": self.stores["customer"],
                                   "planner": self.stores["planner"]})
        self.fence = Fence.for_store(self.stores["executor"], self.owners)
        self.roots: list[RecordId] = [plan.id]
        self.deps = frozenset({ORDER})
        self.shipped = 0

    def ship(self, city: str) -> str:
        """The tool: a cheap side effect (a counter), so the seam's cost shows."""
        self.shipped += 1
        return f"shipped to {city}"


def fence_cases(world: SeamWorld | None = None) -> list[SeamCase]:
    """The bare-fence cases: a plain call vs ``Fence.execute``, ``execute`` vs ``aexecute``.

    ``aexecute`` with in-process owners is held to 1.5x ``execute`` (issue 28).
    """
    w = world or SeamWorld()
    tool = ProtectedTool(w.ship, depends_on=w.deps, name=w.tool_name)
    args, roots = w.args, w.roots

    def plain() -> Any:
        return w.ship(**args)

    def execute() -> Any:
        return _ran(w.fence.execute(tool, roots=roots, args=args))

    async def aexecute() -> Any:
        return _ran(await w.fence.aexecute(tool, roots=roots, args=args))

    return [
        SeamCase("bare fence: Fence.execute", "plain call", "Fence.execute", plain, execute),
        SeamCase("Fence.aexecute (in-process owners)", "Fence.execute", "Fence.aexecute",
                 execute, aexecute, target=1.5),
    ]


def _ran(res: Any) -> Any:
    if not res.executed:  # a benchmark of blocked calls would measure the wrong path
        raise RuntimeError(f"the benchmark's call was blocked: {res.detail}")
    return res.value


async def _atimed(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        await fn()
    return time.perf_counter() - t


def _timed(fn: Call, n: int) -> float:
    """Seconds for ``n`` calls of ``fn`` (an async one inside one event loop run)."""
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(_atimed(fn, n))
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - t


def measure(case: Pair, *, calls: int = 2000, rounds: int = 5,
            advance: Callable[[int], None] | None = None) -> SeamFigure:
    """Time both sides of ``case``: ``calls`` calls each, in ``rounds`` alternating rounds.

    A warm-up of ``min(50, calls)`` calls per side comes first. Each side's figure is
    the median over rounds of its mean µs per call.

    Args:
        case: the pair.
        calls: calls per side (split over the rounds).
        rounds: alternating rounds (base, fenced, fenced, base, ...).
        advance: called with the number of calls just made (a progress bar).

    Raises:
        BadOption: ``calls`` or ``rounds`` is not a positive integer, or ``calls`` is
            below ``rounds``.
        RuntimeError: a fenced call was blocked (the world is not set up to authorize).
    """
    check_count("calls", calls)
    check_count("rounds", rounds)
    check_count("calls", calls, minimum=rounds)
    per = max(1, calls // rounds)
    warm = min(50, calls)
    _timed(case.base, warm)
    _timed(case.fenced, warm)
    base: list[float] = []
    fenced: list[float] = []
    for r in range(rounds):
        order = (case.base, case.fenced) if r % 2 == 0 else (case.fenced, case.base)
        for fn in order:
            s = _timed(fn, per) / per * 1e6
            (base if fn is case.base else fenced).append(s)
            if advance is not None:
                advance(per)
    return SeamFigure(case.name, case.base_label, case.fenced_label,
                      statistics.median(base), statistics.median(fenced), per * rounds,
                      case.target)


def run_seam_bench(cases: Sequence[Pair], *, calls: int = 2000, rounds: int = 5,
                   advance: Callable[[str, int], None] | None = None) -> list[SeamFigure]:
    """:func:`measure` every case in order; ``advance(case name, calls made)`` per step."""
    out = []
    for c in cases:
        step = None if advance is None else (lambda n, c=c: advance(c.name, n))
        out.append(measure(c, calls=calls, rounds=rounds, advance=step))
    return out


__all__ = ["Pair", "SeamCase", "SeamFigure", "SeamWorld", "fence_cases", "measure",
           "run_seam_bench"]
