"""QA fixes of issue 25 with real parts: the SDK's client launching ``icore mcp`` over
stdio in front of a low-level SDK server (tests/mcp/upstream_ledger.py) whose data a test
edits directly, with no notification.

* a changed upstream resource is seen at the protected call itself (read again from its
  upstream, planfence Alg. 1: the owner of an upstream resource is the upstream), with no
  client subscription and no notification; the gateway subscribes itself;
* a read that fails or hangs blocks the call (fail closed), as does a D(a) resource the
  upstream does not serve (named with its manifest line, ``_meta`` attached);
* the audit of the run: each decision once, replans counted and marked, re-reads are
  observations (no hard flags), a normal stop is a terminal marker;
* two gateways on one manifest write two traces and never share a session name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from icore.adapters import audit_trace, load_jsonl

from .conftest import env, stdio_gateway, text, upstream_log

LEDGER = Path(__file__).resolve().parent / "upstream_ledger.py"


def _manifest(folder: Path, timeout_s: float = 2.0, **extra: Any) -> Path:
    state = folder / "ledger.json"
    if not state.exists():
        state.write_text(json.dumps({"accounts": {"main": 500}}), encoding="utf-8")
    m = {"name": "ledger-gateway",
         "upstreams": {"ledger": {"command": sys.executable, "args": [str(LEDGER)],
                                  "env": {"LEDGER_STATE": str(state),
                                          "LEDGER_LOG": str(folder / "ledger.log")},
                                  "timeout_s": timeout_s}},
         "facts": {"owners": {"fact://ops/*": "ops"},
                   "initial": {"fact://ops/note": "grève ☂ à 15h"}},
         "tools": {"charge": {"depends_on": ["acct://{account}/balance"]},
                   "audit_note": {"depends_on": ["fact://ops/note"]}},
         "trace": str(folder / "trace.jsonl"), **extra}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")
    return path


def _edit(folder: Path, **changes: Any) -> None:
    """Another agent changes the ledger's data directly: no notification at all."""
    p = folder / "ledger.json"
    s = json.loads(p.read_text(encoding="utf-8"))
    s.update(changes)
    p.write_text(json.dumps(s), encoding="utf-8")


def _run_gateway(manifest: Path) -> Any:
    """``icore mcp MANIFEST`` with no client (stdin closed): how it exits."""
    import subprocess
    return subprocess.run([sys.executable, "-m", "icore", "mcp", str(manifest)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env(),
                          timeout=120, check=False)


def _charges(folder: Path) -> list[dict[str, Any]]:
    return [x["args"] for x in upstream_log(folder / "ledger.log") if x["tool"] == "charge"]


def test_silent_change_seen_at_the_call_and_failed_reads_block(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, timeout_s=1.5)

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            got = await s.read_resource("acct://main/balance")
            assert got.contents[0].text == "500"  # type: ignore[union-attr]
            r = await s.call_tool("charge", {"account": "main", "amount": 400})
            assert not r.is_error, text(r)
            # finance edits the database: no notification, and this client never subscribed
            _edit(tmp_path, accounts={"main": 10})
            r = await s.call_tool("charge", {"account": "main", "amount": 400})
            assert r.is_error and "(stale)" in text(r) and "= 10" in text(r), text(r)
            assert r.meta is not None and r.meta["icore/gate"]["reason"] == "stale"
            assert _charges(tmp_path) == [{"account": "main", "amount": 400}]
            r = await s.call_tool("charge", {"account": "main", "amount": 5})  # the replan
            assert not r.is_error, text(r)
            await s.read_resource("acct://main/balance")  # a re-read: an observation
            # a resource the upstream does not serve: named with its manifest line
            r = await s.call_tool("charge", {"account": "ghost", "amount": 1})
            t = text(r)
            assert r.is_error and "(dependency_unreadable)" in t, t
            assert "acct://ghost/balance" in t and "tools.charge.depends_on.0, line" in t
            assert r.meta is not None and r.meta["icore/gate"]["unreadable"] == [
                "acct://ghost/balance"]
            # the upstream hangs on the read: owner_unavailable, fail closed, no values
            _edit(tmp_path, read_delay=10)
            r = await s.call_tool("charge", {"account": "main", "amount": 5})
            t = text(r)
            assert r.is_error and "(owner_unavailable)" in t and "did not answer" in t, t
            assert "below" not in t
            _edit(tmp_path, read_delay=0, fail=True)  # the upstream answers an error
            r = await s.call_tool("charge", {"account": "main", "amount": 5})
            assert r.is_error and "database is locked" in text(r), text(r)
            _edit(tmp_path, fail=False)
            # non-ASCII facts reach the model as written
            r = await s.call_tool("audit_note", {"text": "x"})
            assert r.is_error and "grève ☂ à 15h" in text(r) and "\\u" not in text(r)
        # the gateway subscribed itself to the resource it read (the client never did)
        subs = [x["args"]["uri"] for x in upstream_log(tmp_path / "ledger.log")
                if x["tool"] == "<subscribe>"]
        assert "acct://main/balance" in subs

    anyio.run(main)
    assert _charges(tmp_path) == [{"account": "main", "amount": 400},
                                  {"account": "main", "amount": 5}]
    # the audit of this run (items 6-8 of the QA report)
    path = tmp_path / "trace.jsonl"
    trace = load_jsonl(path)
    decisions = trace.extras["planfence"]["decisions"]
    # each decision once; the refusals made before the gate are blocked decisions too
    assert [d["reason"] for d in decisions] == [
        "valid", "stale", "valid", "dependency_unreadable", "owner_unavailable",
        "dependency_unreadable", "not_read"], [d["reason"] for d in decisions]
    assert all(d["outcome"] == "blocked" and d["policy"] == "icore mcp gateway"
               for d in decisions[3:])
    result = audit_trace(trace)
    assert result.replans == 1
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    # every protected call writes its plan; the replan rewrites the stale call's plan
    plans = [x for x in lines if x.get("kind") == "plan"]
    assert [p.get("replan", False) for p in plans] == [False, False, True, False, False,
                                                       False, False]
    assert plans[2]["plan_id"] == plans[1]["plan_id"] != plans[0]["plan_id"]
    assert plans[2]["executed"] is True and plans[2]["reason"] == "valid"
    # every refused call is a blocked action of the lineage (icore audit --json counts)
    refused = [x for x in lines if x.get("blocked")]
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(path), "--json",
                          str(tmp_path / "audit.json")], capture_output=True, text=True,
                         env=env(), timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    run = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))["runs"][0]
    assert run["actions"]["blocked"] == len(refused) == 5, run["actions"]
    assert run["actions"]["valid"] == 2 and run["actions"]["total"] == 7
    assert sorted(lv["action"] for lv in run["lineage"] if lv["status"] == "blocked") \
        == sorted(x["task"] for x in refused)
    assert "protected actions of ledger-gateway: 7 (2 valid, 5 blocked)" in cli.stdout
    assert not result.state.flags, result.state.flags  # re-reads are no hard flags
    assert result.terminated
    assert not any("without a terminal marker" in d.detail for d in result.diagnoses)
    refusal = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()
               if "dependency_unreadable" in x and '"tool_output"' in x]
    assert refusal and all(r["blocked"] and "UPSTREAM" not in r["content"]
                           for r in refusal)


