"""One end per recorded run (issue 28 item 6; icore Sec. 3, the terminal marker).

A framework hook learns that "a run" ended more often than the recording has runs: an
AG2 ``ask`` inside another ``ask``, a second top-level ``ask`` or ``Runner.run`` into the
same recorder. :class:`RunEnd` keeps the one ``termination`` line a recorder should have:
the latest end; when another run starts, the end recorded so far becomes an ordinary
``output`` of the agent that gave it.
"""

from __future__ import annotations

import threading
from typing import Any

from icore.integrations._recorder import RunRecorder


class RunEnd:
    """The end of the run recorded into ``recorder`` (thread-safe).

    Args:
        recorder: the run's recorder.
        echoed: the answer is also recorded as the agent's ``output`` line (the Agents SDK
            processor records every model turn): when another run starts, the end
            recorded so far is removed instead (no second output of the same text).
    """

    def __init__(self, recorder: RunRecorder, *, echoed: bool = False) -> None:
        self.recorder = recorder
        self.echoed = echoed
        self._line: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def end(self, agent: str, answer: str) -> None:
        """``agent``'s ``answer`` ends the run (a ``termination`` line with ``final_answer``)."""
        line = self.recorder.finish(agent, answer, traced=True)
        with self._lock:
            self._line = line

    def another_run(self) -> None:
        """Another run starts: the end recorded so far becomes an ``output`` line.

        With ``echoed``, it is removed (its answer is already an ``output`` line).
        """
        with self._lock:
            line, self._line = self._line, None
        if line is not None and not (self.echoed and self.recorder.remove(line)):
            line["kind"] = "output"
            line.pop("final_answer", None)
