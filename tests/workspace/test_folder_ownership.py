"""One SQLite folder, one ownership map (#28, QA qa-new13b S2, SAFETY).

Two processes opened one ``Workspace.sqlite`` folder with different owners for
``campaign/*``: the second saw nothing, wrote its own ``mkt.db``, and the first one's
fenced call ran on a fact that had moved on. The folder now records the maps it is
opened with (``ownership.sqlite``) and refuses a map routing a key to another owner: at
open for a same pattern or a sample key, at first use for other overlaps.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.memory import OwnershipMap, SQLiteStore
from icore.workspace import Workspace, WorkspaceError
from icore.workspace._folder_map import RECORD_NAME, samples

SRC = str(Path(__file__).resolve().parents[2] / "src")

# Process A of the QA repro: reads the launch date, plans, waits for B, then runs its
# fenced call. Prints what ran.
_A = r"""
import json, os, sys, time
from icore.workspace import Workspace
folder = sys.argv[1]
ws = Workspace.sqlite({"campaign/*": "marketing"}, folder)
ws.put("campaign/spring", {"launch": "2026-12-24"})
desk = ws.agent("ops-desk")
day = desk.read("campaign/spring")["launch"]
open(os.path.join(folder, "A_read"), "w").close()
while not os.path.exists(os.path.join(folder, "B_done")):
    time.sleep(0.02)
call = desk.execute("schedule_post", lambda day: f"posted {day}", {"day": day},
                    depends_on={"campaign/spring"})
print(json.dumps({"executed": call.executed, "reason": call.reason}))
"""

# Process B: another map for the same folder; tries to move the launch date.
_B = r"""
import json, os, sys
from icore.workspace import Workspace, WorkspaceError
folder, facts = sys.argv[1], json.loads(sys.argv[2])
try:
    ws = Workspace.sqlite(facts, folder)
    seen = ws.value("campaign/spring", default=None)
    ws.put("campaign/spring", {"launch": "2027-01-10"})
    out = {"wrote": True, "seen": seen}
except WorkspaceError as exc:
    out = {"refused": str(exc), "fields": {k: v for k, v in exc.fields.items()}}
open(os.path.join(folder, "B_done"), "w").close()
print(json.dumps(out))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC}


def _run(code: str, *args: str, timeout: float = 60) -> dict[str, Any]:
    import json
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                         text=True, env=_env(), timeout=timeout, check=False)
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def _qa_repro(folder: Path, b_facts: str) -> tuple[dict[str, Any], dict[str, Any]]:
    import json
    a = subprocess.Popen([sys.executable, "-c", _A, str(folder)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.monotonic() + 60
        while not (folder / "A_read").exists():
            assert a.poll() is None, a.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.02)
        b = _run(_B, str(folder), b_facts)
        out, err = a.communicate(timeout=60)
        assert a.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1]), b
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(10)


@pytest.mark.timeout(120)
def test_qa_repro_other_owner_for_the_same_pattern_is_refused_at_open(tmp_path: Path
                                                                       ) -> None:
    """QA repro, two real processes: B names ``mkt`` for ``campaign/*`` where A named
    ``marketing``; B is refused at open naming the pattern, both owners and the folder,
    no ``mkt.db`` is made, and A's call runs on the date it read (nothing moved it)."""
    a, b = _qa_repro(tmp_path, '{"campaign/*": "mkt"}')
    assert "refused" in b, b
    f = b["fields"]
    assert f["pattern"] == "campaign/*"
    assert {f["owner"], f["other_owner"]} == {"mkt", "marketing"}
    assert f["folder"] == str(tmp_path)
    assert not list(tmp_path.glob("mkt.db*"))
    assert a == {"executed": True, "reason": "valid"}


@pytest.mark.timeout(120)
def test_same_map_in_two_processes_still_moves_the_fact_and_blocks_the_stale_call(
        tmp_path: Path) -> None:
    """The control: B with the same map writes the new date, and A's call is stale."""
    a, b = _qa_repro(tmp_path, '{"campaign/*": "marketing", "slot/*": "ops"}')
    assert b == {"wrote": True, "seen": {"launch": "2026-12-24"}}
    assert a == {"executed": False, "reason": "stale"}