def test_two_gateways_on_one_manifest_keep_apart(tmp_path: Path) -> None:
    # 10 s: four interpreters start at once here; under a loaded CI an upstream took
    # over the 2 s default to answer `initialize` and its gateway gave up at start
    manifest = _manifest(tmp_path, timeout_s=10.0)

    async def one(started: anyio.Event, stop: anyio.Event) -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("acct://main/balance")
            started.set()
            await stop.wait()

    async def main() -> None:
        a, b, stop = anyio.Event(), anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, a, stop)
            tg.start_soon(one, b, stop)
            with anyio.fail_after(120):
                await a.wait()
                await b.wait()
            stop.set()

    anyio.run(main)
    first, second = tmp_path / "trace.jsonl", tmp_path / "trace-gw2.jsonl"
    sessions = []
    for p in (first, second):
        t = load_jsonl(p)
        mine = [a for a in t.agents if a.startswith("mcp#") or a.startswith("client#")]
        assert len(mine) == 1, t.agents
        sessions.append(mine[0])
        assert sum('"kind": "termination"' in x for x in p.read_text().splitlines()) == 1
    assert sessions[0] != sessions[1]


def test_a_clean_run_audits_clean_and_refusals_say_what_helps(tmp_path: Path) -> None:
    """A run whose every call was valid scores astab 1 and cq 1 (each call's plan is
    recorded); a first call of a session that read nothing says only this same session
    can pass; a fact never written, its key made from the model's argument, says it has
    no value yet and to call again with a corrected argument."""
    manifest = _manifest(tmp_path, tools={
        "charge": {"depends_on": ["acct://{account}/balance"]},
        "audit_note": {"depends_on": ["fact://ops/{text}"]}})

    async def main() -> None:
        async with stdio_gateway(manifest) as s:  # a client that never reads first
            r = await s.call_tool("charge", {"account": "main", "amount": 1})
            t = text(r)
            assert r.is_error and "(not_read)" in t and "this same session" in t, t
            assert "new session for each tool call" in t and "= 500" in t, t
            r = await s.call_tool("audit_note", {"text": "never"})
            t = text(r)
            assert r.is_error and "no value yet for fact://ops/never" in t, t
            # the key is made from the model's own argument: a wrong id it may correct
            # (one wording with the in-process tools, QA qa-new15a S3)
            assert "your argument text='never'" in t and "Do not retry" not in t, t
            assert "call audit_note again with corrected arguments" in t, t
        async with stdio_gateway(manifest) as s:  # a clean run: read, then act
            await s.read_resource("acct://main/balance")
            for amount in (1, 2):
                r = await s.call_tool("charge", {"account": "main", "amount": amount})
                assert not r.is_error, text(r)

    anyio.run(main)
    first = load_jsonl(tmp_path / "trace-1.jsonl").extras["planfence"]["decisions"]
    assert [(d["outcome"], d["reason"]) for d in first] == [("blocked", "not_read")] * 2
    clean = tmp_path / "trace.jsonl"
    result = audit_trace(load_jsonl(clean))
    s = result.summary()
    assert (s.snd, s.astab, s.cq, s.replans, s.diagnoses) == (1.0, 1.0, 1.0, 0, 0), s
    plans = [json.loads(x) for x in clean.read_text(encoding="utf-8").splitlines()
             if '"kind": "plan"' in x]
    assert len(plans) == 2 and all(len(p["roots"]) == 1 for p in plans)


