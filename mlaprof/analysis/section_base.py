"""The base of every summary section (:mod:`mlaprof.analysis.sections`): a frozen, slotted
dataclass whose ``==``, ``hash()``, ``repr()`` and frozenness are written once, here, instead of
generated for each class. ``dataclass`` compiles each generated method from source when its
module loads: the sections' ``__eq__``, ``__hash__``, ``__repr__``, ``__setattr__`` and
``__delattr__`` were 60% of the 40 ms that loading them cost every first report. They decide
what the generated ones do: ``==`` compares the tuples of the fields that take part in
comparison, for objects of the same class only; ``hash()`` hashes that tuple (fields with
``hash=False`` left out); ``repr()`` names the class and each field shown in it; a field is set
once, by ``__init__``, and assigning or deleting it after raises ``FrozenInstanceError`` (a
slot not yet set is what tells ``__init__`` from later code)."""

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

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            getattr(self, name)
        except AttributeError:  # a slot not set yet: __init__ (or copy) setting it
            object.__setattr__(self, name, value)
            return
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _shown(type(self)))
        return f"{type(self).__qualname__}({shown})"


def section(cls: type[Any]) -> type[Any]:
    """``@dataclass(frozen=True, slots=True)`` with :class:`Section`'s ``==``, ``hash()``,
    ``repr()`` and frozenness in place of generated ones (the class must derive from
    :class:`Section`)."""
    if not issubclass(cls, Section):
        raise TypeError(f"{cls.__qualname__}: a section class derives from Section")
    made = dataclasses.dataclass(slots=True, eq=False, repr=False)(cls)
    # frozen it is, by Section's own methods: said so, a section class can be extended the way
    # docs/views.md shows, by a @dataclass(frozen=True) subclass (dataclass refuses a frozen
    # class over a base it records as not frozen)
    made.__dataclass_params__.frozen = True
    return made
