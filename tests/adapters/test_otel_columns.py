"""The OTLP import holds a trace's spans as columns and releases them (issue 29 item 4).

:mod:`icore.adapters._otel_columns` keeps the spans of a big trace as lists and arrays
until the document ends, and the mapping builds each span back at its turn. These tests
hold the streamed import (a file, read by ijson and the C scanner) to the whole-document
import and to :func:`spans_to_trace` of the parsed spans, check the step order and
parents against a plain recomputation from the spans, and check that nothing of the
import is alive once it returns. :func:`iter_otlp_runs` gives the same runs one at a
time: each is built when taken and its columns are then released.
"""

from __future__ import annotations

import copy
import gc
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import (
    AdapterError,
    OtelSpan,
    StepKind,
    Trace,
    audit_trace,
    iter_otlp_runs,
    load_otlp,
    load_otlp_runs,
    parse_otlp_runs,
    parse_spans,
    spans_to_trace,
)
from icore.adapters._otel_columns import SpanColumns, columns
from icore.adapters._otel_import import span_kind

_KINDS = ["AGENT", "LLM", "TOOL", "CHAIN", "RETRIEVER", "HANDOFF", "WORKFLOW", "PLAN"]


def _kv(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else
             {"stringValue": str(v)}} for k, v in attrs.items()]


def _span(rnd: random.Random, tid: str, i: int, parent: int | None) -> dict[str, Any]:
    kind = rnd.choice(_KINDS)
    attrs: dict[str, Any] = {"openinference.span.kind": kind,
                             "output.value": f"out {i} " + "z" * rnd.randrange(0, 90),
                             "llm.model_name": "m", "dropped.key": rnd.randrange(9)}
    if kind == "HANDOFF":
        attrs = {"handoff.to": f"agent-{rnd.randrange(4)}"}
    if kind == "WORKFLOW":
        attrs = {"gen_ai.operation.name": "invoke_workflow"}
    if rnd.random() < 0.6:
        attrs["gen_ai.agent.name"] = f"agent-{rnd.randrange(4)}"
    if rnd.random() < 0.1:
        attrs["input.value"] = f"in {i}"
    start = 1_700_000_000_000_000_000 + rnd.randrange(0, 40) * 1000  # ties on purpose
    sp: dict[str, Any] = {"traceId": tid, "spanId": f"{i:016x}", "name": f"{kind.lower()} {i}",
                          "kind": 1, "startTimeUnixNano": str(start),
                          "endTimeUnixNano": str(start + rnd.randrange(0, 3) * 500),
                          "attributes": _kv(attrs),
                          "status": {"code": rnd.choice([0, 1, 2])}}
    if parent is not None:
        sp["parentSpanId"] = f"{parent:016x}"
    return sp