@pytest.mark.timeout(120)
def test_overlap_only_first_use_shows_is_refused_in_the_second_process(tmp_path: Path
                                                                       ) -> None:
    """``a/b*`` of another owner, masked at its sample keys (``a/b``, ``a/b0``): the open
    passes; the first use of ``a/b1`` (routed x by one map, y by the other) is refused
    in the later process, while consistent keys work."""
    code = r"""
import json, sys
from icore.workspace import Workspace, WorkspaceError
ws = Workspace.sqlite(json.loads(sys.argv[2]), sys.argv[1])
out = {}
for key in sys.argv[3:]:
    try:
        ws.put(key, 1)
        out[key] = "ok"
    except WorkspaceError as exc:
        out[key] = [exc.fields["key"], exc.fields["owner"], exc.fields["other_owner"]]
print(json.dumps(out))
"""
    first = _run(code, str(tmp_path), '{"a/*": "x"}', "a/c")
    assert first == {"a/c": "ok"}
    masked = '{"a/*": "x", "a/b*": "y", "a/b": "x", "a/b0": "x"}'
    second = _run(code, str(tmp_path), masked, "a/c", "a/b", "a/b1")
    assert second == {"a/c": "ok", "a/b": "ok", "a/b1": ["a/b1", "y", "x"]}
    again = _run(code, str(tmp_path), '{"a/*": "x"}', "a/b1")  # both maps recorded
    assert again == {"a/b1": ["a/b1", "x", "y"]}


def test_exact_key_overlapping_a_pattern_is_refused_at_open(tmp_path: Path) -> None:
    """``campaign/launch: mkt`` next to ``campaign/*: marketing``: refused at open."""
    Workspace.sqlite({"campaign/*": "marketing"}, tmp_path).close()
    with pytest.raises(WorkspaceError, match="different owners") as ei:
        Workspace.sqlite({"campaign/launch": "mkt"}, tmp_path)
    assert ei.value.fields["key"] == "campaign/launch"
    assert ei.value.fields["record"] == str(tmp_path / RECORD_NAME)


def test_a_map_that_adds_consistent_patterns_extends_the_record(tmp_path: Path) -> None:
    """New patterns are fine; the same map opened again adds no row; rows only grow."""
    with Workspace.sqlite({"campaign/*": "marketing"}, tmp_path) as ws:
        ws.put("campaign/spring", {"launch": "2026-12-24"})
    with Workspace.sqlite({"campaign/*": "marketing", "slot/*": "ops",
                           "campaign/launch": "marketing"}, tmp_path) as ws:
        assert ws.value("campaign/spring") == {"launch": "2026-12-24"}
        ws.put("slot/x", 1)
    Workspace.sqlite({"campaign/*": "marketing"}, tmp_path).close()
    db = sqlite3.connect(tmp_path / RECORD_NAME)
    try:
        rows = db.execute("SELECT entries FROM maps ORDER BY entries").fetchall()
    finally:
        db.close()
    assert len(rows) == 2


def test_folder_without_record_is_checked_against_what_its_files_hold(tmp_path: Path
                                                                      ) -> None:
    """A folder from before the record (the QA's ``marketing.db`` and ``mkt.db`` both
    holding ``campaign/spring``): every map is refused, naming the file's owner; a
    folder whose files agree gets its record and keeps its data."""
    for owner in ("marketing", "mkt"):
        ws = Workspace(OwnershipMap.from_mapping({"campaign/*": owner}),
                       stores={owner: SQLiteStore(tmp_path / f"{owner}.db",
                                                  OwnershipMap.from_mapping(
                                                      {"campaign/*": owner}), owner)})
        ws.put("campaign/spring", {"by": owner})
        ws.stores[owner].close()
    for mine, other in (("marketing", "mkt"), ("mkt", "marketing")):
        with pytest.raises(WorkspaceError, match="different owners") as ei:
            Workspace.sqlite({"campaign/*": mine}, tmp_path)
        assert (ei.value.fields["owner"], ei.value.fields["other_owner"]) == (mine, other)
        assert f"{other}.db holds it" in ei.value.fields["fix"]
    assert not (tmp_path / RECORD_NAME).exists() or _rows(tmp_path) == 0
    ok = tmp_path / "ok"
    om = OwnershipMap.from_mapping({"campaign/*": "marketing"})
    ws = Workspace(om, stores={"marketing": SQLiteStore(ok / "marketing.db", om,
                                                        "marketing")})
    ws.put("campaign/spring", {"launch": "2026-12-24"})
    ws.stores["marketing"].close()
    with Workspace.sqlite({"campaign/*": "marketing"}, ok) as again:
        assert again.value("campaign/spring") == {"launch": "2026-12-24"}
    assert _rows(ok) == 1


