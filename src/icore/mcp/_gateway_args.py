"""A tool call's arguments checked against the tool's input schema before it is forwarded.

The gateway refuses arguments its upstream would refuse, so a refused call never reaches
the upstream (and, for a protected tool, is recorded as a blocked call, not a valid one):
JSON Schema keywords through one compiled ``jsonschema`` validator per tool, and the
string formats a tool's parameters commonly declare (``date``, ``date-time``, ``time``,
``uuid``: what an SDK server writes for ``datetime.date``, ``datetime.datetime``,
``datetime.time`` and ``uuid.UUID`` parameters, QA r7-mcp D5). Each format is read the
way Python reads it (``date`` strictly ``YYYY-MM-DD``; ``date-time`` and ``time`` by
``fromisoformat``, so a value without a UTC offset passes, as most servers accept it;
``uuid`` by :class:`uuid.UUID`), so the gateway never refuses a value a typical server
accepts for its own reasons. Other formats (``email``, ``uri``, ...) are left to the
upstream.

``"type": "integer"`` is read as the tool sees a JSON number (QA qa-crew S3, #29): an
integer written without a fraction or exponent (``7``, any size: Python reads it
exactly), or a number written with one whose value is an integer a JavaScript or Python
tool holds exactly, i.e. finite, with no fraction, and within the safe range
``|x| <= 2**53 - 1`` (``1.0``, ``5e2``: integers, as JSON Schema counts them). ``1e+300``
or ``1e16`` is refused: a float that large names no one integer (its neighbours share
it), and a typed server refuses or rounds it.

A protected tool's arguments are compared by the gate as the tool sees them (D(a)
placeholders, an approval's exact request), and the gateway's peer reads JSON: a
JavaScript server (Node's ``JSON.parse``) reads ``9007199254740993`` as
``9007199254740992``, so two calls the gate tells apart reach the tool as one, and
one it binds to an approval runs as another. Where a protected tool's schema says
``integer`` or ``number``, an integer written without a fraction outside
``±MAX_SAFE_INTEGER`` is refused ``invalid_arguments`` naming its argument path (send
such an id as a string); an unprotected tool's arguments are forwarded as before, and
in-process (Python) tools keep exact integers. Pure: no I/O, no clock.
"""

from __future__ import annotations

import datetime as _dt
import functools
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from icore.errors import IcoreError

FORMATS: dict[str, str] = {
    "date": "a calendar date YYYY-MM-DD (RFC 3339 full-date, e.g. 2026-12-06)",
    "date-time": "an ISO 8601 date and time, e.g. 2026-12-06T10:30:00 or "
                 "2026-12-06T10:30:00Z",
    "time": "an ISO 8601 time of day, e.g. 10:30 or 10:30:00+01:00",
    "uuid": "a UUID, e.g. 123e4567-e89b-12d3-a456-426614174000",
}
"""Format -> what it expects, as a refusal says it: the formats the gateway checks."""


def _date_time(value: object) -> bool:
    return not isinstance(value, str) or bool(_dt.datetime.fromisoformat(value.upper()))


def _time(value: object) -> bool:
    return not isinstance(value, str) or bool(_dt.time.fromisoformat(value.upper()))


def _uuid(value: object) -> bool:
    return not isinstance(value, str) or bool(uuid.UUID(value))


MAX_SAFE_INTEGER = 2**53 - 1
"""The largest float the gateway counts as an integer (JavaScript's
``Number.MAX_SAFE_INTEGER``: every integer up to it has its own float)."""


