"""Per step of an imported trace, what its MLA layers say: how many there are, the S they ran
with, and their median time. Computed once per run, in the database (a fleet import holds
hundreds of thousands of layers; their per-step aggregates are a few thousand rows), and read by
every analysis that judges steps: graph kinds (verify or drafter), paths, the step list, the
collapse rule and its reference.

:func:`step_stats_sql` runs :data:`STEP_STATS_SQL` over every rank's layers (DuckDB, on the
import's Parquet files); :func:`step_stats` computes the same from a layers frame in pandas (a
caller holding only frames, and the tests' oracle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

COLUMNS = ("n_layers", "S", "median_ns")

# S of a step: the value its layers share (the largest when they differ); NULLs are skipped,
# as in every aggregate here, and a step whose layers all lack S has none
STEP_STATS_SQL = """
SELECT rank, step, COUNT(*) AS n_layers, MAX(splits_used) AS S, MEDIAN(duration_ns) AS median_ns
FROM layers
WHERE step IS NOT NULL
GROUP BY rank, step
"""


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Indexed by (rank, step); counts as integers, S and medians as floats (NaN: unknown)."""
    out = pd.DataFrame(
        {
            "n_layers": df["n_layers"].astype(np.int64),
            "S": df["S"].astype(float),
            "median_ns": df["median_ns"].astype(float),
        }
    )
    out.index = pd.MultiIndex.from_arrays(
        [df["rank"].astype(np.int64), df["step"].astype(np.int64)], names=["rank", "step"]
    )
    return out.sort_index()


def step_stats_sql(run: Run) -> pd.DataFrame:
    """:data:`STEP_STATS_SQL` over all of the run's ranks."""
    return _typed(run.query(STEP_STATS_SQL))


def step_stats(layers: pd.DataFrame) -> pd.DataFrame:
    """The same from a layers frame (``rank`` taken as 0 where the frame has none)."""
    if layers.empty:
        return _typed(pd.DataFrame(columns=["rank", "step", "n_layers", "S", "median_ns"]))
    ly = layers[layers["step"].notna()]
    rank = ly["rank"] if "rank" in ly else pd.Series(0, index=ly.index)
    g = ly.assign(rank=rank).groupby(["rank", "step"])
    n = g.size()
    out = pd.DataFrame(
        {
            "n_layers": n,
            "S": g["splits_used"].max() if "splits_used" in ly else np.nan,
            "median_ns": g["duration_ns"].median() if "duration_ns" in ly else np.nan,
        },
        index=n.index,
    ).reset_index()
    return _typed(out)


def by_step(frame: pd.DataFrame, values: pd.Series) -> pd.Series:
    """``values`` (indexed by rank and step) for each row of ``frame`` (steps are numbered per
    rank: a step number alone never identifies a step); NaN where a step has none."""
    if values.empty:
        return pd.Series(np.nan, index=frame.index)
    idx = pd.MultiIndex.from_arrays([frame["rank"], frame["step"]])
    return pd.Series(values.reindex(idx).to_numpy(), index=frame.index)


def for_steps(frame: pd.DataFrame, stats: pd.DataFrame, column: str) -> pd.Series:
    """``stats[column]`` for each row of ``frame``; NaN for a step without layers."""
    return by_step(frame, stats[column])
