"""OpenTelemetry in: OTLP JSON, Phoenix and Langfuse exports into a :class:`Trace`.

Reads, without the ``otel`` extra (plain JSON):

- **OTLP JSON**: one ``ExportTraceServiceRequest`` document (``{"resourceSpans": [...]}``)
  or JSON lines of them — the OpenTelemetry Collector's file exporter format and what
  :class:`icore.adapters.OtlpJsonFileExporter` writes. Ids may be hex (OTLP/JSON) or
  base64 (the generic protobuf JSON mapping); snake_case keys are accepted too.
- **Phoenix** span exports (``phoenix.client.Client().spans.get_spans(...)`` / the REST
  API ``/v1/projects/{id}/spans``): a list (or ``{"data": [...]}``) of spans with
  ``context.span_id``, ``parent_id``, ``span_kind``, ISO times and nested attributes.
- **Langfuse** trace exports: a trace with ``observations`` (or a list of observations)
  with ``type``, ``parentObservationId``, ``input``/``output``, ``level``.
- **Jaeger**: its own JSON (the UI's "Download", ``/api/traces``: ``{"data": [{"traceID",
  "spans": [...]}]}``, tags, references, µs times) and its OTLP API (``/api/v3/traces``:
  ``{"result": {"resourceSpans": [...]}}``).

Mapping into the source-neutral trace (docs/observability.md, "Auditing a trace"):

- agent spans (OpenInference ``AGENT``, GenAI ``invoke_agent``/``create_agent``, Langfuse
  ``AGENT``) -> agents and their turns: a ``thought`` at the start, the output text as
  an ``output`` at the span's end (:mod:`icore.adapters._otel_turns`, QA qa-new15c);
- LLM spans (``LLM``, ``chat``/``text_completion``/``generate_content``, Langfuse
  ``GENERATION``) -> outputs of the enclosing agent, with their tool calls;
- tool spans (``TOOL``, ``execute_tool``, Langfuse ``TOOL``) -> tool outputs, exit code 1
  when the span's status is ERROR, else 0;
- handoffs (a span named ``handoff``/``transfer_to_<agent>``, or with
  ``handoff.to``/``to_agent``) -> instructions assigning the next turn to the target;
  the agent of the first handoff is the orchestrator (a trace without one has none);
- one trace -> one run (:func:`load_otlp_runs` splits a file holding several);
- the root span -> the task (its input) and, once it ended, the termination (its output
  is the final answer); a root span with ``icore.paused: true`` (what
  :meth:`OtelExporter.audit` writes for a run paused at an ``interrupt()``) has no
  termination: its last step is a pause, and the run is reported paused as the JSONL
  path reports a run ending in a ``pause`` thought; any other span with that marker is a
  pause step;
- parent/child -> causes (each step's parent is the nearest ancestor that is a step);
- a span with ``icore.approval.*`` (:meth:`OtelExporter.human_answer`) -> a ``thought``
  and a human's answer in ``Trace.planfence.answers`` (the lineage says "approved by a
  human", as for JSONL);
- every other span kind (chains, retrievers, guardrails, evaluators, ...) -> kept as
  ``thought`` events naming the kind, and counted in ``extras["unknown_spans"]``.

icore's own live-run spans (attribute ``icore.call``) also carry the run's recorded
steps; such a trace has family ``icore_live`` and is re-audited by replaying those
steps through the live run's iCORE audit (:func:`icore.adapters.audit_trace`).

Anything that is not one of these formats raises :class:`AdapterError` naming the field.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from icore.adapters import _otel_names as N
from icore.adapters._errors import AdapterError
from icore.adapters._gate_lines import span_answer
from icore.adapters._line_steps import ColumnSteps
from icore.adapters._otel_columns import SpanColumns, check_parents, columns
from icore.adapters._otel_readers import _LANGFUSE_KIND, _text, parse_spans
from icore.adapters._otel_stream import iter_file_spans
from icore.adapters._otel_turns import AgentTurns, span_calls
from icore.adapters._otel_values import OtelSpan, span_agent
from icore.adapters._span_seals import SpanSeals, gate_decision
from icore.adapters._trace import (
    HumanAnswer,
    LiveRunPart,
    PlanfenceLog,
    Step,
    StepKind,
    Trace,
)
from icore.adapters._trace_values import AgentNames
from icore.adapters._valid_text import step_text_valid
from icore.adapters._values import (
    gc_paused,
    trace_path,
)
from icore.fence import DecisionEntry

OTEL = "otel"
"""Family of a trace imported from generic OpenTelemetry / OpenInference spans."""


ICORE_LIVE = "icore_live"
"""Family of an icore live run exported by :class:`icore.adapters.OtelExporter`."""


_SUFFIXES = (".otlp.json", ".otlp.jsonl", ".otel.json", ".otel.jsonl")

_ANSWERED, _ANSWERED_TOOL = N.APPROVAL + "approved", N.APPROVAL + "tool"  # span_answer


_AGENT_OPS = {"invoke_agent", "create_agent"}


_LLM_OPS = {"chat", "text_completion", "generate_content", "embeddings"}


_TOOL_OPS = {"execute_tool"}


_HANDOFF_NAME = re.compile(r"^(handoff|transfer_to_(?P<to>.+))$", re.IGNORECASE)


def is_otel_path(path: str | Path) -> bool:
    """True for a name the OTLP importer claims (``*.otlp.json``, ``*.otlp.jsonl``, ...)."""
    return str(path).lower().endswith(_SUFFIXES)


def sniff_otel(head: str) -> bool:
    """True when the start of a JSON document looks like OTLP / Phoenix / Langfuse spans."""
    h = head[:8192]
    return any(k in h for k in ('"resourceSpans"', '"resource_spans"', '"scopeSpans"',
                                '"operationName"')) or (
        '"context"' in h and '"span_id"' in h) or '"parentObservationId"' in h or (
        '"observations"' in h and '"traceId"' in h)


# ------------------------------------------------------------------------ classification
_OWN_OPS = {"invoke_workflow": "WORKFLOW", "plan": "PLAN", "apply_guardrail": "GUARDRAIL"}
"""GenAI operations (semantic-conventions-genai v0.1.0) that decide a span's kind before
OpenInference's ``openinference.span.kind`` (which has no workflow or plan kind)."""


