"""Wrap a plain Python agent loop with iCORE-Audit (icore Alg. 1; docs/audit.md).

The "framework" here is the simplest there is: a list of agent functions called in turn,
each returning an action dict. ``to_proposal`` labels an action with its effects on G, Q
and Π; ``FunctionPolicy`` turns the step function into the host-policy interface; the
loop audits every proposal, and routes state-grounded feedback to the responsible agent
when a trigger fires. Run: ``python examples/audit_plain_loop.py``.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

from icore.audit import AuditLoop, Feedback, FunctionPolicy, HostView, LoopConfig, reconstruct
from icore.state import (
    CertificateRequest,
    Effect,
    EventSpec,
    Proposal,
    SQLiteLog,
    State,
    Status,
    declaration_from_dict,
)

D = declaration_from_dict({
    "name": "plain-loop",
    "parameters": {"epsilon": 0.1, "patience": 3, "tau": 0.5},
    "observables": [
        {"name": "task", "fields": ["item"]},
        {"name": "assign", "fields": ["item", "to"]},
        {"name": "test", "fields": ["item", "passed"]},
    ],
    "agents": [
        {"id": "env", "roles": ["task"]},
        {"id": "boss", "roles": ["assigner"]},
        {"id": "ann", "capabilities": {"code": 0.9}},
        {"id": "ben", "capabilities": {"code": 0.4}},
    ],
    "validators": [
        {"name": "tests_pass", "builtin": "event_field_equals",
         "params": {"field": "passed", "value": True}},
    ],
    "operations": [
        {"name": "introduce", "proposers": ["role:task"],
         "preconditions": {"target_required": False},
         "effects": [{"kind": "node", "target": "new", "many": True}]},
        {"name": "assign", "proposers": ["role:assigner"], "productive": True,
         "effects": [{"kind": "assignee"}, {"kind": "status", "values": ["assigned"]}]},
        {"name": "done", "proposers": ["ann", "ben"], "productive": True,
         "preconditions": {"assignee_is_proposer": True,
                           "status_in": ["assigned", "active"]},
         "effects": [{"kind": "status", "values": ["discharged"]}],
         "requires": ["tests_pass"]},
    ],
})

_ids = itertools.count(1)


def to_proposal(agent: str, action: dict[str, Any]) -> Proposal:
    """Label a plain action dict with its intended effects (the adapter's one job)."""
    item = action["item"]
    e = f"ev{next(_ids)}"
    if action["op"] == "assign":
        return Proposal(agent, "assign", item,
                        events=(EventSpec("assign", agent, {"item": item, "to": action["to"]},
                                          id=e),),
                        effects=(Effect.assign(item, action["to"]),
                                 Effect.status(item, Status.ASSIGNED)),
                        justification=(e,))
    certs = (CertificateRequest("tests_pass", events=(e,)),) if action.get("tested") else ()
    return Proposal(agent, "done", item,
                    events=(EventSpec("test", agent, {"item": item, "passed": True}, id=e),),
                    effects=(Effect.status(item, Status.DISCHARGED),),
                    justification=(e,), certificates=certs)


# --- the existing "framework": agents are functions, a loop calls them in turn -------
def boss(board: dict[str, Any]) -> dict[str, Any] | None:
    todo = [i for i, s in board.items() if s["owner"] is None]
    return {"op": "assign", "item": todo[0], "to": "ben"} if todo else None  # poor choice


def worker(name: str, board: dict[str, Any]) -> dict[str, Any] | None:
    mine = [i for i, s in board.items() if s["owner"] == name and not s["done"]]
    return {"op": "done", "item": mine[0], "tested": name != "ben"} if mine else None  # ben
    # claims completion without running the tests


def main() -> None:
    board = {i: {"owner": None, "done": False} for i in ("build", "docs")}
    agents = [("boss", boss), ("ann", lambda b: worker("ann", b)),
              ("ben", lambda b: worker("ben", b))]
    turn = itertools.cycle(agents)
    pending: dict[str, tuple[str, dict[str, Any]]] = {}

    def step(view: HostView) -> Proposal | None:  # the framework's step, wrapped
        for _ in agents:
            name, fn = next(turn)
            action = fn(board)
            if action is not None:
                p = to_proposal(name, action)
                pending[p.events[0].id or ""] = (name, action)
                return p
        return None

    def observe(outcome: Any) -> None:  # apply accepted actions to the framework's board
        _name, action = pending.pop(outcome.proposal.events[0].id, (None, None))
        if action is None or not outcome.accepted:
            return
        if action["op"] == "assign":
            board[action["item"]]["owner"] = action["to"]
        else:
            board[action["item"]]["done"] = True

    def recover(feedback: Feedback, view: HostView) -> list[Proposal]:
        print(f"\n[feedback to {feedback.to}]\n{feedback.text}\n")
        out = []
        for b in feedback.obligations:
            act: dict[str, Any]
            if feedback.defect == "assignment" and b.alternatives:
                act = {"op": "assign", "item": b.id, "to": b.alternatives[0][0]}
            else:
                act = {"op": "done", "item": b.id, "tested": True}  # run the tests this time
            p = to_proposal(feedback.to, act)
            pending[p.events[0].id or ""] = (feedback.to, act)
            out.append(p)
        return out

    with tempfile.TemporaryDirectory() as tmp:
        log = SQLiteLog(Path(tmp) / "run.sqlite", declaration=D)
        x = State(D, log=log)
        x.submit(Proposal("env", "introduce",
                          events=(EventSpec("task", "env", {"item": "*"}, id="t0"),),
                          effects=(Effect.node("build", "code", required_root=True),
                                   Effect.node("docs", "code", required_root=True)),
                          justification=("t0",)))
        host = FunctionPolicy(step, recover=recover, observe=observe)
        res = AuditLoop(x, host, config=LoopConfig(max_steps=20)).run()
        print(f"terminal={res.terminal} cq={res.final.cq if res.final else None:.2f} "
              f"interventions={len(res.interventions)} accepted={res.accepted_recoveries}")
        for t in reconstruct(x.entries):
            print(f"{t.diagnosis}: told {t.told}, accepted={t.accepted}, changed={t.changes}")
        log.close()


if __name__ == "__main__":
    main()
