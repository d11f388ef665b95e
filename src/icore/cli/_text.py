r"""Text from input data made safe to print on a terminal (issue 29, QA r8-bad D1).

A trace is input: its run id, agent names, task names and field values may hold
terminal control sequences (``ESC ] 0 ; title BEL`` sets the window title, ``ESC ] 52``
writes the clipboard, ``ESC [ 2K`` erases a line, ``U+202E`` reverses the text that
follows) or rich markup (``[bold]``, ``[/x]``). Rich escapes neither control codes nor,
unless asked, markup. Two layers:

* :func:`shown`: every value from input data that a command prints through rich goes
  through it: control characters (C0 but tab and newline, DEL, C1, bidi controls, line
  and paragraph separators) become visible ``\xNN`` / ``\uNNNN`` escapes, then markup
  is escaped, so the value is printed as the text it is.
* :func:`neutral`: the ``icore`` entry point's output streams pass everything through
  it (:mod:`icore.cli` ``_Redacting``): the codes icore never writes itself (NUL, BEL,
  C1, bidi controls, and the string commands ``ESC ]`` OSC, ``ESC P`` DCS, ``ESC _``
  APC, ``ESC ^`` PM, ``ESC X`` SOS) are made visible in any line, a ``typer.echo`` of an
  error message included. Rich's own colours (``ESC [ ... m``) pass.
"""

from __future__ import annotations

import re

from rich.markup import escape

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e"
                      "\u2028\u2029\u2066-\u2069]")
_NEVER_OURS = re.compile("[\x00\x07\x80-\x9f\u202a-\u202e\u2066-\u2069]|\x1b(?=[\\]P_^X])")


def _visible(m: re.Match[str]) -> str:
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in m.group(0))


def printable(value: object) -> str:
    r"""``str(value)`` with its control characters as visible escapes (``\x1b``).

    For a line printed without rich (``typer.echo``); :func:`shown` for rich.
    """
    return _CONTROL.sub(_visible, str(value))


def shown(value: object) -> str:
    r"""``str(value)`` to print through rich, shown as the text it is.

    Control characters become visible escapes (``\x1b``), rich markup is escaped
    (``[bold]`` shown as such).
    """
    return escape(printable(value))


def neutral(text: str) -> str:
    """``text`` with the control codes icore never writes itself made visible.

    NUL, BEL, C1, bidi controls and the OSC/DCS/APC/PM/SOS introducers; rich's SGR
    colours pass.
    """
    return _NEVER_OURS.sub(_visible, text)


__all__ = ["neutral", "printable", "shown"]
