"""The ``recorder`` argument of every recording entry point, checked once (#28, #29).

``RecordingHandler(None)``, ``recording("rec")`` and the like accepted anything and
recorded nothing at run time (QA qa-fw7 S2): a fenced call ran unrecorded. They are
refused at construction with an :class:`~icore.errors.IntegrationError` naming the fix.
"""

from __future__ import annotations

import os
from typing import Any

from icore.errors import IntegrationError
from icore.integrations._recorder import RunRecorder


def check_recorder(recorder: Any, *, where: str, optional: bool = False) -> None:
    """Refuse anything but a :class:`RunRecorder` (or None when ``optional``).

    Args:
        recorder: the value given.
        where: the entry point (``"RecordingHandler"``, ``"recorder="``), for the message.
        optional: None is allowed (``recorder=`` of a fenced tool).

    Raises:
        IntegrationError: ``recorder`` is not a RunRecorder (a path: the message says the
            recorder writes the file: ``RunRecorder(path=...)`` as the run goes, or
            ``rec.write(path)`` after it).
    """
    if isinstance(recorder, RunRecorder) or (optional and recorder is None):
        return
    is_path = isinstance(recorder, str | os.PathLike)
    path = str(recorder)[:80] if is_path else "run.jsonl"
    raise IntegrationError(
        f"{where} must be a RunRecorder" + (", not a path: the recorder writes the file "
                                          "(RunRecorder(path=...) as the run goes, or "
                                          "rec.write(path) after it)" if is_path else ""),
        got=type(recorder).__name__,
        fix=f"rec = RunRecorder('run-1'); pass rec; after the run: rec.write({path!r}) "
            f"(or RunRecorder('run-1', path={path!r}): written as the run goes)")


__all__ = ["check_recorder"]