def _rows(folder: Path) -> int:
    db = sqlite3.connect(folder / RECORD_NAME)
    try:
        return int(db.execute("SELECT count(*) FROM maps").fetchone()[0])
    finally:
        db.close()


@pytest.mark.timeout(120)
def test_two_processes_opening_at_once_with_conflicting_maps_one_wins(tmp_path: Path
                                                                      ) -> None:
    """Opens are serialized by the record's write lock: of two processes opening at the
    same moment with ``campaign/*`` -> marketing / mkt, exactly one opens."""
    import json
    code = r"""
import json, os, sys, time
from icore.workspace import Workspace, WorkspaceError
go = sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.005)
try:
    Workspace.sqlite({"campaign/*": sys.argv[2]}, sys.argv[1]).close()
    print(json.dumps("opened"))
except WorkspaceError:
    print(json.dumps("refused"))
"""
    folder = tmp_path / "f"
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(folder), o, str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env()) for o in ("marketing", "mkt")]
    try:
        time.sleep(1.0)
        go.touch()
        got = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            got.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)
    assert sorted(got) == ["opened", "refused"]


def test_samples_match_their_pattern() -> None:
    """Every sample key matches its pattern (classes, negated classes, ``?``, ``*``)."""
    import fnmatch
    for pat in ("a/*", "a/?c", "a/[xy]*", "a/[!0]", "x", "a/[]]b", "a/*/[a-c]?"):
        got = samples(pat)
        assert got and all(fnmatch.fnmatchcase(k, pat) for k in got), (pat, got)


# -- property: conflicting maps always refused, consistent maps never ---------------------
PATTERNS = ["a/*", "b/*", "a/b*", "a/b1", "a/c", "b/x"]
KEYS = ["a/b1", "a/b2", "a/c", "a/d", "b/x", "b/y"]  # one per routing class of PATTERNS
OWNERS = ["x", "y", "z"]
maps = st.dictionaries(st.sampled_from(PATTERNS), st.sampled_from(OWNERS), min_size=1)


def _routes(m: dict[str, str]) -> dict[str, str | None]:
    om = OwnershipMap.from_mapping(m)
    return {k: om.owner_of(k) for k in KEYS}


def _use(ws: Workspace, key: str) -> bool:
    try:
        ws.owner_of(key)
        return True
    except WorkspaceError:
        return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(first=maps, second=maps)
def test_property_conflicting_maps_refused_consistent_maps_never(
        tmp_path_factory: pytest.TempPathFactory, first: dict[str, str],
        second: dict[str, str]) -> None:
    """Two maps on one folder: when some key is routed to two owners (or one pattern
    names two), the second map is refused at open or at first use of every such key;
    when none is, both open and every key is usable in both."""
    folder = tmp_path_factory.mktemp("prop")
    r1, r2 = _routes(first), _routes(second)
    differ = [k for k in KEYS if r1[k] and r2[k] and r1[k] != r2[k]]
    same_pattern = [p for p in first if p in second and first[p] != second[p]]
    with Workspace.sqlite(first, folder) as w1:
        if differ or same_pattern:
            try:
                w2 = Workspace.sqlite(second, folder)
            except WorkspaceError:
                return  # refused at open
        else:
            w2 = Workspace.sqlite(second, folder)  # never refused
        with w2:
            if differ:
                assert not any(_use(w2, k) for k in differ)
            else:
                assert not same_pattern
                assert all(_use(w2, k) for k in KEYS if r2[k])
                assert all(_use(w1, k) for k in KEYS if r1[k])


def test_first_use_check_covers_a_fenced_calls_depends_on(tmp_path: Path) -> None:
    """The first-use refusal also reaches a call's ``depends_on`` (``check_keys``): the
    call never runs on a key another recorded map gives another owner."""
    Workspace.sqlite({"a/*": "x", "a/b*": "y", "a/b": "x", "a/b0": "x"}, tmp_path).close()
    ran: list[int] = []
    with Workspace.sqlite({"a/*": "x"}, tmp_path) as ws:
        with pytest.raises(WorkspaceError, match="different owners") as ei:
            ws.check_keys({"a/b1"}, where="depends_on")
        assert ei.value.fields["key"] == "a/b1"
        with pytest.raises(WorkspaceError, match="different owners"):
            ws.agent("desk").execute("act", lambda: ran.append(1), {},
                                     depends_on={"a/b1"})
    assert ran == []
