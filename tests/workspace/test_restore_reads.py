"""``restore_reads``: the versions a pending approval's call derives from, read again.

A new process's agent holds no reads; noting the exact versions the model saw (by
record id, fetched from the owners of a real ``Workspace.sqlite`` folder) lets the gate
validate the call against the current heads: unchanged heads run it, a moved head
refuses it ``stale`` (planfence Alg. 1), an unknown version is a ``WorkspaceError``
(fail closed). A message whose calls already fixed their reads gets the missing keys.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from icore.workspace import Workspace, WorkspaceError, restore_reads

FACTS = {"order/*": "sales"}


def _seen_before_restart(folder: Path) -> str:
    with Workspace.sqlite(FACTS, folder) as ws:
        ws.put("order/1", {"city": "Berlin"}, by="sales")
        ws.put("order/2", {"city": "Rome"}, by="sales")
        rec = ws.agent("clerk").read_record("order/1")
        assert rec is not None
        return rec.id


@pytest.mark.parametrize("moved", [False, True])
def test_restored_versions_are_validated_against_current_heads(tmp_path: Path,
                                                               moved: bool) -> None:
    rid = _seen_before_restart(tmp_path)
    with Workspace.sqlite(FACTS, tmp_path) as ws:  # the new process
        if moved:
            ws.update("order/1", lambda o: {**o, "city": "Munich"})
        clerk = ws.agent("clerk")
        got = restore_reads(clerk, {"order/1": rid})
        assert got["order/1"].id == rid and got["order/1"].content == {"city": "Berlin"}
        ran: list[str] = []
        call = clerk.execute("ship", lambda city: ran.append(city), {"city": "Berlin"},
                             depends_on={"order/1"})
        assert call.executed is (not moved) and ran == ([] if moved else ["Berlin"])
        assert call.reason == ("stale" if moved else "valid")


def test_a_version_the_owner_does_not_hold_is_refused(tmp_path: Path) -> None:
    _seen_before_restart(tmp_path)
    with Workspace.sqlite(FACTS, tmp_path) as ws:
        clerk = ws.agent("clerk")
        with pytest.raises(WorkspaceError, match="cannot be found"):
            restore_reads(clerk, {"order/1": "0" * 64})
        rid2 = ws.head("order/2").id  # type: ignore[union-attr]
        with pytest.raises(WorkspaceError, match="cannot be found"):
            restore_reads(clerk, {"order/1": rid2})  # a version of another key


def test_a_turn_whose_calls_fixed_their_reads_gets_the_missing_keys(tmp_path: Path) -> None:
    rid = _seen_before_restart(tmp_path)
    with Workspace.sqlite(FACTS, tmp_path) as ws:
        clerk = ws.agent("clerk")
        clerk.read_record("order/2", stamp="earlier")
        assert clerk.request_for("ship", {}, ["order/2"], turn="T") is not None  # fixed
        restore_reads(clerk, {"order/1": rid}, turn="T")
        req = clerk.request_for("ship", {}, ["order/1"], turn="T")
        assert req is not None and dict(req.basis) == {"order/1": rid}
