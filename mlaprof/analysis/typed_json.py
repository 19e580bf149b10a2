"""The typed summary's two directions: the analyzers' JSON-shaped sections into frozen
dataclasses (:func:`from_json`), and back into the ``report --json`` document (:func:`to_json`),
driven by the dataclasses' type hints. A key the dataclass does not declare, a missing required
key or a value of the wrong shape is an internal error: nothing is dropped or guessed silently.

Scalars are kept as the analyzers made them (an ``int`` in a ``float`` field stays ``3``, not
``3.0``), so the document is the same object the dict-shaped summary printed."""

from __future__ import annotations

import dataclasses
import numbers
import re
import types
import typing
from collections.abc import Iterable
from enum import Enum
from functools import cache
from typing import Any, Union

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import plural

# a field whose key the document leaves out when it has no value (producers that never write it)
OMIT = "omit_when_none"
# the field holding which optional keys a producer wrote as ``null`` (``nulls()``)
NULLS = "optional_keys_written_null"
# what a field's ``None`` means where it is not "unknown" (``reads_when_none()``)
NONE_READS = "reads_when_none"
OVER_RANKS = "summed_over_ranks"
# the list field whose records (each with its ``rank``) a value over ranks is made of
OVER_RECORDS = "summed_over_records"
# the field a text field words (``words_of()``): a view shows the number only where the words
# say something else (a per-rank range beside the pooled value), never the same value twice
WORDS_OF = "words_of"
KEEP_VALUE = "keep_value"  # with WORDS_OF: where the two read the same, the value's row stays
# the fields a line of words is made of (``says()``): a view leaves out each field's own row
# where the line holds its value's words
SAYS = "says"
# the count field a list's records are counted by (``counted_by()``)
COUNTED_BY = "counted_by"
# the field a map of rank -> value holds each rank's value of (``each_rank_of()``)
EACH_RANK_OF = "each_rank_of"


def opt(
    over: str | None = None,
    of: str | None = None,
    reads: str | None = None,
    words: str | None = None,
    says: tuple[str, ...] = (),
    each_rank: str | None = None,
) -> Any:
    """An optional key: ``None`` when the section's producer did not write it, left out of the
    JSON document then (so a key present as ``null`` and a key absent stay told apart only where
    a producer writes ``null``: those fields are plain ``X | None`` without this marker).
    ``over`` (and ``of``): the value is made of every rank's, as :func:`over_ranks` says.
    ``reads``: what the key reads as where its producer wrote it ``null`` (the section's
    :func:`nulls` field names it), as :func:`reads_when_none`; left out it is shown nowhere.
    ``words``: the field this text words, as :func:`words_of`; ``says``: the fields this line
    is made of, as :func:`says`; ``each_rank``: the field this map holds each rank's value
    of, as :func:`each_rank_of`."""
    said = {NONE_READS: reads} if reads is not None else {}
    worded = {WORDS_OF: words} if words is not None else {}
    made = {SAYS: says} if says else {}
    ranked = {EACH_RANK_OF: each_rank} if each_rank is not None else {}
    meta = {OMIT: True, **_over(over, of), **said, **worded, **made, **ranked}
    return dataclasses.field(default=None, metadata=meta)


def words_of(name: str, keep_value: bool = False, says: tuple[str, ...] = ()) -> Any:
    """A text field that says field ``name``'s value in words (a time of several ranks: the
    pooled value where they agree, else the range with the ranks behind each value). The
    document keeps both; a view shows one row where they read the same: the words' (``name``'s
    own row only where it reads otherwise), or, ``keep_value``, the value's (a verdict whose
    words are most often the value itself: its ``status`` row is the one every view names).
    ``says``: the other fields the words are made of, as :func:`says`."""
    return dataclasses.field(
        metadata={
            WORDS_OF: name,
            **({KEEP_VALUE: True} if keep_value else {}),
            **({SAYS: says} if says else {}),
        }
    )


def says(*names: str) -> Any:
    """A line of words made of fields ``names`` (where a run stands: its status, its committed
    steps and last step). The document keeps them all; a view leaves out each named field's row
    where the line holds that row's words (:func:`holds_words`), and keeps it where the line says
    something else (a count the ranks differ on reads "differs per rank", which no line holds)."""
    return dataclasses.field(metadata={SAYS: names})


def counted_by(name: str, over: str | None = None) -> Any:
    """A list (or map) of what field ``name`` counts (the host syncs a trace's check found; a
    timing's medians per graph mode, of its steps). Empty where the count is 0 or unknown, it
    says nothing the count's row does not ("0", "unknown" where nothing was checked, "no steps
    recorded"): a view leaves its row out, never a "none" beside an unknown count. ``over``: the
    value is made of every rank's, as :func:`over_ranks` says."""
    return dataclasses.field(metadata={COUNTED_BY: name, **_over(over, None)})