def _doc(seed: int, n: int, traces: int) -> dict[str, Any]:
    """Spans of ``traces`` traces in a random file order; parents before or after their
    children, some outside the file."""
    rnd = random.Random(seed)
    spans = []
    for t in range(traces):
        tid = f"{rnd.getrandbits(128):032x}"
        base = 1 + t * 1000
        for i in range(n):
            parent = None
            if i and rnd.random() < 0.9:
                parent = base + rnd.randrange(i)  # a tree: no cycles
            elif i and rnd.random() < 0.5:
                parent = 900_000 + i  # not in the file: another root
            spans.append(_span(rnd, tid, base + i, parent))
    rnd.shuffle(spans)
    return {"resourceSpans": [{"resource": {"attributes": _kv({"service.name": "t"})},
                               "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]}


def _write(tmp_path: Path, doc: dict[str, Any], name: str) -> tuple[Path, str]:
    # one span a line: a document of many lines, read by the streaming parser
    text = json.dumps(doc, indent=1)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path, text


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 60), traces=st.integers(1, 3))
def test_streamed_import_equals_the_whole_document_and_the_span_list(
        tmp_path_factory: pytest.TempPathFactory, seed: int, n: int, traces: int) -> None:
    path, text = _write(tmp_path_factory.mktemp("cols"), _doc(seed, n, traces),
                        "run.otlp.json")
    streamed = load_otlp_runs(path)
    whole = parse_otlp_runs(text, file=str(path), run_id="run")
    assert streamed == whole
    assert len(streamed) == traces
    spans = parse_spans(text, file=str(path))
    before = copy.deepcopy(spans)
    for tr in streamed:
        own = [s for s in spans if tr.id == "run" or tr.id == f"run-{s.trace_id[:8]}"]
        listed = spans_to_trace(own, file=str(path), run_id=tr.id)
        assert listed == tr
        _check_order_and_parents(own, tr)
    assert spans == before  # spans_to_trace changes none of the caller's spans


def _check_order_and_parents(spans: list[OtelSpan], tr: Any) -> None:
    """Steps follow the spans' (start, end) order; a step's parent is its nearest
    ancestor span that is a step (recomputed here from the spans, with dicts). An agent
    span's own output comes later, when it ended, caused by its turn's start."""
    by_id = {s.span_id: s for s in spans}
    order = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    root = next(s for s in order if s.parent_id not in by_id)
    mapped = [s for s in order if span_kind(s) != "WORKFLOW" and not (
        s is root and span_kind(s) not in ("AGENT", "LLM", "TOOL", "HANDOFF"))]
    agents = {s.name: s for s in spans if span_kind(s) == "AGENT"}
    late = [st for st in tr.steps if st.kind == StepKind.OUTPUT and st.role in agents]
    body = [st for st in tr.steps[1:] if not st.terminates and st not in late]
    assert [st.role for st in body] == [s.name for s in mapped]
    step_of = {id(root): 0}  # the task, until the root's own turn (if it has one)
    for s, step in zip(mapped, body, strict=True):
        cur = by_id.get(s.parent_id)
        want = None
        while cur is not None:
            if id(cur) in step_of:
                want = step_of[id(cur)]
                break
            cur = by_id.get(cur.parent_id)
        assert step.parent == want, (step.index, s.name)
        step_of[id(s)] = step.index
    for out in late:  # after its start (its parent), saying the span's output
        assert out.parent is not None and out.parent < out.index
        assert tr.steps[out.parent].role == out.role
        assert out.content == agents[out.role].attributes["output.value"]


def test_nothing_of_the_import_is_alive_after_it(tmp_path: Path) -> None:
    path, _ = _write(tmp_path, _doc(7, 300, 2), "two.otlp.json")
    traces = load_otlp_runs(path)
    gc.collect()
    alive = [o for o in gc.get_objects() if isinstance(o, OtelSpan | SpanColumns)]
    assert alive == []
    assert sum(len(t.steps) for t in traces) > 300


def test_times_out_of_int64_are_kept_by_hand_made_spans() -> None:
    big = 2**70  # no file gives it (the readers refuse it); a hand-made span may
    spans = [OtelSpan("t", "a", "", "root", "", 1, big, {"input.value": "q"}),
             OtelSpan("t", "b", "a", "llm", "", big, big + 1,
                      {"openinference.span.kind": "LLM", "output.value": "x"})]
    cols = columns(spans, span_kind, file="<memory>", by_trace=False)[0]
    assert (cols.span(1).start_ns, cols.span(1).end_ns, cols.span(0).end_ns) == (
        big, big + 1, big)
    tr = spans_to_trace(spans)
    assert [s.role for s in tr.steps] == ["root", "llm", "root"]


def test_hand_made_float_times_are_kept_as_given() -> None:
    """``spans_to_trace`` took float times before the columns (review #29): it still
    does, in the same order."""
    spans = [OtelSpan("t", "a", "", "root", "", 1.5, 9.0, {"input.value": "q"}),
             OtelSpan("t", "b", "a", "llm", "", 2.0, 3.5,
                      {"openinference.span.kind": "LLM", "output.value": "x"})]
    tr = spans_to_trace(spans)
    assert [s.role for s in tr.steps] == ["root", "llm", "root"]


def test_rebuilt_spans_keep_what_the_mapping_reads() -> None:
    a = {"openinference.span.kind": "TOOL", "output.value": "o", "other": [1, 2],
         "icore.seq": 3, "gen_ai.agent.name": "x"}
    s = OtelSpan("t", "b", "a", "tool", "1", 5, 6, dict(a), status="ERROR",
                 status_message="bad")
    cols = columns([s], span_kind, file="f", by_trace=True)[0]
    back = cols.span(0)
    assert back.attributes == {k: v for k, v in a.items() if k != "other"}
    assert (back.span_id, back.parent_id, back.name, back.start_ns, back.end_ns,
            back.status, back.status_message, back.kind) == (
        "b", "a", "tool", 5, 6, "ERROR", "bad", "TOOL")
    assert s.attributes == a  # the caller's span is unchanged
    assert cols.attr(0, "icore.seq") == 3 and cols.attr(0, "other") is None


@pytest.mark.parametrize(("spans", "said"), [
    ([("a", "", 1, 2), ("a", "", 3, 4), ("b", "", 5, 4)], "duplicate span id a"),
    ([("a", "", 1, 2), ("b", "a", 5, 4), ("a", "", 3, 4)], "ends before it starts"),
])
def test_the_first_refused_span_is_named(spans: list[tuple[str, str, int, int]],
                                         said: str) -> None:
    made = [OtelSpan("t", i, p, f"n{i}", "", s, e, {}) for i, p, s, e in spans]
    with pytest.raises(AdapterError, match=said):
        spans_to_trace(made)


def test_several_traces_in_one_load_otlp_are_refused(tmp_path: Path) -> None:
    path, _ = _write(tmp_path, _doc(3, 5, 2), "two.otlp.json")
    with pytest.raises(AdapterError, match="holds 2 traces"):
        load_otlp(path)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 30), traces=st.integers(1, 4))
