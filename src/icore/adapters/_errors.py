"""Adapter errors: the ``AdapterError`` branch of the icore error tree.

::

    AdapterError (ValueError)     adapters: a trace file is unreadable, malformed or truncated
    └── ExportError               an export (PROV-JSON) could not be produced or read back

Every error names the offending ``file`` and ``field`` (a JSON path such as
``history[12].content``), so a user can open the file at the right place.
"""

from __future__ import annotations

from typing import Any

from icore.errors import ErrorCode, IcoreError


class AdapterError(IcoreError, ValueError):
    """A recorded trace cannot be imported (design.md 2, ``adapters/``).

    Attributes:
        file: the source file (``"<memory>"`` for in-memory input).
        field: the offending field, as a JSON path (``"<root>"`` for the whole document).
        problem: what is wrong.
    """

    code = ErrorCode.ADAPTER

    def __init__(self, problem: str, *, file: str, field: str, **fields: Any) -> None:
        super().__init__(f"{file}: {field}: {problem}", file=file, field=field, **fields)
        self.file = file
        self.field = field
        self.problem = problem


class ExportError(AdapterError):
    """An export could not be produced, written or read back."""


def check_text(text: object, file: object) -> None:
    """Refuse an in-memory input of a ``parse_*`` function that is not text (issue 29).

    Raises:
        AdapterError: ``file`` is not a ``str`` (field ``file``), or ``text`` is not a
            ``str`` (field ``text``; bytes are told to be decoded first).
    """
    if not isinstance(file, str):
        raise AdapterError(f"file must be a str naming the input, got {type(file).__name__}",
                           file="<memory>", field="file")
    if not isinstance(text, str):
        hint = " (decode bytes first: data.decode('utf-8'))" \
            if isinstance(text, bytes | bytearray) else ""
        raise AdapterError(f"text must be a str, got {type(text).__name__}{hint}", file=file,
                           field="text")


__all__ = ["AdapterError", "ExportError", "check_text"]