def each_rank_of(name: str) -> Any:
    """A map of rank -> that rank's value of field ``name`` (a trace's kernels per rank, beside
    their sum; ``name`` may be a nested section's field: ``trust.verdict``). A run of one rank
    whose map holds ``name``'s value or nothing (that value is the rank's), or a map of no rank
    beside a 0, says nothing ``name``'s row does not: a view leaves its row out."""
    return dataclasses.field(metadata={EACH_RANK_OF: name})


def holds_words(text: str, words: str) -> bool:
    """``text`` holds ``words`` as whole words: "model" is no word of "modelled", "3" none of
    "32"."""
    return bool(words) and re.search(rf"(?<!\w){re.escape(words)}(?!\w)", text) is not None


def _over(how: str | None, of: str | None) -> dict[str, str]:
    return {**({OVER_RANKS: how} if how else {}), **({OVER_RECORDS: of} if of else {})}


def reads_when_none(text: str) -> Any:
    """A field whose ``None`` is known, not missing evidence (a modelled value that does not
    apply in this run): every view shows ``text`` for it instead of "unknown"."""
    return dataclasses.field(metadata={NONE_READS: text})


def over_ranks(how: str = "sum", of: str | None = None) -> Any:
    """A value made of every rank's (``how``: "sum", or e.g. "median of the pooled steps"; each
    rank's is in the section's per-rank rows): a view says so where the run has several ranks,
    never a silent sum. ``of``: the section's list field whose records (each with its ``rank``)
    the value is made of, where that is not every rank of the run (an engine's acceptance: its
    EngineCores'); the section holds no such list where the value is one record's own."""
    return dataclasses.field(metadata=_over(how, of))


def over_ranks_text(how: str, ranks: int) -> str:
    """The words of a value made of several ranks' ("sum over 8 ranks"), without deciding
    whether to say them: every label, finding and text says them through
    :func:`over_ranks_label`."""
    return f"{how} over {ranks} ranks"


def over_ranks_label(how: str, ranks: int | Iterable[int]) -> str:
    """The one decision of whether and how a value made of every rank's is labelled: ``" (sum
    over 8 ranks)"``, put right after the value or the label it qualifies, where it is made of
    several ranks' values; ``""`` where it is one rank's (its own value: no sum to say) or no
    rank's. ``ranks``: how many ranks the value is made of, or which (a record's own ``ranks``)."""
    n = ranks if isinstance(ranks, int) else len(set(ranks))
    return f" ({over_ranks_text(how, n)})" if n > 1 else ""


def over_ranks_how(cls: type, name: str) -> str:
    """How field ``name`` of section ``cls`` is made of every rank's (its :func:`over_ranks`
    marker), for a text that states that value to say it as the field's label does."""
    how = cls.__dataclass_fields__[name].metadata.get(OVER_RANKS)  # type: ignore[attr-defined]
    if not how:
        raise ValueError(f"{cls.__name__}.{name} is not marked over_ranks")
    return str(how)


def nulls() -> Any:
    """Bookkeeping for a section whose producers differ on an optional key: one writes it as
    ``null``, another leaves it out. The names written as ``null`` are kept here, so the
    document is written back as it was; views read the fields, never this."""
    return dataclasses.field(default=frozenset(), metadata={NULLS: True}, repr=False)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


