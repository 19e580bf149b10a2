"""The typed summary's two directions: the analyzers' JSON-shaped sections into frozen
dataclasses (:func:`from_json`), and back into the ``report --json`` document (:func:`to_json`),
driven by the dataclasses' type hints. A key the dataclass does not declare, a missing required
key or a value of the wrong shape is an internal error: nothing is dropped or guessed silently.

Scalars are kept as the analyzers made them (an ``int`` in a ``float`` field stays ``3``, not
``3.0``), so the document is the same object the dict-shaped summary printed."""

from __future__ import annotations

import dataclasses
import numbers
import types
import typing
from enum import Enum
from functools import cache
from typing import Any, Union

from mlaprof.errors import MlaprofError

# a field whose key the document leaves out when it has no value (producers that never write it)
OMIT = "omit_when_none"
# the field holding which optional keys a producer wrote as ``null`` (``nulls()``)
NULLS = "optional_keys_written_null"


def opt() -> Any:
    """An optional key: ``None`` when the section's producer did not write it, left out of the
    JSON document then (so a key present as ``null`` and a key absent stay told apart only where
    a producer writes ``null``: those fields are plain ``X | None`` without this marker)."""
    return dataclasses.field(default=None, metadata={OMIT: True})


def nulls() -> Any:
    """Bookkeeping for a section whose producers differ on an optional key: one writes it as
    ``null``, another leaves it out. The names written as ``null`` are kept here, so the
    document is written back as it was; views read the fields, never this."""
    return dataclasses.field(default=frozenset(), metadata={NULLS: True}, repr=False)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fail(where: str, msg: str) -> MlaprofError:
    return MlaprofError(f"internal: summary section {where}: {msg}")


def from_json(tp: Any, value: Any, where: str = "summary") -> Any:
    """``value`` (the analyzers' dicts, lists and scalars) as type ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise _fail(where, "is None but not optional")
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return from_json(rest[0], value, where)
        for a in rest:  # scalar unions (int | str): the first that takes the value
            if _is_scalar(a, value):
                return value
        raise _fail(where, f"{value!r} is none of {tp}")
    if value is None:
        raise _fail(where, f"is None, expected {tp}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise _fail(where, f"expected an object for {tp.__name__}, got {type(value).__name__}")
        hints = _hints(tp)
        names = {f.name: f for f in dataclasses.fields(tp)}
        unknown = set(value) - {n for n, f in names.items() if not f.metadata.get(NULLS)}
        if unknown:
            raise _fail(where, f"{tp.__name__} has no field(s) {sorted(unknown)}")
        kw: dict[str, Any] = {}
        null_keys = set()
        for name, f in names.items():
            if f.metadata.get(NULLS):
                continue
            if f.metadata.get(OMIT) and name in value and value[name] is None:
                null_keys.add(name)
            if name not in value:
                if f.metadata.get(OMIT):
                    continue
                raise _fail(where, f"{tp.__name__} misses {name!r}")
            kw[name] = from_json(hints[name], value[name], f"{where}.{name}")
        if null_keys:
            keep = [n for n, f in names.items() if f.metadata.get(NULLS)]
            if not keep:
                raise _fail(where, f"{tp.__name__} has no nulls() field for {sorted(null_keys)}")
            kw[keep[0]] = frozenset(null_keys)
        return tp(**kw)
    if origin is list:
        if not isinstance(value, list | tuple):
            raise _fail(where, f"expected a list, got {type(value).__name__}")
        (arg,) = typing.get_args(tp)
        return [from_json(arg, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        arg = typing.get_args(tp)[0]
        return tuple(from_json(arg, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise _fail(where, f"expected a mapping, got {type(value).__name__}")
        _, arg = typing.get_args(tp)
        return {k: from_json(arg, v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(value)
        except ValueError as e:
            raise _fail(where, f"{value!r} is not a {tp.__name__}") from e
    if tp is Any or tp is object:
        raise _fail(where, "untyped field")
    if not _is_scalar(tp, value):
        raise _fail(where, f"{value!r} is not {tp.__name__}")
    return value


def _is_scalar(tp: Any, value: Any) -> bool:
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if tp is float:  # a count in a float field stays the analyzers' number
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    return False


def to_json(obj: Any) -> Any:
    """The JSON document of a typed section (the shape :func:`from_json` read)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        written_null: frozenset[str] = frozenset()
        for f in dataclasses.fields(obj):
            if f.metadata.get(NULLS):
                written_null = getattr(obj, f.name)
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if f.metadata.get(NULLS) or (
                v is None and f.metadata.get(OMIT) and f.name not in written_null
            ):
                continue
            out[f.name] = to_json(v)
        return out
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    return obj
