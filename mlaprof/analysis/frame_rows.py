"""Rows of a DataFrame's columns as tuples of Python values: what the analyzers and views loop
over. Iterating a frame's rows (``iterrows``, ``itertuples``) costs ~10-50 us a row, building a
Series or a namedtuple each time; a frame's columns as lists, zipped, cost next to nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def column_rows(df: pd.DataFrame, *cols: str) -> Iterator[tuple[Any, ...]]:
    """The rows of ``df``'s columns ``cols`` as tuples of Python values, in the frame's order."""
    return zip(*(df[c].tolist() for c in cols), strict=True)
