"""Type checks of the stores' arguments (issue 29): a typed refusal naming the argument.

A key, owner or record id that is no str (a dict: ``unhashable type``; None; bytes), a
``keys`` that is a str (read as its letters) and a commit of something that is no
:class:`~icore.records.Record` are refused with the store's own errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from icore.errors import MalformedRecord, OwnershipError
from icore.records import Record


def need_str(name: str, value: object) -> None:
    """Refuse a key, owner or record id that is not a str (a dict, None, bytes).

    Raises:
        OwnershipError: naming the argument and the type given.
    """
    if type(value) is not str:  # a subclass of str passes isinstance: keep it cheap
        if isinstance(value, str):
            return
        raise OwnershipError(f"{name} must be a str, not {type(value).__name__}",
                             field=name)


def need_record(record: object) -> None:
    """Refuse a commit or install of something that is not a :class:`Record`.

    Raises:
        MalformedRecord: naming the type given.
    """
    if not isinstance(record, Record):
        raise MalformedRecord(f"a store commits and installs Record objects, not "
                              f"{type(record).__name__}", field="record")


def need_strs(name: str, values: object) -> Iterator[str]:
    """The items of ``keys``/``ids``, each checked to be a str (see :func:`need_str`).

    Raises:
        OwnershipError: ``values`` is a str (read as its letters), no collection, or an
            item is no str (naming the argument and the type given).
    """
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise OwnershipError(f"{name} must be a collection of str, not "
                             f"{type(values).__name__}", field=name)
    for v in values:
        need_str(name, v)
        yield v


__all__ = ["need_record", "need_str", "need_strs"]
