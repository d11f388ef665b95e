"""The integrity checks the JSONL importer runs on each line as it reads it (#29, qa-new14 S3).

One :class:`LineChecks` per trace bundles them: each writer's chain
(:class:`icore._line_chain.ChainCheck`), the header's writer marker
(:class:`icore._writer_mark.MarkCheck`), every line's whole-line digest
(:class:`icore._line_seal.SealCheck`), the model turns' tool calls held against the
protected calls they asked for (:class:`~icore.adapters._turn_args.TurnArgs`), and the
line each protected call's first decision is on (for the report). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from icore._line_chain import ChainCheck
from icore._line_seal import LINES, SealCheck
from icore._writer_mark import MarkCheck
from icore.adapters._turn_args import TurnArgs
from icore.fence import DecisionEntry


class LineChecks:
    """The per-line checks of one trace (``file``: its name, for the messages)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.chain = ChainCheck()  # each writer's chain, checked as read (#29)
        self.mark = MarkCheck(file)  # what the header's writer marker promises (#29)
        self.seal = SealCheck(file)  # every line's whole-line digest (QA qa-new14 S3)
        self.turns = TurnArgs()  # model turns' tool calls vs the calls they asked for
        self.task_lines: dict[str, int] = {}
        """task -> the line of its first decision."""
        self.sealed = False
        """A line carries a writer's seal (``chain_end``: its writer closed the file)."""

    def header(self, n: int, obj: Mapping[str, Any]) -> None:
        """The run header, line ``n``."""
        self.mark.header(n, obj)
        self.seal.line(n, obj)
        if "digest" in obj or "chain" in obj:  # the writer marker's digest (#29)
            self.chain.line(n, obj.get("chain"), obj.get("digest"))

    def planfence(self, n: int, obj: Mapping[str, Any]) -> None:
        """A PlanFence line ``n`` (already checked by the importer's ``_planfence_line``)."""
        pf, got = obj["planfence"], obj.get("digest")
        self.seal.line(n, obj)
        d = pf.get("decision")
        if isinstance(d, Mapping) and isinstance(task := d.get("task"), str):
            self.task_lines.setdefault(task, n)
        if "chain" in obj or "digest" in pf.get("decision", ()) or got is not None:
            got = got if isinstance(got, str) else d.get("digest") if isinstance(
                d, Mapping) else pf["record"]["id"]
            self.chain.line(n, obj.get("chain"), got)

    def event(self, n: int, obj: Mapping[str, Any], *, own: bool, terminates: bool) -> None:
        """An event line ``n``; ``own``: its digest is checked for its action alone."""
        if "digest" in obj or "chain" in obj:
            self.chain.line(n, obj.get("chain"), obj.get("digest"))
        self.seal.line(n, obj, own=own)
        self.turns.line(n, obj)
        if "chain_end" in obj:
            self.sealed = True
            self.chain.seal(n, obj["chain_end"])
        elif terminates:
            self.mark.missing(n, "seal", "chain_end seal on the run's end line")

    def result(self, *, protected: bool, decisions: Sequence[tuple[str, Any]],
               lines: Sequence[tuple[Any, ...]]) -> tuple[str | None, tuple[str, ...], bool]:
        """``(why every action is INVALID or None, warnings, marked)``.

        Args:
            protected: the trace has PlanFence lines (the chain's note is given only then).
            decisions: ``(field, recorded digest or None)`` per decision line.
            lines: the guarded event lines (:func:`icore._line_digest.checked_line`).

        ``marked``: the writer marker is active; the importer then drops the "audited as
        recorded" notes of the other checks (its promises decide).
        """
        broken, said3 = self.chain.result(file=self.file, note=protected)
        self.mark.writers(self.chain.marked, self.chain.lined)
        unmarked, said4 = self.mark.lines(decisions, lines)
        unsealed, said5 = self.seal.result(LINES in self.mark.promised)
        if self.mark.active:
            said3 = tuple(w for w in said3 if ": note: " not in w)
        return broken or unmarked or unsealed, said3 + said4 + said5, self.mark.active

    @property
    def unclosed(self) -> bool:
        """The header's writer marker promises a seal at the close and no line has one."""
        return "seal" in self.mark.promised and not self.sealed

    def turn_problems(self, decisions: Sequence[DecisionEntry],
                      records: Sequence[tuple[str, Mapping[str, Any]]]
                      ) -> tuple[dict[str, str], tuple[str, ...]]:
        """:meth:`~icore.adapters._turn_args.TurnArgs.problems` of the trace."""
        return self.turns.problems(decisions, records, file=self.file)


__all__ = ["LineChecks"]
