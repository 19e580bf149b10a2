"""The base of every summary section (:mod:`mlaprof.analysis.sections`): a frozen, slotted
dataclass whose methods are written once, here, instead of generated for each class.
``dataclass`` compiles each generated method from source when its module loads, and the sections'
methods were most of the 40 ms that loading them cost every first report. What is written here
decides what the generated methods do:

- ``==`` compares the tuples of the fields that take part in comparison, for objects of the same
  class only; ``hash()`` hashes that tuple (fields with ``hash=False`` left out); ``repr()`` names
  the class and each field shown in it;
- frozen: setting or deleting an attribute raises ``FrozenInstanceError``; copies and pickles
  restore their fields past it, as a frozen dataclass's do.

``__init__`` alone is compiled per class (:func:`_init_source`), at the class's first instance
(a report makes about a third of the classes), as ``dataclass`` writes a frozen one: each field
set with ``object.__setattr__``, in C, never through the shared Python ``__setattr__`` (which
made building a fleet's 12,000 ten-field rows 5x slower, 68 against 13 ms). The class reads as
frozen to ``dataclass`` (a subclass must be frozen too)."""

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

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    # what a frozen slotted dataclass gives copy and pickle: the fields' values, set back
    # past the frozen __setattr__
    def __getstate__(self) -> list[Any]:
        return [getattr(self, n) for n in _names(type(self))]

    def __setstate__(self, state: list[Any]) -> None:
        for n, v in zip(_names(type(self)), state, strict=True):
            object.__setattr__(self, n, v)

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
    """``@dataclass(frozen=True, slots=True)`` with :class:`Section`'s methods in place of
    generated ones and one ``__init__`` compiled for the class (it must derive from
    :class:`Section`)."""
    if not issubclass(cls, Section):
        raise TypeError(f"{cls.__qualname__}: a section class derives from Section")
    undocumented = not cls.__doc__
    if undocumented:  # else dataclass words one from object.__init__'s signature, wrongly
        cls.__doc__ = cls.__name__
    cls = dataclasses.dataclass(init=False, slots=True, eq=False, repr=False)(cls)
    _init_source(cls)  # what it refuses (an InitVar, a keyword-only field) fails at import
    cls.__init__ = _compiled_when_first_called(cls)
    if undocumented:  # the words dataclass gives a class without a docstring
        cls.__doc__ = f"{cls.__name__}({', '.join(map(_shown_param, dataclasses.fields(cls)))})"
    # frozen as dataclass knows it: a dataclass deriving from a section must be frozen too
    cls.__dataclass_params__.frozen = True
    return cls


_SET = "__section_set__"
_SELF = "__section_self__"
_FACTORY = "__section_factory__"


@cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _init_source(cls: type) -> tuple[str, dict[str, Any]]:
    """The source of ``cls.__init__`` and the names it reads: what ``dataclass`` writes for a
    frozen class (parameters in field order, defaults and factories, ``__post_init__``)."""
    params: list[str] = []
    body: list[str] = []
    names: dict[str, Any] = {_SET: object.__setattr__, _FACTORY: _HAS_FACTORY}
    declared = getattr(cls, "__dataclass_fields__", {})
    if len(declared) != len(dataclasses.fields(cls)) and any(
        "InitVar" in str(f.type) for f in declared.values()
    ):
        raise TypeError(f"{cls.__qualname__}: a section takes no InitVar")
    defaulted = None
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only:
            raise TypeError(f"{cls.__qualname__}.{f.name}: a section's fields are all positional")
        value = f.name
        if f.default is not dataclasses.MISSING:
            names[f"__default_{f.name}__"] = f.default
            params.append(f"{f.name}=__default_{f.name}__")
        elif f.default_factory is not dataclasses.MISSING:
            names[f"__make_{f.name}__"] = f.default_factory
            params.append(f"{f.name}={_FACTORY}")
            value = f"__make_{f.name}__() if {f.name} is {_FACTORY} else {f.name}"
        elif defaulted is not None:
            raise TypeError(
                f"non-default argument {f.name!r} follows default argument {defaulted!r}"
            )
        else:
            params.append(f.name)
        if params[-1] != f.name:
            defaulted = f.name
        body.append(f"    {_SET}({_SELF}, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append(f"    {_SELF}.__post_init__()")
    src = f"def __init__({', '.join([_SELF, *params])}):\n" + ("\n".join(body) or "    pass")
    return src, names


def _shown_param(f: dataclasses.Field) -> str:
    said = f"{f.name}: {f.type!r}" if isinstance(f.type, str) else f"{f.name}: {f.type}"
    if f.default is not dataclasses.MISSING:
        return f"{said} = {f.default!r}"
    return said if f.default_factory is dataclasses.MISSING else f"{said} = <factory>"


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _Factory()


def _compiled_when_first_called(cls: type) -> Any:
    """``cls.__init__``: compiled from its source at the class's first instance, then in place
    of this one (a demo report makes 23 of the 77 section classes; compiling each one's at import
    was most of what loading them cost)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = cls.__dict__["__init__"]
        if init is __init__:  # the first instance (its subclasses' have their own)
            init = _init_for(cls)
            cls.__init__ = init
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__module__ = cls.__module__
    return __init__


def _init_for(cls: type) -> Any:
    src, names = _init_source(cls)
    scope: dict[str, Any] = {}
    exec(src, names, scope)  # noqa: S102 - our own source, built from the class's fields
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {f.name: f.type for f in dataclasses.fields(cls)} | {"return": None}
    return init