def span_kind(s: OtelSpan) -> str:
    """``AGENT``, ``LLM``, ``TOOL``, ``HANDOFF``, ``GUARDRAIL``, ``PLAN``, ``WORKFLOW``, ...

    The 2026 GenAI operations ``invoke_workflow``, ``plan`` and ``apply_guardrail`` come
    first; a span with a string ``icore.gate.outcome`` is icore's gate (``GUARDRAIL``);
    icore's spans before them (``icore.workflow <task>``, ``icore.gate <tool>``) read
    the same.
    """
    a = s.attributes
    if _handoff_target(s) is not None:
        return "HANDOFF"
    own = _OWN_OPS.get(str(a.get(N.OPERATION)))
    if own is not None:
        return own
    if isinstance(a.get(N.G + "outcome"), str):  # an icore gate decision, whatever else
        return "GUARDRAIL"                       # it says (else its stale action vanished)
    if s.name.startswith("icore.workflow "):
        return "WORKFLOW"
    kind = a.get(N.SPAN_KIND)
    if isinstance(kind, str) and kind:
        return kind.upper()
    op = a.get(N.OPERATION)
    if not isinstance(op, str):
        op = None
    if op in _AGENT_OPS:
        return "AGENT"
    if op in _TOOL_OPS:
        return "TOOL"
    if op in _LLM_OPS:
        return "LLM"
    if s.kind.upper() in _LANGFUSE_KIND.values():
        return s.kind.upper()
    return "UNKNOWN"


