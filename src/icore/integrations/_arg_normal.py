"""Arguments compared as the tool sees them (issue 28 item 2; planfence App. A.3 step 1).

A call's arguments and a plan's bound arguments are compared in one normal form: put
through the tool's own parameter schema (a pydantic model, or one built from the
function's signature), with defaults applied and every value in its JSON form (``date``
and ``datetime`` -> ISO text, ``UUID`` -> text, ``Enum`` -> its value, ``Decimal`` ->
text, nested models -> objects). A ``date`` argument thus binds and matches as
``"2026-03-01"`` whichever side produced it, and a plan that omits a defaulted
parameter matches the call that the framework filled in.

Functions whose arguments cannot be named (``*args``, ``**kwargs``, positional-only
parameters), classes, ``functools.partial`` objects and non-callables are refused when
the tool is wrapped (:func:`check_tool_function`), with an
:class:`~icore.errors.IntegrationError` saying what to do instead.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.errors import PydanticUserError

from icore.errors import IntegrationError
from icore.integrations._arg_problems import NOT_FINITE, non_finite
from icore.records import JSONValue

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _unbound_owner(fn: Any, sig: inspect.Signature) -> str | None:
    """The class name of a method taken from its class (``Cls.ship``), else None.

    A plain function defined in a class body (its qualified name is ``Cls.ship``, not
    ``f.<locals>.ship``) whose first parameter is ``self``; a bound method, a
    ``@staticmethod`` and a ``@classmethod`` are not.
    """
    if not inspect.isfunction(fn):
        return None
    parts = str(getattr(fn, "__qualname__", "")).split(".")
    first = next(iter(sig.parameters), None)
    if len(parts) < 2 or parts[-2] == "<locals>" or first != "self":
        return None
    return parts[-2]


def check_tool_function(fn: Any, *, framework: str, tool: str | None = None,
                        skip: Iterable[str] = ()) -> inspect.Signature:
    """Refuse what cannot be a fenced tool function; return its signature.

    Args:
        fn: the candidate tool function.
        framework: the integration's name (for the error).
        tool: the tool's name, when known.
        skip: parameters the framework injects (not model arguments).

    Raises:
        IntegrationError: ``fn`` is None or not callable, a class, a
            ``functools.partial``, a generator function (sync or async), an unbound method
            (``Cls.method``: its ``self`` would be a model argument), a lambda or a
            callable object without ``__name__`` (when ``tool`` names nothing), has no
            signature, or takes ``*args`` / ``**kwargs`` / positional-only parameters
            (the schema could not name the arguments the plan binds).
    """
    name = tool or getattr(fn, "__name__", type(fn).__name__)
    if fn is None or not callable(fn):
        raise IntegrationError("a fenced tool needs a function", framework=framework,
                               tool=name, got=type(fn).__name__,
                               fix="pass the tool function (def ship(city: str): ...)")
    if inspect.isclass(fn):
        raise IntegrationError("a fenced tool needs a function, not a class",
                               framework=framework, tool=name,
                               fix="wrap a function that builds and calls the object")
    if isinstance(fn, functools.partial):
        raise IntegrationError("a functools.partial cannot be a fenced tool: its schema "
                               "would hide the bound arguments", framework=framework,
                               tool=name, fix="define a def with the remaining parameters")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise IntegrationError("a generator function cannot be a fenced tool: a call would "
                               "return the generator, not a result, after the gate let it "
                               "run", framework=framework, tool=name,
                               fix="return the result (a list of the items) instead of "
                               "yielding them")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise IntegrationError("the tool function has no readable signature",
                               framework=framework, tool=name, error=str(exc)) from None
    skipped = set(skip)
    if "self" not in skipped and (owner := _unbound_owner(fn, sig)) is not None:
        raise IntegrationError(f"an unbound method ({owner}.{fn.__name__}, taken from the "
                               "class) cannot be a fenced tool: its 'self' would become an "
                               "argument the model fills", framework=framework, tool=name,
                               fix=f"pass the method of an instance ({owner}().{fn.__name__})"
                               " or a @staticmethod")
    bad = [p.name for p in sig.parameters.values()
           if p.name not in skipped and (p.kind in _VARIADIC
                                         or p.kind is inspect.Parameter.POSITIONAL_ONLY)]
    if bad:
        raise IntegrationError("a fenced tool's parameters must be named: *args, **kwargs "
                               "and positional-only parameters cannot be bound to a plan",
                               framework=framework, tool=name, parameters=bad,
                               fix="declare each argument as a named, typed parameter")
    if tool is None and getattr(fn, "__name__", None) == "<lambda>":
        raise IntegrationError("a lambda cannot be a fenced tool: its name '<lambda>' is "
                               "not a tool name a model can call, and it has no "
                               "description", framework=framework, tool=name,
                               fix="def ship(city: str) -> str: with a docstring")
    if tool is None and not isinstance(fn, functools.partial) and \
            not isinstance(getattr(fn, "__name__", None), str):
        raise IntegrationError("a callable object has no name to call it by",
                               framework=framework, tool=name,
                               fix="pass a function or a bound method (obj.ship), or the "
                               "framework's tool built from obj.__call__ with name='ship'")
    return sig


SCHEMA_ERRORS = (NameError, SyntaxError, PydanticUserError)
"""What a framework raises when it cannot build a tool's schema from its annotations."""


