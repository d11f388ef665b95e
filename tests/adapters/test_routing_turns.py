"""An orchestrator's routing turn is no repeated work unless it is a loop (QA qa-new15c).

The rule (docs/audit-real-runs.md, "Routing turns"; icore Sec. 4): an ``output`` of the
declared orchestrator whose hand-off (an ``instruction`` of the orchestrator) follows it,
with only thoughts and its own tool outputs between, is a routing turn. Made again (the
same text and calls, the same hand-off) it repeats only when no progress was made since
the last one (a supported output of a step that is no routing turn, or a new plan).
Everything else repeats as before. And an instruction to an agent the header does not
declare is kept, with a warning naming the agent, its line and the declared agents.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import audit_trace, parse_jsonl
from icore.adapters._routing import REACH, RoutingTurns, handoff_line
from icore.adapters._trace import Step, StepKind

AGENTS = {"boss": "routes the task to the workers", "coder": "writes python code",
          "writer": "writes drafts"}
REPEATS = "repeats an observation"


def _trace(*steps: dict[str, Any], orchestrator: str | None = "boss",
           agents: dict[str, str] | None = None) -> str:
    head: dict[str, Any] = {"id": "r", "question": "q",
                            "agents": AGENTS if agents is None else agents}
    if orchestrator:
        head["orchestrator"] = orchestrator
    lines = [{"run": head}, {"agent": "user", "kind": "task", "content": "do it"}, *steps,
             {"agent": "boss", "kind": "termination", "final_answer": "x", "content": "end"}]
    return "\n".join(json.dumps(x) for x in lines) + "\n"


def _route(to: str, who: str = "boss") -> list[dict[str, Any]]:
    """A routing turn (the same words each time) and its hand-off."""
    return [{"agent": who, "kind": "output", "content": f"transfer to {to}"},
            {"agent": who, "kind": "thought", "content": "node boss wrote messages"},
            {"agent": who, "kind": "instruction", "to": to, "content": f"{who} -> {to}"}]


def _work(who: str, text: str) -> list[dict[str, Any]]:
    return [{"agent": who, "kind": "output", "content": text}]


def _flags(text: str) -> list[str]:
    """``<proposer>: <detail>`` per hard flag of the audited run."""
    r = audit_trace(parse_jsonl(text, file="t.jsonl"))
    return [f"{f.proposer}: {f.detail}" for f in r.state.flags.values()]


def test_routing_again_after_progress_is_no_repeat() -> None:
    """boss routes coder, writer, coder, writer, coder: each worker says something new."""
    steps = [x for i in range(3) for x in (*_route("coder"), *_work("coder", f"result {i}"),
                                           *_route("writer"), *_work("writer", f"draft {i}"))]
    assert _flags(_trace(*steps)) == []


def test_routing_again_with_no_progress_between_is_a_loop() -> None:
    """The coder fails each round: the second identical routing turn follows no progress."""
    steps = [x for _ in range(2) for x in (*_route("coder"),
                                           *_work("coder", "I couldn't find the file."))]
    flags = _flags(_trace(*steps))
    assert any(f.startswith("boss:") and REPEATS in f for f in flags), flags


def test_routing_back_to_back_is_a_loop() -> None:
    """Two identical routing turns with nothing between them."""
    flags = _flags(_trace(*_route("coder"), *_route("coder"), *_work("coder", "done 1")))
    assert [f for f in flags if f.startswith("boss:")] and all(
        REPEATS in f for f in flags if f.startswith("boss:"))


def test_an_other_routing_turn_is_no_progress() -> None:
    """boss alternates coder, writer with the workers failing: routing turns are no
    progress for each other, so the third and fourth turns are loops."""
    steps = [x for _ in range(2) for x in (*_route("coder"), *_work("coder", "I can't."),
                                           *_route("writer"), *_work("writer", "I cannot."))]
    boss = [f for f in _flags(_trace(*steps)) if f.startswith("boss:")]
    assert len(boss) == 2 and all(REPEATS in f for f in boss)


def test_a_new_plan_is_progress() -> None:
    steps = [*_route("coder"), *_work("coder", "I can't."),
             {"agent": "boss", "kind": "plan", "content": "new plan: try the writer"},
             *_route("coder"), *_work("coder", "done")]
    assert not [f for f in _flags(_trace(*steps)) if f.startswith("boss:")]


def test_only_a_declared_orchestrators_hand_off_is_routing() -> None:
    """No orchestrator declared, or the same words with no hand-off after them, or a
    worker's words: repeats as before (after progress too)."""
    steps = [x for i in range(2) for x in (*_route("coder"), *_work("coder", f"result {i}"))]
    assert any(REPEATS in f for f in _flags(_trace(*steps, orchestrator=None)))
    no_handoff = [x for i in range(2) for x in (
        {"agent": "boss", "kind": "output", "content": "transfer to coder"},
        *_work("coder", f"result {i}"))]
    assert any(REPEATS in f for f in _flags(_trace(*no_handoff)))
    worker = [x for i in range(2) for x in (*_route("coder", who="writer"),
                                            *_work("coder", f"result {i}"))]
    assert any(f.startswith("writer:") and REPEATS in f for f in _flags(_trace(*worker)))


