"""The icore error tree (style habit 4).

Every error raised on purpose by icore derives from :class:`IcoreError` and carries a
stable machine-readable :class:`ErrorCode`. Input-validation errors also derive from
``ValueError``.

::

    IcoreError
    ├── RecordError (ValueError)          records: malformed record / codec / id mismatch
    │   ├── MalformedRecord
    │   ├── RecordIdMismatch
    │   └── CodecError
    ├── LineageError                       records: traversal cannot prove a frontier
    │   ├── MissingParent
    │   ├── MissingBoundary
    │   ├── FrontierConflict
    │   └── LineageTooLarge
    ├── StoreError                         memory: owner rules and storage
    │   ├── OwnershipError (ValueError)    unknown key / writer is not the owner
    │   ├── CommitConflict                 a concurrent commit won (retryable)
    │   │   ├── HeadConflict               the commit's base is not the current head
    │   │   ├── SequenceError              sequence did not increase
    │   │   └── SequenceConflict           same sequence, another record id
    │   ├── RecordNotFound
    │   ├── StoreClosed
    │   └── OwnerUnavailable               the owner could not be reached (gate blocks)
    ├── FenceError                         fence: declaration / usage errors
    │   ├── DeclarationError (ValueError)
    │   ├── ActionBlocked                  raised by ``execute(..., raise_on_block=True)``
    │   ├── AsyncRequired                  a coroutine function given to the sync path
    │   └── FenceCallError (TypeError)     execute/aexecute called with wrong argument types
    ├── TransportError                     net: anything between two agents went wrong
    │   ├── ProtocolError (ValueError)     bytes on the wire are not a valid frame/message
    │   │   ├── FrameTooLarge              length prefix over the maximum frame size
    │   │   ├── TruncatedFrame             the stream ended inside a frame
    │   │   ├── UnsupportedVersion         the frame names another protocol version
    │   │   ├── MalformedMessage           not msgpack, wrong shape or types, unknown type
    │   │   ├── InvalidRecord              a carried record fails verification
    │   │   └── SequenceViolation          a request id was replayed or reordered
    │   ├── AuthenticationError            TLS failed, or a certificate names another agent
    │   ├── OwnerUnreachable               also an OwnerUnavailable
    │   │   └── RpcTimeout                 no reply within the RPC timeout (default 2 s)
    │   ├── ConnectionClosed               the peer closed the connection
    │   ├── RemoteError                    the owner answered with a typed error reply
    │   └── TeamManifestError (ValueError) the team manifest is missing or invalid
    ├── StateError                         iCORE state (defined in icore.state)
    ├── AuditError                         iCORE-Audit (defined in icore.audit)
    ├── AdapterError (ValueError)          importers (defined in icore.adapters)
    ├── MissingExtra (ImportError)         an optional extra is not installed
    ├── IntegrationError                   framework integrations (icore.integrations)
    │   └── WorkspaceError (ValueError)    the workspace API (defined in icore.workspace)
    │       ├── FactNotWritten (LookupError) a read of a fact never written
    │       └── ReplanFailed               a user replanner failed; the call did not run
    ├── LiveManifestError, LiveRunError    live runs (defined in icore.live)
    ├── LLMUnavailable                     the LLM host (defined in icore.agents)
    ├── DataUnavailable                    the shared data folder cannot be found
    └── BenchError                         harnesses (defined in the lab, icore_lab.bench)

Higher layers define their subclasses next to their code and attach them to this tree.
Import every error of this module from ``icore.errors`` (``from icore.errors import
IntegrationError, ActionBlocked``); the higher layers' errors from their package
(``from icore.workspace import WorkspaceError``). ``IcoreError`` is also ``icore.IcoreError``.

Error families: every error sets the :class:`ErrorCode` of its own family
(:data:`FAMILIES`: the package it belongs to -> the codes it may report); the root's
``unclassified`` is never reported by a public error (tests/test_error_families.py).
"""

from __future__ import annotations

import enum
import re
import reprlib
from typing import Any

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"]+@")
_SECRET_WORD = (r"(?:token|access_?token|api_?key|key|secret|passw(?:or)?d|pwd|"
                r"auth(?:orization)?|sig(?:nature)?|credentials?|session(?:_?id)?)")
