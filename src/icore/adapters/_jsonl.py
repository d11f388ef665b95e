r"""A simple documented JSONL event format, so users can audit their own runs.

One JSON object per line (blank lines and lines starting with ``#`` are skipped)::

    {"run": {"id": "r1", "question": "...", "ground_truth": "42", "succeeded": false,
             "agents": {"planner": "plans and assigns work", "coder": "writes python code",
                        "terminal": "runs code"},
             "orchestrator": "planner",
             "annotation": {"agent": "coder", "step": 4}}}
    {"agent": "user", "kind": "task", "content": "What is 6 * 7?"}
    {"agent": "planner", "kind": "plan", "content": "1. compute 6*7 in python"}
    {"agent": "planner", "kind": "ledger", "ledger": {"is_request_satisfied": false,
        "is_progress_being_made": true, "is_in_loop": false, "next_speaker": "coder"}}
    {"agent": "planner", "kind": "instruction", "to": "coder", "content": "compute 6*7"}
    {"agent": "coder", "kind": "output", "content": "```python\nprint(6*7)\n```"}
    {"agent": "terminal", "kind": "tool_output", "exitcode": 0, "content": "42"}
    {"agent": "planner", "kind": "termination", "final_answer": "42", "content": "done"}

- The optional first line ``{"run": {...}}`` is the header; every field is optional.
- Event lines need ``agent`` and ``kind`` (one of task, plan, ledger, instruction,
  thought, output, tool_output, stall, termination). ``content`` defaults to "".
- ``step`` (int or string) defaults to the event's 0-based position; steps must increase.
- ``to`` names the instruction target; ``ledger`` holds the claims (booleans may be
  strings); ``final_answer`` and ``terminates`` mark the end; ``exitcode`` for tools.
- ``tool_calls`` on an ``output`` (``[{"name", "args", "id"?, "args_normal"?}, ...]``):
  the calls the turn asked for; their names and arguments count in whether the output
  repeats an earlier one. A protected call's lines naming one by ``call_id`` are held
  against it (:mod:`~icore.adapters._turn_args`; ``args_normal``: the tool's reading).
- ``plan_id`` on a ``plan``: the plan it writes; a later plan with the same id is its
  replan, one with a new id a new plan (without ids every later plan is a replan).
  ``replan: true`` with a ``plan_id`` marks the PlanFence gate's one replan of that
  protected call (the framework recorders write it): counted as a replan, with no
  ``progress`` diagnosis (the protocol working as designed, planfence Sec. 4).
- ``pause`` (boolean) on a ``thought``: the run stopped there waiting for a human (an
  ``interrupt()``); a run whose last event is a pause is reported as paused, not as a
  run that ended without a terminal marker.
- Unknown keys are ignored. Agents that speak but are not declared are added.
- PlanFence lines (optional) carry the records and gate decisions of protected actions,
  so the report can draw their lineage (planfence Sec. 3-4)::

    {"planfence": {"record": {"id": "<64 hex>", "key": "req/t1", "owner": "reviser",
                              "seq": 2, "type": "requirement", "parents": [],
                              "role": "revision"}}}
    {"planfence": {"decision": {"action": "book", "task": "t1", "outcome": "authorized",
                                "reason": "fresh", "roots": ["<id>"], "deps": ["req/t1"],
                                "frontier": {"req/t1": "<id>"}, "heads": {"req/t1": "<id>"},
                                "point": 1, "policy": "planfence"}}}

  A decision is :meth:`icore.fence.Decision.to_dict` (plus an optional ``task`` that
  groups the decisions of one action). They are kept in ``Trace.extras["planfence"]``
  (``records``, ``decisions``) and are not steps. A decision written again with an
  ``error`` (an append-only trace: the MCP gateway's, whose call failed after the
  decision was on disk) is the same decision, failed after authorization: the action's
  lineage keeps it once (:func:`~icore.adapters.trace_lineages`).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from icore._files import not_a_regular_file
from icore._line_digest import checked_line, line_action, line_digest_problems
from icore.adapters._decision_check import (
    check_record_line,
    check_record_links,
    checked_decision,
    decision_digest_problems,
    record_id_problems,
)
from icore.adapters._errors import AdapterError, check_text
from icore.adapters._gate_lines import (
    answer_args,
    check_tool_calls,
    gate_activity,
    gate_without_records,
    human_answer,
    note_call,
    note_plan,
    strs,
    tool_calls,
    tool_claim,
)
from icore.adapters._json_where import path_at, path_at_depth
from icore.adapters._json_window import MAX_DEPTH
from icore.adapters._line_checks import LineChecks
from icore.adapters._line_steps import FileSteps, file_stamp
from icore.adapters._odd_values import EXIT_MAX, EXIT_MIN, odd_constants, odd_exit_code
from icore.adapters._trace import (
    Annotation,
    HumanAnswer,
    Ledger,
    PlanfenceLog,
    Step,
    StepKind,
    Trace,
)
from icore.adapters._trace_values import MAX_STEP, AgentNames, as_bool, as_name, as_step, as_str
from icore.adapters._twice_in_message import TwiceInMessage
from icore.adapters._valid_text import step_text_valid
from icore.adapters._values import check_size, gc_paused, json_value_error, trace_path
from icore.fence import INVALID_ARGUMENTS, canonical_reason

JSONL = "jsonl"


def _flag(obj: dict[str, Any], name: str, file: str, where: str) -> bool | None:
    """A step marker (``terminates``, ``pause``, ``replan``): a JSON boolean or absent.

    The recorders write JSON ``true``/``false``; a hand-edited ``"no"``, ``"yes"`` or ``1``
    is refused rather than guessed (issue 29).

    Raises:
        AdapterError: naming the file and ``line N.<name>``.
    """
    v = obj.get(name)
    if v is None or isinstance(v, bool):
        return v
    raise AdapterError(f"{name} must be true or false (a JSON boolean), not "
                       f"{type(v).__name__} {v!r}"[:160], file=file, field=f"{where}.{name}")


STREAM_MIN_BYTES = 8 * 2**20
"""Files from this size (8 MiB) keep their steps in the file, not in memory (issue 29)."""


def load_jsonl(path: str | Path, *, stream: bool | None = None) -> Trace:
    """Import a run in the generic JSONL format (see the module docstring).

    A final line with no newline that is malformed JSON (a writer killed mid-line, a
    full disk) is no error: the run ends before it, with a warning naming it
    (``Trace.warnings``).

    Every line is read and checked here. A streamed run (``stream`` True; None: a file of
    :data:`STREAM_MIN_BYTES` or more) keeps only where each step's line starts: its
    ``steps`` is a :class:`~icore.adapters.FileSteps` that reads them again from the file
    when iterated (8 bytes a step held; the audit holds one step at a time), so the file
    must stay as it is while the trace is used (a changed or removed file raises
    :class:`AdapterError` when the steps are read). Else the steps are a tuple.

    Raises:
        AdapterError: unreadable file, or not a regular file (a FIFO, a device, a
            folder: refused by kind without opening it, field ``<root>``); a malformed
            line, a missing or invalid field (the error names the file and
            ``line <n>.<field>``); ``stream`` is not a bool or None (field ``stream``).
    """
    p = trace_path(path)
    if stream is not None and not isinstance(stream, bool):
        raise AdapterError(f"stream must be True, False or None, not {type(stream).__name__}",
                           file=str(p), field="stream")
    if (problem := not_a_regular_file(p)) is not None:
        raise AdapterError(f"{problem}; refusing to read it", file=str(p), field="<root>")
    check_size(p)
    try:
        with p.open("rb") as f, gc_paused():  # streamed: one line at a time, split on b"\n" only
            stamp = file_stamp(f)
            if stream is None:
                stream = stamp[2] >= STREAM_MIN_BYTES
            return _parse_lines(_utf8_lines(f, str(p)), file=str(p), run_id=p.stem,
                                source=(p, stamp) if stream else None)
    except OSError as exc:
        raise AdapterError(f"cannot read: {exc}", file=str(p), field="<root>") from None


def _utf8_lines(f: Iterable[bytes], file: str) -> Iterator[tuple[int, str, int]]:
    """The numbered lines of a binary file, decoded as UTF-8 one at a time, and offsets.

    Each is ``(number, text, byte offset where it starts)``. A UTF-8 byte-order mark
    opening the file is dropped (Windows editors write one; the OpenTelemetry readers
    drop it too); a gzip file is named as such.
    """
    at = 0
    for n, raw in enumerate(f, start=1):
        off, at = at, at + len(raw)
        if n == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
            if raw.startswith(b"\x1f\x8b"):
                raise AdapterError("the file is gzip-compressed: decompress it first "
                                   "(gunzip), then audit the .jsonl", file=file,
                                   field="<root>")
        try:
            yield n, raw.decode("utf-8"), off
        except UnicodeDecodeError as exc:
            if exc.end == len(raw) and not raw.endswith(b"\n") \
                    and exc.reason == "unexpected end of data":
                # a character cut by a torn final line: that line's own check
                yield n, raw.decode("utf-8", "replace"), off
                return
            raise AdapterError(f"not UTF-8 text: {exc.reason} at byte {exc.start} of the "
                               "line", file=file, field=_line_field(n, path_at(raw, exc.start)),
                               byte=exc.start) from None


def _cut_off(line: str) -> bool:
    """True when ``line`` ends before its JSON value does (a writer stopped mid-line).

    The parser ran out of text: its error is at the end, or a string never closed (a
    complete value with a fault - a bad character mid-line, a 4301-digit int - is not).
    """
    try:
        json.loads(line)
    except json.JSONDecodeError as e:
        return e.pos >= len(line.rstrip()) or e.msg.startswith("Unterminated string")
    except (ValueError, RecursionError):
        pass
    return False


def _line_field(n: int, where: str | None) -> str:
    """``line <n>``, and the field path within the line when one is known (issue 29)."""
    return f"line {n}.{where}" if where else f"line {n}"


def parse_jsonl(text: str, *, file: str = "<memory>", run_id: str = "run") -> Trace:
    """Parse the generic JSONL format from a string (see :func:`load_jsonl`).

    Lines are split on a newline (LF) only: a raw U+2028 inside a JSON string is text.
    A byte-order mark (U+FEFF) opening ``text`` is dropped.

    Raises:
        AdapterError: ``text`` or ``file`` is not a ``str``; as :func:`load_jsonl`.
    """
    check_text(text, file)
    return _parse_lines(((n, line, 0) for n, line in enumerate(
        text.removeprefix("\ufeff").split("\n"), start=1)), file=file, run_id=run_id)


def _parse_lines(lines: Iterable[tuple[int, str, int]], *, file: str, run_id: str,
                 source: tuple[Path, tuple[int, ...]] | None = None) -> Trace:
    """The run of numbered lines, read one at a time (each line becomes a step at once).

    ``lines`` are ``(number, text, byte offset)``. With ``source`` (the file and its
    :func:`~icore.adapters._line_steps.file_stamp`) the steps are checked and dropped,
    their lines' offsets kept: the trace's steps are a
    :class:`~icore.adapters._line_steps.FileSteps` over the file (issue 29); else a tuple.
    """
    header: dict[str, Any] = {}
    header_at = first_step = 0  # the lines of the run header and of the first step
    planfence: dict[str, list[Any]] = {"records": [], "decisions": [], "digests": [],
                                        "lines": []}
    checks = LineChecks(file)  # digests, chains, writer marker, model turns (#29)
    names: AgentNames | None = None
    agents_decl: dict[str, Any] = {}
    steps: list[Step] = []
    last = -1
    pos = 0
    roles: dict[str, str] = {}  # one str object per distinct raw agent name (memory)
    plan_roots: dict[str, tuple[str, ...]] = {}  # plan id -> roots of its latest plan line
    replans: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    resent: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    answers: list[HumanAnswer] = []
    callers: dict[str, tuple[str, str | None]] = {}
    branches: dict[str, str] = {}  # task -> the parallel branch of its call (#28)
    gated: dict[str, str] = {}  # task -> tool of an authorizing gate thought (qa-new15b)
    gate_lines = 0  # the first line showing gate activity (0: none)
    offsets: array[int] | None = None if source is None else array("q")
    text_valid = True
    question: str | None = None  # the first task step's text (FileSteps only)
    warnings: tuple[str, ...] = ()
    cut = ""  # a torn last line: what is wrong with it
    twice = TwiceInMessage()  # the same protected call twice in one message (17b #7)
    it = iter(lines)
    for n, line, off in it:
        if line[:1] != "{" and (not line.strip() or line.lstrip().startswith("#")):
            continue
        try:
            obj = _decode(line, file, n)
        except AdapterError as exc:
            if line.endswith("\n") or not _cut_off(line) or next(it, None) is not None:
                raise
            # a torn final line (no newline: the writer was killed mid-line, a full disk):
            # the run is read up to it and reported as not ended (#25)
            cut = (f"line {n} (the last) is cut off ({exc.problem}, no newline: the writer "
                   "stopped mid-line, killed or out of disk)")
            warnings = (f"{file}: {cut}; the run is read up to line {n - 1} and did not end",)
            break
        if not isinstance(obj, dict):
            raise AdapterError("each line must be a JSON object", file=file, field=f"line {n}")
        if ("NaN" in line or "Infinity" in line) and (odd := odd_constants(line)):
            warnings += (f"{file}: line {n} holds {odd}, which is not JSON (read as a "
                         "float; another reader refuses the line)",)
        if (ec := obj.get("exitcode")) and type(ec) is int and not EXIT_MIN <= ec <= EXIT_MAX:
            warnings += (f"{file}: line {n}: {odd_exit_code(ec)}",)
        if "run" in obj and "agent" not in obj:
            if header_at:
                raise AdapterError(f"a second run header (the first is line {header_at}): a "
                                   "file holds one run", file=file, field=f"line {n}.run")
            if names is not None:
                raise AdapterError(f"the run header must come before the steps (the first "
                                   f"step is line {first_step})", file=file,
                                   field=f"line {n}.run")
            if not isinstance(obj["run"], dict):
                raise AdapterError("run header must be an object", file=file,
                                   field=f"line {n}.run")
            header, header_at = obj["run"], n
            checks.header(n, obj)
            continue
        if "planfence" in obj and "agent" not in obj:
            _planfence_line(obj["planfence"], file, f"line {n}.planfence", planfence)
            checks.planfence(n, obj)
            continue
        if names is None:
            first_step = n
            agents_decl = header.get("agents", {})
            if not isinstance(agents_decl, dict):
                raise AdapterError("agents must be an object", file=file, field="run.agents")
            names = AgentNames(agents_decl)
        st = _step_of(obj, f"line {n}", file, names, roles, pos, last)
        pos += 1
        last = st.index
        if st.plan_id:
            note_plan(st.plan_id, st.gate_replan, obj.get("roots"), plan_roots, replans)
            if st.gate_replan and (keys := strs(obj.get("resent_unchanged"))) and \
                    (roots := strs(obj.get("roots"))):
                resent.append((roots, keys))
        elif (st.kind == StepKind.THOUGHT or (st.kind == StepKind.TOOL_OUTPUT
                                              and "answered_by" in obj)) and (
                ans := human_answer(obj, st.index, st.kind)):
            answers.append(ans)
            gate_lines = gate_lines or n
        if (ck := checked_line(obj, st.kind)) is not None:
            planfence["lines"].append((n, line_action(obj), *ck, answer_args(
                obj, st.index) if st.kind == StepKind.THOUGHT else None))
        checks.event(n, obj, own=ck is not None, terminates=st.terminates)
        twice.step(n, obj, st.kind, st.agent)
        if "task" in obj:
            note_call(callers, branches, obj, st.kind, st.agent, gated)
        if not gate_lines and gate_activity(obj, st.kind):
            gate_lines = n
        if offsets is None:
            steps.append(st)
        else:  # the file's steps are read again when used (FileSteps): kept as offsets
            offsets.append(off)
            text_valid = text_valid and step_text_valid(st)
            if question is None and st.kind == StepKind.TASK:
                question = st.content
    if names is None and not (planfence["records"] or planfence["decisions"]):
        raise AdapterError("no events" + (f": {cut} and the lines before it hold no step"
                                          if cut else ""), file=file, field="<root>")
    if names is None:  # only the gate's lines: killed inside a protected call (17b #2)
        agents_decl = header.get("agents", {})
        if not isinstance(agents_decl, dict):
            raise AdapterError("agents must be an object", file=file, field="run.agents")
        names = AgentNames(agents_decl)
        warnings += (f"{file}: only the run header and the gate's lines: the writer stopped "
                     "inside a protected call before any step reached disk; its authorized "
                     "calls are counted outcome unknown",)
    check_record_links(planfence["records"], file=file)
    edited = record_id_problems(planfence["records"])
    warnings += tuple(f"{file}: {why}; the protected actions whose lineage shows it are "
                      "INVALID" for why in edited.values())
    undigested, said = decision_digest_problems(planfence["digests"], planfence["decisions"],
                                                file=file, events=planfence["lines"])
    protected = bool(planfence["records"] or planfence["decisions"])
    lined, answered, said2 = line_digest_problems(planfence["lines"], file=file,
                                                  protected=protected)
    turned, said4 = checks.turn_problems(planfence["decisions"], planfence["records"])
    lined = {**turned, **lined}
    broken, said3, marked = checks.result(protected=protected, decisions=planfence["digests"],
                                          lines=planfence["lines"])
    if marked:  # the writer marker's promises decide: no "audited as recorded" note (#29)
        said, said2 = (tuple(w for w in x if ": note: " not in w) for x in (said, said2))
    warnings += said + said2 + said3 + said4 + gate_without_records(gate_lines, file,
                                                                     protected)
    warnings += names.merge_notes(file) + names.undeclared_notes(file) + twice.warnings(
        file, planfence["decisions"], planfence["records"])
    records = tuple({r["id"]: r for _, r in planfence["records"]}.values())
    ann = header.get("annotation")
    annotation = None
    if ann is not None:
        if not isinstance(ann, dict):
            raise AdapterError("annotation must be an object", file=file,
                               field="run.annotation")
        a_agent = as_name(ann.get("agent"), file=file, field="run.annotation.agent",
                          optional=True)
        annotation = Annotation(
            agent=(names.canonical(a_agent) or a_agent) if a_agent else None,
            step=as_step(ann.get("step"), file=file, field="run.annotation.step"),
            reason=as_str(ann.get("reason", ""), file=file, field="run.annotation.reason") or "",
        )
    orch = as_name(header.get("orchestrator"), file=file, field="run.orchestrator",
                   optional=True)
    if orch and names.canonical(orch) is None:
        raise AdapterError(f"{orch!r} is not an agent of the run (declared in run.agents "
                           f"or speaking: {', '.join(names.names[:8])})", file=file,
                           field="run.orchestrator")
    for k, v in agents_decl.items():
        as_name(v, file=file, field=f"run.agents.{k}")
    agents = {n: str(agents_decl.get(n, "")) for n in names.names}
    asked: str | None = as_str(header.get("question", ""), file=file,
                               field="run.question")
    if not asked:
        asked = question if offsets is not None else next(
            (s.content for s in steps if s.kind == StepKind.TASK), None)
    all_steps: Sequence[Step] = tuple(steps)
    if source is not None and offsets is not None:
        names_: AgentNames = names  # complete: every name has its first spelling

        def reparse(line: str, at: int) -> Step:
            return _step_of(_decode(line, file, 0), "line", file, names_, roles, at, -1)

        all_steps = FileSteps(source[0], source[1], offsets, reparse, file=file,
                              last_index=last, text_valid=text_valid)
    return Trace(
        id=as_str(header.get("id", run_id), file=file, field="run.id") or run_id,
        file=file,
        family=JSONL,
        question=asked or "",
        ground_truth=as_str(header.get("ground_truth"), file=file, field="run.ground_truth",
                            optional=True),
        succeeded=as_bool(header.get("succeeded"), file=file, field="run.succeeded",
                          optional=True),
        agents=agents,
        steps=all_steps,
        annotation=annotation,
        orchestrator=(names.canonical(orch) or orch) if orch else None,
        planfence=PlanfenceLog(records, tuple(planfence["decisions"]), tuple(replans),
                               tuple(answers), edited, undigested, tuple(resent),
                               callers, lined, answered, broken, branches, gated,
                               checks.task_lines)
        if records or planfence["decisions"] or broken else None,
        warnings=warnings,
        unclosed=checks.unclosed,
    )


def _step_of(obj: dict[str, Any], f: str, file: str, names: AgentNames,
             roles: dict[str, str], pos: int, last: int) -> Step:
    """The step of one event line (``obj``, at ``f``: ``line <n>``), checked.

    ``pos`` is its position among the steps (its index when it gives none), ``last`` the
    previous step's index (-1: none); ``names`` and ``roles`` gain its agents' names.

    Raises:
        AdapterError: a missing or invalid field, naming the file and ``<f>.<field>``.
    """
    # the checks below call the checkers only off the common case (a str, an int),
    # where they would return the value as it is (import CPU, issue 29)
    agent = obj.get("agent")
    if type(agent) is not str:
        agent = as_name(agent, file=file, field=f"{f}.agent")
    kind_s = obj.get("kind")
    if type(kind_s) is not str:
        kind_s = as_str(kind_s, file=file, field=f"{f}.kind")
    assert agent is not None and kind_s is not None
    kind = _KINDS.get(kind_s) or _kind(kind_s, file, f)
    step = obj.get("step", pos)
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        step = as_step(step, file=file, field=f"{f}.step")
        step = pos if step is None else step
    if step <= last:
        raise AdapterError(f"step {step} does not increase (previous {last})", file=file,
                           field=f"{f}.step")
    content = obj.get("content", "")
    if type(content) is not str:
        content = as_str(content, file=file, field=f"{f}.content") or ""
    who = names.canonical(agent) or names.add(agent)
    to_raw = obj.get("to")
    if to_raw is not None and type(to_raw) is not str:
        to_raw = as_name(to_raw, file=file, field=f"{f}.to", optional=True)
    to = (names.addressed(to_raw, f) if kind == StepKind.INSTRUCTION else
          names.canonical(to_raw) or names.add(to_raw)) if to_raw else None
    ledger = None
    if kind == StepKind.LEDGER:
        ledger = _ledger(obj.get("ledger"), file, f"{f}.ledger", names)
    elif kind == StepKind.INSTRUCTION and to is None:
        raise AdapterError("an instruction needs 'to'", file=file, field=f"{f}.to")
    exitcode = obj.get("exitcode")
    if exitcode is not None and (not isinstance(exitcode, int) or isinstance(exitcode, bool)):
        raise AdapterError(f"exitcode must be an integer, not {exitcode!r}", file=file,
                           field=f"{f}.exitcode")
    term = obj.get("terminates")
    if term is not None and term.__class__ is not bool:
        term = _flag(obj, "terminates", file, f)
    calls = None
    if kind == StepKind.OUTPUT and (tc := obj.get("tool_calls")) is not None:
        check_tool_calls(tc, file=file, field=f"{f}.tool_calls")
        calls = tool_calls(tc)
    plan_id = as_str(obj.get("plan_id"), file=file, field=f"{f}.plan_id",
                     optional=True) if kind == StepKind.PLAN else None
    pause = _flag(obj, "pause", file, f) if kind == StepKind.THOUGHT else None
    replan = _flag(obj, "replan", file, f) if kind == StepKind.PLAN else None
    tool, ran = tool_claim(obj) if kind == StepKind.TOOL_OUTPUT else (None, None)
    task = obj.get("task") if kind == StepKind.TOOL_OUTPUT else None
    # a call the framework's schema refused, no decision (a refusal's line is blocked)
    invalid = kind == StepKind.TOOL_OUTPUT and ran is None and \
        canonical_reason(obj.get("reason")) == INVALID_ARGUMENTS
    return Step(
        index=step, agent=who, kind=kind, content=content,
        role=roles.setdefault(agent, agent), to=to,
        ledger=ledger,
        final_answer=None if (fa := obj.get("final_answer")) is None else as_str(
            fa, file=file, field=f"{f}.final_answer"),
        terminates=bool(term) or kind == StepKind.TERMINATION, exitcode=exitcode,
        calls=calls, plan_id=plan_id or None, pause=bool(pause),
        gate_replan=bool(replan) and bool(plan_id), tool=tool, ran=ran,
        task=task if isinstance(task, str) and task else None, invalid_args=invalid,
    )


_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The C scanner under :func:`json.loads`, called at the line's first character."""
_KINDS = {k.value: k for k in StepKind}
"""Step kinds by their exact spelling (other spellings: :func:`_kind`)."""
_JSON_SPACE = " \t\n\r"