def _handoff_target(s: OtelSpan) -> str | None:
    a = s.attributes
    for k in ("handoff.to", "to_agent", "gen_ai.handoff.to", "handoff.to_agent"):
        if isinstance(a.get(k), str) and a[k]:
            return str(a[k])
    m = _HANDOFF_NAME.match(s.name.strip())
    if m is not None:
        if m.group("to"):
            return m.group("to")
        to = a.get(N.OI_OUTPUT) or a.get("output.value")
        return str(to) if isinstance(to, str) and to else None
    return None


def _content(s: OtelSpan, *keys: str) -> str:
    for k in keys:
        v = s.attributes.get(k)
        if v is not None and v != "":
            return _text(v)
    return ""


# ---------------------------------------------------------------------------- to a Trace
def spans_to_trace(spans: Sequence[OtelSpan], *, file: str = "<memory>",
                   run_id: str = "run") -> Trace:
    """The source-neutral trace of one file's spans (see the module docstring).

    Raises:
        AdapterError: no spans, duplicate span ids, a span that ends before it starts, a
            cycle of parent links, or a malformed icore gate decision.
    """
    return _to_trace(columns(spans, span_kind, file=file, by_trace=False)[0], file=file,
                     run_id=run_id)


def _to_trace(cols: SpanColumns, *, file: str, run_id: str) -> Trace:
    """:func:`spans_to_trace` of spans held as columns (issue 29).

    Each span is built back as an ``OtelSpan`` at its turn (start order) and its
    attributes are released once it is mapped, so the steps reuse their memory; the
    span-id map is dropped once the parent links are resolved.
    """
    if not len(cols):
        raise AdapterError("no spans", file=file, field="resourceSpans")
    if cols.problem is not None:
        raise cols.problem
    n_spans = n = len(cols)
    ids, parents, kinds, own_of, pos = cols.ids, cols.parents, cols.kinds, cols.own, cols.pos
    check_parents(cols, file)
    up = array("q", [-1]) * n  # the parent's position, if in the file (-1: none)
    for i, p in enumerate(parents):
        if p and (j := pos.get(p)) is not None:
            up[i] = j
            parents[i] = ids[j]  # the equal string shared (one per span)
    # by end, then (stable) by start: the order of (start, end) keys without key tuples
    order = sorted(range(n), key=cols.ends.__getitem__)
    order.sort(key=cols.starts.__getitem__)
    r_at = next(i for i in order if up[i] < 0)  # the root: first with no parent in file
    order_col = array("q", order)
    del order, pos
    cols.pos = {}
    n_traces = cols.trace_count()
    calls = _icore_calls(cols.span(i) for i in cols.callers)
    man = next((cols.attr(i, N.RUN_MANIFEST) for i in cols.callers
                if cols.attr(i, N.CALL) == "run"), None) if calls else None
    names = AgentNames()
    descriptions: dict[str, str] = {}
    agent_of: list[str | None] = [None] * n

    def owner(i: int) -> str:
        """The agent a span belongs to: its own, else the nearest agent ancestor's."""
        seen = 0
        cur = i
        while cur >= 0 and seen < 10_000:
            got = agent_of[cur]
            if got is not None:
                return got
            a = own_of[cur]
            if isinstance(a, AdapterError):
                raise a
            if a is not None:
                return names.canonical(a) or names.add(a)
            cur = up[cur]
            seen += 1
        return "system"

    steps = ColumnSteps(Step, StepKind, step_text_valid, where=file)  # built when read (#29)
    decisions: list[DecisionEntry] = []
    answers: list[HumanAnswer] = []
    sealed = SpanSeals(file)
    step_of: list[int | None] = [None] * n
    unknown: dict[str, int] = {}
    root = cols.span(r_at)
    question = _content(root, N.OI_INPUT, N.INPUT_MESSAGES)
    final = _content(root, N.OI_OUTPUT, N.OUTPUT_MESSAGES) if root.end_ns else ""
    orchestrator: str | None = None  # the first agent that routes (a handoff), else none
    last_who = ""  # the last agent that spoke
    starts: dict[str, str] = {}  # agent -> the text of its turns' starts (one string)

    def parent_step(i: int) -> int | None:
        cur = up[i]
        guard = 0
        while cur >= 0 and guard < 10_000:
            got = step_of[cur]
            if got is not None:
                return got
            cur = up[cur]
            guard += 1
        return None

    def paused(s: OtelSpan) -> bool:
        """The span's :data:`~icore.adapters._otel_names.PAUSED` marker (a bool)."""
        v = s.attributes.get(N.PAUSED)
        if v is not None and not isinstance(v, bool):
            raise AdapterError(f"must be a boolean, not {v!r}", file=file,
                               field=f"span {s.span_id} ({s.name!r}).{N.PAUSED}")
        return v is True

    def add(i: int, kind: StepKind, agent: str, content: str, **kw: Any) -> None:
        nonlocal last_who
        idx = len(steps)
        steps.append(agent, kind, content, cols.names[i],
                     parent_step(i) if kind != StepKind.TASK else None, kw)
        step_of[i] = idx  # a root agent's turn, not the task, parents its children
        last_who = agent if kind != StepKind.TASK else last_who

    def agent_span(i: int) -> int | None:
        """The nearest agent span enclosing span ``i`` (None: none)."""
        cur, guard = up[i], 0
        while cur >= 0 and guard < 10_000:
            if kinds[cur] == "AGENT":
                return cur
            cur, guard = up[cur], guard + 1
        return None

    def above(j: int, i: int) -> bool:
        """Span ``j`` is an ancestor of span ``i``."""
        cur, guard = up[i], 0
        while cur >= 0 and guard < 10_000:
            if cur == j:
                return True
            cur, guard = up[cur], guard + 1
        return False

    def agent_output(i: int, who: str, text: str) -> None:  # at the agent span's end
        nonlocal last_who
        steps.append(who, StepKind.OUTPUT, text, cols.names[i], step_of[i], {})
        last_who = who

    last_agent = max((i for i in range(n) if kinds[i] == "AGENT"),
                     key=cols.ends.__getitem__, default=-1)
    turns = AgentTurns(agent_output, lambda at, js: steps.amend(at, calls=js),
                       last_agent_span=last_agent, final_answer=final)

    add(r_at, StepKind.TASK, "user", question)
    for i in order_col:
        s = root if i == r_at else cols.span(i)
        cols.attrs[i] = None  # released: later spans read only the columns of it
        if turns.waiting:  # the outputs of agent spans that ended before this one
            turns.due(cols.starts[i], i, above)
        if N.CHAIN_END + "writer" in s.attributes:  # its trace's seal (#29)
            sealed.seal(s)
        k = kinds[i]
        if k == "AGENT":
            who = agent_of[i] = owner(i)
            desc = s.attributes.get(N.AGENT_DESCRIPTION)
            if isinstance(desc, str):
                descriptions.setdefault(who, desc)
        if i == r_at and k not in ("AGENT", "LLM", "TOOL", "HANDOFF"):
            continue
        if paused(s):  # a step that stopped waiting for a human (JSONL ``pause``)
            add(i, StepKind.THOUGHT, owner(i), f"paused: {s.name}", pause=True)
            continue
        if _ANSWERED in s.attributes or _ANSWERED_TOOL in s.attributes:  # a human's (#29)
            ans = span_answer(s.attributes, len(steps), file=file,
                              where=f"span {s.span_id} ({s.name!r})")
            if ans is not None:
                answers.append(ans)
                sealed.answer(s, ans)
                said = "approved" if ans.approved else "rejected"
                add(i, StepKind.THOUGHT, owner(i), f"a human {said} {ans.tool}")
                continue
        if k == "WORKFLOW":  # groups agent turns; its name is the run's or the task's
            continue
        if k == "AGENT":  # its turn starts; its output comes at its end (_otel_turns)
            said = starts.get(who) or starts.setdefault(who, f"{who} starts its turn")
            add(i, StepKind.THOUGHT, who, said)
            turns.start(i, cols.ends[i], who, _content(s, N.OI_OUTPUT, N.OUTPUT_MESSAGES))
        elif k == "LLM":
            who, text = owner(i), _content(s, N.OI_OUTPUT, N.OUTPUT_MESSAGES,
                                           "llm.output_messages.0.message.content")
            js = turns.model_turn(len(steps), who, agent_span(i), text,
                                  span_calls(s.attributes))
            add(i, StepKind.OUTPUT, who, text, **({"calls": js} if js else {}))
        elif k == "TOOL":
            who = owner(i)
            add(i, StepKind.TOOL_OUTPUT, who,
                _content(s, N.OI_OUTPUT, N.TOOL_RESULT) or s.status_message,
                exitcode=1 if s.status == "ERROR" else 0)
            turns.tool_ran(who, agent_span(i), s.attributes, s.name)
        elif k == "HANDOFF":  # the routing agent's message is the instruction's text
            to, by = _handoff_target(s) or "", owner(i)
            who = names.canonical(to) or names.add(to)
            add(i, StepKind.INSTRUCTION, by,
                turns.handoff_text(agent_span(i)) or f"handoff to {who}", to=who)
            if orchestrator is None and by != "system":
                orchestrator = by  # evidence of routing: it assigns the work
        elif k == "PLAN":
            own = span_agent(s, file)
            who = (names.canonical(own) or names.add(own)) if own else owner(i)
            add(i, StepKind.PLAN, who, _content(s, N.OI_OUTPUT, N.OUTPUT_MESSAGES,
                                                N.PLAN_OPTION) or s.name)
        elif k == "GUARDRAIL":
            a = s.attributes
            value = a.get(N.GR_RESULT_VALUE, a.get(N.G + "outcome", ""))
            why = a.get(N.GR_RESULT_REASON, a.get(N.G + "reason", ""))
            comp = a.get(N.GR_COMPONENT, "guardrail")
            add(i, StepKind.THOUGHT, owner(i), f"{comp} {value}/{why}: {s.name}".strip())
            j = up[i]
            dec = gate_decision(s, None if j < 0 else (kinds[j], ids[j]), file)
            if dec is not None:
                decisions.append(dec)
                sealed.decision(s, len(decisions) - 1)
        else:
            unknown[k] = unknown.get(k, 0) + 1
            add(i, StepKind.THOUGHT, owner(i), f"{k.lower()} span {s.name!r}")
    turns.flush()
    end_agent = agent_of[r_at] or turns.final_by or orchestrator or last_who or "system"
    root_paused = paused(root)
    if root_paused:  # the run waits for a human: no end, its last step is the pause
        steps.append(end_agent, StepKind.THOUGHT, f"paused, waiting for a human: {root.name}",
                     root.name, 0, {"pause": True})
    elif root.end_ns:
        steps.append(end_agent, StepKind.TERMINATION, root.status_message or "done",
                     root.name, 0, {"final_answer": final or None, "terminates": True})
    agents = {n: descriptions.get(n, "") for n in names.names}
    for who in steps.speakers():
        if who not in agents and who != "user":
            agents[who] = ""
    warnings = tuple(f"{file}: kept {n} {_kind_shown(k)} span(s) as events (no mapping)"
                     for k, n in sorted(unknown.items())) + names.merge_notes(file)
    family = OTEL
    live = None
    if calls:
        family = ICORE_LIVE
        live = LiveRunPart(tuple(calls), man if isinstance(man, str) else None)
        warnings = ()
    edited, edited_answers, broken, chain_said = sealed.problems()
    warnings += chain_said
    succeeded = None
    if root.status in ("OK", "ERROR") and root.end_ns and not root_paused:
        succeeded = root.status == "OK"
    return Trace(id=run_id, file=file, family=family, question=question, ground_truth=None,
                 succeeded=succeeded, agents=agents, steps=steps,
                 span_counts=(n_spans, n_traces),
                 orchestrator=orchestrator or None,
                 planfence=PlanfenceLog((), tuple(decisions), answers=tuple(answers),
                                        edited_decisions=edited,
                                        edited_answers=edited_answers, chain_broken=broken)
                 if decisions else None,
                 unknown_spans=dict(sorted(unknown.items())), warnings=warnings, live=live)