_SECRET_QUERY = re.compile(  # the word as a whole part of the name: not author, keyword
    r"(?P<name>[?&;](?:[^=&#;\s'\"?]*[_.-])?" + _SECRET_WORD +
    r"(?:[_.-][^=&#;\s'\"?]*)?=)[^&#;\s'\"]+", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with the credentials of every URL replaced.

    The user-info (``nats://u:pw@h`` -> ``nats://***@h``) and the value of every query
    parameter named like a credential (``?token=``, ``api_key=``, ``secret``, ``password``,
    ``auth``, ``sig``, ``session``: ``https://h/mcp?token=***``), also in a URL printed
    without its scheme (``/v1/traces?api_key=***``). Every :class:`IcoreError` message
    and string field passes through it (issue 29), and so does everything the CLI and
    the MCP gateway print or log, so a password or token in a server URL is never shown.
    """
    if "@" in text:
        text = _USERINFO.sub(r"\g<scheme>***@", text)
    if "=" in text:
        text = _SECRET_QUERY.sub(r"\g<name>***", text)
    return text


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 3, 120, 120, 60


def brief(value: Any, limit: int = 120) -> str:
    """``repr(value)`` for an error message: at most ``limit`` characters, never raises.

    A caller's bad value may be a 30 MB string, a 10,000-deep list (``repr`` overflows
    the stack), an int past Python's 4300-digit str limit, or an object whose
    ``__repr__`` raises: each would turn a typed refusal into a traceback (issue 29).
    Those show as a cut repr, ``<int of N bits>`` or ``<TypeName ...>``.
    """
    if isinstance(value, int) and value.bit_length() > 4000:
        return f"<int of {value.bit_length()} bits>"
    try:
        text = _BRIEF.repr(value)
    except Exception:  # a __repr__ that raises, a stack overflow
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:max(0, limit - 3)] + "..."


def visible(text: str) -> str:
    """``text`` with its control, format and line-separator characters shown escaped.

    A newline reads as a backslash and ``n``, a bidi override (U+202E) as its code: a
    key is shown as it is, never reordered or broken by the characters it holds (the
    audit's pages and the refusals the model reads; QA qa-new10b S4).
    """
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            esc = ch.encode("unicode_escape").decode("ascii")
            out.append(esc if esc != ch else f"\\u{ord(ch):04x}")
    return "".join(out)


def _field_text(v: Any) -> str:
    """``repr(v)`` of an error's field; :func:`brief` where repr would fail, cut past 4000."""
    if isinstance(v, int) and v.bit_length() > 4000:
        return brief(v)
    try:
        text = repr(v)
    except Exception:  # a __repr__ that raises, a stack overflow
        return brief(v, 400)
    return text if len(text) <= 4000 else text[:3997] + "..."


def _redacted(v: Any, depth: int = 0) -> Any:
    if isinstance(v, str):
        return redact(v)
    if isinstance(v, list | tuple):
        if depth > 32:  # deeper than any context icore builds: its outline only
            return brief(v)
        return type(v)(_redacted(x, depth + 1) for x in v)
    return v


class ErrorCode(enum.StrEnum):
    """Stable error codes used in verdicts, logs and CLI exits."""

    MALFORMED_RECORD = "malformed_record"
    RECORD_ID_MISMATCH = "record_id_mismatch"
    CODEC = "codec"
    MISSING_PARENT = "missing_parent"
    MISSING_BOUNDARY = "missing_boundary"
    FRONTIER_CONFLICT = "frontier_conflict"
    LINEAGE_TOO_LARGE = "lineage_too_large"
    OWNERSHIP = "ownership"
    SEQUENCE = "sequence"
    SEQUENCE_CONFLICT = "sequence_conflict"
    HEAD_CONFLICT = "head_conflict"
    NOT_FOUND = "not_found"
    STORE_CLOSED = "store_closed"
    DECLARATION = "declaration"
    BLOCKED = "blocked"
    ASYNC_REQUIRED = "async_required"
    TRANSPORT = "transport"
    STATE = "state"
    AUDIT = "audit"
    ADAPTER = "adapter"
    BENCH = "bench"
    MISSING_EXTRA = "missing_extra"
    INTEGRATION = "integration"
    OWNER_UNAVAILABLE = "owner_unavailable"
    LIVE = "live"
    LLM = "llm"
    DATA = "data"
    WORKSPACE = "workspace"
    MCP = "mcp"
    UNCLASSIFIED = "unclassified"


FAMILIES: dict[str, frozenset[ErrorCode]] = {
    "records": frozenset({ErrorCode.MALFORMED_RECORD, ErrorCode.RECORD_ID_MISMATCH,
                          ErrorCode.CODEC, ErrorCode.MISSING_PARENT,
                          ErrorCode.MISSING_BOUNDARY, ErrorCode.FRONTIER_CONFLICT,
                          ErrorCode.LINEAGE_TOO_LARGE}),
    "memory": frozenset({ErrorCode.OWNERSHIP, ErrorCode.SEQUENCE,
                         ErrorCode.SEQUENCE_CONFLICT, ErrorCode.HEAD_CONFLICT,
                         ErrorCode.NOT_FOUND, ErrorCode.STORE_CLOSED,
                         ErrorCode.OWNER_UNAVAILABLE}),
    "fence": frozenset({ErrorCode.DECLARATION, ErrorCode.BLOCKED, ErrorCode.ASYNC_REQUIRED}),
    "net": frozenset({ErrorCode.TRANSPORT}),
    "state": frozenset({ErrorCode.STATE, ErrorCode.DECLARATION}),
    "audit": frozenset({ErrorCode.AUDIT}),
    "adapters": frozenset({ErrorCode.ADAPTER}),
    "bench": frozenset({ErrorCode.BENCH}),
    "live": frozenset({ErrorCode.LIVE}),
    "agents": frozenset({ErrorCode.LLM}),
    # a fenced tool may surface the gate's block as the framework's own exception type
    "integrations": frozenset({ErrorCode.INTEGRATION, ErrorCode.BLOCKED}),
    "workspace": frozenset({ErrorCode.WORKSPACE}),
    "mcp": frozenset({ErrorCode.MCP}),
    "extras": frozenset({ErrorCode.MISSING_EXTRA}),
    "data": frozenset({ErrorCode.DATA}),
}
"""Each error family (the package an error belongs to) -> the codes its errors report."""


class IcoreError(Exception):
    """Root of every icore error.

    Attributes:
        code: stable :class:`ErrorCode` of the error's family (:data:`FAMILIES`); every
            subclass sets its own (the root's ``unclassified`` is never reported).
        fields: structured context (record key, record id, owner, file, path, ...).
    """

    code: ErrorCode = ErrorCode.UNCLASSIFIED
    retryable: bool = False
    """True when the same operation may succeed after re-reading state (a lost race)."""

    def __init__(self, message: str, **fields: Any) -> None:
        """Make an error from its message and structured context.

        Args:
            message: what went wrong, without the context.
            fields: structured context (record key, record id, owner, file, path, ...),
                kept in :attr:`fields`.
        """
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.fields: dict[str, Any] = {k: _redacted(v) for k, v in fields.items()}

    def __str__(self) -> str:
        """The message followed by the fields as ``(k=v, ...)`` when there are any."""
        if not self.fields:
            return self.message
        ctx = ", ".join(f"{k}={_field_text(v)}" for k, v in self.fields.items())
        return f"{self.message} ({ctx})"


# --- records ------------------------------------------------------------------------
class RecordError(IcoreError, ValueError):
    """A record or its encoding is invalid."""

    code = ErrorCode.MALFORMED_RECORD


class MalformedRecord(RecordError):
    """A record field is missing, of the wrong type or out of bounds."""


class RecordIdMismatch(RecordError):
    """A record's claimed id is not the hash of its canonical encoding."""

    code = ErrorCode.RECORD_ID_MISMATCH


class CodecError(RecordError):
    """Bytes could not be decoded into a record."""

    code = ErrorCode.CODEC


class LineageError(IcoreError):
    """Lineage traversal could not establish a frontier (planfence Alg. 1 line 2)."""

    code = ErrorCode.MISSING_PARENT


class MissingParent(LineageError):
    """A parent id reached from the roots is not available locally."""


class MissingBoundary(LineageError):
    """A key of D(a) is never reached from the roots."""

    code = ErrorCode.MISSING_BOUNDARY


class FrontierConflict(LineageError):
    """Two different versions of one key of D(a) are reached from the roots."""

    code = ErrorCode.FRONTIER_CONFLICT


class LineageTooLarge(LineageError):
    """The traversal visited more records than its bound."""

    code = ErrorCode.LINEAGE_TOO_LARGE


# --- memory -------------------------------------------------------------------------
class StoreError(IcoreError):
    """A store refused or failed an operation; nothing was changed."""

    code = ErrorCode.OWNERSHIP


class OwnershipError(StoreError, ValueError):
    """The key has no owner, or the writer is not the key's owner."""


class CommitConflict(StoreError):
    """A commit lost a race with another writer; nothing was written (retryable).

    Retry: re-read the head (and ``next_seq``), re-derive the record from the current
    inputs, commit again.
    """

    code = ErrorCode.HEAD_CONFLICT
    retryable = True


class HeadConflict(CommitConflict):
    """Compare-and-set on the base failed: the head the commit replaces is not current.

    Fields: ``key``, ``expected`` (the head the writer based its record on, None for a
    creation), ``current`` (the owner's head at the time, None when the key has none).
    """

    code = ErrorCode.HEAD_CONFLICT


class SequenceError(CommitConflict):
    """An owner sequence did not increase."""

    code = ErrorCode.SEQUENCE


class SequenceConflict(CommitConflict):
    """The same owner sequence was used with a different record id."""

    code = ErrorCode.SEQUENCE_CONFLICT


class RecordNotFound(StoreError, KeyError):
    """No record with that id (or no head for that key)."""

    code = ErrorCode.NOT_FOUND

    def __str__(self) -> str:  # KeyError would repr() the message
        """As :meth:`IcoreError.__str__`: the message and fields, not their repr()."""
        return IcoreError.__str__(self)


class StoreClosed(StoreError):
    """The store was closed."""

    code = ErrorCode.STORE_CLOSED


class OwnerUnavailable(StoreError):
    """The owner could not be reached or did not answer in time."""

    code = ErrorCode.OWNER_UNAVAILABLE


# --- fence --------------------------------------------------------------------------
class FenceError(IcoreError):
    """PlanFence usage error."""

    code = ErrorCode.DECLARATION


class DeclarationError(FenceError, ValueError):
    """A tool's dependency declaration D(a) is missing, empty or invalid."""


class ActionBlocked(FenceError):
    """A protected action was blocked (only raised when the caller asks for it).

    ``from icore.errors import ActionBlocked``. Raised by ``Fence.execute(...,
    raise_on_block=True)`` and by the fenced tools of every integration with
    ``on_block="raise"`` (the OpenAI Agents SDK's is a subclass the SDK lets through).

    Attributes:
        action: the tool's name.
        reason: why (a gate reason such as ``stale`` or ``second_change``, or a workspace
            reason such as ``not_read``).
        detail: the detail text (keys and versions named).
        fields: the same values, and any others, as a dict.
    """

    code = ErrorCode.BLOCKED

    def _field(self, name: str) -> Any:
        value = self.fields.get(name)
        return value if value is not None else self.__dict__.get(f"_set_{name}")

    @property
    def action(self) -> str | None:
        """The blocked tool's name."""
        value = self._field("action")
        return None if value is None else str(value)

    @action.setter
    def action(self, value: Any) -> None:
        """Keep a framework base class's own ``action`` aside (``fields`` wins)."""
        self.__dict__["_set_action"] = value

    @property
    def reason(self) -> str | None:
        """Why it was blocked (``stale``, ``second_change``, ``not_read``, ...).

        A framework base class that sets its own ``reason`` (CrewAI's ``HookAborted``
        sets the message) does not override the gate's reason in :attr:`fields`.
        """
        value = self._field("reason")
        return None if value is None else str(value)

    @reason.setter
    def reason(self, value: Any) -> None:
        """Keep a framework base class's own ``reason`` aside (``fields`` wins)."""
        self.__dict__["_set_reason"] = value

    @property
    def detail(self) -> str:
        """The detail text ("" when none was given)."""
        return str(self._field("detail") or "")

    @detail.setter
    def detail(self, value: Any) -> None:
        """Keep a framework base class's own ``detail`` aside (``fields`` wins)."""
        self.__dict__["_set_detail"] = value


class AsyncRequired(FenceError, TypeError):
    """A coroutine function (async tool or replanner) was given to a sync entry point.

    Use ``Fence.aexecute``. Nothing was executed.
    """

    code = ErrorCode.ASYNC_REQUIRED


class FenceCallError(FenceError, TypeError):
    """``Fence.execute``/``aexecute`` was called with an argument of the wrong type.

    A tool that is not a :class:`~icore.fence.ProtectedTool`, roots that are not a list
    of record ids (None, a single id string, a dict inside), args that are not a mapping
    of names. Raised at the call, before any owner is asked; nothing was executed.
    Fields: ``argument`` (the parameter) and ``got`` (the type given).
    """


# --- net: the transport branch (re-exported by icore.net) -----------------------------
class TransportError(IcoreError):
    """Root of every transport error (design.md 3.4).

    Every transport error carries ``code = ErrorCode.TRANSPORT`` plus structured fields
    (owner, peer, request id, ...).
    """

    code = ErrorCode.TRANSPORT


class ProtocolError(TransportError, ValueError):
    """Bytes received do not form a valid frame or message; the connection is closed."""


class FrameTooLarge(ProtocolError):
    """The length prefix exceeds the maximum frame size."""


class TruncatedFrame(ProtocolError):
    """The byte stream ended in the middle of a frame."""


class UnsupportedVersion(ProtocolError):
    """The frame was written by another protocol version."""


class MalformedMessage(ProtocolError):
    """The frame body is not msgpack, or has the wrong shape, types or message type."""


class InvalidRecord(ProtocolError):
    """A record inside a message is invalid (e.g. its content does not hash to its id)."""


class SequenceViolation(ProtocolError):
    """A request id did not increase on its connection (replayed or reordered)."""


class AuthenticationError(TransportError):
    """TLS handshake failed, or a peer certificate names another agent than expected."""


class OwnerUnreachable(TransportError, OwnerUnavailable):
    """The owner could not be reached (refused, reset, closed, down).

    Also an :class:`OwnerUnavailable`, so a gate that treats an unavailable owner as
    *blocked* (planfence Alg. 1 line 6) needs no knowledge of the transport.
    """

    code = ErrorCode.TRANSPORT


class RpcTimeout(OwnerUnreachable):
    """The owner did not answer within the RPC timeout."""


class ConnectionClosed(TransportError):
    """The peer closed the connection."""


class RemoteError(TransportError):
    """The owner answered with an error reply (``fields['remote_code']`` names it)."""


class TeamManifestError(TransportError, ValueError):
    """The team manifest is missing, not YAML, or invalid (``fields['errors']`` says where)."""


# --- optional extras and integrations ------------------------------------------------
class MissingExtra(IcoreError, ImportError):
    """An optional dependency is not installed; the message is the one-line install hint.

    Fields: ``module`` (the missing import), ``extra`` (the icore extra that brings it).
    """

    code = ErrorCode.MISSING_EXTRA


class IntegrationError(IcoreError):
    """A framework integration (``icore.integrations``) was misused or met what it cannot map.

    ``from icore.errors import IntegrationError`` (the base of the workspace's
    ``icore.workspace.WorkspaceError``, ``FactNotWritten`` and ``ReplanFailed``). Fields
    name the framework, tool, key or state field, and the fix.
    """

    code = ErrorCode.INTEGRATION


class DataUnavailable(IcoreError):
    """The shared data folder cannot be found (``fields['path']`` when one was given)."""

    code = ErrorCode.DATA
