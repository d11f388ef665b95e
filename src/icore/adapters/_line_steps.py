"""A run's steps read again from its file when asked, not held (issue 29, bounded memory).

The JSONL importer (:func:`icore.adapters.load_jsonl`) reads and checks every line once
and keeps, per step, only the byte offset where its line starts (8 bytes). The trace's
``steps`` is then a :class:`FileSteps`: iterating it re-reads the file one line at a
time and builds each :class:`~icore.adapters.Step` when the caller takes it, so the
audit (which reads the steps once, in order) holds one step at a time, not the run's
every step and text. The same steps, equal to those a first read built, in the same
order; a file changed after the import is refused, never read as another run.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, overload

from icore.adapters import _text_spill
from icore.adapters._errors import AdapterError
from icore.adapters._text_spill import TextSpill

if TYPE_CHECKING:
    from icore.adapters._trace import Step

_BOM = b"\xef\xbb\xbf"

StepParser = Callable[[str, int], "Step"]
"""Builds the step of one line: ``(line text, 0-based position among the steps)``."""


def file_stamp(f: BinaryIO) -> tuple[int, ...]:
    """What identifies an open file's content: device, inode, size, modification time (ns)."""
    st = os.fstat(f.fileno())
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class StepSource(Sequence["Step"]):
    """Steps kept out of ``Step`` objects, each built when read (a read-only sequence).

    Equality is element-wise with any sequence of steps (a tuple of the same steps is
    equal); a copy (pickle) is the tuple of the steps.

    Attributes:
        text_valid: no step's text holds a lone UTF-16 surrogate (checked at the import;
            :func:`icore.adapters._valid_text.valid_text_trace` then need not read them).
        last_index: the last step's index (-1: no steps); indices increase, so it is the
            largest.
    """

    __slots__ = ("last_index", "text_valid")

    def __init__(self, *, last_index: int, text_valid: bool) -> None:
        self.last_index = last_index
        self.text_valid = text_valid

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other,
                                                                          strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))

    def check(self) -> None:
        """Raise :class:`AdapterError` when the steps can no longer be read as imported.

        Held in memory: never. :class:`FileSteps` overrides it (the file changed or is
        gone since the import).
        """


class ColumnSteps(StepSource):
    """Steps held as columns (an OpenTelemetry run's, issue 29), each built when read.

    Per step: its kind (1 byte), parent (8 bytes, -1: none) and references to its
    agent, role, content and rare fields (shared objects), about 45 bytes instead of a
    ``Step`` of 88 bytes and its list slot; the step's index is its position. Past
    ``spill_chars`` (default :data:`~icore.adapters._text_spill.SPILL_CHARS`)
    characters of text (contents and roles) the run's roles and contents
    go to a temporary file (:class:`~icore.adapters._text_spill.TextSpill`: 16 bytes a
    step in memory), each read back when its step is built; if no temporary file can be
    made they stay here.
    """

    __slots__ = ("_agent", "_chars", "_content", "_kind", "_kind_no", "_kinds", "_memo",
                 "_parent", "_rare", "_role", "_spill", "_spill_at", "_step", "_valid",
                 "_where")

    def __init__(self, step: type[Step], kinds: Iterable[Any],
                 text_valid: Callable[[Step], bool], *, where: str = "",
                 spill_chars: int | None = None) -> None:
        super().__init__(last_index=-1, text_valid=True)
        self._where = where
        self._spill_at = _text_spill.SPILL_CHARS if spill_chars is None else spill_chars
        self._spill: TextSpill | None = None
        self._chars = 0
        self._step = step
        self._valid = text_valid
        self._kinds = tuple(kinds)
        self._kind_no = {k: n for n, k in enumerate(self._kinds)}
        self._kind = bytearray()
        self._agent: list[str] = []
        self._content: list[str] = []
        self._role: list[str] = []
        self._parent: array[int] = array("q")
        self._rare: list[tuple[tuple[str, Any], ...] | None] = []
        self._memo: dict[Any, tuple[tuple[str, Any], ...]] = {}

    def append(self, agent: str, kind: Any, content: str, role: str, parent: int | None,
               rare: dict[str, Any]) -> None:
        """Add the next step (its index: its position); ``rare``: its other fields."""
        self._kind.append(self._kind_no[kind])
        self._agent.append(agent)
        if self._spill is not None:
            self._spill.append(role)
            self._spill.append(content)
        else:
            self._content.append(content)
            self._role.append(role)
            self._chars += len(content) + len(role)
            if self._chars > self._spill_at:
                self._to_spill()
        self._parent.append(-1 if parent is None else parent)
        got = None
        if rare:
            got = tuple(rare.items())
            try:  # equal small sets of fields are one object (a tool's exit code)
                got = self._memo.setdefault((got, tuple(map(type, rare.values()))), got)
            except TypeError:
                pass
        self._rare.append(got)
        self.last_index = len(self._kind) - 1
        if self.text_valid and not (content.isascii() and agent.isascii()
                                    and role.isascii() and got is None):
            self.text_valid = self._valid(self._at(self.last_index))

    def amend(self, i: int, **fields: Any) -> None:
        """Set other fields of step ``i``, already added.

        An OpenTelemetry model turn's tool calls, read from the tool spans after it.
        """
        rare = dict(self._rare[i] or ())
        rare.update(fields)
        self._rare[i] = tuple(rare.items())
        if self.text_valid and not all(isinstance(v, str) and v.isascii()
                                       for v in fields.values()):
            self.text_valid = self._valid(self._at(i))

    def _to_spill(self) -> None:
        """Move the texts to a temporary file (kept here when none can be made)."""
        try:
            spill = TextSpill(where=self._where)
        except OSError:
            self._spill_at = 1 << 62  # no temporary file: the texts stay in memory
            return
        for role, text in zip(self._role, self._content, strict=True):
            spill.append(role)
            spill.append(text)
        self._content, self._role = [], []
        self._spill = spill

    def speakers(self) -> list[str]:
        """The steps' agents, each once, in the order they first speak."""
        return list(dict.fromkeys(self._agent))

    def __len__(self) -> int:
        return len(self._kind)

    def _at(self, i: int) -> Step:
        spill = self._spill
        if spill is None:
            return self._build(i, self._role[i], self._content[i])
        return self._build(i, spill[2 * i], spill[2 * i + 1])

    def _build(self, i: int, role: str, content: str) -> Step:
        p = self._parent[i]
        rare = self._rare[i]
        if rare is None:  # positional: to .. exitcode at their defaults, then the parent
            return self._step(i, self._agent[i], self._kinds[self._kind[i]],
                              content, role, None, None, None, False, None,
                              None if p < 0 else p)
        return self._step(i, self._agent[i], self._kinds[self._kind[i]], content,
                          role, parent=None if p < 0 else p, **dict(rare))

    def __iter__(self) -> Iterator[Step]:
        n = len(self._kind)
        if self._spill is None:
            return map(self._build, range(n), self._role, self._content)
        texts = iter(self._spill)  # role, content, role, content, ...
        return map(self._build, range(n), texts, texts)

    @overload
    def __getitem__(self, i: int) -> Step: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[Step, ...]: ...
    def __getitem__(self, i: int | slice) -> Step | tuple[Step, ...]:
        n = len(self)
        if isinstance(i, slice):
            return tuple(map(self._at, range(*i.indices(n))))
        k = i.__index__()
        if not -n <= k < n:
            raise IndexError("step position out of range")
        return self._at(k % n)

    def __repr__(self) -> str:
        return f"ColumnSteps({len(self)} steps)"


