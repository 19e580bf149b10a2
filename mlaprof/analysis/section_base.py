"""The base of every summary section (:mod:`mlaprof.analysis.sections`): a frozen, slotted
dataclass whose ``==``, ``hash()`` and ``repr()`` are written once, here, instead of generated
for each class. ``dataclass`` compiles each generated method from source when its module loads:
the sections' ``__eq__``, ``__hash__`` and ``__repr__`` were a third of the 40 ms that loading
them cost every first report. They decide what the generated ones do: ``==`` compares the
tuples of the fields that take part in comparison, for objects of the same class only;
``hash()`` hashes that tuple (fields with ``hash=False`` left out); ``repr()`` names the class
and each field shown in it. ``__init__`` and frozenness stay ``dataclass``'s own: its frozen
``__init__`` sets each field in C, where a shared Python ``__setattr__`` made building a fleet's
12,000 ten-field rows 5x slower (68 against 13 ms)."""

from __future__ import annotations

import dataclasses
import reprlib
from functools import cache
from typing import Any


@cache
def _compared(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.compare)


@cache
def _hashed(cls: type) -> tuple[str, ...]:
    return tuple(
        f.name for f in dataclasses.fields(cls) if (f.compare if f.hash is None else f.hash)
    )


@cache
def _shown(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.repr)


class Section:
    """Mixed into each section class; :data:`section` makes the class a dataclass."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = _compared(type(self))
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in _hashed(type(self))))

    def none_reads(self, name: str) -> str | None:
        """What field ``name``'s ``None`` reads as in this section, where the section decides
        it from its other fields (the rows layer shows it); None: the field's own words
        (``reads_when_none``), else "unknown"."""
        return None

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _shown(type(self)))
        return f"{type(self).__qualname__}({shown})"


def section(cls: type[Any]) -> type[Any]:
    """``@dataclass(frozen=True, slots=True)`` with :class:`Section`'s ``==``, ``hash()`` and
    ``repr()`` in place of generated ones (the class must derive from :class:`Section`)."""
    if not issubclass(cls, Section):
        raise TypeError(f"{cls.__qualname__}: a section class derives from Section")
    return dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)(cls)