def _decode(line: str, file: str, n: int) -> Any:
    """Line ``n`` as JSON: the value :func:`json.loads` gives, or its error, typed.

    A line that starts with the value and ends with JSON whitespace (every line an
    exporter writes) is scanned directly, without :func:`json.loads`' two whitespace
    matches and wrappers (import CPU, issue 29); any other line, and any line the scanner
    refuses, goes through :func:`json.loads` itself, so the value and the error are its.

    Raises:
        AdapterError: malformed JSON (with the column), nested too deeply, or an integer
            over Python's digit limit (field ``line <n>``).
    """
    try:
        obj, end = _SCAN(line, 0)
        if end == len(line) or not line[end:].strip(_JSON_SPACE):
            return obj
    except (StopIteration, ValueError, RecursionError):
        pass  # the error (or none: leading whitespace) as json.loads gives it, below
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        col = min(exc.pos, len(line.rstrip("\r\n"))) + 1  # the line's end, not past it
        raise AdapterError(f"malformed JSON at column {col}"
                           f"{' (after this field)' if path_at(line, exc.pos) else ''}: "
                           f"{exc.msg}", file=file,
                           field=_line_field(n, path_at(line, exc.pos)),
                           column=col) from None
    except RecursionError:
        raise AdapterError("JSON nested too deeply", file=file,
                           field=_line_field(n, path_at_depth(line, MAX_DEPTH))) from None
    except ValueError as exc:  # an integer over Python's 4300-digit limit
        raise json_value_error(exc, line, file=file, field=f"line {n}", first_line=n) from None


