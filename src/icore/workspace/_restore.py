"""The reads a pending approval's call derives from, given back to a new process.

A protected call put to a human (``approval=True``) derives from the versions its
agent read (the :class:`~icore.workspace.ApprovalRequest`'s ``basis``: key -> record
id). The reads live in the agent's memory; a process that stops while the human decides
loses them, and the process that resumes the call would refuse it ``not_read``.
:func:`restore_reads` notes those exact versions as read again (fetched by id from the
facts' owners, verified), so the resumed call is validated against the owners' current
heads exactly like an in-process resume (planfence Alg. 1: a head moved meanwhile is
stale, never run on the old plan).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from icore.errors import brief
from icore.records import Record, RecordId
from icore.workspace._agent import Agent
from icore.workspace._errors import WorkspaceError


def restore_reads(agent: Agent, basis: Mapping[str, RecordId], *,
                  turn: Hashable | None = None) -> dict[str, Record]:
    """Note ``basis`` (key -> record id of the version the model saw) as read by ``agent``.

    Noted in the agent's current run scope, unstamped (they count for any model turn of
    that scope, as reads of an earlier message do). When the calls of ``turn`` (the
    model message) already fixed the reads they derive from (a sibling call decided
    first), the keys missing there are added. Nothing is validated here: the gate
    validates the call against the owners' heads.

    Returns:
        key -> the verified record noted.

    Raises:
        WorkspaceError: a key is no declared fact, or its version cannot be fetched from
            its owner (pruned, another folder) or is not a version of that key (named:
            the caller refuses the call; fail closed).
        OwnerUnavailable: the owner did not answer.
    """
    ws = agent.workspace
    got: dict[str, Record] = {}
    for key, rid in sorted(basis.items()):
        owner = ws.owner_of(key)
        found = [r for r in ws.owners.fetch(owner, [rid], timeout_s=ws.timeout_s)
                 if r.id == rid and r.has_content]
        if not found or found[0].key != key:
            raise WorkspaceError("the version a pending approval's call derives from cannot "
                                 "be found at its owner", agent=agent.name, key=key,
                                 record=brief(rid, 80), owner=owner,
                                 fix="ask the human again (call the tool again)")
        rec = found[0].verify()
        agent._install(rec, owner)
        got[key] = rec
    if got:
        scope = agent.current_scope()
        agent._note(got, None, scope)
        with agent._lock:
            snap = agent._turns.get((scope, turn)) if turn is not None else None
            if snap is not None:
                for key, rec in got.items():
                    snap.setdefault(key, rec)
    return got
