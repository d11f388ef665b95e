"""Failure attribution: features, scorer, baselines, protocol, LLM mode (issue 19)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from icore.adapters import (
    AdapterError,
    AuditResult,
    audit_trace,
    parse_captain_agent,
    parse_magentic_one,
)
from icore.adapters._evidence import assumes, content_words, numbers, output_facts, tool_facts
from icore.agents import LLMSettings
from icore.attribution import (
    FEATURES,
    RANDOM,
    SCORER,
    TOLERANCES,
    LLMAttributor,
    ModelSet,
    ScorerModel,
    agent_counts,
    attribute,
    candidates,
    cross_validate,
    feature_names,
    first_error_marker,
    first_output_after_replan,
    first_unsupported,
    fit_model_set,
    fit_scorer,
    group_key,
    last_agent_before_answer,
    majority_agent,
    markdown,
    random_expectation,
    score,
    shipped_models,
    with_llm_rows,
)
from icore.attribution._scorer import MIXES, choose_mix
from icore.cli import app


def _m(d: dict[str, Any]) -> AuditResult:
    return audit_trace(parse_magentic_one(d))


def _c(d: dict[str, Any]) -> AuditResult:
    return audit_trace(parse_captain_agent(d))


def _captains(make_captain: Callable[..., dict[str, Any]], n: int,
              questions: int | None = None) -> list[AuditResult]:
    """``n`` CaptainAgent runs over ``questions`` distinct questions; the culprit varies."""
    out = []
    for i in range(n):
        q = i % (questions or n)
        bad = i % 3 != 0
        hist = [
            {"role": "assistant", "name": "Math_Expert",
             "content": f"You are given a task.\n# General Task\nWhat is {q}*7?\n## Plan\n1. x"},
            {"role": "user", "name": "Python_Expert",
             "content": "```python\nprint(6*7\n```" if bad else "Let us assume 41 for now."},
            {"role": "user", "name": "Computer_terminal",
             "content": "exitcode: 1 (execution failed)\nCode output: SyntaxError"},
            {"role": "user", "name": "Verification_Expert",
             "content": f"I have verified the result: the answer is {40 + q}. TERMINATE"},
        ]
        r = _c(make_captain(
            history=hist, question=f"What is {q}*7?", question_ID=f"q{q}",
            mistake_agent="Python_Expert" if bad else "Verification_Expert",
            mistake_step=1 if bad else 3))
        out.append(replace(r, trace=replace(r.trace, id=f"r{i}")))
    return out


# ------------------------------------------------------------------ vocabulary tables
@pytest.mark.parametrize(("text", "error"), [
    ("Traceback (most recent call last):\n  File x", True),
    ("exitcode: 1 (execution failed)", True),
    ("Error 404 Not Found", True),
    ("I'm sorry, I cannot access that page", True),
    ("No results found for the query", True),
    ("The page shows 42.", False),
    ("I clicked 'Next'.", False),
])
def test_error_vocabulary(text: str, error: bool) -> None:
    """What an error looks like in framework output (the error-marker table)."""
    assert output_facts(text)["error"] is error
    assert tool_facts(text, None)["error"] is error


@pytest.mark.parametrize(("text", "marked"), [
    ("Let's assume the red numbers are 1, 2, 3.", True),
    ("We can simulate the data for now.", True),
    ("Using a placeholder ID 2206.XXXX", True),
    ("The estimated value is 12.", True),
    ("Hypothetically, the answer would be 5.", True),
    ("The script printed 42.", False),
    ("Search results show the museum's address.", False),
])
def test_assumption_vocabulary(text: str, marked: bool) -> None:
    """What an assumed / simulated / made-up result looks like (the assumption table)."""
    assert assumes(text) is marked


def test_numbers_and_content_words() -> None:
    """Numbers lose thousands separators; content words have at least 4 characters."""
    assert numbers("Sold for $850,000 and 950,000.5 in 2022; v2 not.") == {
        "850000", "950000.5", "2022"}
    assert content_words("Please search the web for the list") == {"please", "search",
                                                                   "list"}


# ------------------------------------------------------------------ features
def test_candidates_and_features(magentic: dict[str, Any]) -> None:
    """Candidates are the team's messages (no human, no terminal); every feature is set."""
    r = _m(magentic)
    cs = candidates(r)
    agents = {c.agent for c in cs}
    assert agents <= {"Orchestrator", "WebSurfer"}
    assert 0 not in {c.step for c in cs}
    names = [f.name for f in FEATURES]
    assert len(set(names)) == len(names)
    for c in cs:
        assert set(c.features) == set(names)
        assert all(math.isfinite(v) for v in c.features.values())
    by = {c.step: c.features for c in cs}
    assert by[7]["cert_repeat"] == 1.0 and by[7]["cert_failed"] == 1.0
    assert by[7]["repeat_obs"] == 1.0 and by[4]["repeat_obs"] == 0.0
    assert by[4]["first_of_agent"] == 1.0 and by[7]["first_of_agent"] == 0.0
    assert by[4]["before_stall"] == 1.0 and by[10]["before_stall"] == 0.0
    assert by[1]["revoked"] == 1.0  # the initial plan was superseded by the replan
    assert by[4]["mentions_gt"] == 1.0  # the page shows 42, the ground truth
    assert by[11]["introduces_answer"] == 1.0  # FINAL ANSWER: 41 first stated there
    assert set(feature_names(ground_truth=False)) == set(names) - {"mentions_gt", "after_gt"}