def _kind(kind_s: str, file: str, f: str) -> StepKind:
    """A step kind spelled with other case or surrounding spaces (``" Output"``)."""
    try:
        return StepKind(kind_s.strip().lower())
    except ValueError:
        raise AdapterError(
            f"unknown kind {kind_s!r} (known: {', '.join(k.value for k in StepKind)})",
            file=file, field=f"{f}.kind") from None


def _planfence_line(obj: Any, file: str, field: str, into: dict[str, list[Any]]) -> None:
    """Check one PlanFence line (a record or a gate decision) and keep it."""
    if not isinstance(obj, dict) or len(obj.keys() & {"record", "decision"}) != 1:
        raise AdapterError("planfence must be an object with one of 'record' or 'decision'",
                           file=file, field=field)
    extra = sorted(k for k in obj if k not in ("record", "decision"))
    if extra:  # e.g. a decision's "task" put beside it: it would be lost
        raise AdapterError(f"unknown key {extra[0]!r} (a planfence line holds only "
                           "'record' or 'decision'; a decision's task goes inside it)",
                           file=file, field=f"{field}.{extra[0]}")
    if "record" in obj:
        check_record_line(obj["record"], file=file, field=f"{field}.record")
        into["records"].append((f"{field}.record", obj["record"]))
        return
    # the typed decision's own checks (icore.fence.DecisionEntry) and the importer's
    into["decisions"].append(checked_decision(obj["decision"], file=file,
                                              field=f"{field}.decision"))
    into["digests"].append((f"{field}.decision", obj["decision"].get("digest")))


def _ledger(obj: Any, file: str, field: str, names: AgentNames) -> Ledger:
    if not isinstance(obj, dict):
        raise AdapterError("ledger must be an object", file=file, field=field)

    def ans(k: str) -> Any:
        v = obj.get(k)
        return v.get("answer") if isinstance(v, dict) else v

    nxt = as_name(ans("next_speaker"), file=file, field=f"{field}.next_speaker",
                  optional=True)
    return Ledger(
        is_request_satisfied=as_bool(ans("is_request_satisfied"), file=file,
                                     field=f"{field}.is_request_satisfied", optional=True),
        is_in_loop=as_bool(ans("is_in_loop"), file=file, field=f"{field}.is_in_loop",
                           optional=True),
        is_progress_being_made=as_bool(ans("is_progress_being_made"), file=file,
                                       field=f"{field}.is_progress_being_made", optional=True),
        next_speaker=(names.canonical(nxt) or names.add(nxt)) if nxt else None,
        instruction=as_str(ans("instruction"), file=file, field=f"{field}.instruction",
                           optional=True),
    )


__all__ = ["JSONL", "STREAM_MIN_BYTES", "load_jsonl", "parse_jsonl"]