def schema_failed(exc: Exception, *, framework: str, tool: str) -> IntegrationError:
    """The typed error of a framework that cannot build a tool's argument schema (#29).

    LangChain's ``tool``, the Agents SDK's ``function_tool`` and ``ag2.tool`` resolve the
    annotations (the return's too): one that names nothing (``x: "Nowhere"``) raises a
    NameError or SyntaxError, a type pydantic has no schema for (a plain class) a
    ``PydanticUserError``. Only what the framework itself refuses is refused: a type
    defined in a function, which ``typing.get_type_hints`` cannot see, may still work.
    """
    return IntegrationError("the framework cannot build the tool's argument schema from "
                            "its annotations", framework=framework, tool=tool,
                            error=f"{type(exc).__name__}: {exc}"[:200],
                            fix="annotate each parameter with a JSON type (str, int, "
                            "float, bool, list, dict, a pydantic model)")


def signature_model(fn: Callable[..., Any], *, name: str | None = None,
                    skip: Iterable[str] = (), framework: str = "icore") -> type[BaseModel]:
    """A pydantic model of ``fn``'s named parameters (annotations and defaults).

    Unannotated parameters are ``Any``. Raises as :func:`check_tool_function`.
    """
    sig = check_tool_function(fn, framework=framework, tool=name, skip=skip)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    skipped = set(skip) | {"self", "cls"}
    fields: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.name in skipped:
            continue
        ann = hints.get(p.name, Any)
        fields[p.name] = (ann, ... if p.default is inspect.Parameter.empty else p.default)
    model_name = f"{name or getattr(fn, '__name__', 'tool')}_args"
    return create_model(model_name, __config__=ConfigDict(arbitrary_types_allowed=True),
                        **fields)


class ArgNormalizer:
    """Puts a call's arguments into the tool's normal form (see the module docstring).

    Args:
        schema: the tool's parameter model (a pydantic ``BaseModel`` subclass).
        name: the tool's name (for errors).
        fields: the model-supplied fields to keep (default: every field of the schema);
            injected parameters are left out.
        framework: the integration's name (for errors).

    Raises:
        IntegrationError: ``schema`` is not a pydantic model class.
    """

    def __init__(self, schema: type[BaseModel], *, name: str,
                 fields: Iterable[str] | None = None, framework: str = "icore") -> None:
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise IntegrationError("the tool's argument schema must be a pydantic model",
                                   framework=framework, tool=name,
                                   got=type(schema).__name__)
        self.schema = schema
        self.name = name
        self.framework = framework
        self.fields: frozenset[str] = frozenset(
            fields if fields is not None else schema.model_fields)

    @classmethod
    def for_function(cls, fn: Callable[..., Any], *, name: str | None = None,
                     skip: Iterable[str] = (), framework: str = "icore") -> ArgNormalizer:
        """The normaliser of a plain function's named parameters.

        Raises:
            IntegrationError: as :func:`check_tool_function`.
        """
        tool = str(name or getattr(fn, "__name__", "tool"))
        return cls(signature_model(fn, name=tool, skip=skip, framework=framework),
                   name=tool, framework=framework)

    def _validate(self, args: Mapping[str, Any]) -> BaseModel:
        if not isinstance(args, Mapping):
            raise IntegrationError("a tool call's arguments (args) must be a mapping",
                                   framework=self.framework, tool=self.name,
                                   got=type(args).__name__, field="args")
        try:
            m = self.schema.model_validate(dict(args))
        except ValidationError as exc:
            raise IntegrationError("the call's arguments do not fit the tool's schema",
                                   framework=self.framework, tool=self.name,
                                   error=str(exc).splitlines()[0],
                                   errors=exc.error_count()) from None
        bad = non_finite(m.model_dump())
        if bad:  # NaN / 1e999: no argument value (QA qa-new13a S4)
            raise IntegrationError("the call's arguments do not fit the tool's schema",
                                   framework=self.framework, tool=self.name,
                                   error="; ".join(f"{at}: {NOT_FINITE}" for at in bad),
                                   errors=len(bad))
        return m

    def __call__(self, args: Mapping[str, Any]) -> dict[str, JSONValue]:
        """The normal form: validated, defaults applied, JSON values, model fields only.

        Raises:
            IntegrationError: the arguments do not validate against the schema, or hold
                a NaN or an infinity (``error``: ``"amount: not a finite number"``).
        """
        m = self._validate(args)
        out: dict[str, JSONValue] = m.model_dump(mode="json", include=set(self.fields))
        return out

    def to_python(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the tool function takes them (validated Python values).

        Raises:
            IntegrationError: the arguments do not validate against the schema, or hold
                a NaN or an infinity (``error``: ``"amount: not a finite number"``).
        """
        m = self._validate(args)
        return {k: getattr(m, k) for k in type(m).model_fields if k in self.fields}


def normalize_args(schema: type[BaseModel] | Callable[..., Any],
                   args: Mapping[str, Any]) -> dict[str, JSONValue]:
    """One-off normal form of ``args`` for a schema model or a plain function.

    Raises:
        IntegrationError: the schema or function is unusable (``schema`` neither a
            pydantic model class nor callable: field ``schema``) or the arguments invalid.
    """
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return ArgNormalizer(schema, name=schema.__name__)(args)
    if not callable(schema):
        raise IntegrationError("schema must be a pydantic model class or the tool function",
                               got=type(schema).__name__, field="schema")
    return ArgNormalizer.for_function(schema)(args)
