"""The one formatting module of every view (terminal, Markdown, HTML, TUI): numbers with their
units, shares, bytes, the wording of a missing value, lists and maps, all as plain text.

The rows layer (:mod:`mlaprof.reporters.rows`) turns a summary's sections into labelled rows
through :func:`value_text`; each view only lays those strings out, so a value reads the same in
each view. The unit of a field comes from its name (:func:`unit_of`): a field added to a
section is formatted by the same rule without a change here."""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Any

from mlaprof.analysis.memory import human_bytes
from mlaprof.analysis.share import share_text
from mlaprof.rank_counts import counted, ranks_count
from mlaprof.textsafe import plain

UNKNOWN = "unknown"  # the evidence holds no value (a field that is None)
NONE = "none"  # an empty list or map: recorded, and nothing in it
LIST_ITEMS = 16  # a list of values longer than this shows its first items and how many more

# units named by a field's name (the analyzers' naming rule: ``median_us``, ``kv_bytes_padding``)
US, NS, SECS, BYTES, SHARE, PCT = "us", "ns", "s", "bytes", "share", "pct"
# fields whose name is no unit's, in the unit their values are in (each mode's median step)
UNIT_OF_FIELD = {"by_mode": US}


def unit_of(name: str) -> str | None:
    """The unit a field's name declares (None: a plain count or a word)."""
    n = name.lower()
    if n in UNIT_OF_FIELD:
        return UNIT_OF_FIELD[n]
    if n.endswith("_us") or n == "us" or "_us_" in n:
        return US
    if n.endswith("_ns"):
        return NS
    if n.endswith("_secs"):
        return SECS
    if n == "bytes" or n.endswith("_bytes") or n.startswith("bytes_") or "_bytes_" in n:
        return BYTES
    if n.endswith("_pct"):
        return PCT
    if n.endswith(("share", "fraction", "_rate")) or n.startswith("occupancy"):
        return SHARE
    return None


def number_text(v: float, unit: str | None = None) -> str:
    """A number in ``unit``: ``12.3 µs``, ``96.00 MiB``, ``42.0%``; NaN reads unknown."""
    if isinstance(v, float) and math.isnan(v):
        return UNKNOWN
    if unit == US:
        return f"{v:.1f} µs"
    if unit == NS:
        return f"{int(v)} ns"
    if unit == SECS:
        return f"{v:.0f} s"
    if unit == BYTES:
        return human_bytes(v)
    if unit == SHARE:
        return share_text(v, digits=1, none=UNKNOWN)
    if unit == PCT:
        return f"{v:.1f}%"
    if isinstance(v, float):
        return f"{v:g}" if v == int(v) or abs(v) >= 1 else f"{v:.4g}"
    return str(v)


def gap_text(v: Any) -> str | None:
    """What a value the run does not hold reads, the one rule :func:`value_text` and the
    figures' hovers (:func:`mlaprof.figures._common.said`) both say: :data:`UNKNOWN` for None
    or NaN (the evidence holds no value), :data:`NONE` for an empty string, list or map
    (recorded, and nothing in it); None for a value the run holds."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return UNKNOWN
    if isinstance(v, (str, dict, list, tuple, set, frozenset)) and not v:
        return NONE
    return None


def value_text(v: Any, unit: str | None = None) -> str:
    """Any section value as the one string every view shows (control characters shown as
    ``\\xNN``, long strings shortened: :func:`mlaprof.textsafe.plain`); a value the run does
    not hold as :func:`gap_text` says it."""
    gap = gap_text(v)
    if gap is not None:
        return gap
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, Enum):
        return plain(v.value)
    if isinstance(v, (int, float)):
        return number_text(v, unit)
    if isinstance(v, dict):
        items = list(v.items())
        if all(str(k).lstrip("-").isdigit() for k in v):  # keyed by rank or size: in order
            items.sort(key=lambda kv: int(kv[0]))  # (a JSON document's keys are strings)
        return ", ".join(f"{value_text(k)}={value_text(x, unit)}" for k, x in items)
    if isinstance(v, (list, tuple, set, frozenset)):
        items = sorted(v, key=str) if isinstance(v, (set, frozenset)) else list(v)
        shown = [_item(x, unit) for x in items[:LIST_ITEMS]]
        more = len(items) - LIST_ITEMS
        return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")
    if dataclasses.is_dataclass(v):
        return "; ".join(
            f"{label_of(f.name)} {value_text(getattr(v, f.name), unit_of(f.name))}"
            for f in dataclasses.fields(v)
            if f.name != "null_keys"
        )
    return plain(v)


def _item(x: Any, unit: str | None) -> str:
    if isinstance(x, (list, tuple)):
        return "(" + ", ".join(value_text(y, unit) for y in x) + ")"
    return value_text(x, unit)


def field_text(name: str, v: Any) -> str:
    """The value of the section field ``name``: a list of rank ids (``ranks``,
    ``ranks_collapsed``, ...) as :func:`mlaprof.rank_counts.ranks_count` (``[0]`` never reads as "0 ranks"), any
    other value by :func:`value_text` in the unit the name declares."""
    if (name == "ranks" or name.startswith("ranks_")) and _rank_ids(v):
        return ranks_count(v)
    if (
        name == "heads"
        and isinstance(v, dict)
        and v
        and all(isinstance(x, dict) for x in v.values())
    ):
        return head_votes_text(v)
    if name == "rank_groups" and isinstance(v, list) and v:
        # groups of ranks, each a span text ("0, 2-3"): braced apart, never one run-on list
        # that reads as a single group ("0, 2-3, 1, 4-7")
        return " ".join(f"{{{g}}}" for g in v)
    return value_text(v, unit_of(name))


def head_votes_text(votes: dict[str, dict[str, int]]) -> str:
    """A trace's head counts per path, as its stage-2 grids show them (``TraceChecks.heads``:
    path -> heads -> kernels): "aiter-gluon: 8 heads in 48 stage-2 kernels", never the map's
    raw "aiter-gluon=8=48"."""
    return "; ".join(
        f"{plain(path)}: "
        + ", ".join(f"{h} heads in {counted(n, 'stage-2 kernel(s)')}" for h, n in by.items())
        for path, by in votes.items()
    )


def _rank_ids(v: Any) -> bool:
    return (
        isinstance(v, list)
        and bool(v)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    )


def label_of(name: str) -> str:
    """A field name as a label: ``step_median_us`` -> ``step median`` (the unit is in the
    value), ``S_min`` -> ``S min``."""
    for suffix in ("_us", "_ns", "_secs"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name.replace("_us_", "_").replace("_", " ").strip()
