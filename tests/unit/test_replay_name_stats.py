"""The per-name kernel statistics of the replay query (:data:`NAME_STATS`, a median read off the
ranks' summed (name, duration) histograms so 11M durations are never held at once) equal pandas' count, sum,
median and any on hand-made durations: odd and even counts, ties across the middle, one launch."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from mlaprof.analysis.replay_time import NAME_STATS


def _cases() -> dict[str, list[float]]:
    rng = np.random.default_rng(7)
    return {
        "one": [5.0],
        "two": [3.0, 10.0],
        "odd_distinct": [9.0, 1.0, 4.0, 7.0, 2.0],
        "even_distinct": [8.0, 2.0, 6.0, 4.0, 11.0, 1.0],
        "ties_across_middle": [2.0, 2.0, 2.0, 9.0, 9.0, 1.0],
        "odd_ties": [4.0, 4.0, 1.0, 7.0, 7.0, 7.0, 3.0],
        "many": rng.integers(1, 50, 1001).astype(float).tolist(),
        "many_even": rng.integers(1, 5000, 2000).astype(float).tolist(),
    }


@pytest.fixture(scope="module")
def got_and_want() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [(n, d, i % 3 == 0 and n.startswith("odd")) for n, ds in _cases().items()
            for i, d in enumerate(ds)]  # fmt: skip
    k = pd.DataFrame(rows, columns=["name", "dur", "mla"])
    # the histogram as the ranks give it (RANK_SQL): each rank's own (name, duration) counts,
    # here two "ranks" whose durations overlap, so NAME_STATS must sum their counts
    hist = pd.concat(
        h.groupby(["name", "dur"]).agg(c=("mla", "size"), mla=("mla", "any")).reset_index()
        for h in (k.iloc[::2], k.iloc[1::2])
    ).rename(columns={"dur": "d"})
    db = duckdb.connect()
    db.register("hist", hist)
    got = db.sql(NAME_STATS).df().set_index("name").sort_index()
    want = k.groupby("name").agg(n=("dur", "size"), total=("dur", "sum"),
                                 med=("dur", "median"), mla=("mla", "any")).sort_index()  # fmt: skip
    return got, want


def test_median_is_pandas_median_for_odd_even_and_tied_counts(got_and_want) -> None:  # noqa: ANN001
    got, want = got_and_want
    assert list(got.index) == list(want.index)
    assert got["med"].tolist() == want["med"].tolist()


def test_counts_totals_and_mla_flag(got_and_want) -> None:  # noqa: ANN001
    got, want = got_and_want
    assert got["n"].astype(int).tolist() == want["n"].tolist()
    assert got["total"].tolist() == want["total"].tolist()
    assert got["mla"].tolist() == want["mla"].tolist()
    assert want["mla"].any() and not want["mla"].all()  # the flag check is not vacuous