def _icore_calls(spans: Iterable[OtelSpan]) -> list[dict[str, Any]]:
    """Icore live-run steps carried by the spans (``icore.call``), in recorded order."""
    out = []
    for s in spans:
        a = s.attributes
        call = a.get(N.CALL)
        if not isinstance(call, str) or call == "run" or not isinstance(a.get(N.SEQ), int):
            continue
        out.append({"seq": a[N.SEQ], "call": call, "span": s.span_id,
                    "attributes": {k: v for k, v in a.items() if k.startswith(("icore.",
                                                                            "gen_ai."))}})
    out.sort(key=lambda c: int(c["seq"]))
    return out


def _run_name(path: str | Path) -> str:
    p = Path(path)
    name = p.name
    for suf in (*_SUFFIXES, ".jsonl", ".json"):
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
            break
    return name or p.stem


def _kind_shown(kind: str) -> str:
    """A span kind as a warning names it: lower case, at most 60 characters.

    A kind is input text: a 100 KB one must not make the warning 100 KB.
    """
    k = kind.lower()
    return k if len(k) <= 60 else f"{k[:40]}... ({len(k)} characters)"


def load_otlp(path: str | Path) -> Trace:
    """Import a one-run OTLP JSON / Phoenix / Langfuse / Jaeger export (module docstring).

    The file is streamed (:func:`iter_file_spans`).

    Raises:
        AdapterError: unreadable or not a regular file (field ``<root>``), over the input
            size limit, malformed JSON, not one of the formats (the error names the field),
            a cycle of parent links, or several traces in the file (field ``traceId``;
            use :func:`load_otlp_runs`).
    """
    file = str(trace_path(path))  # None, bytes, a NUL: typed, field path
    with gc_paused():
        groups = columns(iter_file_spans(path), span_kind, file=file, by_trace=True)
    if len(groups) > 1:
        raise AdapterError(f"holds {len(groups)} traces (runs); read them with "
                           "load_otlp_runs (icore audit audits each)", file=file,
                           field="traceId")
    return next(_runs(groups, file=file, run_id=_run_name(path)))


