"""The one invalid-action verdict (issue 26 item 2): ``judge_action`` / ``action_status``.

The four places that judged an executed action before issue 26 (paper replay, live run,
report lineage status, CLI ``--fail-on invalid``) are copied here verbatim as the
reference; for random dependency scopes, frontiers and heads the new single function,
called the way each caller now calls it, must agree with each of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import example, given
from hypothesis import strategies as st

from icore.fence import ActionVerdict, KeyCheck, action_status, judge_action

IDS = st.sampled_from(["r0", "r1", "r2", "r3"])
KEYS = st.sampled_from(["req/a", "req/b", "plan/c", "inv/d"])
DEPS = st.lists(KEYS, max_size=4)
MAPS = st.dictionaries(KEYS, IDS, max_size=4)
HEADS = st.dictionaries(KEYS, st.none() | IDS, max_size=4)


# -- the four old expressions, as they were -----------------------------------------------
def old_replay(fr: Mapping[str, str] | None, deps: Sequence[str],
               heads: Mapping[str, str | None]) -> bool:
    """bench/planfence/_replay.py ``Episode._is_invalid`` (fr None = LineageError)."""
    if fr is None:
        return True
    for k in deps:
        h = heads.get(k)
        if h is None or fr.get(k) != h:
            return True
    return False


def old_live(req_head: str, parents: Sequence[str]) -> bool:
    """live/_live.py: ``st["invalid"] = req_head["id"] not in parents``."""
    return req_head not in parents


def old_report(authorized: bool | None, deps: Sequence[str], frontier: Mapping[str, str],
               heads: Mapping[str, str], source: str) -> tuple[str, tuple[str, ...]]:
    """report/_lineage_view.py ``_validation``'s stale + ``lineage_view``'s status."""
    stale = tuple(k for k in deps if k in frontier and k in heads and frontier[k] != heads[k])
    if authorized is None:
        status = "not issued"
    elif authorized:
        unknown = source == "none" and bool(deps)
        status = "INVALID" if stale else "unchecked" if unknown else "valid"
    else:
        status = "blocked"
    return status, stale


def old_cli(lineage: Sequence[Mapping[str, str]]) -> bool:
    """cli/_audit_json.py ``failing``'s ``invalid`` condition over ``run_json["lineage"]``."""
    return any(lv["status"] == "INVALID" for lv in lineage)


# -- the callers' new forms -----------------------------------------------------------------
def new_replay(fr: Mapping[str, str] | None, deps: Sequence[str],
               heads: Mapping[str, str | None]) -> bool:
    return judge_action(deps, fr, heads).invalid(ground_truth=True)


def new_live(req_key: str, r0: str, req_head: str, parents: Sequence[str]) -> bool:
    frontier = ({req_key: req_head} if req_head in parents
                else {req_key: r0} if r0 in parents else {})
    return judge_action((req_key,), frontier, {req_key: req_head}).invalid(ground_truth=True)


def new_report(authorized: bool | None, deps: Sequence[str], frontier: Mapping[str, str],
               heads: Mapping[str, str], source: str) -> tuple[str, tuple[str, ...]]:
    v = judge_action(deps, frontier, heads)
    return action_status(authorized, v, frontier_known=source != "none"), v.stale


REPORT_CASE = st.tuples(st.none() | st.booleans(), DEPS, MAPS,
                        st.dictionaries(KEYS, IDS, max_size=4), st.booleans())


def _report_args(case: tuple[bool | None, list[str], dict[str, str], dict[str, str], bool]
                 ) -> tuple[bool | None, list[str], dict[str, str], dict[str, str], str]:
    authorized, deps, frontier, heads, from_gate = case
    source = ("gate" if from_gate else "plan parents") if frontier else "none"
    return authorized, deps, frontier, heads, source


@given(st.none() | MAPS, DEPS, HEADS)
@example(None, [], {})
@example({"req/a": "r1"}, ["req/a"], {"req/a": None})
def test_replay_form_agrees(fr: dict[str, str] | None, deps: list[str],
                            heads: dict[str, str | None]) -> None:
    assert new_replay(fr, deps, heads) == old_replay(fr, deps, heads)


@given(KEYS, IDS, IDS, st.lists(IDS, max_size=3))
def test_live_form_agrees(req_key: str, r0: str, req_head: str, parents: list[str]) -> None:
    assert new_live(req_key, r0, req_head, parents) == old_live(req_head, parents)


@given(REPORT_CASE)
@example((True, [], {}, {}, False))  # no deps, no frontier: valid, not unchecked
@example((True, ["req/a"], {}, {"req/a": "r1"}, False))  # unchecked
@example((True, ["req/a", "req/a"], {"req/a": "r1"}, {"req/a": "r2"}, True))
def test_report_form_agrees(case: tuple[bool | None, list[str], dict[str, str],
                                        dict[str, str], bool]) -> None:
    args = _report_args(case)
    assert new_report(*args) == old_report(*args)


@given(st.lists(REPORT_CASE, max_size=4))
def test_cli_form_agrees(cases: list[tuple[bool | None, list[str], dict[str, str],
                                          dict[str, str], bool]]) -> None:
    old = [{"status": old_report(*_report_args(c))[0]} for c in cases]
    invalid_actions = sum(new_report(*_report_args(c))[0] == "INVALID" for c in cases)
    assert (invalid_actions > 0) == old_cli(old)


# -- the verdict itself ------------------------------------------------------------------------
def test_per_key_checks_in_deps_order() -> None:
    v = judge_action(["b", "a", "c", "d"], {"a": "1", "b": "2", "d": "4"},
                     {"a": "1", "b": "9", "c": "3", "d": None})
    assert v == ActionVerdict((("b", KeyCheck.STALE), ("a", KeyCheck.CURRENT),
                               ("c", KeyCheck.UNKNOWN), ("d", KeyCheck.UNKNOWN)), True)
    assert v.stale == ("b",)
    assert v.invalid(ground_truth=False)
    assert v.invalid(ground_truth=True)


def test_unknown_is_invalid_only_as_ground_truth() -> None:
    v = judge_action(["a", "b"], {"a": "1"}, {"a": "1", "b": "2"})
    assert v.stale == ()
    assert not v.invalid(ground_truth=False)
    assert v.invalid(ground_truth=True)
    assert not judge_action(["a"], {"a": "1"}, {"a": "1"}).invalid(ground_truth=True)


def test_unreadable_frontier() -> None:
    v = judge_action(["a", "b"], None, {"a": "1", "b": "2"})
    assert not v.lineage_ok
    assert all(c is KeyCheck.UNKNOWN for _, c in v.keys)
    assert v.invalid(ground_truth=True)
    assert not v.invalid(ground_truth=False)
    assert judge_action([], None, {}).invalid(ground_truth=True)
    assert not judge_action([], {}, {}).invalid(ground_truth=True)


def test_action_status_values() -> None:
    stale = judge_action(["a"], {"a": "1"}, {"a": "2"})
    fine = judge_action(["a"], {"a": "1"}, {"a": "1"})
    unread = judge_action(["a"], {}, {"a": "1"})
    assert action_status(None, fine, frontier_known=True) == "not issued"
    assert action_status(False, stale, frontier_known=True) == "blocked"
    assert action_status(True, stale, frontier_known=True) == "INVALID"
    assert action_status(True, unread, frontier_known=False) == "unchecked"
    assert action_status(True, fine, frontier_known=True) == "valid"
    assert action_status(True, judge_action([], {}, {}), frontier_known=False) == "valid"
    assert KeyCheck.STALE == "stale"
