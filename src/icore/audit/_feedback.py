"""State-grounded feedback built from a diagnosis F (icore Sec. 4; design.md 4.4).

Feedback says only what X shows: the affected obligations with status, assignee, weight,
soundness and gain, the missing or revoked evidence and the rejection reasons, the
feasible alternatives with their declared values, and the recovery kinds and operations
the routed agent may propose. Its text is a deterministic rendering, so the feedback
entry in the log is exactly what the agent was told; its size in tokens is counted with a
fixed word/punctuation tokenizer (a model-free proxy, documented in docs/audit.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from icore.audit._diagnosis import Diagnosis
from icore.state import State

RECOVERY_KINDS: dict[str, tuple[str, ...]] = {
    "work": ("repair", "verify", "decompose", "settle"),
    "evidence": ("repair", "verify"),
    "assignment": ("reassign",),
}
"""Recovery kinds offered per defect (icore Sec. 4: repair, verification, decomposition,
reassignment; settlement with evidence)."""

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by a fixed word/punctuation split (no model tokenizer)."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True, slots=True)
class ObligationBrief:
    """What the feedback says about one obligation."""

    id: str
    kind: str
    status: str
    assignee: str | None
    weight: float
    sound: bool
    gain: float
    missing: tuple[str, ...]
    revoked: tuple[str, ...]
    reasons: tuple[str, ...]
    alternatives: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class Feedback:
    """Feedback sent to the routed agent (a log entry of kind ``feedback``).

    Attributes:
        id: feedback id (``fb<n>``).
        diagnosis: the diagnosis id.
        to: the routed agent.
        defect: ``work``, ``evidence`` or ``assignment``.
        primary: the trigger addressed.
        obligations: briefs of the affected obligations.
        flags: hard flags the recovery must resolve.
        allowed: recovery kinds the agent may use.
        operations: operations of Ω the agent may propose.
        text: the rendered message.
        tokens: size of ``text`` (:func:`count_tokens`).
    """

    id: str
    diagnosis: str
    to: str
    defect: str
    primary: str
    obligations: tuple[ObligationBrief, ...]
    flags: tuple[str, ...]
    allowed: tuple[str, ...]
    operations: tuple[str, ...]
    text: str
    tokens: int

    def brief(self, oid: str) -> ObligationBrief | None:
        """The brief of obligation ``oid``, if it is affected."""
        for b in self.obligations:
            if b.id == oid:
                return b
        return None

    def to_json(self) -> Any:
        """The feedback as the JSON payload of its log entry."""
        return {
            "id": self.id,
            "diagnosis": self.diagnosis,
            "to": self.to,
            "defect": self.defect,
            "primary": self.primary,
            "obligations": [
                {
                    "id": b.id,
                    "kind": b.kind,
                    "status": b.status,
                    "assignee": b.assignee,
                    "weight": b.weight,
                    "sound": b.sound,
                    "gain": b.gain,
                    "missing": list(b.missing),
                    "revoked": list(b.revoked),
                    "reasons": list(b.reasons),
                    "alternatives": [[a, v] for a, v in b.alternatives],
                }
                for b in self.obligations
            ],
            "flags": list(self.flags),
            "allowed": list(self.allowed),
            "operations": list(self.operations),
            "text": self.text,
            "tokens": self.tokens,
        }


def build_feedback(state: State, diagnosis: Diagnosis, *, feedback_id: str, to: str) -> Feedback:
    """Build the state-grounded feedback for ``to`` from F (icore Sec. 4)."""
    gaps = {g.obligation: g for g in diagnosis.evidence}
    alts = dict(diagnosis.alternatives)
    # freeze() reads D's weight interface through the state's checks (InterfaceError)
    frozen = state.freeze(diagnosis.obligations)
    weights = dict(zip(frozen.obligations, frozen.weights, strict=True))
    briefs = []
    for oid in diagnosis.obligations:
        o = state.obligations[oid]
        g = gaps.get(oid)
        briefs.append(
            ObligationBrief(
                id=oid,
                kind=o.kind,
                status=str(o.effective_status),
                assignee=o.assignee,
                weight=weights[oid],
                sound=state.is_sound(oid),
                gain=round(state.gain(oid), 6),
                missing=g.missing if g else (),
                revoked=g.revoked if g else (),
                reasons=g.reasons if g else (),
                alternatives=alts.get(oid, ())[:3],
            )
        )
    allowed = RECOVERY_KINDS.get(diagnosis.defect, ("repair",))
    ops = tuple(sorted(n for n in state.decl.operations if state.decl.may_propose(to, n)))
    lines = [
        f"iCORE-Audit feedback {feedback_id} for {to} (diagnosis {diagnosis.id}, "
        f"{diagnosis.defect} defect, trigger {diagnosis.primary}).",
        f"Why: {diagnosis.detail}.",
    ]
    for b in briefs:
        line = (
            f"- {b.id} [{b.kind}, weight {b.weight:g}]: status {b.status}, assignee "
            f"{b.assignee or 'none'}, {'sound' if b.sound else 'UNSOUND'}, gain {b.gain:.3f}"
        )
        if b.missing:
            line += f"; missing evidence: {', '.join(b.missing)}"
        if b.revoked:
            line += f"; revoked certificates: {', '.join(b.revoked)}"
        if b.reasons:
            line += f"; rejected because: {' | '.join(b.reasons)}"
        if b.alternatives and diagnosis.defect == "assignment":
            line += "; better feasible agents: " + ", ".join(
                f"{a} ({v:.2f})" for a, v in b.alternatives
            )
        lines.append(line)
    if diagnosis.flags:
        lines.append(f"Resolve hard flag(s): {', '.join(diagnosis.flags)}.")
    lines.append(
        f"Propose one of: {', '.join(allowed)} (operations: {', '.join(ops) or 'none'}). "
        "The recovery is audited: it must be legal, work-sound, resolve the flags and not "
        "lower quality on the frozen set; removal needs transport or settlement evidence."
    )
    text = "\n".join(lines)
    return Feedback(
        id=feedback_id,
        diagnosis=diagnosis.id,
        to=to,
        defect=diagnosis.defect,
        primary=str(diagnosis.primary),
        obligations=tuple(briefs),
        flags=diagnosis.flags,
        allowed=allowed,
        operations=ops,
        text=text,
        tokens=count_tokens(text),
    )