def test_captain_features(captain: dict[str, Any]) -> None:
    """A failed code run is a failed certificate of the code's author; the terminal is no
    candidate; the unsupported verification states a number G never showed."""
    cs = {c.step: c for c in candidates(_c(captain))}
    assert set(cs) == {0, 1, 3}
    assert cs[1].features["cert_code"] == 1.0 and cs[1].features["offers_code"] == 1.0
    assert cs[3].features["novel_numbers"] > 0  # 41: no tool output showed it
    assert sum(c.features["first_novel"] for c in cs.values()) == 1.0


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["web", "err", "same", "claim"]), min_size=1, max_size=8))
def test_features_are_bounded(make_magentic: Callable[..., dict[str, Any]],
                              kinds: list[str]) -> None:
    """Any Magentic-One-shaped run gives finite features in their documented ranges."""
    magentic_run = make_magentic
    d = magentic_run()
    hist = d["history"][:4]
    texts = {"web": "I clicked 'x'.\nHere is a screenshot of [p](https://a.b/c) 12",
             "err": "Error 404 File not found", "same": "The page shows 42.",
             "claim": "Therefore the final answer is 7."}
    for i, k in enumerate(kinds):
        hist.append({"role": "WebSurfer", "content": texts[k]})
        hist.append({"role": "Orchestrator (-> WebSurfer)", "content": f"Do step {i}."})
    hist.append(d["history"][-1])
    cs = candidates(_m(magentic_run(history=hist)))
    for c in cs:
        f = c.features
        assert 0.0 <= f["position"] < 1.0
        assert 0.0 <= f["divergence"] <= 1.0 and 0.0 <= f["unsound"] <= 1.0
        assert 0.0 < f["agent_share"] <= 1.0
        assert all(math.isfinite(v) and v >= 0.0 for v in f.values())


# ------------------------------------------------------------------ baselines
def test_baselines(magentic: dict[str, Any], captain: dict[str, Any]) -> None:
    """Each baseline's rule on the synthetic runs."""
    m, c = _m(magentic), _c(captain)
    assert first_unsupported(m) == ("WebSurfer", 7)
    assert first_error_marker(c) == ("Python_Expert", 1)  # the failed run of its code
    assert last_agent_before_answer(m) == ("WebSurfer", 7)
    assert last_agent_before_answer(c) == ("Python_Expert", 1)
    assert first_output_after_replan(c) == ("Python_Expert", 1)
    counts = agent_counts([m, c])
    assert counts == {"websurfer": 1, "pythonexpert": 1}
    assert majority_agent(c, {"verificationexpert": 3}) == ("Verification_Expert", 3)
    ra, rs = random_expectation(c)
    assert ra == pytest.approx(1 / 3) and rs == pytest.approx(1 / 3)
    assert random_expectation(c, tolerance=5) == (pytest.approx(1 / 3), 1.0)


