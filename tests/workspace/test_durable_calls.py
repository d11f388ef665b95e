"""A protected call's first attempt kept on disk: never run twice across a restart (#30).

The plain workspace API: ``Agent.execute(..., call_id=)`` on a ``Workspace.sqlite``
folder. Real SQLite files, real processes (one SIGKILLed inside the tool body, two racing
one call), and a hypothesis state machine over the attempts table against a model.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from tests._procs import kill_inside_body

from icore.workspace import (
    ALREADY_RAN,
    CALL_RUNNING,
    EARLIER_UNKNOWN,
    NOT_READ,
    NoEffect,
    Workspace,
    WorkspaceError,
)
from icore.workspace._durable_calls import (
    FILE_NAME,
    LOCKS,
    RAN,
    UNKNOWN,
    AttemptsFile,
    Found,
)

pytestmark = pytest.mark.timeout(120)

SRC = str(Path(__file__).resolve().parents[2] / "src")
FACTS = {"pay/*": "billing"}


def _desk(folder: Path) -> Any:
    ws = Workspace.sqlite(FACTS, folder)
    if ws.head("pay/A1") is None:
        ws.put("pay/A1", {"due": 80})
    desk = ws.agent("desk")
    desk.read("pay/A1")
    return desk


def _pay(ran: list[str]) -> Any:
    def pay(order: str) -> str:
        ran.append(order)
        return f"paid {order}"
    return pay


def test_the_same_call_runs_once_and_is_answered_already_ran(tmp_path: Path) -> None:
    desk, ran = _desk(tmp_path), []
    first = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                         call_id="c1")
    again = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                         call_id="c1")
    other = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                         call_id="c2")  # another model call: a new decision, gated
    assert first.executed and other.executed and ran == ["A1", "A1"]
    assert not again.executed and again.reason == ALREADY_RAN
    assert "paid A1" in again.message and "not run again" in again.message
    assert (tmp_path / FILE_NAME).exists()


def test_without_a_folder_or_a_call_id_nothing_is_kept(tmp_path: Path) -> None:
    ws = Workspace(FACTS)
    ws.put("pay/A1", {"due": 80})
    desk, ran = ws.agent("desk"), []
    desk.read("pay/A1")
    for _ in range(2):
        assert desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                            call_id="c1").executed
    disk = _desk(tmp_path)
    for _ in range(2):
        assert disk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"]).executed
    assert len(ran) == 4


@pytest.mark.parametrize("bad", ["", 7, b"c1", "x" * 1001])
def test_a_call_id_that_is_no_text_is_refused(tmp_path: Path, bad: Any) -> None:
    desk, ran = _desk(tmp_path), []
    with pytest.raises(WorkspaceError, match="call_id"):
        desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"], call_id=bad)
    assert ran == []


def test_a_raising_body_spends_its_reads_and_is_told_once(tmp_path: Path) -> None:
    """Issue gap 2: ``Agent.execute`` whose function raises spends its reads (the
    integrations' rule); the same call again is refused ``earlier_outcome_unknown`` once,
    which spends the reads made before it again (a call after it needs a fresh read)."""
    desk, ran = _desk(tmp_path), []

    def timeout(order: str) -> str:
        ran.append(order)
        raise TimeoutError("carrier did not answer")

    with pytest.raises(TimeoutError):
        desk.execute("pay", timeout, {"order": "A1"}, depends_on=["pay/A1"], call_id="c1")
    spent = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"])
    assert spent.reason == NOT_READ and spent.spent == ("pay/A1",) and ran == ["A1"]
    desk.read("pay/A1")  # the check the model is told to make
    told = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                        call_id="c1")
    assert told.reason == EARLIER_UNKNOWN and "TimeoutError" in told.message
    assert "outcome is unknown" in told.message and ran == ["A1"]
    replay = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                          call_id="c1")  # the same call again (a saved state resumed)
    assert replay.reason == EARLIER_UNKNOWN and ran == ["A1"]  # QA qa-new18a S1
    blind = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                         call_id="c3")  # the refusal spent the read (QA 17b #1)
    assert blind.reason == NOT_READ and blind.spent == ("pay/A1",) and ran == ["A1"]
    desk.read("pay/A1")
    after = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                         call_id="c3")  # the model's new call after its check
    assert after.executed and ran == ["A1", "A1"]


def test_an_exception_whose_str_raises_reaches_the_caller_unchanged(tmp_path: Path) -> None:
    class Odd(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    desk, ran = _desk(tmp_path), []

    def odd(order: str) -> str:
        ran.append(order)
        raise Odd()

    with pytest.raises(Odd):
        desk.execute("pay", odd, {"order": "A1"}, depends_on=["pay/A1"], call_id="c1")
    told = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                        call_id="c1")
    assert told.reason == EARLIER_UNKNOWN and "Odd" in told.message and ran == ["A1"]


def test_no_effect_spends_nothing_and_keeps_nothing(tmp_path: Path) -> None:
    desk, ran = _desk(tmp_path), []

    def declined(order: str) -> str:
        ran.append(order)
        raise NoEffect("card declined")

    with pytest.raises(NoEffect):
        desk.execute("pay", declined, {"order": "A1"}, depends_on=["pay/A1"], call_id="c1")
    retry = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                         call_id="c1")
    assert retry.executed and ran == ["A1", "A1"]


def test_async_calls_are_kept_too(tmp_path: Path) -> None:
    import asyncio

    desk, ran = _desk(tmp_path), []

    async def pay(order: str) -> str:
        ran.append(order)
        return "paid"

    async def twice() -> list[Any]:
        return [await desk.aexecute("pay", pay, {"order": "A1"}, depends_on=["pay/A1"],
                                    call_id="c9") for _ in range(2)]

    first, again = asyncio.run(twice())
    assert first.executed and again.reason == ALREADY_RAN and ran == ["A1"]


def test_finished_calls_are_pruned_by_age_and_count(tmp_path: Path) -> None:
    f = AttemptsFile(tmp_path, keep_s=3600, keep_rows=3)
    try:
        for i in range(6):
            assert f.claim(f"k{i}", "pay") is None
            f.settle(f"k{i}", RAN, i)
        assert f.claim("live", "pay") is None  # a claim of a live holder is kept
        with closing(sqlite3.connect(tmp_path / FILE_NAME)) as db, db:
            db.execute("UPDATE calls SET at = at - 7200 WHERE key IN ('k5', 'live')")
        f.prune()
        rows = f.rows()
        assert sorted(rows) == ["k2", "k3", "k4", "live"]  # k5 too old, k0/k1 beyond 3
    finally:
        f.close()
    with pytest.raises(ValueError, match="keep_s"):
        AttemptsFile(tmp_path, keep_s=0)


def test_a_dead_holders_claim_is_unknown_a_live_ones_is_running(tmp_path: Path) -> None:
    a, b = AttemptsFile(tmp_path), AttemptsFile(tmp_path)
    try:
        assert a.claim("k", "pay") is None
        assert b.claim("k", "pay") == Found(CALL_RUNNING)  # a is alive
        assert b.look("k") == Found(CALL_RUNNING)
        a.close()  # its process ended: the kernel drops the lock
        found = b.claim("k", "pay")
        assert found is not None and found.how == EARLIER_UNKNOWN
        again = b.claim("k", "pay")  # told: the same call replayed never runs
        assert again is not None and again.how == EARLIER_UNKNOWN
        assert b.claim("k2", "pay") is None  # a new call id is a new attempt
        assert not any(p.stem == a.holder for p in (tmp_path / LOCKS).iterdir())
    finally:
        b.close()


# --- real processes ----------------------------------------------------------------------

APP = '''
import os, sys, time
from icore.workspace import Workspace
PHASE, DB = sys.argv[1], sys.argv[2]
ws = Workspace.sqlite({"pay/*": "billing"}, DB)
if ws.head("pay/A1") is None:
    try:
        ws.put("pay/A1", {"due": 80})
    except Exception:
        pass  # the other racer wrote it
desk = ws.agent("desk")
desk.read("pay/A1")
def pay(order):
    with open(os.path.join(DB, "effects.log"), "a") as f:
        f.write(f"{PHASE} {os.getpid()} pay {order}\\n")
    time.sleep(100 if PHASE == "run" else 1.0)
    return "paid"
if PHASE == "race":
    while not os.path.exists(os.path.join(DB, "go")):
        time.sleep(0.005)
call = desk.execute("pay", pay, {"order": "A1"}, depends_on=["pay/A1"], call_id="msg-7/c2")
print("CALL", call.executed, call.reason, call.message.replace("\\n", " "))
'''


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC}


def _effects(db: Path) -> list[str]:
    path = db / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
def test_killed_inside_the_body_then_restarted_is_refused(tmp_path: Path) -> None:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APP)
    kill_inside_body(app, db, _env(), timeout_s=60)
    again = subprocess.run([sys.executable, str(app), "resume", str(db)], env=_env(),
                           capture_output=True, text=True, timeout=60, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"CALL False {EARLIER_UNKNOWN}" in again.stdout
    assert "never finished" in again.stdout and "check its effect" in again.stdout
    assert len(_effects(db)) == 1  # the body ran once


@pytest.mark.slow
def test_two_processes_racing_one_call_run_its_body_once(tmp_path: Path) -> None:
    app, db = tmp_path / "app.py", tmp_path / "db"
    app.write_text(APP)
    Workspace.sqlite(FACTS, db).put("pay/A1", {"due": 80})
    procs = [subprocess.Popen([sys.executable, str(app), "race", str(db)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    time.sleep(0.2)
    (db / "go").touch()
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    said = sorted(line for o, _ in outs for line in o.splitlines() if line.startswith("CALL"))
    assert len(_effects(db)) == 1, _effects(db)
    assert said[1].startswith("CALL True valid")
    assert said[0].startswith(f"CALL False {CALL_RUNNING}") or \
        said[0].startswith(f"CALL False {ALREADY_RAN}")


# --- the attempts table's state machine ---------------------------------------------------


class AttemptsMachine(RuleBasedStateMachine):
    """Two holders (processes) on one attempts file against a model of its rows.

    The model: key -> ("started", holder) | ("ran",) | ("unknown",) | ("told",) | absent.
    A claim succeeds only on an absent key; a started key of a live holder answers
    running, of a dead one (closed) unknown, and so does a told one, every time (QA
    qa-new18a S1); ran answers already ran.
    """

    KEYS = st.sampled_from(["a", "b"])
    WHO = st.sampled_from([0, 1])

    def __init__(self) -> None:
        super().__init__()
        import tempfile
        self.dir = Path(tempfile.mkdtemp(prefix="icore-attempts-"))
        self.files = [AttemptsFile(self.dir), AttemptsFile(self.dir)]
        self.model: dict[str, tuple[Any, ...]] = {}
        self.bodies: dict[str, int] = {}

    def _expect(self, key: str, who: int) -> str | None:
        got = self.model.get(key)
        if got is None:
            return None
        if got[0] == "ran":
            return ALREADY_RAN
        if got[0] == "started" and got[2] == self.files[got[1]].holder:
            return CALL_RUNNING  # its holder lives (this process or the other)
        return EARLIER_UNKNOWN

    def _seen(self, key: str, who: int, found: Found | None, claim: bool) -> None:
        want = self._expect(key, who)
        assert (found.how if found else None) == want, (key, who, found, self.model)
        if want == EARLIER_UNKNOWN:
            self.model[key] = ("told",)  # refuses the same call from now on
        elif want is None and claim:
            self.model[key] = ("started", who, self.files[who].holder)
            self.bodies[key] = self.bodies.get(key, 0) + 1

    @rule(key=KEYS, who=WHO)
    def claim(self, key: str, who: int) -> None:
        self._seen(key, who, self.files[who].claim(key, "pay"), True)

    @rule(key=KEYS, who=WHO)
    def look(self, key: str, who: int) -> None:
        self._seen(key, who, self.files[who].look(key), False)

    @rule(key=KEYS, how=st.sampled_from([RAN, UNKNOWN, None]))
    def settle(self, key: str, how: str | None) -> None:
        got = self.model.get(key)
        if got is None or got[0] != "started" or got[2] != self.files[got[1]].holder:
            return  # only the live claimer settles its own claim
        self.files[got[1]].settle(key, how, "v")
        if how is None:
            del self.model[key]
        else:
            self.model[key] = (how,)

    @rule(who=WHO)
    def restart(self, who: int) -> None:
        """The holder's process dies (kill -9: its lock dropped); a new one takes its place."""
        self.files[who].close()
        self.files[who] = AttemptsFile(self.dir)

    @invariant()
    def no_claim_is_won_twice(self) -> None:
        rows = self.files[0].rows()
        started = [k for k, (how, _) in rows.items() if how == "started"]
        assert sorted(started) == sorted(k for k, m in self.model.items() if m[0] == "started")

    def teardown(self) -> None:
        for f in self.files:
            f.close()


AttemptsMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25,
                                             deadline=None)
