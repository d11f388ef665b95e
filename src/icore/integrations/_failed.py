"""The value a fenced tool that failed after its authorization gives back (issue 28).

Its own module so the recorder can tell a failed call from a result without importing
the guard's wrapping (:mod:`icore.integrations._tool_failed`). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Failed:
    """What a tool that failed after its authorization gave back.

    Attributes:
        value: what the model reads (a framework's error text); None when it raised.
        error: the failure as text (``"RuntimeError: carrier down"``).
        exc: the exception raised again once the call is recorded (None: handled).
        ran: False when the tool's body provably never ran (a layer between the gate
            and the body, or the framework's own argument check, answered with an
            error): recorded ``ran: false``, not "failed after authorization" (#28).
    """

    value: Any
    error: str
    exc: BaseException | None = None
    ran: bool = True

    def reraise(self) -> Any:
        """Raise :attr:`exc` again (its traceback kept); else return :attr:`value`."""
        if self.exc is not None:
            raise self.exc
        return self.value

    @property
    def output(self) -> str:
        """The recorded tool output: ``ERROR: <error>`` (and the model's text, if any)."""
        shown = "" if self.value is None else f" (the model read: {self.value})"
        return f"ERROR: {self.error}{shown}"[:2000]


__all__ = ["Failed"]