# ------------------------------------------------------------------ scorer
def test_scorer_learns_and_round_trips(make_captain: Callable[..., dict[str, Any]]) -> None:
    """A scorer fitted on runs whose culprit is the failed code learns to rank it first;
    the JSON form scores identically."""
    runs = _captains(make_captain, 12)
    m = fit_scorer(runs, family="captain_agent", ground_truth=False, c=1.0)
    assert m.runs == 12 and m.features == feature_names(ground_truth=False)
    hits = sum(attribute(r, model=m).step == r.trace.annotation.step  # type: ignore[union-attr]
               for r in runs)
    assert hits >= 10
    back = ScorerModel.from_json(json.loads(json.dumps(m.to_json())))
    r0 = runs[1]
    assert [c.to_json() for c in back.rank(candidates(r0))] == [
        c.to_json() for c in m.rank(candidates(r0))]
    top = attribute(r0, model=m)
    assert top is not None and 1 <= len(top.candidates) <= 3
    assert top.rule == "scorer:captain_agent"
    for c in top.candidates:
        assert all(w > 0 for _, _, w in c.reasons)


def test_mix_is_chosen_on_training_runs(make_captain: Callable[..., dict[str, Any]]) -> None:
    """The per-step agent weight comes from an inner grouped CV over the training runs
    (one of MIXES); with a single question group there is nothing to cross-validate."""
    runs = _captains(make_captain, 8)
    mix = choose_mix(runs, ground_truth=False)
    assert mix in MIXES
    assert fit_scorer(runs, family="captain_agent", ground_truth=False).mix == mix
    one = _captains(make_captain, 4, questions=1)
    assert choose_mix(one, ground_truth=False) == MIXES[0]


def test_fit_needs_annotations(captain: dict[str, Any]) -> None:
    """No annotated failed run: a typed error."""
    ok = _c({**captain, "is_correct": "true"})
    with pytest.raises(AdapterError, match="no annotated failed run"):
        fit_scorer([ok], family="x", ground_truth=False)


def test_shipped_model() -> None:
    """The shipped set has both families and a pooled model, both settings, current features."""
    ms = shipped_models()
    for fam in ("magentic_one", "captain_agent", "any"):
        for gt in (False, True):
            m = ms.get(fam, ground_truth=gt)
            assert m is not None and m.family == fam
            assert m.features == feature_names(ground_truth=gt)
            assert len(m.agent.coef) == 2 * len(m.features)
            assert m.runs > 0 and m.trained_on
    assert ms.get("jsonl", ground_truth=False) is ms.get("any", ground_truth=False)


def test_attribute_defaults(magentic: dict[str, Any]) -> None:
    """Default attribution uses the shipped model; success is not attributed; chain ends
    with the terminal diagnosis."""
    r = _m(magentic)
    a = attribute(r)
    assert a is not None and a.agent in ("WebSurfer", "Orchestrator")
    assert a.rule == "scorer:magentic_one" and a.model
    assert a.chain and a.chain[-1].defect == "terminal"
    assert a.to_json()["candidates"][0]["agent"] == a.agent
    assert attribute(_m({**magentic, "is_corrected": "True"})) is None
    s = score([r], attributions={r.trace.id: a})
    assert s.n == 1 and s.rows[0].agent == a.agent


def test_report_shows_top_candidates(magentic: dict[str, Any], tmp_path: Path) -> None:
    """The run report lists the top three candidates with the features that ranked them."""
    from icore.report import render_report, view_from_audit

    r = _m(magentic)
    a = attribute(r)
    assert a is not None
    html = render_report(view_from_audit(r, attribution=a), tmp_path).read_text("utf-8")
    assert 'id="attribution-candidates"' in html
    c = a.candidates[0]
    assert f"<td>{c.agent}</td><td>{c.step}</td>" in html
    assert c.reasons[0][0] in html and "development half" in html