TestAttemptsTable = AttemptsMachine.TestCase


def test_a_call_refused_running_spends_the_reads_of_its_scope(tmp_path: Path) -> None:
    """QA 17b #1: a call refused ``call_running`` (the same call runs now, here in another
    thread) spends the agent's reads of its dependency scope: a new call needs a fresh
    read (its outcome is unknown until it returns)."""
    import threading

    desk, ran = _desk(tmp_path), []
    inside, go = threading.Event(), threading.Event()

    def slow(order: str) -> str:
        ran.append(order)
        inside.set()
        go.wait(30)
        return "paid"

    first = threading.Thread(target=desk.execute, args=("pay", slow, {"order": "A1"}),
                             kwargs={"depends_on": ["pay/A1"], "call_id": "c1"})
    first.start()
    try:
        assert inside.wait(30)
        twice = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                             call_id="c1")
        assert twice.reason == CALL_RUNNING
        blind = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                             call_id="c2")
        assert blind.reason == NOT_READ and blind.spent == ("pay/A1",)
        assert "running now elsewhere" in blind.message and ran == ["A1"]
    finally:
        go.set()
        first.join(30)
    desk.read("pay/A1")
    after = desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                         call_id="c2")
    assert after.executed and ran == ["A1", "A1"]


def test_a_corrupt_attempts_file_is_a_store_error_naming_it(tmp_path: Path) -> None:
    """Not a database: every integration's call (through ``execute``) gets the typed
    ``StoreError`` with the path and a fix, never a bare ``sqlite3.DatabaseError``, and
    nothing runs (QA qa-new18a #4)."""
    from icore.errors import StoreError
    from icore.workspace._durable_calls import attempts_in
    desk, ran = _desk(tmp_path), []
    (tmp_path / FILE_NAME).write_bytes(b"\x13" * 100 + b"not a database")
    with pytest.raises(StoreError, match="attempts file: file is not a database") as got:
        desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                     call_id="c1")
    assert not isinstance(got.value, sqlite3.Error)
    assert got.value.fields["path"] == str(tmp_path.resolve() / FILE_NAME)
    assert "move the file away" in got.value.fields["fix"]
    assert ran == []
    (tmp_path / FILE_NAME).unlink()  # moved away, as the fix says: the call runs
    assert attempts_in(tmp_path).rows() == {}
    assert desk.execute("pay", _pay(ran), {"order": "A1"}, depends_on=["pay/A1"],
                        call_id="c1").executed and ran == ["A1"]