def load_otlp_runs(path: str | Path) -> list[Trace]:
    """Import every run of an export: one :class:`Trace` per trace id, in start order.

    A Collector's file exporter appends every trace it receives, and ``icore run
    --matched`` exports one trace per policy; each trace is one run. Run ids are the file
    stem, suffixed (``-<policy>`` for icore runs, else ``-<trace id prefix>``) when the
    file holds several. The file is streamed (:func:`iter_file_spans`); the runs are
    those of :func:`iter_otlp_runs`, all built before this returns.

    A trace whose parent links form a cycle (a self-parent, a 2-cycle, ...) refuses the
    whole file: its other traces are not audited either (the error names the trace and
    the spans), so a damaged export is never mistaken for a complete one.

    Raises:
        AdapterError: as :func:`load_otlp` (but several traces are fine).
    """
    return list(iter_otlp_runs(path))


def iter_otlp_runs(path: str | Path) -> Iterator[Trace]:
    """The runs of :func:`load_otlp_runs`, each built only when the previous one is taken.

    The whole file is read (streamed, :func:`iter_file_spans`) into per-trace columns
    before this returns: a trace's spans may be anywhere in the file. Then each trace is
    mapped to its :class:`Trace` when the iterator reaches it and its columns are
    released, so a caller that audits and drops each run before taking the next holds one
    run's trace (and its audit) at a time, not every run's (issue 29). Same runs, ids and
    order as :func:`load_otlp_runs`.

    A trace refused by the mapping (a cycle of parent links, a duplicate span id, a
    malformed gate decision, ...) raises when the iterator reaches it: the runs before it
    (in start order) have been yielded already and those after it are not built.
    :func:`load_otlp_runs` (``list`` of this) refuses the whole file instead; so does
    ``icore audit``.

    Returns:
        An iterator of :class:`Trace`, one per trace id, in the order of their first start.

    Raises:
        AdapterError: from this call, as :func:`load_otlp` for the file (unreadable, over
            the size limit, malformed JSON, in none of the formats); while iterating, the
            mapping's errors of the trace reached.
    """
    file = str(trace_path(path))  # None, bytes, a NUL: typed, field path
    with gc_paused():
        groups = columns(iter_file_spans(path), span_kind, file=file, by_trace=True)
    return _runs(groups, file=file, run_id=_run_name(path))