class _Bad(Exception):
    """A value of the wrong shape; the path to it is filled in on the way up (no path string
    is built while the values are good)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg
        self.path: list[str] = []


def from_json(tp: Any, value: Any, where: str = "summary") -> Any:
    """``value`` (the analyzers' dicts, lists and scalars) as type ``tp``."""
    try:
        return _reader(tp)(value)
    except _Bad as e:
        path = where + "".join(reversed(e.path))
        raise MlaprofError(f"internal: summary section {path}: {e.msg}") from None


Reader = Any  # Callable[[Any], Any]: a converter compiled once per type (fleets hold tens of
# thousands of rows: the type hints are read once, not per row)


@cache
def _reader(tp: Any) -> Reader:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        nullable = type(None) in args
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            inner = _reader(rest[0])

            def optional(v: Any) -> Any:
                if v is None:
                    if nullable:
                        return None
                    raise _Bad("is None but not optional")
                return inner(v)

            return optional

        def scalars(v: Any) -> Any:
            if v is None:
                if nullable:
                    return None
                raise _Bad("is None but not optional")
            if any(_is_scalar(a, v) for a in rest):  # scalar unions (int | str)
                return v
            raise _Bad(f"{v!r} is none of {tp}")

        return scalars
    if dataclasses.is_dataclass(tp):
        return _dataclass_reader(tp)
    if origin in (list, tuple):
        item = _reader(typing.get_args(tp)[0])
        make = list if origin is list else tuple

        def sequence(v: Any) -> Any:
            if not isinstance(v, list | tuple):
                raise _Bad(f"expected a list, got {type(v).__name__}")
            try:
                return make([item(x) for x in v])
            except _Bad as e:
                e.path.append(f"[{_first_bad(item, v)}]")
                raise

        return sequence
    if origin is dict:
        val = _reader(typing.get_args(tp)[1])

        def mapping(v: Any) -> Any:
            if not isinstance(v, dict):
                raise _Bad(f"expected a mapping, got {type(v).__name__}")
            out = {}
            for k, x in v.items():
                try:
                    out[k] = val(x)
                except _Bad as e:
                    e.path.append(f"[{k!r}]")
                    raise
            return out

        return mapping
    if isinstance(tp, type) and issubclass(tp, Enum):

        def enum(v: Any) -> Any:
            try:
                return tp(v)
            except ValueError:
                raise _Bad(f"{v!r} is not a {tp.__name__}") from None

        return enum
    if tp is Any or tp is object:
        raise MlaprofError(f"internal: summary section type {tp!r} is untyped")

    fast = {int: (int,), float: (float, int), str: (str,), bool: (bool,)}.get(tp, ())

    def scalar(v: Any) -> Any:
        if type(v) in fast:  # the common case, without the numbers ABCs
            return v
        if v is None:
            raise _Bad(f"is None, expected {tp}")
        if not _is_scalar(tp, v):
            raise _Bad(f"{v!r} is not {tp.__name__}")
        return v

    return scalar


def _first_bad(item: Reader, v: Any) -> int:
    for i, x in enumerate(v):
        try:
            item(x)
        except _Bad:
            return i
    return -1


def _dataclass_reader(tp: type) -> Reader:
    hints = _hints(tp)
    fields = [f for f in dataclasses.fields(tp) if not f.metadata.get(NULLS)]
    plan = [(f.name, bool(f.metadata.get(OMIT))) for f in fields]
    known = {f.name for f in fields}
    keep = [f.name for f in dataclasses.fields(tp) if f.metadata.get(NULLS)]
    readers: dict[str, Reader] = {}

    def read(v: Any) -> Any:
        if not readers:  # compiled on first use: a section type may refer to itself
            readers.update({f.name: _reader(hints[f.name]) for f in fields})
        if type(v) is tp:  # an analyzer that returns its section type: already typed
            return v
        if not isinstance(v, dict):
            raise _Bad(f"expected an object for {tp.__name__}, got {type(v).__name__}")
        if not known.issuperset(v):
            raise _Bad(
                f"{tp.__name__} has no {plural('field(s)', len(set(v) - known))} "
                f"{sorted(set(v) - known)}"
            )
        kw: dict[str, Any] = {}
        null_keys = []
        for name, omit in plan:
            if name not in v:
                if omit:
                    continue
                raise _Bad(f"{tp.__name__} misses {name!r}")
            x = v[name]
            if omit and x is None:
                null_keys.append(name)
            try:
                kw[name] = readers[name](x)
            except _Bad as e:
                e.path.append(f".{name}")
                raise
        if null_keys:
            if not keep:
                raise _Bad(f"{tp.__name__} has no nulls() field for {sorted(null_keys)}")
            kw[keep[0]] = frozenset(null_keys)
        return tp(**kw)

    return read


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
    if obj is None or type(obj) in _PLAIN:
        return obj
    if hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):
        plan, nulls_field = _writer(type(obj))
        written_null = getattr(obj, nulls_field) if nulls_field else frozenset()
        out = {}
        for name, omit in plan:
            v = getattr(obj, name)
            if v is None:
                if omit and name not in written_null:
                    continue
                out[name] = None
            else:  # a plain value as it is: a fleet's step rows are 100k+ of them
                out[name] = v if type(v) in _PLAIN else to_json(v)
        return out
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    return obj


_PLAIN = frozenset({int, float, str, bool})


@cache
def _writer(tp: type) -> tuple[list[tuple[str, bool]], str | None]:
    fields = dataclasses.fields(tp)
    plan = [(f.name, bool(f.metadata.get(OMIT))) for f in fields if not f.metadata.get(NULLS)]
    return plan, next((f.name for f in fields if f.metadata.get(NULLS)), None)