class FileSteps(StepSource):
    """The steps of a run file, built from its lines when read (a read-only sequence).

    Holds the file's path and stamp (:func:`file_stamp` when it was imported), the byte
    offset of each step's line (``array('q')``: 8 bytes a step) and the parser that
    builds a step from its line. Iterating reads the file once, front to back; an index
    reads one line (see :class:`StepSource` for equality).
    """

    __slots__ = ("_file", "_offsets", "_parse", "_path", "_stamp")

    def __init__(self, path: Path, stamp: tuple[int, ...], offsets: array[int],
                 parse: StepParser, *, file: str, last_index: int, text_valid: bool) -> None:
        super().__init__(last_index=last_index, text_valid=text_valid)
        self._path = path
        self._stamp = stamp
        self._offsets = offsets
        self._parse = parse
        self._file = file

    def __len__(self) -> int:
        return len(self._offsets)

    def _open(self) -> BinaryIO:
        """The file, checked to be the one imported.

        Raises:
            AdapterError: it cannot be opened, or it changed since the import (field
                ``<root>``).
        """
        try:
            f = self._path.open("rb")
        except OSError as exc:
            raise AdapterError(f"cannot read the steps again: {exc}", file=self._file,
                               field="<root>") from None
        if file_stamp(f) != self._stamp:
            f.close()
            raise self._changed()
        return f

    def check(self) -> None:
        """See :meth:`StepSource.check`: the file is still the one imported.

        Raises:
            AdapterError: it cannot be opened, or it changed since the import (field
                ``<root>``).
        """
        self._open().close()

    def _changed(self, why: str = "") -> AdapterError:
        return AdapterError("the file changed after it was imported (its steps are read "
                            "again from it when used: audit a copy that does not change)"
                            + (f": {why}" if why else ""), file=self._file, field="<root>")

    def _step(self, raw: bytes, off: int, pos: int) -> Step:
        if off == 0:
            raw = raw.removeprefix(_BOM)
        try:
            return self._parse(raw.decode("utf-8"), pos)
        except (AdapterError, UnicodeDecodeError) as exc:  # the import read it without error
            raise self._changed(str(exc)) from None

    def __iter__(self) -> Iterator[Step]:
        parse = self._parse
        with self._open() as f:
            at = 0
            for pos, off in enumerate(self._offsets):
                if off != at:
                    f.seek(off)
                raw = f.readline()
                at = off + len(raw)
                if not off:
                    raw = raw.removeprefix(_BOM)
                try:
                    st = parse(raw.decode("utf-8"), pos)
                except (AdapterError, UnicodeDecodeError) as exc:  # read without error once
                    raise self._changed(str(exc)) from None
                yield st
            if file_stamp(f) != self._stamp:  # rewritten in place while it was read: the
                raise self._changed("while it was read")  # steps may mix two files

    @overload
    def __getitem__(self, i: int) -> Step: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[Step, ...]: ...
    def __getitem__(self, i: int | slice) -> Step | tuple[Step, ...]:
        if isinstance(i, slice):
            want = range(*i.indices(len(self)))
            if want.step == 1:
                return tuple(s for k, s in enumerate(self) if k in want)
            return tuple(self[k] for k in want)
        n = len(self)
        k = i.__index__()
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("step position out of range")
        with self._open() as f:
            f.seek(self._offsets[k])
            return self._step(f.readline(), self._offsets[k], k)

    def __repr__(self) -> str:
        return f"FileSteps({len(self)} steps read from {str(self._path)!r})"


__all__ = ["ColumnSteps", "FileSteps", "StepParser", "StepSource", "file_stamp"]
