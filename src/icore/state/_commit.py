"""Committing audited proposals to X (icore Def. 6, Alg. 1; design.md 4.2, 4.4).

:class:`Commits` is the part of :class:`~icore.state.State` that audits a proposal
(:func:`~icore.state.check_legality`) and records the verdict, and commits an audited
repair (a batch of proposals, all or nothing) together with the flags it resolves, in
one log transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from icore.state._components import Transition
from icore.state._entries import Body, Committed, FlagResolved, LogEntry
from icore.state._errors import StateError, StateInputError
from icore.state._heads import HeadView
from icore.state._legality import Verdict, check_legality
from icore.state._tables import Recorder
from icore.state._view import StateView
from icore.state._xmodel import Proposal


class Trialable(StateView, Protocol):
    """X with trials (the state): what a batch commit audits on."""

    def trial(self) -> AbstractContextManager[StateView]:
        """Apply changes tentatively, then undo them all."""
        ...


class Commits:
    """Audits and records proposals (a part of :class:`~icore.state.State`).

    Args:
        x: the state (audited on, trials opened on).
        record: the state's recorder (one log transaction per call).
    """

    __slots__ = ("_record", "_x")

    def __init__(self, x: Trialable, record: Recorder) -> None:
        self._x = x
        self._record = record

    def submit(self, proposal: Proposal, *, head_view: HeadView | None = None) -> Verdict:
        """Audit ``proposal`` (icore Def. 6) and record the outcome (see ``State.submit``).

        Raises:
            StateInputError: the proposal's id was already used.
            InterfaceError: an interface of D misbehaved; nothing is written.
            LogError: the log refused the entries; nothing is written.
        """
        verdict = check_legality(proposal, self._x, head_view=head_view)
        self.apply_verdict(verdict)
        return verdict

    def apply_verdict(self, verdict: Verdict) -> list[LogEntry]:
        """Record a verdict taken on this state (see ``State.apply_verdict``).

        Raises:
            StateError: the state changed since the verdict was taken (stale verdict).
            InterfaceError: an interface misbehaved on a touched obligation.
            LogError: the log refused the entries; nothing is written.
        """
        seq = self._x.seq
        if verdict.base_seq != seq:
            raise StateError(
                "stale verdict: the state changed since the audit",
                verdict_seq=verdict.base_seq,
                state_seq=seq,
            )
        return self._record(verdict.bodies)

    def commit_all(
        self,
        proposals: Sequence[Proposal],
        *,
        head_view: HeadView | None = None,
        resolve: Sequence[str] = (),
        by: str | None = None,
        note: str = "",
    ) -> list[Verdict]:
        """Audit ``proposals`` in order and commit all of them, or none (see ``State.commit_all``).

        Raises:
            StateInputError: unknown flag in ``resolve`` or a reused proposal id.
            StateError: a trial is open on X.
            InterfaceError: an interface of D misbehaved; nothing is written.
            LogError: the log refused the entries; nothing is written.
        """
        self._check_flags(resolve)
        verdicts: list[Verdict] = []
        bodies: list[Body] = []
        with self._x.trial():
            for i, proposal in enumerate(proposals):
                v = check_legality(proposal, self._x, head_view=head_view)
                verdicts.append(v)
                if not v.committed:
                    return verdicts
                bodies.extend(v.bodies)
                if i + 1 < len(proposals):
                    self.apply_verdict(v)
        self._record_resolving(bodies, resolve, by, note)
        return verdicts

    def commit_verdicts(
        self,
        verdicts: Sequence[Verdict],
        *,
        resolve: Sequence[str] = (),
        by: str | None = None,
        note: str = "",
    ) -> list[Verdict]:
        """Commit verdicts already taken in order on X (see ``State.commit_verdicts``).

        Raises:
            StateError: a verdict is not a commit, or the chain does not start at X's
                current sequence number; nothing is written.
            StateInputError: a flag in ``resolve`` is unknown; nothing is written.
            InterfaceError: an interface misbehaved on a touched obligation.
            LogError: the log refused the entries; nothing is written.
        """
        self._check_flags(resolve)
        seq = self._x.seq
        bodies: list[Body] = []
        for v in verdicts:
            if not v.committed:
                raise StateError("cannot commit a rejected verdict", proposal=v.proposal.id)
            if v.base_seq != seq:
                raise StateError("stale verdict: the state changed since the audit",
                                 verdict_seq=v.base_seq, state_seq=seq)
            seq += len(v.bodies)
            bodies.extend(v.bodies)
        self._record_resolving(bodies, resolve, by, note)
        return list(verdicts)

    def _check_flags(self, resolve: Sequence[str]) -> None:
        flags = self._x.flags
        for fid in resolve:
            if fid not in flags:
                raise StateInputError("unknown flag", flag=fid)

    def _record_resolving(self, bodies: list[Body], resolve: Sequence[str],
                          by: str | None, note: str) -> None:
        """Record ``bodies`` and resolve the flags of ``resolve`` they leave open.

        One log transaction: ``bodies``, then a ``flag_resolved`` entry for each flag still
        open after them (nothing is written when there is nothing).
        """
        closed = {
            fid for b in bodies if isinstance(b, Committed) for fid in b.resolved_flags
        }
        for fid in dict.fromkeys(resolve):
            if self._x.flag_resolution(fid) is None and fid not in closed:
                bodies.append(FlagResolved(fid, by, note))
        if bodies:
            self._record(bodies)

    def transition(self, body: Committed) -> Transition:
        """The :class:`Transition` of a commit (for ``progress``)."""
        decl = self._x.decl
        return Transition(
            decl.operations[body.operation],
            Proposal(proposer=body.proposer, operation=body.operation, id=body.proposal),
            body.assertions,
            fields=decl.parameters.progress_fields,
        )