def test_writes_placeholders_are_filled_from_the_call(tmp_path: Path) -> None:
    """QA r5-mcp D1: a ``writes`` entry's ``{arg}`` is filled from the call's arguments
    as in D(a); the literal template URI was re-read (and failed) after every call."""
    manifest = _manifest(tmp_path, tools={
        "charge": {"depends_on": ["acct://{account}/balance"],
                   "writes": ["acct://{account}/balance"]}})

    async def main() -> None:
        async with stdio_gateway(manifest) as s:
            await s.read_resource("acct://main/balance")
            r = await s.call_tool("charge", {"account": "main", "amount": 1})
            assert not r.is_error, text(r)

    anyio.run(main)
    trace = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    assert "re-read of" not in trace, [x for x in trace.splitlines() if "re-read" in x]


@pytest.mark.parametrize(("tools", "expect"), [
    ({"chrage": {"depends_on": ["acct://{account}/balance"]}},
     ["at line 2: tools.chrage", "did you mean 'charge'"]),
    ({"charge": {"depends_on": ["acct://{acount}/balance"]}},
     ["at line 2: tools.charge.depends_on.0", "did you mean 'account'"]),
    ({"charge": {"depends_on": ["acct://{account}/balance"],
                 "writes": ["acct://{acount}/balance"]}},
     ["at line 2: tools.charge.writes.0", "did you mean 'account'"]),
    ({"charge": {"depends_on": ["acc://{account}/balance"]}},
     ["tools.charge.depends_on.0", "no upstream serves a resource 'acc://{account}/balance'"]),
    ({"charge": {"depends_on": ["fact://opz/{account}"]}},
     ["at line 2: tools.charge.depends_on.0", "no owner is declared for the fact "
      "'fact://opz/{account}'", "facts.owners: 'fact://ops/*'"]),
])
def test_manifest_checked_against_the_upstreams_at_start(tmp_path: Path, tools: Any,
                                                          expect: list[str]) -> None:
    manifest = _manifest(tmp_path)
    m = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    m["tools"] = tools
    lines = ["tools:", *(f"  {k}: {json.dumps(v)}" for k, v in tools.items())]
    rest = {k: v for k, v in m.items() if k != "tools"}
    manifest.write_text("\n".join(lines) + "\n" + yaml.safe_dump(rest, allow_unicode=True),
                        encoding="utf-8")
    p = _run_gateway(manifest)
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip().splitlines()[-1]
    assert err.startswith("error: invalid gateway manifest at line") and str(manifest) in err
    for e in expect:
        assert e in err, err
    assert "Traceback" not in p.stderr


def test_only_upstream_unreachable_exits_1_naming_the_cause(tmp_path: Path) -> None:
    from .conftest import free_port
    url = f"http://127.0.0.1:{free_port()}/mcp"
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({"upstreams": {"billing": {"url": url}}}),
                    encoding="utf-8")
    p = _run_gateway(path)
    assert p.returncode == 1, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: gateway manifest {path}: no upstream could be started: "
                           "upstream billing is unreachable: ConnectError"), last
    assert "ExceptionGroup" not in p.stderr and "Traceback" not in p.stderr


def test_upstream_down_at_start_blocks_what_a_protected_name_may_mean(tmp_path: Path) -> None:
    """``bokk`` may be a typo of ``book``, or a tool of the upstream that is down: the
    gateway starts, and ``book`` never runs unprotected until it can tell."""
    from .conftest import free_port, stdio_upstream

    log = tmp_path / "up.log"
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({
        "upstreams": {"trip": stdio_upstream(log, 5.0),
                      "later": {"url": f"http://127.0.0.1:{free_port()}/mcp",
                                "timeout_s": 1}},
        "tools": {"bokk": {"depends_on": ["memo://price"]}}}), encoding="utf-8")

    async def main() -> None:
        async with stdio_gateway(path) as s:
            r = await s.call_tool("book", {"city": "Porto", "price": 100})
            t = text(r)
            assert r.is_error and "(unverified_protection)" in t, t
            assert "'bokk'" in t and "tools.bokk (line" in t and "later" in t
            assert r.meta is not None
            assert r.meta["icore/gate"]["reason"] == "unverified_protection"
            r = await s.call_tool("echo", {"text": "unrelated"})  # not what bokk may mean
            assert text(r) == "unrelated"

    anyio.run(main)
    assert [x["tool"] for x in upstream_log(log)] == ["echo"]

