"""Windowed JSON reading of a binary file with the standard library's C scanner (issue 29).

:class:`JsonWindow` decodes a file's UTF-8 text a window (1 MiB) at a time and parses one
JSON value at a time with ``json.JSONDecoder.raw_decode``; the streaming readers of the
OpenTelemetry importer walk a document's outer structure with it (an array's items, an
object's members) without holding the document: memory stays bounded by the window and
the largest value parsed at once (one span). ``NaN``/``Infinity`` are refused as ijson
refuses them; every problem is an :class:`AdapterError` naming the file.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from itertools import accumulate, count
from operator import sub
from typing import IO, Any

from icore.adapters._errors import AdapterError
from icore.adapters._values import json_value_error

WINDOW = 1 << 20
"""Bytes read at a time (a window grows to hold a value bigger than it)."""

MAX_DEPTH = 512
"""Deepest nesting of arrays and objects accepted in a one-document file (OTLP needs ~12)."""

_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b'[]{}"')))
_UP_DOWN = bytes.maketrans(b"[]{}", b"\x02\x00\x02\x00")


_WS = re.compile(r"[ \t\n\r]*")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class JsonWindow:
    """The text of a binary file from byte ``at`` on, parsed one value at a time.

    Args:
        f: the file, positioned at byte ``at``.
        file: its name (for errors).
        at: the byte offset ``f`` is at.
        encoding: ``utf-8`` (or ``utf-8-sig`` from the start of a file: a BOM is skipped).

    Raises (every method):
        AdapterError: malformed JSON, not UTF-8 text, ``NaN``/``Infinity``, nesting too deep.
    """

    __slots__ = ("_dec", "_f", "_rd", "_want", "buf", "eof", "file", "pos", "read")

    def __init__(self, f: IO[bytes], file: str, *, at: int = 0,
                 encoding: str = "utf-8") -> None:
        self._f = f
        self.file = file
        self._dec = codecs.getincrementaldecoder(encoding)()
        self._rd = json.JSONDecoder(parse_constant=_no_constant).raw_decode
        self._want = WINDOW
        self.buf, self.pos, self.eof, self.read = "", 0, False, at

    def _more(self) -> None:
        try:
            chunk = self._f.read(max(self._want, len(self.buf) - self.pos))
            self.read += len(chunk)
            self.eof = not chunk
            self.buf = self.buf[self.pos:] + self._dec.decode(chunk, final=self.eof)
        except ValueError as exc:  # not UTF-8
            raise AdapterError(f"malformed JSON: {exc}", file=self.file,
                               field="<root>") from None
        self.pos = 0

    def error(self, problem: str) -> AdapterError:
        """A malformed-document error naming the file."""
        return AdapterError(f"malformed JSON: {problem}", file=self.file, field="<root>",
                            byte=self.byte_offset())

    def peek(self) -> str:
        """Skip whitespace; the next character, or ``""`` at the end of the file."""
        m = _WS.match(self.buf, self.pos)
        self.pos = m.end() if m is not None else self.pos
        while self.pos >= len(self.buf) and not self.eof:
            self._more()
            m = _WS.match(self.buf, self.pos)
            self.pos = m.end() if m is not None else self.pos
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def take(self, ch: str, what: str) -> None:
        """Consume ``ch`` (after whitespace), else a malformed-JSON error saying ``what``."""
        if self.peek() != ch:
            raise self.error(what)
        self.pos += 1

    def value(self) -> Any:
        """Parse the next JSON value (a window never cuts it: it grows until it parses)."""
        if (self.pos >= len(self.buf) or self.buf[self.pos] in " \t\n\r") and not self.peek():
            raise self.error("unexpected end of the document")
        while True:
            try:
                item, end = self._rd(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise self.error(exc.msg) from None
                self._more()
                continue
            except ValueError as exc:  # NaN / Infinity, an integer over 4300 digits
                raise json_value_error(exc, self.buf, file=self.file, field="<root>",
                                       first_line=None) from None
            except RecursionError:
                raise AdapterError("JSON nested too deeply", file=self.file,
                                   field="<root>") from None
            if end < len(self.buf) or self.eof:
                self.pos = end
                return item
            self._more()  # a number could go on in the next window

    def items(self, what: str = "an item") -> Iterator[Any]:
        """The items of the array whose ``[`` was just consumed, one at a time (then ``]``)."""
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            pos = self.pos  # the usual case, a comma right after the item, without peek()
            if pos < len(self.buf) and self.buf[pos] == ",":
                self.pos = pos + 1
                continue
            c = self.peek()
            if c == ",":
                self.pos += 1
                continue
            if c == "]":
                self.pos += 1
                return
            if not c:
                raise self.error("an array is not closed")
            raise self.error(f"expected ',' or ']' after {what}")

    def byte_offset(self) -> int:
        """Bytes of the file before the current position (the text after it re-encoded)."""
        return self.read - len(self.buf[self.pos:].encode("utf-8")) - len(
            self._dec.getstate()[0])

    def end(self) -> None:
        """Only whitespace may follow (as ``json.loads`` requires)."""
        if self.peek():
            raise self.error("extra data after the document")


def check_depth(f: IO[bytes], file: str, *, limit: int = MAX_DEPTH,
                chunk: int = 1 << 22) -> None:
    """Refuse a document nested deeper than ``limit`` before any parser builds it.

    ijson keeps one prefix string per open level, each as long as the path to it, so a
    400 KB file of ``[[[[...`` costs it gigabytes (quadratic in the depth). This pass reads
    ``f`` from where it is to its end in ``chunk``-byte pieces with C-speed byte operations
    only: escaped backslashes and quotes are dropped, everything but brackets and quotes
    is deleted, string contents are cut out, and the depth is the running sum of the
    brackets left (~20 ms per MiB; memory one chunk). Malformed JSON is left to the parser.

    Raises:
        AdapterError: nesting deeper than ``limit`` (naming the file and the byte range).
    """
    carry, depth, at = b"", 0, 0
    while piece := f.read(chunk):
        buf = carry + piece
        tail = len(buf) - len(buf.rstrip(b"\\"))  # a backslash run may go on in the next
        carry = buf[len(buf) - tail:] if tail else b""
        s = (buf[:len(buf) - tail].replace(b"\\\\", b"").replace(b'\\"', b"")
             .translate(None, _NOT_BRACKET).replace(b'""', b""))
        if b'"' in s:  # cut string contents; an odd quote left opens a string going on
            parts = s.split(b'"')
            if len(parts) % 2 == 0:
                carry = b'"' + carry
            s = b"".join(parts[0::2])
        if depth + s.count(b"[") + s.count(b"{") > limit and max(
                map(sub, accumulate(s.translate(_UP_DOWN), initial=depth),
                    count(0))) > limit:
            raise AdapterError(f"JSON nested deeper than {limit} levels (between bytes "
                               f"{at} and {at + len(piece)})", file=file, field="<root>")
        depth += 2 * (s.count(b"[") + s.count(b"{")) - len(s)
        at += len(piece)


__all__ = ["MAX_DEPTH", "WINDOW", "JsonWindow", "check_depth"]