def test_the_iterator_gives_the_runs_of_load_otlp_runs(
        tmp_path_factory: pytest.TempPathFactory, seed: int, n: int, traces: int) -> None:
    path, _ = _write(tmp_path_factory.mktemp("it"), _doc(seed, n, traces), "r.otlp.json")
    streamed = list(iter_otlp_runs(path))
    assert streamed == load_otlp_runs(path)
    assert len(streamed) == traces == len({t.id for t in streamed})


def _alive() -> tuple[int, int]:
    """How many ``SpanColumns`` and ``Trace`` objects (subclasses too) are alive: one
    collection and one pass over the heap, counted by type in C (a worker that ran many
    tests holds millions of objects: an ``isinstance`` per object, per kind, took most
    of this test's time)."""
    gc.collect()
    by_type = Counter(map(type, gc.get_objects()))
    cols = sum(n for t, n in by_type.items() if issubclass(t, SpanColumns))
    traces = sum(n for t, n in by_type.items() if issubclass(t, Trace))
    return cols, traces


def test_each_run_is_built_when_taken_and_its_columns_released(tmp_path: Path) -> None:
    path, _ = _write(tmp_path, _doc(1, 40, 4), "four.otlp.json")
    base_cols, base_traces = _alive()
    runs = iter_otlp_runs(path)  # the file is read now: four traces' columns, no trace
    cols, traces = _alive()
    assert (cols - base_cols, traces - base_traces) == (4, 0)
    ids = []
    for k in range(4):
        t = next(runs)
        # the run taken is the only one alive; the runs after it are still columns
        cols, traces = _alive()
        assert (cols - base_cols, traces - base_traces) == (3 - k, 1)
        audit_trace(t)  # audited and dropped before the next one is built
        ids.append(t.id)
        del t
    assert next(runs, None) is None
    assert _alive() == (base_cols, base_traces)
    assert ids == [t.id for t in load_otlp_runs(path)]


def test_a_bad_trace_raises_when_reached_and_load_refuses_the_file(tmp_path: Path) -> None:
    """Documented: the iterator has yielded the runs before a bad one (in start order);
    ``load_otlp_runs`` (and ``icore audit``) refuse the whole file."""
    rnd = random.Random(0)
    good = _span(rnd, "ab" * 16, 1, None)
    bad = [_span(rnd, "cd" * 16, 5, 6), _span(rnd, "cd" * 16, 6, 5)]
    for sp in bad:  # after the good trace's start
        sp["startTimeUnixNano"] = sp["endTimeUnixNano"] = str(2 * 10**18)
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [*bad, good]}]}]}
    path, _ = _write(tmp_path, doc, "two.otlp.json")
    runs = iter_otlp_runs(path)
    assert next(runs).id == "two-abababab"
    with pytest.raises(AdapterError, match="cycle in trace " + "cd" * 16):
        next(runs)
    with pytest.raises(AdapterError, match="cycle in trace " + "cd" * 16):
        load_otlp_runs(path)


@pytest.mark.parametrize(("text", "said"), [
    ("", "empty file"),
    ('{"resourceSpans": [', "malformed JSON"),
])
def test_a_file_that_cannot_be_read_fails_at_the_call(tmp_path: Path, text: str,
                                                      said: str) -> None:
    p = tmp_path / "x.otlp.json"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(AdapterError, match=said):
        iter_otlp_runs(p)  # not at the first next(): nothing was yielded
    with pytest.raises(AdapterError, match="cannot read: No such file"):
        iter_otlp_runs(tmp_path / "missing.otlp.json")
