r"""Text that every output can encode: lone UTF-16 surrogates become U+FFFD (issue 29).

JSON may spell a lone surrogate (``"x\ud800y"``, e.g. an emoji cut in half by a
tracer's length limit), and Python decodes it into a ``str`` that no UTF-8 writer
accepts: the digest of a message, the HTML report, PROV, an OTLP export and the console
would each fail on it. A file name that is not UTF-8 reaches Python the same way
(``\udcff``). :func:`valid_text_trace` is applied to every trace before it is audited
(:func:`icore.adapters.audit_trace`): each lone surrogate is replaced by U+FFFD, the
Unicode replacement character, and the trace's warnings name the fields it was found in.
A well-formed pair (an emoji written as ``\ud83d\ude00``) is one character after JSON
decoding and is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from icore.adapters._line_steps import StepSource
from icore.adapters._trace import Annotation, Ledger, LiveRunPart, Step, Trace
from icore.fence import DecisionEntry

_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_NAMED = 3


def valid_text(s: str) -> str:
    """``s`` with each lone UTF-16 surrogate replaced by U+FFFD (``s`` itself if none)."""
    if s.isascii() or not _SURROGATE.search(s):
        return s
    return _SURROGATE.sub("\ufffd", s)


class _Fixer:
    """Replaces surrogates in one trace and remembers where it found them."""

    def __init__(self) -> None:
        self.places: list[str] = []

    def s(self, v: str, where: str) -> str:
        """``v`` fixed (:func:`valid_text`); ``where`` noted when it changed."""
        got = valid_text(v)
        if got is not v:
            self.places.append(where)
        return got

    def opt(self, v: str | None, where: str) -> str | None:
        """As :meth:`s`, None passing through."""
        return None if v is None else self.s(v, where)

    def deep(self, v: Any, where: str) -> Any:
        """A JSON-like value with every string (keys too) fixed.

        ``v`` itself when it holds no lone surrogate (checked on its JSON text, in C);
        else a copy, built without recursion (a record nested 900 deep is valid JSON).
        """
        if isinstance(v, str):
            return self.s(v, where)
        if not isinstance(v, Mapping | list | tuple) or _clean(v):
            return v
        frames: list[tuple[Any, Iterator[Any], list[tuple[Any, Any]], Any]] = []

        def enter(x: Any, key: Any) -> None:
            frames.append((x, iter(x.items()) if isinstance(x, Mapping) else iter(x), [],
                           key))

        enter(v, None)
        while True:
            src, items, out, key = frames[-1]
            for item in items:
                k, x = item if isinstance(src, Mapping) else (None, item)
                if isinstance(k, str):
                    k = self.s(k, where)
                if isinstance(x, Mapping | list | tuple):
                    enter(x, k)
                    break
                out.append((k, self.s(x, where) if isinstance(x, str) else x))
            else:
                frames.pop()
                built = dict(out) if isinstance(src, Mapping) else type(src)(
                    x for _, x in out)
                if not frames:
                    return built
                frames[-1][2].append((key, built))


def _clean(v: Any) -> bool:
    """Whether the JSON text of ``v`` surely holds no lone surrogate (False: look)."""
    try:
        text = json.dumps(v, ensure_ascii=False, default=str, check_circular=False)
    except (RecursionError, ValueError, TypeError):
        return False
    return text.isascii() or not _SURROGATE.search(text)


def step_text_valid(st: Step) -> bool:
    """Whether no text of ``st`` holds a lone UTF-16 surrogate (it needs no fixing)."""
    texts = (st.content, st.agent, st.role, st.to or "", st.final_answer or "")
    if all(t.isascii() for t in texts) and st.ledger is None:
        return True
    led = st.ledger
    more = (led.next_speaker or "", led.instruction or "", *led.reasons.values(),
            *led.reasons) if led is not None else ()
    return not any(_SURROGATE.search(t) for t in (*texts, *more))


def _step(fx: _Fixer, st: Step) -> Step:
    w = f"step {st.index}"
    led = st.ledger
    if led is not None:
        led = Ledger(led.is_request_satisfied, led.is_in_loop, led.is_progress_being_made,
                     fx.opt(led.next_speaker, f"{w}.ledger.next_speaker"),
                     fx.opt(led.instruction, f"{w}.ledger.instruction"),
                     fx.deep(dict(led.reasons), f"{w}.ledger.reasons"))
    return replace(st, content=fx.s(st.content, f"{w}.content"),
                   agent=fx.s(st.agent, f"{w}.agent"), role=fx.s(st.role, f"{w}.role"),
                   to=fx.opt(st.to, f"{w}.to"),
                   final_answer=fx.opt(st.final_answer, f"{w}.final_answer"), ledger=led)


def valid_text_trace(trace: Trace) -> Trace:
    """``trace`` with no lone UTF-16 surrogate in any text (see the module docstring).

    Returns:
        ``trace`` itself when it holds none; else a copy whose ``warnings`` end with one
        line naming the first fields fixed and how many there were.
    """
    fx = _Fixer()
    steps: Sequence[Step] = trace.steps
    if not (isinstance(steps, StepSource) and steps.text_valid):  # else checked at the import
        steps = tuple(st if step_text_valid(st) else _step(fx, st) for st in steps)
    ann = trace.annotation
    if ann is not None:
        ann = Annotation(fx.opt(ann.agent, "annotation.agent"), ann.step,
                         fx.s(ann.reason, "annotation.reason"))
    pf = trace.planfence
    if pf is not None:
        pf = replace(
            pf, records=tuple(fx.deep(dict(r), "planfence.records") for r in pf.records),
            decisions=tuple(DecisionEntry.from_dict(fx.deep(
                d.to_dict(), "planfence.decisions")) for d in pf.decisions),
            replans=tuple((tuple(fx.s(r, "planfence.replans") for r in old),
                           tuple(fx.s(r, "planfence.replans") for r in new))
                          for old, new in pf.replans),
            answers=tuple(replace(a, tool=fx.s(a.tool, "planfence.answers"))
                          for a in pf.answers))
    live = trace.live
    if live is not None:
        live = LiveRunPart(tuple(fx.deep(dict(c), "icore.call") for c in live.calls),
                           fx.opt(live.manifest, "icore.run.manifest"))
    fixed = replace(
        # the file's name is the file system's (bytes that are no UTF-8 come as
        # surrogates, a shell's $'\xff'), not the trace's text: shown fixed, no warning
        trace, id=fx.s(trace.id, "id"), file=valid_text(trace.file),
        question=fx.s(trace.question, "question"),
        ground_truth=fx.opt(trace.ground_truth, "ground_truth"),
        agents=fx.deep(dict(trace.agents), "agents"), steps=steps, annotation=ann,
        source_fields=fx.deep(dict(trace.source_fields), "source fields"),
        orchestrator=fx.opt(trace.orchestrator, "orchestrator"), planfence=pf,
        unknown_spans=fx.deep(dict(trace.unknown_spans), "unknown spans"),
        warnings=tuple(fx.s(w, "warnings") for w in trace.warnings), live=live)
    if not fx.places:
        return trace if fixed.file is trace.file else replace(trace, file=fixed.file)
    named = ", ".join(dict.fromkeys(fx.places[:_MAX_NAMED]))
    more = f" and {len(fx.places) - _MAX_NAMED} more" if len(fx.places) > _MAX_NAMED else ""
    return replace(fixed, warnings=(*fixed.warnings, (
        f"{fixed.file}: {named}{more}: lone UTF-16 surrogate(s) (e.g. an emoji cut in "
        "half) read as U+FFFD")))


__all__ = ["valid_text", "valid_text_trace"]
