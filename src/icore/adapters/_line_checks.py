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
        self.sealed_by: str | None = None
        """The writer whose header says the file ends with its sealed end line."""
        self.seal_writers: set[Any] = set()

    def header(self, n: int, obj: Mapping[str, Any]) -> None:
        """The run header, line ``n``.

        ``"sealed": true`` in its ``run`` (a closed recorder's file holding its end line:
        a ``termination`` or the ``stopped`` line of a run left by an exception) is a
        promise that a line carries its writer's ``chain_end``: without one, lines were
        cut from the file's end (QA qa-new17c #5), which the chain alone cannot see.
        Kept only for a header whose writer marker opens that writer's chain (a trace
        stripped of its marker and chain reads as one written before them).
        """
        run = obj.get("run")
        mark = run.get("icore") if isinstance(run, Mapping) else None
        if isinstance(run, Mapping) and run.get("sealed") is True:
            w = mark.get("writer") if isinstance(mark, Mapping) else None
            self.sealed_by = w if isinstance(w, str) else ""
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
            end = obj["chain_end"]
            self.seal_writers.add(end.get("writer") if isinstance(end, Mapping) else None)
        elif terminates or obj.get("stopped") is True:
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
        if self.sealed_by and self.sealed_by in self.chain.marked \
                and self.sealed_by not in self.seal_writers:  # a marked writer's promise
            cut = ("the header says the file ends with its run's sealed end line "
                   "(sealed: true), but no line carries that writer's chain_end: lines were "
                   "cut from the file's end")
            broken = broken or cut
            said3 = (*said3, f"{self.file}: {cut}; every protected action of the run is "
                     "INVALID (which action a missing line concerned cannot be known)")
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
