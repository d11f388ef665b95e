"""The gateway's trace: every session's reads, calls and gate decisions, for ``icore audit``.

Built on :class:`icore.integrations.RunRecorder` (the recorder every integration uses):
event lines from it, plus the PlanFence lines of the generic JSONL format (the records
a decision cites and the decisions themselves), so ``icore audit TRACE`` draws the
lineage pictures and ``--fail-on invalid`` judges the run. With a file, the trace is
appended after every event (a crash of the gateway loses nothing already recorded) and
rewritten once, atomically, when the gateway stops.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from icore.fence import GateDecision
from icore.integrations import RunRecorder
from icore.mcp._facts import Verdict
from icore.records import Record

log = logging.getLogger("icore.mcp")


def _record_line(rec: Record, role: str) -> dict[str, Any]:
    return {"planfence": {"record": {"id": rec.id, "key": rec.key, "owner": rec.owner,
                                     "seq": rec.seq, "type": rec.type,
                                     "parents": list(rec.parents), "role": role}}}


class GatewayTrace:
    """The recorder of one gateway run (thread-safe; one agent per client session).

    Args:
        run_id: the run's id in the trace header.
        path: the JSONL file to keep current (None: in memory only).
    """

    def __init__(self, run_id: str, path: Path | None = None) -> None:
        self.recorder = RunRecorder(run_id, question=f"MCP gateway {run_id}",
                                    agents={"gateway": "icore MCP gateway"})
        self.path = path
        self.planfence: list[dict[str, Any]] = []
        self._ids: set[str] = set()
        self._lock = threading.RLock()
        self._fh: TextIO | None = None
        self._events_done = 0
        self._pf_done = 0

    def _rec(self, rec: Record, role: str) -> None:
        with self._lock:
            if rec.id in self._ids:
                return
            self._ids.add(rec.id)
            self.planfence.append(_record_line(rec, role))

    def session(self, sid: str, client: str) -> None:
        """A client session started."""
        self.recorder.agents.setdefault(sid, f"MCP client {client}")
        self.recorder.task(f"session {sid} ({client}) connected", agent=sid)
        self.flush()

    def version(self, rec: Record, source: str) -> None:
        """A new version of a fact was committed (``source``: who or what changed it)."""
        self._rec(rec, "revision" if rec.parents else "input")
        self.recorder.add("gateway", "thought", f"new version of {rec.key} (seq {rec.seq}) "
                          f"from {source}", fact={"key": rec.key, "record": rec.id,
                                                  "source": source})
        self.flush()

    def read(self, sid: str, uri: str, rec: Record | None) -> None:
        """A session read ``uri`` (the version it saw, when ``uri`` is a fact)."""
        fields: dict[str, Any] = {"read": {"key": uri}}
        if rec is not None:
            self._rec(rec, "revision" if rec.parents else "input")
            fields["read"] = {"key": uri, "record": rec.id, "seq": rec.seq}
        self.recorder.add(sid, "output", f"read {uri}", **fields)
        self.flush()

    def verdict(self, sid: str, tool: str, v: Verdict, args: Mapping[str, Any], *,
                task: str, flush: bool = True) -> None:
        """One protected call's gate decisions, its action record and a refusal if any.

        ``flush=False``: the caller records the call's result next (written together).
        """
        call = v.call
        if call.record is not None:
            self._rec(call.record, "plan")
        for r in v.changed.values():
            self._rec(r, "revision" if r.parents else "input")
        with self._lock:
            for d in v.decisions:
                self.planfence.append({"planfence": {"decision": d.entry(task=task).to_dict()}})
        if call.result is not None:
            if call.executed:
                for d in call.result.decisions:
                    self.recorder.add(sid, "thought", f"gate {d.outcome.value}/"
                                      f"{d.reason.value} for {tool}",
                                      gate={"outcome": d.outcome.value,
                                            "reason": d.reason.value, "tool": tool,
                                            "replanned": d.replanned})
            else:
                self.recorder.gate(sid, tool, call.result)
        else:
            self.recorder.tool_call(sid, tool, args, f"BLOCKED: {call.reason}: {call.detail}",
                                    error=True, blocked=True, task=task)
        if flush:
            self.flush()

    def decisions(self, sid: str, tool: str, decisions: Sequence[GateDecision], *,
                  task: str) -> None:
        """Gate decisions of a call whose forward then failed (recorded before the error)."""
        with self._lock:
            for d in decisions:
                self.planfence.append({"planfence": {"decision": d.entry(task=task).to_dict()}})
        for d in decisions:
            self.recorder.add(sid, "thought", f"gate {d.outcome.value}/{d.reason.value} "
                              f"for {tool}", gate={"outcome": d.outcome.value,
                                                   "reason": d.reason.value, "tool": tool,
                                                   "replanned": d.replanned})
        self.flush()

    def call(self, sid: str, tool: str, args: Mapping[str, Any] | None, result: Any, *,
             error: bool, **fields: Any) -> None:
        """A tool call forwarded to an upstream (or served by the gateway) and its result."""
        self.recorder.tool_call(sid, tool, args, result, error=error, **fields)
        self.flush()

    def note(self, agent: str, text: str, **fields: Any) -> None:
        """Anything else worth keeping (an upstream down, a refused request)."""
        self.recorder.add(agent, "thought", text, **fields)
        self.flush()

    def jsonl(self) -> str:
        """The trace: the recorder's lines, then the PlanFence lines."""
        with self._lock:
            extra = list(self.planfence)
        return self.recorder.jsonl() + "".join(json.dumps(x, sort_keys=True) + "\n"
                                               for x in extra)

    def flush(self) -> None:
        """Append the events recorded since the last flush to the trace file.

        Append-only while the gateway runs (O(1) per event, a killed gateway keeps every
        line written); :meth:`close` rewrites the file once, atomically, with the final
        header (every session's agent named).
        """
        if self.path is None:
            return
        with self._lock:
            events = self.recorder.events[self._events_done:]
            pf = self.planfence[self._pf_done:]
            lines = [json.dumps(x, sort_keys=True) + "\n" for x in (*events, *pf)]
            if self._fh is None:
                lines.insert(0, json.dumps(self.recorder.header(), sort_keys=True) + "\n")
            try:
                if self._fh is None:
                    self._fh = self.path.open("w", encoding="utf-8")
                self._fh.write("".join(lines))
                self._fh.flush()
            except OSError as exc:  # keep serving; the trace stays in memory
                log.error("cannot write the trace %s: %s", self.path, exc)
                return
            self._events_done += len(events)
            self._pf_done += len(pf)

    def close(self) -> None:
        """Rewrite the trace atomically with the final header; close the file."""
        if self.path is None:
            return
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            text = self.jsonl()
            tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
            try:
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, self.path)
            except OSError as exc:
                log.error("cannot write the trace %s: %s", self.path, exc)
