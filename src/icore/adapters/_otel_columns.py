"""One trace's spans as columns, for the OpenTelemetry importer's mapping (issue 29).

A big export is one trace of hundreds of thousands of spans, all held until the document
ends (the mapping sorts them by start time and follows parent links anywhere in the
trace). As :class:`~icore.adapters._otel_values.OtelSpan` objects with their attribute
dicts they took about 580 bytes a span besides their texts; as columns (lists of shared
strings, times in ``array`` columns, the attributes the mapping reads as one tuple with a
shared key layout) about 250. A span is built back as an ``OtelSpan`` only at its turn
in the mapping. Part of :mod:`icore.adapters._otel_import` (split for size).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from icore.adapters import _otel_names as N
from icore.adapters._errors import AdapterError
from icore.adapters._otel_values import OtelSpan, span_agent

MAPPED = frozenset({
    N.SPAN_KIND, N.OPERATION, "handoff.to", "to_agent", "handoff.to_agent", N.AGENT_NAME,
    N.OI_AGENT_NAME, N.AGENT_ID, "graph.node.id", N.AGENT_DESCRIPTION, N.OI_INPUT,
    N.INPUT_MESSAGES, N.OI_OUTPUT, N.OUTPUT_MESSAGES, N.TOOL_RESULT, "output.value",
    "llm.output_messages.0.message.content"})
"""Span attributes the mapping reads (besides every ``icore.*``/``gen_ai.*``)."""


NO_EVENTS: list[tuple[str, int, dict[str, Any]]] = []
"""The events of every span built back from columns (never read by the mapping)."""


NO_RESOURCE: Mapping[str, Any] = MappingProxyType({})
"""The resource of every span built back from columns (never read by the mapping)."""


_SHORT = 64
"""Strings up to this length (span kinds, agent names, statuses) are shared by value."""


_BOUND = 65536
"""Most entries of each sharing memo (short strings, key layouts, attribute keys)."""


_OWN = ("AGENT", "TOOL", "LLM")
"""Span kinds whose own agent attribute the mapping reads (:func:`span_agent`)."""


class Memo:
    """What the columns of one file share: short strings, key layouts, kept keys."""

    __slots__ = ("keep", "layouts", "shared", "short")

    def __init__(self) -> None:
        self.short: dict[str, str] = {}
        self.layouts: dict[tuple[str, ...], tuple[str, ...]] = {}  # raw keys -> kept
        self.shared: dict[tuple[str, ...], tuple[str, ...]] = {}  # kept keys, one object
        self.keep: dict[str, bool] = {}

    def text(self, v: str) -> str:
        """``v``, or the equal string seen first when it is short."""
        if len(v) > _SHORT:
            return v
        got = self.short.get(v)
        if got is not None:
            return got
        if len(self.short) < _BOUND:
            self.short[v] = v
        return v

    def kept(self, k: str) -> bool:
        """Whether the mapping reads attribute ``k``."""
        got = self.keep.get(k)
        if got is None:
            got = k in MAPPED or k.startswith(("icore.", "gen_ai."))
            if len(self.keep) < _BOUND:
                self.keep[k] = got
        return got

    def attrs(self, a: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """The attributes the mapping reads as ``(keys, value, ...)``; None when none.

        Short string values are shared (:meth:`text`).
        """
        raw = tuple(a)
        keys = self.layouts.get(raw)
        if keys is None:
            keys = self._layout(raw, tuple(k for k in raw if self.kept(k)))
        if not keys:
            return None
        sh = self.short
        return (keys, *[(x if (x := sh.get(v)) is not None else self.text(v))
                        if type(v) is str and len(v) <= _SHORT else v
                        for v in map(a.__getitem__, keys)])

    def _layout(self, raw: tuple[str, ...], keys: tuple[str, ...]) -> tuple[str, ...]:
        """The kept keys of the key order ``raw``, one object per distinct layout."""
        keys = self.shared.setdefault(keys, keys) if len(self.shared) < _BOUND else keys
        if len(self.layouts) < _BOUND:
            self.layouts[raw] = keys
        return keys


class SpanColumns:
    """The spans of one trace (or of one ``spans_to_trace`` call), one list per field.

    Built with :meth:`add` in the spans' order; ``pos`` maps a span id to its position
    (the first span of a duplicated id), a parent id already seen is stored as the
    parent's own id string. The first problem :func:`spans_to_trace` refuses before
    anything else (a duplicate span id, a span ending before it starts) is kept in
    ``problem`` and raised by the mapping, as the list-based mapping raised it.

    Attributes:
        ids / parents / names / statuses / messages: per span.
        trace_id: the first span's trace id; ``trace_ids`` per span only when they
            differ (``spans_to_trace`` of several traces' spans).
        starts / ends: start and end, ns since the epoch.
        attrs: the attributes the mapping reads (``Memo.attrs``), None once released.
        kinds: the span kind (:func:`~icore.adapters._otel_import.span_kind`; a span
            built back has it as its ``kind``: the mapping reads no other).
        own: the span's own agent name (``AGENT``/``TOOL``/``LLM`` spans; an
            ``AdapterError`` when it is malformed, raised when the mapping reads it).
        callers: positions of the spans with an ``icore.call`` attribute.
        first_start: the earliest start.
    """

    __slots__ = ("attrs", "callers", "ends", "file", "first_start", "ids", "kinds",
                 "messages", "names", "own", "parents", "pos", "problem", "starts",
                 "statuses", "trace_id", "trace_ids")

    def __init__(self, file: str) -> None:
        self.file = file
        self.ids: list[str] = []
        self.parents: list[str] = []
        self.names: list[str] = []
        self.statuses: list[str] = []
        self.messages: list[str] = []
        self.trace_id = ""
        self.trace_ids: list[str] | None = None  # only when the spans' trace ids differ
        self.starts: array[int] | list[int] = array("q")
        self.ends: array[int] | list[int] = array("q")
        self.attrs: list[tuple[Any, ...] | None] = []
        self.kinds: list[str] = []
        self.own: list[str | AdapterError | None] = []
        self.callers: list[int] = []
        self.pos: dict[str, int] = {}
        self.problem: AdapterError | None = None
        self.first_start: int | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, s: OtelSpan, kind: str, memo: Memo) -> None:
        """Append span ``s`` whose kind (``span_kind``) is ``kind``."""
        ids, pos, sh, text = self.ids, self.pos, memo.short, memo.text
        i = len(ids)
        sid, start, end = s.span_id, s.start_ns, s.end_ns
        if self.problem is None:
            self._check(s, sid in pos)
        p = s.parent_id
        if p and (j := pos.get(p)) is not None:
            p = ids[j]  # the equal string shared (one per span)
        pos.setdefault(sid, i)
        ids.append(sid)
        self.parents.append(p)
        v = s.name
        self.names.append(x if (x := sh.get(v)) is not None else text(v))
        v = s.status
        self.statuses.append(x if (x := sh.get(v)) is not None else text(v))
        v = s.status_message
        self.messages.append(x if (x := sh.get(v)) is not None else text(v))
        if s.trace_id != self.trace_id:  # several traces in one mapping: a column
            self._other_trace(s.trace_id, i)
        elif self.trace_ids is not None:
            self.trace_ids.append(self.trace_id)
        try:
            self.starts.append(start)
        except (OverflowError, TypeError):  # out of int64 or no int (a span made by
            self.starts = [*self.starts, start]  # hand): a list column, as the spans'
        try:
            self.ends.append(end)
        except (OverflowError, TypeError):
            self.ends = [*self.ends, end]
        a = s.attributes
        self.attrs.append(memo.attrs(a) if a else None)
        k = x if (x := sh.get(kind)) is not None else text(kind)
        self.kinds.append(k)
        own: str | AdapterError | None = None
        if k in _OWN:
            try:
                own = span_agent(s, self.file)
            except AdapterError as exc:
                own = exc
        self.own.append(own)
        if N.CALL in a:
            self.callers.append(i)
        if self.first_start is None or start < self.first_start:
            self.first_start = start

    def _other_trace(self, tid: str, i: int) -> None:
        """Span ``i`` is of trace ``tid``, not ``trace_id`` (the first span's)."""
        if i == 0:
            self.trace_id = tid
            return
        if self.trace_ids is None:
            self.trace_ids = [self.trace_id] * i
        self.trace_ids.append(tid)

    def trace_of(self, i: int) -> str:
        """The trace id of span ``i``."""
        return self.trace_id if self.trace_ids is None else self.trace_ids[i]

    def trace_count(self) -> int:
        """How many distinct trace ids the spans have."""
        return 1 if self.trace_ids is None else len(set(self.trace_ids))

    def _check(self, s: OtelSpan, duplicate: bool) -> None:
        """Keep the first problem the mapping refuses (a duplicate id, a negative span)."""
        if duplicate:
            self.problem = AdapterError(f"duplicate span id {s.span_id}", file=self.file,
                                        field=f"span {s.name!r}.spanId")
        elif s.end_ns and s.end_ns < s.start_ns:  # 0: not ended (or unknown)
            self.problem = AdapterError(
                f"ends before it starts (end {s.end_ns} < start {s.start_ns} ns)",
                file=self.file, field=f"span {s.span_id} ({s.name!r}).end")

    def span(self, i: int) -> OtelSpan:
        """Span ``i`` built back (the attributes the mapping reads, no events/resource)."""
        a = self.attrs[i]
        return OtelSpan(trace_id=self.trace_of(i), span_id=self.ids[i],
                        parent_id=self.parents[i], name=self.names[i],
                        kind=self.kinds[i], start_ns=self.starts[i],
                        end_ns=self.ends[i],
                        attributes=dict(zip(a[0], a[1:], strict=True)) if a else {},
                        events=NO_EVENTS, status=self.statuses[i],
                        status_message=self.messages[i], resource=NO_RESOURCE)

    def attr(self, i: int, key: str) -> Any:
        """Attribute ``key`` of span ``i`` (None when absent)."""
        a = self.attrs[i]
        if a is None:
            return None
        try:
            return a[a[0].index(key) + 1]
        except ValueError:
            return None


def check_parents(cols: SpanColumns, file: str) -> None:
    """Refuse parent links that form a cycle (a self-parent, a 2-cycle, ...).

    Every span must reach a root (no parent, or a parent outside the file) by following
    parents; a span on a cycle never does.

    Raises:
        AdapterError: naming the trace and the spans of the first cycle found.
    """
    pos, ids, parents, names = cols.pos, cols.ids, cols.parents, cols.names
    done = bytearray(len(ids))
    for start in range(len(ids)):
        path: list[int] = []
        on_path: set[int] = set()
        cur: int | None = start
        while cur is not None and not done[cur]:
            if cur in on_path:
                cyc = path[path.index(cur):]
                shown = ", ".join(f"{ids[x]} ({names[x]!r})" for x in cyc[:8])
                raise AdapterError(
                    f"parent links form a cycle in trace {cols.trace_of(cur)}: "
                    f"{shown}{' ...' if len(cyc) > 8 else ''} (each span is its own "
                    "ancestor; the file is refused)", file=file,
                    field=f"span {ids[cur]}.parentSpanId")
            path.append(cur)
            on_path.add(cur)
            p = parents[cur]
            cur = pos.get(p) if p else None
        for x in path:
            done[x] = 1


def columns(spans: Iterable[OtelSpan], kind_of: Any, *, file: str,
            by_trace: bool) -> list[SpanColumns]:
    """The spans as columns: one :class:`SpanColumns` per trace id, or one for all.

    With ``by_trace``, one per trace id in the order of their earliest start (ties: first
    seen). ``kind_of`` is :func:`~icore.adapters._otel_import.span_kind`. Each span is read
    once and dropped; nothing of the caller's spans is changed.
    """
    memo = Memo()
    by: dict[str, SpanColumns] = {}
    one = SpanColumns(file)
    cols, tid = one, None
    for s in spans:
        if by_trace and s.trace_id != tid:
            tid = s.trace_id
            got = by.get(tid)
            if got is None:
                got = by[tid] = SpanColumns(file)
            cols = got
        cols.add(s, kind_of(s), memo)
    if not by_trace:
        return [one]
    return sorted(by.values(), key=lambda c: c.first_start or 0)
