"""Issue 29, second bad-input report (badinput D6d, D10, D12): wrong values at the call
are typed errors naming the argument, file or variable; nothing else is raised.

Files are made under ``tmp_path`` (a FIFO stands for "not a regular file"; no device
node or system path is ever written).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore.errors import (
    AuthenticationError,
    DeclarationError,
    FenceCallError,
    IcoreError,
    IntegrationError,
    MalformedRecord,
    OwnershipError,
    TeamManifestError,
)


# ------------------------------------------------------------------ D12: records, memory
@pytest.mark.parametrize(("inputs", "field"), [
    (None, "inputs"), ("abc", "inputs"), (["abc"], "inputs[0]"), (["a" * 64], "inputs[0]"),
    ([None], "inputs[0]"), (5, "inputs"),
])
def test_derive_refuses_inputs_that_are_not_records(inputs: Any, field: str) -> None:
    from icore.records import derive

    with pytest.raises(MalformedRecord) as e:
        derive(key="k", owner="o", seq=1, content={}, inputs=inputs)
    assert e.value.fields["field"] == field


def test_derive_refuses_a_bad_supersedes() -> None:
    from icore.records import derive

    with pytest.raises(MalformedRecord, match="supersedes"):
        derive(key="k", owner="o", seq=1, content={}, inputs=[], supersedes=5)  # type: ignore[arg-type]


@pytest.mark.parametrize("record", ["x", None, {"key": "k"}, 5])
def test_commit_refuses_a_non_record(record: Any) -> None:
    from icore.memory import MemoryStore, OwnershipMap

    m = MemoryStore(OwnershipMap({"k": "o"}), "o")
    with pytest.raises(MalformedRecord) as e:
        m.commit(record, writer="o")
    assert e.value.fields["field"] == "record"


def test_commit_refuses_a_non_string_writer() -> None:
    from icore.memory import MemoryStore, OwnershipMap
    from icore.records import Record

    m = MemoryStore(OwnershipMap({"k": "o"}), "o")
    r = Record.create(key="k", owner="o", seq=1, content={})
    with pytest.raises(MalformedRecord, match="writer"):
        m.commit(r, writer=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("args", "field"), [
    (("x", 5), "ownership"), ((None,), "ownership"), ((None, "o"), "ownership"),
])
def test_stores_check_their_arguments(args: tuple[Any, ...], field: str, tmp_path: Path
                                      ) -> None:
    from icore.memory import MemoryStore, OwnershipMap

    with pytest.raises(OwnershipError) as e:
        MemoryStore(*args)
    assert e.value.fields["field"] == field
    with pytest.raises(OwnershipError, match="agent"):
        MemoryStore(OwnershipMap({"k": "o"}), 5)  # type: ignore[arg-type]
    with pytest.raises(OwnershipError):
        OwnershipMap(5)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- fence
@pytest.mark.parametrize(("store", "owners", "argument"), [
    (None, None, "store"), ("x", None, "store"), ("STORE", None, "owners"),
    ("STORE", 5, "owners"),
])
def test_fence_for_store_refuses_what_is_not_a_store(store: Any, owners: Any,
                                                     argument: str) -> None:
    from icore.fence import Fence
    from icore.memory import MemoryStore, OwnershipMap

    s = MemoryStore(OwnershipMap({"k": "o"}), "o")
    with pytest.raises(FenceCallError) as e:
        Fence.for_store(s if store == "STORE" else store, owners)
    assert e.value.fields["argument"] == argument


@pytest.mark.parametrize("tool", [None, 5, "book"])
def test_protected_refuses_what_is_not_a_function(tool: Any) -> None:
    from icore.fence import protected

    with pytest.raises(DeclarationError, match="must be a function"):
        protected(depends_on={"k"})(tool)


def test_protected_refuses_a_class() -> None:
    from icore.fence import protected

    with pytest.raises(DeclarationError, match="the class Book"):
        @protected(depends_on={"k"})
        class Book:
            pass


# ------------------------------------------------------------------ integrations
def test_run_recorder_write_errors_are_typed(tmp_path: Path) -> None:
    from icore.integrations import RunRecorder

    rec = RunRecorder("r")
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for target, words in ((tmp_path, "directory"), (fifo, "FIFO")):
        with pytest.raises(IntegrationError) as e:
            rec.write(target)
        assert str(target) in str(e.value) and words in str(e.value)
    with pytest.raises(IntegrationError, match="path"):
        rec.write(None)  # type: ignore[arg-type]
    assert rec.write(tmp_path / "ok.jsonl").is_file()
    # a missing folder is made, as `icore audit --json` makes one (QA qa-new10b S4)
    assert rec.write(tmp_path / "none" / "r.jsonl").is_file()


@pytest.mark.parametrize("run_id", [None, "", "  ", 5])
def test_run_recorder_needs_a_run_id(run_id: Any) -> None:
    from icore.integrations import RunRecorder

    with pytest.raises(IntegrationError, match="run_id"):
        RunRecorder(run_id)


# --------------------------------------------------------------------- D6d / D10: LLM
@pytest.mark.parametrize(("var", "value"), [
    ("ICORE_LLM_BACKOFF_S", "nan"), ("ICORE_LLM_BACKOFF_S", "inf"),
    ("ICORE_LLM_BACKOFF_S", "-1"), ("ICORE_LLM_RETRIES", "many"),
    ("ICORE_LLM_RETRIES", "1.5"), ("ICORE_LLM_RETRIES", "10000"),
    ("ICORE_LLM_SLOTS", "-3"), ("ICORE_LLM_SLOTS", "0"), ("ICORE_LLM_TIMEOUT_S", "0"),
    ("ICORE_LLM_TIMEOUT_S", "nan"), ("ICORE_LLM_TOOL_CHOICE", "sometimes"),
])
def test_llm_environment_values_name_the_variable(var: str, value: str,
                                                  tmp_path: Path) -> None:
    from icore.agents import LLMConfig

    with pytest.raises(ValueError, match=var):
        LLMConfig.from_env(base_url="http://127.0.0.1:1/v1", model="m", env={var: value})
    if var == "ICORE_LLM_TIMEOUT_S":  # icore run takes the manifest's timeout_s instead
        return
    env = {"COLUMNS": "200", "ICORE_LLM_MODEL": "", "ICORE_LLM_BASE_URL": "",
           "OPENAI_BASE_URL": "", var: value}
    res = CliRunner().invoke(app, ["run", "--backend", "llm", "--llm-base-url",
                                   "http://127.0.0.1:1/v1", "--llm-model", "m", "-o",
                                   str(tmp_path / "r")], env=env)
    assert res.exit_code == 2 and var in res.output, res.output  # before any agent starts
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("field", "value"), [
    ("backoff_s", float("nan")), ("timeout_s", float("inf")), ("retries", True),
    ("slots", 0), ("temperature", float("nan")), ("max_tokens", 0),
])
def test_llm_config_fields_are_checked(field: str, value: Any) -> None:
    from icore.agents import LLMConfig

    with pytest.raises(ValueError, match=field):
        LLMConfig("http://127.0.0.1:1/v1", "m", **{field: value})


# ------------------------------------------------------------------ D10: serve, manifests
def test_two_agents_on_one_port_are_refused_by_the_manifest() -> None:
    from icore.net import TeamManifest

    with pytest.raises(TeamManifestError) as e:
        TeamManifest.parse({"agents": [{"id": "planner", "port": 47123},
                                       {"id": "booker", "host": "localhost", "port": 47123}]})
    assert "planner and booker both use port 47123" in str(e.value)
    TeamManifest.parse({"agents": [{"id": "a", "port": 0}, {"id": "b", "port": 0}]})


@pytest.mark.parametrize("damage", ["swapped", "garbage_key", "garbage_cert", "garbage_ca"])
def test_bad_certificate_files_are_named(tmp_path: Path, damage: str) -> None:
    from icore.net import client_context, init_team_certs, server_context

    certs = init_team_certs(tmp_path / "certs", ["planner", "booker"])
    bad = {"swapped": ("planner.crt", (certs / "booker.crt").read_bytes()),
           "garbage_key": ("planner.key", b"garbage\n"),
           "garbage_cert": ("planner.crt", b"garbage\n"),
           "garbage_ca": ("ca.crt", b"garbage\n")}[damage]
    (certs / bad[0]).write_bytes(bad[1])
    for ctx in (server_context, client_context):
        with pytest.raises(AuthenticationError) as e:
            ctx(certs, "planner")
        assert str(certs / bad[0]) in str(e.value), e.value


def test_serve_names_the_certificate_it_cannot_use(tmp_path: Path) -> None:
    from icore.net import init_team_certs

    m = tmp_path / "team.yaml"
    m.write_text("version: 1\nagents: [{id: planner}, {id: booker}]\n", encoding="utf-8")
    certs = init_team_certs(tmp_path / "certs", ["planner", "booker"])
    (certs / "planner.key").write_text("garbage\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["serve", str(m), "--agent", "planner"])
    assert res.exit_code == 1 and "planner.key" in res.output, res.output
    assert "Traceback" not in res.output


def test_an_agent_that_cannot_start_is_reported_by_its_reason(tmp_path: Path) -> None:
    """The launcher quotes the agent's ``error:`` line, not a traceback excerpt."""
    from icore.net._team.launch import _last_error

    log = tmp_path / "planner.log"
    log.write_text("2026 INFO start\nerror: agent planner: cannot serve on 127.0.0.1:47123: "
                   "address already in use\n", encoding="utf-8")
    assert _last_error(log).startswith("agent planner: cannot serve on 127.0.0.1:47123")
    assert _last_error(tmp_path / "none.log") == "no log"


@pytest.mark.parametrize("kind", ["run", "team"])
def test_a_corrupted_manifest_is_reported_with_its_path(tmp_path: Path, kind: str) -> None:
    from icore.live import load_manifest
    from icore.net import TeamManifest

    p = tmp_path / f"{kind}.yaml"
    p.write_text("name: x\nagents:\n  - {id: a\n{\"resourceSpans\": [1]}\n", encoding="utf-8")
    with pytest.raises(IcoreError) as e:
        (load_manifest if kind == "run" else TeamManifest.load)(p)
    assert str(p) in e.value.message and "<unicode string>" not in e.value.message