def is_integer(value: object) -> bool:
    """Whether a JSON value satisfies ``"type": "integer"`` as the tool sees it.

    An ``int`` (not a ``bool``) of any size, or a ``float`` that is finite, has no
    fraction and lies within ``±MAX_SAFE_INTEGER`` (see the module docstring).
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return (isinstance(value, float) and value.is_integer()
            and abs(value) <= MAX_SAFE_INTEGER)


def unsafe_int(value: object) -> bool:
    """Whether ``value`` is an ``int`` (not a ``bool``) outside ``±MAX_SAFE_INTEGER``.

    A JSON peer that reads numbers as doubles (JavaScript) holds another integer.
    """
    return isinstance(value, int) and not isinstance(value, bool) \
        and abs(value) > MAX_SAFE_INTEGER


@functools.cache
def validator_class(schema_cls: Any, *, safe_ints: bool = False) -> Any:
    """A ``jsonschema`` validator class whose ``integer`` type is :func:`is_integer`.

    With ``safe_ints`` (a protected tool's arguments), ``integer`` and ``number`` also
    refuse :func:`unsafe_int`. Built once per ``schema_cls`` (the class the tool's
    schema asks for) and ``safe_ints``.
    """
    import jsonschema
    checker = schema_cls.TYPE_CHECKER.redefine("integer", lambda _c, v: is_integer(v))
    if safe_ints:
        number = checker.redefine  # the draft's own number check, then the range
        base = schema_cls.TYPE_CHECKER
        checker = number("integer", lambda _c, v: is_integer(v) and not unsafe_int(v))
        checker = checker.redefine("number", lambda c, v: base.is_type(v, "number")
                                   and not unsafe_int(v))
    return jsonschema.validators.extend(schema_cls, type_checker=checker)


@functools.cache
def format_checker() -> Any:
    """The ``jsonschema.FormatChecker`` of :data:`FORMATS` (built once).

    ``date`` is jsonschema's own check (``YYYY-MM-DD`` and a real day); the others parse
    with the standard library (see the module docstring).
    """
    import jsonschema
    checker = jsonschema.FormatChecker(formats=("date",))
    checks: dict[str, Callable[[object], bool]] = {
        "date-time": _date_time, "time": _time, "uuid": _uuid}
    for name, fn in checks.items():
        checker.checks(name, raises=(ValueError, TypeError))(fn)
    return checker


class ArgChecks:
    """The argument side of a gateway's ``tools/call``: schema checks and defaults.

    Args:
        tool_defs: returns the listed tools (shown name -> the upstream's ``Tool``, its
            ``input_schema`` a JSON Schema mapping or None); asked at each call, so a
            new listing is seen.
    """

    def __init__(self, tool_defs: Callable[[], Mapping[str, Any]]) -> None:
        self._defs = tool_defs
        self._validators: dict[tuple[str, bool], Any] = {}
        """(tool name, protected) -> its argument schema's validator (:meth:`clear` when
        tools change)."""

    def clear(self) -> None:
        """Forget the compiled validators (the upstreams' tools changed)."""
        self._validators.clear()

    def _schema(self, name: str) -> Any:
        return getattr(self._defs().get(name), "input_schema", None)

    def _validator(self, name: str, protected: bool) -> Any:
        v = self._validators.get((name, protected))
        if v is None:
            import jsonschema
            schema = self._schema(name) or {"type": "object"}
            cls = validator_class(jsonschema.validators.validator_for(schema),
                                  safe_ints=protected)
            v = cls(schema, format_checker=format_checker())
            self._validators[name, protected] = v
        return v

    def problem(self, name: str, args: Mapping[str, Any], *,
                protected: bool = False) -> str | None:
        """What is wrong with ``args`` for tool ``name`` (None: they fit its schema).

        ``protected``: the gate compares the arguments, so an integer outside
        ``±MAX_SAFE_INTEGER`` where the schema says ``integer`` or ``number`` is refused
        (see the module docstring).

        Returns:
            ``"<argument path>: <what is wrong>"`` (``<arguments>`` for the whole
            object); a bad format names the format expected. None also when the tool's
            schema is itself invalid (the upstream judges then).
        """
        import jsonschema
        try:
            v = self._validator(name, protected)
            if v.is_valid(args):  # the common case: no error tree to build
                return None
            err = jsonschema.exceptions.best_match(v.iter_errors(args))
        except jsonschema.exceptions.SchemaError:
            return None  # the upstream's schema is broken: let the upstream judge
        if err is None:
            return None
        where = "/".join(str(p) for p in err.absolute_path) or "<arguments>"
        if protected and err.validator == "type" and unsafe_int(err.instance):
            return (f"{where}: the integer {err.instance} is outside the safe range "
                    f"±{MAX_SAFE_INTEGER} (2**53 - 1): a JSON tool that reads numbers as "
                    f"doubles (JavaScript) holds {int(float(err.instance))}, which other "
                    "integers round to too, so the tool may not see the value the gate "
                    "checks; send it as a string")
        if err.validator == "format" and err.validator_value in FORMATS:
            fmt = err.validator_value
            return f"{where}: {err.instance!r} is not a valid {fmt}: expected {FORMATS[fmt]}"
        return f"{where}: {err.message}"

    def with_defaults(self, name: str, args: Mapping[str, Any]) -> Mapping[str, Any]:
        """``args`` with the input schema's ``default`` of each omitted argument.

        What fills the ``{arg}`` placeholders of D(a) and ``writes`` (the upstream applies
        the same defaults; the in-process integration normalises through the tool's
        schema likewise). A ``null`` default fills nothing (no key can name it). The
        call is forwarded with the client's own arguments.
        """
        schema = self._schema(name)
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(props, Mapping):
            return args
        missing = {k: p["default"] for k, p in props.items() if k not in args
                   and isinstance(p, Mapping) and p.get("default") is not None}
        return {**missing, **args} if missing else args

    def no_default(self, name: str, exc: IcoreError) -> str:
        """The detail of a D(a) entry whose placeholder names an omitted argument."""
        arg = exc.fields.get("argument")
        schema = self._schema(name) or {}
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(arg, str) or not isinstance(props, Mapping) or arg not in props:
            return exc.message
        return (f"{exc.message}: {arg!r} is optional in {name}'s input schema with no "
                "default (or a null one), so the facts this call depends on are unknown "
                f"without it. Call {name} again with {arg!r} given")