def test_the_same_words_with_another_hand_off_are_another_routing_turn() -> None:
    """The same text handing off to the coder, then to the writer: two routing turns."""
    steps = [*_route("coder"), *_work("coder", "I can't."),
             {"agent": "boss", "kind": "output", "content": "transfer to coder"},
             {"agent": "boss", "kind": "instruction", "to": "writer", "content": "boss -> coder"}]
    assert not [f for f in _flags(_trace(*steps)) if f.startswith("boss:")]


def test_the_look_ahead_is_bounded() -> None:
    """A hand-off more than REACH steps after the output is not its hand-off."""
    far = [{"agent": "boss", "kind": "thought", "content": f"t{i}"} for i in range(REACH)]
    steps = [x for i in range(2) for x in (
        {"agent": "boss", "kind": "output", "content": "transfer to coder"}, *far,
        {"agent": "boss", "kind": "instruction", "to": "coder", "content": "go"},
        *_work("coder", f"result {i}"))]
    assert any(f.startswith("boss:") and REPEATS in f for f in _flags(_trace(*steps)))


def test_a_hand_off_again_after_others_progress_is_new_work_for_the_worker() -> None:
    """The coder answers "Done." each round, the writer drafts between: no repeat (the
    hand-off's words are the same each round, the work is not)."""
    steps = [x for i in range(3) for x in (*_route("coder"), *_work("coder", "Done."),
                                           *_route("writer"), *_work("writer", f"draft {i}"))]
    assert _flags(_trace(*steps)) == []


def test_a_worker_saying_the_same_after_the_same_hand_off_with_no_other_progress_loops(
        ) -> None:
    """boss routes the coder, it says "Done.", boss routes it again, it says "Done." again:
    the routing turn follows progress (no flag on boss), the worker's answer is the loop."""
    flags = _flags(_trace(*_route("coder"), *_work("coder", "Done."), *_route("coder"),
                          *_work("coder", "Done.")))
    assert len(flags) == 1 and flags[0].startswith("coder:") and REPEATS in flags[0]


def test_an_instruction_that_is_no_hand_off_keeps_the_old_rule() -> None:
    """The same instruction without a routing turn before it, after the writer's progress:
    the same piece of work, the coder's "Done." again is a repeat (as before)."""
    give = {"agent": "boss", "kind": "instruction", "to": "coder", "content": "count rows"}
    flags = _flags(_trace(give, *_work("coder", "Done."), *_route("writer"),
                          *_work("writer", "draft"), give, *_work("coder", "Done.")))
    assert [f for f in flags if f.startswith("coder:") and REPEATS in f]


def test_recorded_hand_off_lines() -> None:
    assert handoff_line("boss -> coder", "boss", "coder")
    assert handoff_line("boss -> coder (transfer_to_coder)", "boss", "coder")
    assert handoff_line("handoff to coder", "boss", "coder")
    assert not handoff_line("boss -> coder: count the rows", "boss", "coder")
    assert not handoff_line("boss -> writer", "boss", "coder")
    assert not handoff_line("count the rows", "boss", "coder")


