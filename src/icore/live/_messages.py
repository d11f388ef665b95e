"""Typed control-plane messages between the run coordinator and its agent processes.

planfence App. A.2. Each message is one JSON line (``json.dumps(..., sort_keys=True)``);
:meth:`to_dict` gives exactly the object written today, so transcripts and run folders do
not change::

    coordinator -> agent   Command    {"id": n, "cmd": "...", <args>}
    agent -> coordinator   Reply      {"id": n, "ok": true, "result": {...}}
                                      {"id": n, "ok": false, "error": "..."}
    agent -> coordinator   Ready      {"ready": <port>, "pid": <pid>, "agent": "<id>"}
    agent -> coordinator   PeerCall   {"call": m, "to": "<role>", "cmd": "...", <args>}
    coordinator -> agent   PeerReply  {"reply": m, "ok": ..., "result" | "error": ...}

:func:`parse_line` reads an incoming line into one of them (None for a line that is not
a JSON object); a command's arguments stay a mapping (each command reads its own), and a
reply's ``result`` is read by the step's typed reply (:mod:`icore.live._replies`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = Any
"""A JSON value as :func:`json.loads` returns it."""


def dumps(obj: Mapping[str, Any]) -> str:
    """One control line (without the newline): sorted keys, ``str`` for other values."""
    return json.dumps(obj, sort_keys=True, default=str)


@dataclass(frozen=True, slots=True)
class Command:
    """A step the coordinator asks of an agent (``id`` None: no answer is awaited)."""

    id: JSON
    cmd: str
    args: Mapping[str, JSON] = field(default_factory=dict)

    def to_dict(self) -> dict[str, JSON]:
        """The wire object."""
        return {"id": self.id, "cmd": self.cmd, **self.args}

    @classmethod
    def from_dict(cls, obj: Mapping[str, JSON]) -> Command:
        """Read a command line's object (a missing ``cmd`` reads as ``'None'``)."""
        return cls(obj.get("id"), str(obj.get("cmd")),
                   {k: v for k, v in obj.items() if k not in ("id", "cmd")})


@dataclass(frozen=True, slots=True)
class Reply:
    """An agent's answer to a :class:`Command`: a result, or an error text."""

    id: JSON
    ok: bool
    result: Mapping[str, JSON] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, JSON]:
        """The wire object (``result`` when ok, else ``error``)."""
        if self.ok:
            return {"id": self.id, "ok": True, "result": self.result}
        return {"id": self.id, "ok": False, "error": self.error}

    @classmethod
    def from_dict(cls, obj: Mapping[str, JSON]) -> Reply:
        """Read a reply line's object (a missing ``result`` reads as ``{}``)."""
        ok = bool(obj.get("ok"))
        return cls(obj.get("id"), ok, (obj.get("result") or {}) if ok else None,
                   None if ok else str(obj.get("error")))


@dataclass(frozen=True, slots=True)
class Ready:
    """An agent process is serving (``ready`` = its owner service's port, 0: none)."""

    ready: int
    pid: int
    agent: str

    def to_dict(self) -> dict[str, JSON]:
        """The wire object."""
        return {"ready": self.ready, "pid": self.pid, "agent": self.agent}

    @classmethod
    def from_dict(cls, obj: Mapping[str, JSON]) -> Ready:
        """Read a ready line's object."""
        return cls(int(obj["ready"]), int(obj.get("pid") or 0), str(obj.get("agent")))


@dataclass(frozen=True, slots=True)
class PeerCall:
    """An agent asks another role (through the coordinator), e.g. the one replan."""

    call: int
    to: str
    cmd: str
    args: Mapping[str, JSON] = field(default_factory=dict)

    def to_dict(self) -> dict[str, JSON]:
        """The wire object."""
        return {"call": self.call, "to": self.to, "cmd": self.cmd, **self.args}

    @classmethod
    def from_dict(cls, obj: Mapping[str, JSON]) -> PeerCall:
        """Read a call line's object."""
        return cls(obj["call"], str(obj.get("to")), str(obj["cmd"]),
                   {k: v for k, v in obj.items() if k not in ("call", "to", "cmd")})


@dataclass(frozen=True, slots=True)
class PeerReply:
    """The coordinator's answer to a :class:`PeerCall` (the other agent's result)."""

    reply: int
    ok: bool
    result: Mapping[str, JSON] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, JSON]:
        """The wire object (``result`` when ok, else ``error``)."""
        if self.ok:
            return {"reply": self.reply, "ok": True, "result": self.result}
        return {"reply": self.reply, "ok": False, "error": self.error}

    @classmethod
    def from_dict(cls, obj: Mapping[str, JSON]) -> PeerReply:
        """Read a reply line's object (``result`` as sent, None when absent)."""
        return cls(int(obj["reply"]), bool(obj.get("ok")), obj.get("result"),
                   None if obj.get("ok") else str(obj.get("error")))


Message = Command | Reply | Ready | PeerCall | PeerReply
"""Any control-plane message."""


def parse_line(line: str | bytes, *, to_agent: bool) -> Message | None:
    """Read one control line.

    Args:
        line: the JSON line.
        to_agent: True on the agent side (a :class:`PeerReply` or a :class:`Command`),
            False on the coordinator side (:class:`Ready`, :class:`PeerCall` or
            :class:`Reply`).

    Returns:
        The message, or None for a JSON object that is none of them (or has a field of the
        wrong type).

    Raises:
        ValueError: the line is not JSON (or not UTF-8).
    """
    obj = json.loads(line)
    if not isinstance(obj, dict):
        return None
    try:
        if to_agent:
            return PeerReply.from_dict(obj) if "reply" in obj else Command.from_dict(obj)
        if "ready" in obj:
            return Ready.from_dict(obj)
        if "call" in obj:
            return PeerCall.from_dict(obj)
        if "id" in obj:
            return Reply.from_dict(obj)
    except (KeyError, TypeError, ValueError):
        return None
    return None
