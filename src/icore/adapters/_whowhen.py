"""Who&When importers (Hand-Crafted = Magentic-One, Algorithm-Generated = CaptainAgent/AG2).

Dataset: "Which Agent Causes Task Failures and When?" (ICML 2025), ``shared/data/who_and_when``.
Each file is one JSON object; see the README there for the fields. Quirks handled here
(each with a test): string booleans (``"True"``), agent-name case (``Websurfer``), string
step indices (``"12"``), the two outcome field names (``is_corrected`` / ``is_correct``)
and extra keys (``mistake_type``, ``labels``: kept in :attr:`Trace.source_fields`). Anything
else malformed raises :class:`~icore.adapters.AdapterError` naming the file and field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from icore._files import not_a_regular_file
from icore.adapters._errors import AdapterError
from icore.adapters._json_where import located
from icore.adapters._json_window import MAX_DEPTH
from icore.adapters._trace import (
    Annotation,
    Ledger,
    Step,
    StepKind,
    Trace,
)
from icore.adapters._trace_values import (
    AgentNames,
    as_bool,
    as_name,
    as_step,
    as_str,
)
from icore.adapters._values import json_value_error, trace_path

MAGENTIC_ONE = "magentic_one"
CAPTAIN_AGENT = "captain_agent"
ORCHESTRATOR = "Orchestrator"
HUMAN = "human"
TERMINAL_AGENT = "Computer_terminal"

_KNOWN_KEYS = {
    "history", "question", "ground_truth", "question_ID", "level", "is_corrected",
    "is_correct", "mistake_agent", "mistake_step", "mistake_reason", "system_prompt",
}
_ROUTE = re.compile(r"^\s*(?P<who>[^()]+?)\s*\(\s*->\s*(?P<to>[^()]+?)\s*\)\s*$")
_PAREN = re.compile(r"^\s*(?P<who>[^()]+?)\s*\(\s*(?P<what>[^()]+?)\s*\)\s*$")
_TEAM_LINE = re.compile(r"^(?P<name>[A-Za-z][\w\-]*):\s+(?P<desc>\S.*)$")
_FINAL = re.compile(r"FINAL ANSWER:\s*(?P<a>[^\n]*)")
_EXIT = re.compile(r"exitcode:\s*(?P<c>-?\d+)")
_TERMINATE = re.compile(r"\bTERMINATE\b")
_NEXT = re.compile(r"^Next speaker\s+(?P<who>\S+)")


def read_json(path: str | Path) -> tuple[Any, str]:
    """Read a JSON document.

    Returns:
        The parsed document and the file name used in error messages.

    Raises:
        AdapterError: the path is not a regular file (a FIFO, a device, a folder: refused
            by kind without opening it), or the file is unreadable, not UTF-8, truncated
            or not JSON (the field at the bad byte, e.g. ``history[3].content``, else
            ``<root>``).
    """
    p = trace_path(path)
    file = str(p)
    if (problem := not_a_regular_file(p)) is not None:
        raise AdapterError(f"{problem}; refusing to read it", file=file, field="<root>")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise located(AdapterError(f"not UTF-8 text: {exc.reason} at byte {exc.start}",
                                   file=file, field="<root>", byte=exc.start),
                      p, depth=MAX_DEPTH) from None
    except OSError as exc:
        raise AdapterError(f"cannot read: {exc.strerror or exc}", file=file,
                           field="<root>") from None
    try:
        return _parse(text, file), file
    except AdapterError as exc:  # name the field, not <root>, where the place is known
        if (named := located(exc, text, depth=MAX_DEPTH)) is exc:
            raise
        raise named from None


def _parse(text: str, file: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        body = text.strip()
        if not body:
            what = "empty file"
        elif body[:1] not in ("{", "["):  # prose, a log line
            what = "not JSON"
        elif exc.pos >= len(text.rstrip()) or not body.endswith(("}", "]")):
            what = "truncated JSON"  # a document that stops early
        else:
            what = "malformed JSON"
        raise AdapterError(
            f"{what}: {exc.msg}", file=file, field="<root>", line=exc.lineno, column=exc.colno
        ) from None
    except RecursionError:
        raise AdapterError("JSON nested too deeply", file=file, field="<root>") from None
    except ValueError as exc:  # an integer over Python's 4300-digit limit
        raise json_value_error(exc, text, file=file, field="<root>") from None


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def detect_family(data: Any) -> str:
    """``captain_agent`` for ``system_prompt`` or named messages, else ``magentic_one``."""
    if isinstance(data, dict):
        if "system_prompt" in data or "is_correct" in data:
            return CAPTAIN_AGENT
        hist = data.get("history")
        if isinstance(hist, list) and hist and isinstance(hist[0], dict) and "name" in hist[0]:
            return CAPTAIN_AGENT
    return MAGENTIC_ONE


def load_who_and_when(path: str | Path, *, family: str | None = None) -> Trace:
    """Import one Who&When file (family detected from its fields unless given).

    Raises:
        AdapterError: not a regular file (a FIFO, a device, a folder: refused without
            opening it), or an unreadable, truncated or malformed file (names file and
            field).
    """
    data, file = read_json(path)
    return parse_who_and_when_data(data, file=file, family=family)


def parse_who_and_when_data(data: Any, *, file: str = "<memory>",
                            family: str | None = None) -> Trace:
    """Parse an already-loaded Who&When run (family detected unless given).

    Raises:
        AdapterError: as :func:`load_who_and_when`; both outcome fields given
            (``is_corrected``, Magentic-One's, and ``is_correct``, CaptainAgent's: which
            one holds the outcome, and which family the run is, cannot be told);
            ``file`` not a str (field ``file``).
    """
    if not isinstance(file, str):
        raise AdapterError(f"file must be a str naming the input, got {type(file).__name__}",
                           file="<memory>", field="file")
    if isinstance(data, dict) and "is_corrected" in data and "is_correct" in data:
        raise AdapterError(
            f"both outcome fields given: is_corrected={_short(data['is_corrected'])} "
            f"(Hand-Crafted / Magentic-One runs) and is_correct="
            f"{_short(data['is_correct'])} (CaptainAgent runs); keep the one of the run's "
            "family", file=file, field="is_correct")
    fam = family or detect_family(data)
    if fam == CAPTAIN_AGENT:
        return parse_captain_agent(data, file=file)
    if fam == MAGENTIC_ONE:
        return parse_magentic_one(data, file=file)
    raise AdapterError(f"unknown Who&When family {fam!r}", file=file, field="<root>")


def load_magentic_one(path: str | Path) -> Trace:
    """Import a Hand-Crafted (Magentic-One) file."""
    return load_who_and_when(path, family=MAGENTIC_ONE)


def load_captain_agent(path: str | Path) -> Trace:
    """Import an Algorithm-Generated (CaptainAgent / AG2) file."""
    return load_who_and_when(path, family=CAPTAIN_AGENT)


# ------------------------------------------------------------------ common parts
def _run_id(file: str) -> str:
    """``<folder>/<stem>`` (Hand-Crafted and Algorithm-Generated reuse stems), or ``run``."""
    if file == "<memory>":
        return "run"
    p = Path(file)
    return f"{p.parent.name}/{p.stem}" if p.parent.name else p.stem


def _top(data: Any, file: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise AdapterError(
            f"top level must be an object, not {type(data).__name__}", file=file, field="<root>"
        )
    hist = data.get("history")
    if hist is None:
        raise AdapterError("missing field (a .json file is read as a Who&When trace "
                           "unless it holds OpenTelemetry spans: resourceSpans, a Phoenix "
                           "span list or a Langfuse trace)", file=file, field="history")
    if not isinstance(hist, list):
        raise AdapterError("history must be a list", file=file, field="history")
    if not hist:
        raise AdapterError("history is empty", file=file, field="history")
    return data


def _entry(hist: list[Any], i: int, file: str, keys: tuple[str, ...]) -> dict[str, str]:
    item = hist[i]
    if not isinstance(item, dict):
        raise AdapterError("history entry must be an object", file=file, field=f"history[{i}]")
    out: dict[str, str] = {}
    for k in keys:
        v = item.get(k)
        if v is None:
            raise AdapterError("missing field", file=file, field=f"history[{i}].{k}")
        if not isinstance(v, str):
            raise AdapterError(f"expected a string, got {type(v).__name__}", file=file,
                               field=f"history[{i}].{k}")
        out[k] = v
    return out


def _annotation(data: dict[str, Any], file: str, names: AgentNames) -> Annotation | None:
    if "mistake_agent" not in data and "mistake_step" not in data:
        return None
    agent = as_name(data.get("mistake_agent"), file=file, field="mistake_agent",
                    optional=True)
    step = as_step(data.get("mistake_step"), file=file, field="mistake_step")
    reason = as_str(data.get("mistake_reason"), file=file, field="mistake_reason", optional=True)
    canon = None
    if agent:
        canon = names.canonical(agent) or agent.strip()
    return Annotation(agent=canon, step=step, reason=reason or "")


def _common(data: dict[str, Any], file: str, outcome_keys: tuple[str, ...]) -> dict[str, Any]:
    question = as_str(data.get("question"), file=file, field="question", optional=True) or ""
    gt = as_str(data.get("ground_truth"), file=file, field="ground_truth", optional=True)
    succeeded = None
    for k in outcome_keys:
        if k in data:
            succeeded = as_bool(data[k], file=file, field=k, optional=True)
            break
    extras = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    for k in ("question_ID", "level"):
        if k in data:
            extras[k] = data[k]
    return {"question": question, "ground_truth": gt, "succeeded": succeeded,
            "source_fields": extras}


# ------------------------------------------------------------------ Magentic-One
def _team(plan: str) -> dict[str, str]:
    """Parse the "assembled the following team" block of a Magentic-One plan."""
    out: dict[str, str] = {}
    start = plan.find("following team:")
    if start < 0:
        return out
    for line in plan[start + len("following team:") :].splitlines():
        line = line.strip()
        if not line:
            if out:
                break
            continue
        m = _TEAM_LINE.match(line)
        if m is None:
            break
        out[m["name"]] = m["desc"]
    return out


def _ledger(text: str, file: str, field: str, names: AgentNames) -> Ledger:
    i = text.find("{")
    if i < 0:
        raise AdapterError("ledger without a JSON object", file=file, field=field)
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[i:])
    except json.JSONDecodeError as exc:
        raise AdapterError(f"malformed ledger JSON: {exc.msg}", file=file, field=field) from None
    except RecursionError:
        raise AdapterError("ledger JSON nested too deeply", file=file, field=field) from None
    except ValueError as exc:  # an integer over Python's 4300-digit limit
        raise json_value_error(exc, text[i:], file=file, field=field,
                               what="malformed ledger JSON") from None
    if not isinstance(obj, dict):
        raise AdapterError("ledger is not an object", file=file, field=field)

    def answer(key: str) -> Any:
        v = obj.get(key)
        if isinstance(v, dict):
            return v.get("answer")
        return v

    reasons = {
        k: str(v.get("reason", ""))
        for k, v in obj.items()
        if isinstance(v, dict) and isinstance(v.get("reason", ""), str)
    }
    nxt = answer("next_speaker")
    nxt_s = as_str(nxt, file=file, field=f"{field}.next_speaker", optional=True)
    instr = as_str(
        answer("instruction_or_question"), file=file, field=f"{field}.instruction_or_question",
        optional=True,
    )
    return Ledger(
        is_request_satisfied=as_bool(
            answer("is_request_satisfied"), file=file, field=f"{field}.is_request_satisfied",
            optional=True,
        ),
        is_in_loop=as_bool(answer("is_in_loop"), file=file, field=f"{field}.is_in_loop",
                           optional=True),
        is_progress_being_made=as_bool(
            answer("is_progress_being_made"), file=file, field=f"{field}.is_progress_being_made",
            optional=True,
        ),
        next_speaker=(names.canonical(nxt_s) or names.add(nxt_s)) if nxt_s else None,
        instruction=instr,
        reasons=reasons,
    )


def parse_magentic_one(data: Any, *, file: str = "<memory>") -> Trace:
    """Parse a Hand-Crafted (Magentic-One) run already loaded from JSON.

    Raises:
        AdapterError: a required field is missing or has the wrong type.
    """
    d = _top(data, file)
    hist: list[Any] = d["history"]
    entries = [_entry(hist, i, file, ("role", "content")) for i in range(len(hist))]
    team: dict[str, str] = {}
    for e in entries:
        if e["content"].lstrip().startswith("Initial plan"):
            team = _team(e["content"])
            break
    names = AgentNames([HUMAN, ORCHESTRATOR, *team])
    for e in entries:
        role = e["role"]
        m = _ROUTE.match(role) or _PAREN.match(role)
        if m is None:
            names.add(role)
    steps: list[Step] = []
    warnings: list[str] = []
    for i, e in enumerate(entries):
        role, text = e["role"], e["content"]
        field = f"history[{i}].content"
        routed = _ROUTE.match(role)
        paren = _PAREN.match(role)
        head = text.lstrip()
        if routed is not None:
            who = names.canonical(routed["who"]) or names.add(routed["who"])
            to = names.canonical(routed["to"]) or names.add(routed["to"])
            steps.append(Step(i, who, StepKind.INSTRUCTION, text, role, to=to))
        elif paren is not None:
            who = names.canonical(paren["who"]) or names.add(paren["who"])
            what = paren["what"].lower()
            if "termination" in what:
                fm = _FINAL.search(text)
                steps.append(Step(i, who, StepKind.TERMINATION, text, role,
                                  final_answer=fm["a"].strip() if fm else None, terminates=True))
            elif head.startswith(("Initial plan", "New plan")):
                steps.append(Step(i, who, StepKind.PLAN, text, role))
            elif head.startswith("Updated Ledger"):
                try:
                    led = _ledger(text, file, field, names)
                except AdapterError as exc:
                    # the ledger is the orchestrator's free-text output, not the file's
                    # structure: keep the message as a thought and record why
                    warnings.append(str(exc))
                    steps.append(Step(i, who, StepKind.THOUGHT, text, role))
                else:
                    steps.append(Step(i, who, StepKind.LEDGER, text, role, ledger=led))
            elif head.startswith(("Stalled", "Replan counter exceeded")):
                steps.append(Step(i, who, StepKind.STALL, text, role,
                                  terminates=head.startswith("Replan counter exceeded")))
            else:
                nm = _NEXT.match(head)
                to = None
                if nm is not None:
                    to = names.canonical(nm["who"]) or names.add(nm["who"])
                steps.append(Step(i, who, StepKind.THOUGHT, text, role, to=to))
        elif role.strip().lower() in ("human", "user") and i == 0:
            steps.append(Step(i, HUMAN, StepKind.TASK, text, role))
        else:
            who = names.canonical(role) or names.add(role)
            steps.append(Step(i, who, StepKind.OUTPUT, text, role))
    common = _common(d, file, ("is_corrected", "is_correct"))
    if warnings:
        common["warnings"] = tuple(warnings)
    if not common["question"] and steps and steps[0].kind == StepKind.TASK:
        common["question"] = steps[0].content.strip()
    agents = {n: team.get(n, "") for n in names.names}
    agents[ORCHESTRATOR] = agents.get(ORCHESTRATOR) or (
        "Orchestrator: plans, keeps the ledger and routes instructions to the team.")
    agents[HUMAN] = "The user who poses the task."
    return Trace(
        id=_run_id(file),
        file=file,
        family=MAGENTIC_ONE,
        steps=tuple(steps),
        agents=agents,
        annotation=_annotation(d, file, names),
        **common,
    )


# ------------------------------------------------------------------ CaptainAgent / AG2
def parse_captain_agent(data: Any, *, file: str = "<memory>") -> Trace:
    """Parse an Algorithm-Generated (CaptainAgent / AG2) run already loaded from JSON.

    Raises:
        AdapterError: a required field is missing or has the wrong type.
    """
    d = _top(data, file)
    hist: list[Any] = d["history"]
    prompts = d.get("system_prompt", {})
    if prompts is None:
        prompts = {}
    if not isinstance(prompts, dict):
        raise AdapterError("system_prompt must be an object", file=file, field="system_prompt")
    for k, v in prompts.items():
        as_str(v, file=file, field=f"system_prompt.{k}")
    names = AgentNames([*prompts, TERMINAL_AGENT])
    entries = [_entry(hist, i, file, ("name", "content")) for i in range(len(hist))]
    steps: list[Step] = []
    for i, e in enumerate(entries):
        raw, text = e["name"], e["content"]
        who = names.canonical(raw) or names.add(raw)
        if who == TERMINAL_AGENT:
            m = _EXIT.search(text)
            steps.append(Step(i, who, StepKind.TOOL_OUTPUT, text, raw,
                              exitcode=int(m["c"]) if m else None))
        elif i == 0:
            steps.append(Step(i, who, StepKind.PLAN, text, raw,
                              terminates=bool(_TERMINATE.search(text))))
        else:
            steps.append(Step(i, who, StepKind.OUTPUT, text, raw,
                              terminates=bool(_TERMINATE.search(text))))
    agents = {n: str(prompts.get(n, "")) for n in names.names}
    agents[TERMINAL_AGENT] = agents.get(TERMINAL_AGENT) or (
        "A computer terminal that only executes the python or sh code blocks it is given.")
    return Trace(
        id=_run_id(file),
        file=file,
        family=CAPTAIN_AGENT,
        steps=tuple(steps),
        agents=agents,
        annotation=_annotation(d, file, names),
        **_common(d, file, ("is_correct", "is_corrected")),
    )


__all__ = [
    "CAPTAIN_AGENT",
    "MAGENTIC_ONE",
    "detect_family",
    "load_captain_agent",
    "load_magentic_one",
    "load_who_and_when",
    "parse_captain_agent",
    "parse_magentic_one",
    "parse_who_and_when_data",
    "read_json",
]
