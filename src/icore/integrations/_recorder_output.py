"""What a :class:`~icore.integrations.RunRecorder` gives: its lines, its file, its audit.

The recorder's outputs, split from the events it collects (:mod:`icore.integrations._recorder`):
the header with the writer marker, the generic JSONL text (:meth:`RunOutput.jsonl`),
:meth:`RunOutput.write` to a file, :meth:`RunOutput.close` of the file given as
``path=`` (:mod:`icore.integrations._run_journal`), and the parse and audit of the lines
(no second code path: ``icore audit`` reads exactly these lines).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from icore._line_chain import chain_lines, is_end
from icore._line_seal import sealed
from icore._strict_json import strict_dumps
from icore._writer_mark import marked_header
from icore.integrations._run_file import write_run
from icore.integrations._run_journal import RunJournal, done
from icore.integrations._run_stop import stopped

if TYPE_CHECKING:  # imported when used: the adapters package is heavy (MCP gateway start-up)
    from icore.adapters import AuditResult, Trace


class RunOutput:
    """The outputs of a :class:`~icore.integrations.RunRecorder` (its base class)."""

    run_id: str
    question: str
    agents: dict[str, str]
    orchestrator: str | None
    ground_truth: str | None
    succeeded: bool | None
    events: list[dict[str, Any]]
    planfence: list[dict[str, Any]]
    writer: str
    journal: RunJournal | None
    _before: list[Callable[[], None]]
    _lock: threading.Lock

    def header(self) -> dict[str, Any]:
        """The ``{"run": {...}}`` header line, with the writer marker (#29).

        ``"sealed": true`` when the lines hold an end line (:func:`~icore._line_chain.is_end`,
        sealed with the chain's ``chain_end``): the audit then flags a file whose end was
        cut off (QA qa-new17c #5).
        """
        with self._lock:
            agents = dict(self.agents)
            ends = any(is_end(e) for e in self.events)
        given = {"question": self.question or None, "orchestrator": self.orchestrator or None,
                 "ground_truth": self.ground_truth, "succeeded": self.succeeded,
                 "sealed": True if ends else None}
        return marked_header({"id": self.run_id, "agents": agents, **{
            k: v for k, v in given.items() if v is not None}}, self.writer)

    def jsonl(self, *, after: Sequence[Mapping[str, Any]] = ()) -> str:
        """The run in the generic JSONL format.

        The header first, then the PlanFence lines, then one event per line, then
        ``after`` (the MCP gateway's PlanFence lines). Every line carries its whole-line
        digest (:func:`icore._line_seal.sealed`: model turns and their ``tool_calls``
        too, QA qa-new14 S3) and its link in this recorder's chain (:attr:`writer`),
        every end line the chain's seal (:func:`icore._line_chain.chain_lines`, #29).
        """
        with self._lock:
            before = list(self._before)
        for refresh in before:
            refresh()
        with self._lock:
            events = list(self.events)
            planfence = list(self.planfence)
        lines = chain_lines(self.writer, [sealed(x) for x in (self.header(), *planfence,
                                                              *events, *after)])
        return "".join(strict_dumps(x, sort_keys=True) + "\n" for x in lines)

    def write(self, path: str | Path, *, overwrite: bool = False) -> Path:
        r"""Write :meth:`jsonl` to ``path`` (``icore audit PATH`` reads it); return the path.

        Nothing is overwritten unless ``overwrite=True``: a trace icore wrote there before
        (the folder's ``.icore-files`` ledger: a rerun, a concurrent run) is moved aside
        to the first free ``<stem>-1<suffix>``, ``-2`` ... (as the MCP gateway keeps an
        earlier run's trace); a user's file (a source file, another trace) is refused,
        never lost to a mistyped path. The written file is listed in the ledger. Missing
        parent folders are created (as ``icore audit --json`` does).

        Raises:
            IntegrationError: ``path`` is empty or not a path, holds a surrogate (a name
                of bytes that are not UTF-8, ``'run\udc80.jsonl'``: refused as the MCP
                gateway's ``trace`` is, before anything is written), names a folder, a
                device or a FIFO, holds a file icore did not write (or one changed
                since; without ``overwrite``), or cannot be written (the message names the path and
                the reason; ``fix`` says what to do), or as :meth:`close` for the run's own
                file (``path=``: writing it is closing it).
        """
        if self.journal is not None and self.journal.same(path):
            return self.close() or Path(path)  # the run's own file: its end (close)
        return write_run(path, self.jsonl, overwrite=overwrite)

    def close(self) -> Path | None:
        """End the file given as ``path=``: its end lines, then :meth:`jsonl` in place.

        Afterwards the file is byte for byte what :meth:`write` writes (replaced
        atomically; a close killed midway leaves the appended lines, the end included).
        Lines recorded later stay in memory (:meth:`write`); calling it again writes the
        file again. Returns the path (None without ``path=``).

        Raises:
            IntegrationError: the file at the path is no longer the one the run appended
                to (moved or replaced: left as it is), or cannot be written.
        """
        if self.journal is None:
            return None
        done(self)
        return self.journal.finish(self.jsonl)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        """The block's end: :meth:`close`; left by an exception, the run stopped first.

        An exception (not ``SystemExit``/``GeneratorExit``) out of the block, with no end
        recorded since the run's last task: the run's last line is a ``thought`` "the run
        stopped: <Type>: <message>" with ``error`` (``cancelled: true`` for Ctrl-C)
        and ``stopped: true`` (the one an integration already wrote, e.g. LangGraph's
        ``RecordingHandler`` on the graph's error, else a new one). It is sealed with the
        chain's ``chain_end`` like an end line, so lines cut from the file are seen, while
        the run still audits as not ended (no final answer). The exception propagates.
        """
        if exc is not None and not isinstance(exc, SystemExit | GeneratorExit):
            stopped(self, exc)
        self.close()

    def _flush(self) -> None:
        if self.journal is not None:
            self.journal.flush()

    def trace(self) -> Trace:
        """Parse the recorded lines with the JSONL importer (what ``icore audit`` sees).

        Raises:
            AdapterError: nothing was recorded.
        """
        from icore.adapters import parse_jsonl
        return parse_jsonl(self.jsonl(), file=f"<{self.run_id}>", run_id=self.run_id)

    def audit(self) -> AuditResult:
        """Audit the recorded run (iCORE-Audit over X built from :meth:`trace`)."""
        from icore.adapters import audit_trace
        return audit_trace(self.trace())


__all__ = ["RunOutput"]