def test_model_set_json(make_captain: Callable[..., dict[str, Any]]) -> None:
    """A fitted model set round-trips through JSON."""
    ms = fit_model_set(_captains(make_captain, 6), trained_on="test runs")
    back = ModelSet.from_json(json.loads(json.dumps(ms.to_json())))
    assert set(back.models) == set(ms.models) == {("captain_agent", False),
                                                  ("captain_agent", True), ("any", False),
                                                  ("any", True)}


# ------------------------------------------------------------------ protocol
def test_cross_validation_groups_questions(make_captain: Callable[..., dict[str, Any]]) -> None:
    """Runs of one question are never split across folds; every method is scored on every
    run; tolerances are monotone; intervals contain the estimate."""
    runs = _captains(make_captain, 12, questions=4)
    assert len({group_key(r) for r in runs}) == 4
    ev = cross_validate(runs, folds=3, repeats=2, seed=1)
    assert ev.folds == 3
    folds: dict[tuple[int, str], set[int]] = {}
    for p in ev.predictions:
        if p.method == SCORER:
            g = group_key(next(r for r in runs if r.trace.id == p.run))
            folds.setdefault((p.repeat, g), set()).add(p.fold)
    assert all(len(v) == 1 for v in folds.values())
    methods = {r.label for r in ev.rows}
    assert {f"{SCORER} (without GT)", f"{SCORER} (with GT)", RANDOM} <= methods
    assert len(methods) == 8
    for r in ev.rows:
        assert r.n == 12 and r.subset == "captain_agent"
        assert list(r.step) == sorted(r.step) and len(r.step) == len(TOLERANCES)
        assert r.agent_ci[0] - 1e-9 <= r.agent <= r.agent_ci[1] + 1e-9
    text = markdown(ev)
    assert "Algorithm-Generated (captain_agent): 12 runs" in text
    assert "Features and weights" in text and "novel_numbers" in text
    with pytest.raises(ValueError, match="folds"):
        cross_validate(runs, folds=1)


# ------------------------------------------------------------------ LLM mode
class _FakeChat:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 answering by prompt."""

    def __init__(self, answer: Callable[[str], str]) -> None:
        self.prompts: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = body["messages"][-1]["content"]
                fake.prompts.append(user)
                msg = {"role": "assistant", "content": answer(user)}
                out = json.dumps({"id": "c", "object": "chat.completion", "created": 0,
                                  "model": body["model"],
                                  "choices": [{"index": 0, "message": msg,
                                               "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def _judge(user: str) -> str:
    """Blames step 1 all at once; step by step says yes only for step 1."""
    if "Consider step" in user:
        return json.dumps({"error": "Consider step 1 " in user})
    return 'Sure: {"agent": "Python_Expert", "step": 1, "reason": "bad code"}'


@pytest.fixture
def fake_chat() -> Iterator[_FakeChat]:
    """A started fake endpoint."""
    srv = _FakeChat(_judge)
    try:
        yield srv
    finally:
        srv.close()


@pytest.mark.parametrize("mode", ["all-at-once", "step-by-step", "hybrid"])
def test_llm_modes(mode: str, fake_chat: _FakeChat, captain: dict[str, Any]) -> None:
    """Each strategy asks the endpoint with X's evidence in the prompt and parses the answer."""
    att = LLMAttributor(LLMSettings(base_url=fake_chat.url, model="fake"), mode=mode,
                        ground_truth=True)
    a = att.attribute(_c(captain))
    assert a is not None and (a.agent, a.step) == ("Python_Expert", 1)
    assert a.rule == f"llm:{mode}" and att.parse_failures == 0
    assert att.requests == {"all-at-once": 1, "step-by-step": 2, "hybrid": 2}[mode]
    p = fake_chat.prompts[0]
    assert "evidence: " in p and "cert_code" in p and "Correct answer: 42" in p


