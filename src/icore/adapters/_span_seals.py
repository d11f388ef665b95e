"""An OpenTelemetry trace's gate and human-answer spans: decisions, digests, chain (#29).

The decision a gate span carries (:func:`gate_decision`), and what
:class:`~icore.adapters.OtelExporter` writes on those spans (``icore.gate.digest``,
``icore.approval.digest``, ``icore.chain.*``; :mod:`icore._line_digest`,
:mod:`icore._line_chain`), checked as the OTLP importer reads the spans. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from icore._line_chain import chain_problems
from icore._line_digest import attributes_digest
from icore.adapters import _otel_names as N
from icore.adapters._decision_check import gate_span_decision
from icore.adapters._otel_values import OtelSpan
from icore.adapters._trace import HumanAnswer
from icore.fence import DecisionEntry


class SpanSeals:
    """The digests and chain links of a trace's gate and human-answer spans (#29).

    The exporter writes ``icore.gate.digest`` / ``icore.approval.digest``
    (:func:`icore._line_digest.attributes_digest`) and ``icore.chain.*`` on each; a
    span whose attributes do not hash to its digest (or has none while others do) was
    edited: the action it decides (or could have answered) is ``INVALID``; a writer's
    chain checked in ``seq`` order (span order in a file is the exporter's batching, not
    the run's) shows a span lost or repeated: every action ``INVALID``. The exporter's
    seal (``icore.chain_end.*``: on a live run's span at its end, on an
    ``icore.chain_end`` span at its shutdown) says how many spans its chain holds: a span
    lost after the last one breaks the chain too, and every gate and human-answer span
    must then carry its digest and link (the seal promises them). Spans without digests
    or seal (other exporters, earlier icore) are read as recorded, with no note.
    """

    def __init__(self, file: str) -> None:
        self.file = file
        self.checks: list[tuple[str, Any, bool, int | HumanAnswer]] = []
        self.links: list[tuple[int | str, Any, Any]] = []
        self.seals: dict[Any, tuple[str, dict[str, Any]]] = {}  # writer -> its last seal

    def seal(self, s: OtelSpan) -> None:
        """The seal ``s`` carries (``icore.chain_end.*``); per writer its largest counts."""
        a, e = s.attributes, N.CHAIN_END
        seal = {"writer": a.get(e + "writer"), "lines": a.get(e + "lines"),
                "last": a.get(e + "last")}
        w, n = seal["writer"], seal["lines"]
        had = self.seals.get(w if isinstance(w, str) else repr(w))
        if had is None or (type(n) is int and type(had[1]["lines"]) is int
                           and n > had[1]["lines"]):
            self.seals[w if isinstance(w, str) else repr(w)] = (
                f"span {s.span_id} ({s.name!r})", seal)

    def _check(self, s: OtelSpan, prefix: str, what: int | HumanAnswer) -> None:
        a = s.attributes
        got = a.get(prefix + "digest")
        where = f"span {s.span_id} ({s.name!r})"
        self.checks.append((where, got, isinstance(got, str)
                            and got == attributes_digest(a, prefix), what))
        c = N.CHAIN
        if got is not None or any(k.startswith(c) for k in a):
            link = {"writer": a.get(c + "writer"), "seq": a.get(c + "seq"),
                    "prev": a.get(c + "prev")} if c + "writer" in a else None
            self.links.append((where, link, got))

    def decision(self, s: OtelSpan, index: int) -> None:
        """Check the gate span ``s`` of decision ``index``."""
        self._check(s, N.G, index)

    def answer(self, s: OtelSpan, ans: HumanAnswer) -> None:
        """Check the human-answer span ``s``."""
        self._check(s, N.APPROVAL, ans)

    def problems(self) -> tuple[dict[int, str], tuple[tuple[str, str | None, int, str], ...],
                                str | None, tuple[str, ...]]:
        """``(edited decisions, edited answers, chain break, warnings)``."""
        if not self.seals and not any(got is not None for _, got, _, _ in self.checks):
            return {}, (), None, ()
        edited: dict[int, str] = {}
        answers: list[tuple[str, str | None, int, str]] = []
        warnings: list[str] = []
        for where, got, ok, what in self.checks:
            if ok:
                continue
            why = ("its attributes hash to another digest" if got is not None else
                   "it carries no digest while the trace's other such spans do" if any(
                       x[1] is not None for x in self.checks) else "it carries no digest "
                   "although its exporter's seal (icore.chain_end) promises one")
            said = f"{where} does not match its digest: {why} (the trace was edited)"
            if isinstance(what, int):
                edited[what] = said
            else:
                answers.append((what.tool, what.args, what.step, said))
            warnings.append(f"{self.file}: {said}; the protected action(s) it concerns "
                            "are INVALID")

        def order(x: tuple[int | str, Any, Any]) -> int:
            seq = x[1].get("seq") if isinstance(x[1], dict) else None
            return seq if type(seq) is int else 0

        broken, notes = chain_problems(sorted(self.links, key=order),
                                       list(self.seals.values()), file=self.file,
                                       digested=0)
        return edited, tuple(answers), broken, (*warnings, *notes)


def gate_decision(s: OtelSpan, parent: tuple[str, str] | None,
                   file: str) -> DecisionEntry | None:
    """The gate decision an icore guardrail span carries (``icore.gate.*``), or None.

    Validated by :func:`icore.adapters._decision_check.gate_span_decision`. ``task``
    groups one protected call's decisions: the span's ``icore.task`` and the enclosing
    ``execute_tool`` span.

    Raises:
        AdapterError: a malformed decision (naming the span and the attribute).
    """
    a, g = s.attributes, N.G
    call = parent[1][:8] if parent is not None and parent[0] == "TOOL" else ""
    action = a.get(g + "action")
    task = "/".join(str(x) for x in (a.get(N.TASK), action if isinstance(action, str)
                                     else None, call) if x)
    return gate_span_decision(a, task, file=file, where=f"span {s.span_id} ({s.name!r})")


__all__ = ["SpanSeals", "gate_decision"]