def test_a_recorded_hand_off_line_again_after_others_progress_is_new_work() -> None:
    """A supervisor node with no model turn (``Command(goto=...)`` from a function): its
    hand-off lines are the same each round; the coder's "Done." each round is no repeat,
    unless nobody else made progress between."""
    def give(to: str) -> dict[str, Any]:
        return {"agent": "boss", "kind": "instruction", "to": to, "content": f"boss -> {to}"}

    steps = [x for i in range(2) for x in (give("coder"), *_work("coder", "Done."),
                                           give("writer"), *_work("writer", f"draft {i}"))]
    assert _flags(_trace(*steps)) == []
    looped = _flags(_trace(give("coder"), *_work("coder", "Done."), give("coder"),
                           *_work("coder", "Done.")))
    assert len(looped) == 1 and looped[0].startswith("coder:") and REPEATS in looped[0]
    other = [x for i in range(2) for x in (  # not the orchestrator's: the old rule
        {**give("coder"), "agent": "writer", "content": "writer -> coder"},
        *_work("coder", "Done."), *_work("writer", f"draft {i}"))]
    assert [f for f in _flags(_trace(*other)) if f.startswith("coder:")]


_KINDS = [StepKind.OUTPUT, StepKind.THOUGHT, StepKind.TOOL_OUTPUT, StepKind.INSTRUCTION,
          StepKind.PLAN]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KINDS), st.sampled_from(["boss", "coder"]),
                          st.sampled_from(["a", "b"])), max_size=40),
       st.sampled_from(["boss", None]))
def test_steps_are_yielded_all_in_order(rows: list[tuple[StepKind, str, str]],
                                        orch: str | None) -> None:
    """The look-ahead never drops, repeats or reorders a step, and only an output of the
    orchestrator followed by its hand-off is a routing turn."""
    steps = [Step(i, who, kind, text, who, to="coder" if kind == StepKind.INSTRUCTION
                  else None) for i, (kind, who, text) in enumerate(rows)]
    r = RoutingTurns(orch)
    assert list(r.steps(iter(steps))) == steps
    for i, s in enumerate(steps):
        if not r.is_routing(s.index):
            continue
        assert s.kind == StepKind.OUTPUT and s.agent == orch
        nxt = next(x for x in steps[i + 1:] if not (
            x.kind == StepKind.THOUGHT or (x.kind == StepKind.TOOL_OUTPUT and x.agent == orch)))
        assert nxt.kind == StepKind.INSTRUCTION and nxt.agent == orch


# ------------------------------------------------------------ undeclared addressees
def test_an_instruction_to_an_undeclared_agent_is_kept_and_named() -> None:
    text = _trace(*_route("nobody"), *_route("nobody"), *_route("coder"))
    t = parse_jsonl(text, file="t.jsonl")
    said = [w for w in t.warnings if "does not declare" in w]
    assert said == ["t.jsonl: line 5: an instruction to 'nobody', an agent the run header "
                    "does not declare (declared: 'boss', 'coder', 'writer'); it is audited "
                    "as an agent of the run with no declared capabilities"]
    assert "nobody" in t.agents  # kept: the trace is what happened
    r = audit_trace(t)
    assert r.state.obligations["o3"].assignee == "nobody"


def test_declared_or_merged_addressees_and_headers_without_agents_warn_nothing() -> None:
    """A declared agent (also spelled another way), or a header declaring no agents."""
    t = parse_jsonl(_trace(*_route("coder"), *_route("Coder")), file="t.jsonl")
    assert not [w for w in t.warnings if "does not declare" in w]
    t = parse_jsonl(_trace(*_route("nobody"), agents={}), file="t.jsonl")
    assert not [w for w in t.warnings if "does not declare" in w]


def test_a_long_declared_list_is_shortened() -> None:
    many = {f"a{i}": "" for i in range(12)} | {"boss": ""}
    t = parse_jsonl(_trace(*_route("zed"), agents=many), file="t.jsonl")
    said = [w for w in t.warnings if "does not declare" in w]
    assert len(said) == 1 and "'a7' and 5 more)" in said[0]