def test_llm_bad_reply_falls_back(captain: dict[str, Any]) -> None:
    """A reply that is not JSON falls back to the scorer and is counted."""
    srv = _FakeChat(lambda _u: "no idea")
    try:
        att = LLMAttributor(LLMSettings(base_url=srv.url, model="fake"), mode="all-at-once")
        r = _c(captain)
        a = att.attribute(r)
        base = attribute(r)
        assert a is not None and base is not None and (a.agent, a.step) == (base.agent,
                                                                            base.step)
        assert att.parse_failures == 1 and "fallback" in a.rule
    finally:
        srv.close()
    with pytest.raises(AdapterError, match="unknown LLM attribution mode"):
        LLMAttributor(LLMSettings(base_url=srv.url), mode="vibes")


@pytest.mark.parametrize("step", ["\u00b2", "\u0661", " \u0663 "])
def test_llm_step_in_other_digits_falls_back(captain: dict[str, Any], step: str) -> None:
    """A reply's step in non-ASCII digits ("²": isdigit, int() raises) is no step (#29)."""
    reply = json.dumps({"agent": "nobody", "step": step, "reason": "x"})
    srv = _FakeChat(lambda _u: reply)
    try:
        att = LLMAttributor(LLMSettings(base_url=srv.url, model="fake"), mode="all-at-once")
        a = att.attribute(_c(captain))
        assert a is not None and "fallback" in a.rule
    finally:
        srv.close()


def test_llm_rows_in_the_table(fake_chat: _FakeChat,
                               make_captain: Callable[..., dict[str, Any]]) -> None:
    """The bench adds an out-of-fold LLM row per subset."""
    runs = _captains(make_captain, 6)
    ev = cross_validate(runs, folds=2, repeats=1)
    att = LLMAttributor(LLMSettings(base_url=fake_chat.url, model="fake"), mode="all-at-once")
    ev2 = with_llm_rows(ev, runs, att)
    row = next(r for r in ev2.rows if r.method.startswith("LLM"))
    assert row.n == 6 and row.step[0] == pytest.approx(4 / 6)  # step 1 right in 4 of 6


# ------------------------------------------------------------------ CLI
def test_bench_cli(tmp_path: Path, make_captain: Callable[..., dict[str, Any]]) -> None:
    """``icore bench attribution`` prints the per-subset table and writes the model file."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for i in range(6):
        q = i
        d = make_captain(question=f"What is {q}*7?", question_ID=f"q{q}",
                         mistake_step=1 if i % 2 else 3,
                         mistake_agent="Python_Expert" if i % 2 else "Verification_Expert")
        (runs / f"{i}.json").write_text(json.dumps(d), encoding="utf-8")
    model = tmp_path / "m.json"
    res = CliRunner().invoke(app, ["bench", "attribution", str(runs), "--folds", "2",
                                   "--repeats", "1", "--out", str(tmp_path / "out"),
                                   "--write-model", str(model)])
    assert res.exit_code == 0, res.output
    for word in ("Algorithm-Generated", "uniform random", "majority agent",
                 "first error marker", "last agent before the final answer",
                 "first output after the last replan", "with GT", "±5", "Features and weights"):
        assert word in res.output, word
    assert ModelSet.from_json(json.loads(model.read_text(encoding="utf-8"))).get(
        "captain_agent", ground_truth=False) is not None
    assert (tmp_path / "out" / "predictions.csv").exists()


def test_audit_cli_llm_mode(tmp_path: Path, fake_chat: _FakeChat,
                            captain: dict[str, Any]) -> None:
    """``icore audit --attribution --llm-base-url`` asks the endpoint; the default does not."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "1.json").write_text(json.dumps(captain), encoding="utf-8")
    res = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--attribution"])
    assert res.exit_code == 0, res.output
    assert "top candidates" in res.output and not fake_chat.prompts
    res = CliRunner().invoke(app, ["audit", str(runs), "--no-report", "--attribution",
                                   "--llm-base-url", fake_chat.url, "--llm-model", "fake",
                                   "--llm-mode", "all-at-once"])
    assert res.exit_code == 0, res.output
    assert len(fake_chat.prompts) == 1 and "evidence:" in fake_chat.prompts[0]