def parse_otlp_runs(text: str, *, file: str = "<memory>", run_id: str = "run") -> list[Trace]:
    """Parse every run (trace) of a string (see :func:`load_otlp_runs`)."""
    return list(_runs(columns(parse_spans(text, file=file), span_kind, file=file,
                              by_trace=True), file=file, run_id=run_id))


def _runs(groups: list[SpanColumns], *, file: str, run_id: str) -> Iterator[Trace]:
    """One trace per group, built when taken; each group is taken out of ``groups``.

    A group's columns are released once its trace is built (before it is yielded); the
    cyclic collector is paused while each is built (:func:`gc_paused`), not between.
    """
    if len(groups) <= 1:
        g = groups.pop() if groups else SpanColumns(file)
        with gc_paused():
            one = _to_trace(g, file=file, run_id=run_id)
        del g
        yield one
        return
    used: set[str] = set()
    groups.reverse()
    while groups:
        g = groups.pop()
        policy = next((g.attr(i, N.RUN_POLICY) for i in g.callers
                       if g.attr(i, N.CALL) == "run"), None)
        tid = g.trace_id
        rid = f"{run_id}-{policy}" if isinstance(policy, str) else f"{run_id}-{tid[:8]}"
        if rid in used:  # the whole trace id (64-bit Jaeger ids share their first digits)
            rid = f"{rid}-{tid}"
        while rid in used:  # only an id a run policy already took: number it
            rid = f"{rid}-{len(used)}"
        used.add(rid)
        with gc_paused():
            tr = _to_trace(g, file=file, run_id=rid)
        del g
        yield tr
        del tr


def parse_otlp(text: str, *, file: str = "<memory>", run_id: str = "run") -> Trace:
    """Parse a one-run export from a string into a :class:`Trace` (see :func:`load_otlp`).

    Raises:
        AdapterError: as :func:`load_otlp`.
    """
    groups = columns(parse_spans(text, file=file), span_kind, file=file, by_trace=True)
    if len(groups) > 1:
        raise AdapterError(f"holds {len(groups)} traces (runs); read them with "
                           "load_otlp_runs (icore audit audits each)", file=file,
                           field="traceId")
    return next(_runs(groups, file=file, run_id=run_id))


__all__ = [
    "ICORE_LIVE",
    "OTEL",
    "OtelSpan",
    "is_otel_path",
    "iter_file_spans",
    "iter_otlp_runs",
    "load_otlp",
    "load_otlp_runs",
    "parse_otlp",
    "parse_otlp_runs",
    "parse_spans",
    "sniff_otel",
    "span_kind",
    "spans_to_trace",
]
