"""Errors of the iCORE state layer (attached to the ``IcoreError`` tree, style habit 4).

::

    StateError                               icore.state
    ├── DeclarationPackageError (ValueError) malformed declaration package D (file, path)
    ├── StateInputError (ValueError)         bad direct input: unknown agent/event/obligation...
    ├── ValidatorError                       a validator raised when called directly
    ├── InterfaceError                       an interface of I_D raised or returned a bad value
    └── LogError                             event log unreadable, wrong schema, closed

Rejections of proposals are *not* errors: :func:`icore.state.audit` returns a typed
:class:`~icore.state.Verdict` (icore Def. 6).
"""

from __future__ import annotations

from typing import Any

from icore.errors import ErrorCode, IcoreError


class StateError(IcoreError):
    """Root of the iCORE state errors (design.md 4.2)."""

    code = ErrorCode.STATE


class DeclarationPackageError(StateError, ValueError):
    """A declaration package D is malformed (design.md 4.1).

    Attributes (in ``fields``):
        file: the source file, or ``"<dict>"``/``"<python>"``.
        path: the offending path inside the document, e.g. ``operations[2].effects[0]``.
        problem: what is wrong.
    """

    code = ErrorCode.DECLARATION

    def __init__(self, problem: str, *, file: str, path: str, **fields: Any) -> None:
        super().__init__(f"{file}: {path}: {problem}", file=file, path=path, **fields)
        self.file = file
        self.path = path
        self.problem = problem


class StateInputError(StateError, ValueError):
    """Direct input to the state (import API) names something unknown or is malformed."""


class ValidatorError(StateError):
    """A validator raised or returned a non-boolean when called directly."""


class LogError(StateError):
    """The event-sourced log cannot be read or written (nothing was half-written)."""


class InterfaceError(StateError):
    """An interface of I_D raised or returned a bad value (a defect of D, design.md 4.1).

    Checked before anything is written: when a change raises it, X and its log are
    exactly as they were before the call.

    Attributes (also in ``fields``):
        interface: the interface of I_D, e.g. ``"weight"``, ``"value"``, ``"feasible"``,
            ``"progress"``.
        field: what it was asked for, with its arguments, e.g. ``"weight(o7)"`` or
            ``"value(bob, o7)"``.
        value: the bad value it returned, or the exception it raised.
        problem: what is wrong, e.g. ``"returned nan; expected a finite number >= 0"``.
    """

    code = ErrorCode.DECLARATION

    def __init__(
        self, problem: str, *, interface: str, field: str, value: Any, **fields: Any
    ) -> None:
        super().__init__(
            f"interfaces.{interface}: {field} {problem}",
            interface=interface,
            field=field,
            value=value,
            **fields,
        )
        self.interface = interface
        self.field = field
        self.value = value
        self.problem = problem
