"""Runs of an OpenTelemetry file one at a time: :func:`iter_otlp_runs` (issue 29 item 4).

The iterator reads the whole file into per-trace columns, then builds each run only when
it is taken and releases its columns, so a caller that audits and drops each run holds one
run at a time. These tests hold it to :func:`load_otlp_runs` (same runs, ids, order),
count what is alive between two runs, and pin where a bad trace's error comes from.
"""

from __future__ import annotations

import gc
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import AdapterError, Trace, audit_trace, iter_otlp_runs, load_otlp_runs
from icore.adapters._otel_columns import SpanColumns

pytestmark = pytest.mark.timeout(120)


def _span(tid: str, i: int, parent: int | None, start: int, kind: str) -> dict[str, Any]:
    attrs = [{"key": "openinference.span.kind", "value": {"stringValue": kind}},
             {"key": "output.value", "value": {"stringValue": f"out {i}"}},
             {"key": "gen_ai.agent.name", "value": {"stringValue": f"agent-{i % 3}"}}]
    sp: dict[str, Any] = {"traceId": tid, "spanId": f"{i:016x}", "name": f"s{i}",
                          "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 5),
                          "attributes": attrs, "status": {"code": 1}}
    if parent is not None:
        sp["parentSpanId"] = f"{parent:016x}"
    return sp


def _doc(seed: int, traces: int, n: int) -> dict[str, Any]:
    """``traces`` trees of ``n`` spans each, their spans shuffled across the file."""
    rnd = random.Random(seed)
    spans = []
    for t in range(traces):
        tid = f"{rnd.getrandbits(128):032x}"
        base = 1 + t * 1000
        for i in range(n):
            parent = base + rnd.randrange(i) if i else None
            spans.append(_span(tid, base + i, parent, 10**18 + rnd.randrange(50) * 10 + i,
                               rnd.choice(["AGENT", "LLM", "TOOL", "CHAIN"])))
    rnd.shuffle(spans)
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]}


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def _alive(kind: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), traces=st.integers(1, 4), n=st.integers(1, 30))
def test_the_iterator_gives_the_runs_of_load_otlp_runs(
        tmp_path_factory: pytest.TempPathFactory, seed: int, traces: int, n: int) -> None:
    path = _write(tmp_path_factory.mktemp("it") / "runs.otlp.json", _doc(seed, traces, n))
    streamed = list(iter_otlp_runs(path))
    assert streamed == load_otlp_runs(path)
    assert len(streamed) == traces
    assert len({t.id for t in streamed}) == traces


def test_each_run_is_built_when_taken_and_its_columns_released(tmp_path: Path) -> None:
    path = _write(tmp_path / "four.otlp.json", _doc(1, 4, 40))
    gc.collect()
    base_traces, base_cols = _alive(Trace), _alive(SpanColumns)
    runs = iter_otlp_runs(path)  # the file is read now: four traces' columns, no trace
    assert (_alive(SpanColumns) - base_cols, _alive(Trace) - base_traces) == (4, 0)
    ids = []
    for k in range(4):
        t = next(runs)
        # the run taken is the only one alive; the runs after it are still columns
        assert (_alive(SpanColumns) - base_cols, _alive(Trace) - base_traces) == (3 - k, 1)
        audit_trace(t)  # audited and dropped before the next one is built
        ids.append(t.id)
        del t
    assert next(runs, None) is None
    assert (_alive(SpanColumns), _alive(Trace)) == (base_cols, base_traces)
    assert ids == [t.id for t in load_otlp_runs(path)]


def test_a_bad_trace_raises_when_reached_and_load_refuses_the_file(tmp_path: Path) -> None:
    """Documented: the iterator has yielded the runs before a bad one (in start order);
    ``load_otlp_runs`` (and ``icore audit``) refuse the whole file."""
    good = _span("ab" * 16, 1, None, 10**18, "AGENT")
    bad = [_span("cd" * 16, 5, 6, 10**18 + 100, "LLM"),
           _span("cd" * 16, 6, 5, 10**18 + 200, "LLM")]
    path = _write(tmp_path / "two.otlp.json",
                  {"resourceSpans": [{"scopeSpans": [{"spans": [*bad, good]}]}]})
    runs = iter_otlp_runs(path)
    first = next(runs)
    assert first.id == "two-abababab" and len(first.steps) == 3
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
