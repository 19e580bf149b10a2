"""JSON text built an Arrow column at a time, exactly as ``json.dumps`` writes it row by row.

The exporters of huge runs spent most of their time in a Python call per row (``json.dumps``, an
f-string per value); these build the same text with Arrow kernels: a value's JSON once per
distinct text value, integers as digits, null as ``null`` (bench/huge_trace.py).
"""

from __future__ import annotations

import json
from typing import Any


def json_values(col: Any) -> Any:
    """Each value of an integer or text Arrow column as ``json.dumps`` writes it (a string
    column, no nulls): text through ``json.dumps`` once per distinct value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        uniq = pc.unique(col.drop_null())
        text = pa.array([json.dumps(u) for u in uniq.to_pylist()], pa.string())
        col = text.take(pc.index_in(col, value_set=uniq))
    elif pa.types.is_integer(col.type):
        col = col.cast(pa.string())
    else:  # floats, booleans: their text differs from json.dumps'; the caller goes row by row
        raise TypeError(f"no JSON text for Arrow type {col.type}")
    return pc.fill_null(col, "null")


def json_objects(batch: Any, cols: list[str], head: str = "{", tail: str = "}") -> Any:
    """``head`` + ``json.dumps``'s ``"col": value, ...`` of each row of ``batch`` + ``tail``, as
    one Arrow string column: ``json.dumps({"k": row})`` is ``head='{"k": {'``, ``tail='}}'``.
    Integer and text columns only (:func:`json_values`)."""
    import pyarrow.compute as pc

    pieces: list[Any] = []
    for i, c in enumerate(cols):
        pieces.append(("" if i == 0 else ", ") + json.dumps(c) + ": ")
        pieces.append(json_values(batch.column(c)))
    pieces[0] = head + pieces[0]
    pieces.append(tail)
    return pc.binary_join_element_wise(*pieces, "")


def jsonable(types: dict[str, str], cols: list[str]) -> bool:
    """Whether the store columns ``cols`` (``types``: column -> SQL type) are all integers or
    text, the values :func:`json_objects` writes."""
    return all(types[c] in ("INTEGER", "TEXT") for c in cols)
