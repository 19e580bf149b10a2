"""The S each (rank, layer) ran most, as the replay-time section reports it."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from mlaprof.analysis.replay_time import _mode_s


def _by_hand(layers: pd.DataFrame) -> dict[tuple[int, int], int | None]:
    """Row by row: groups of a known rank and layer; the most frequent S, the smallest of a
    tie; None where no row of the group has an S."""
    got: dict[tuple[int, int], Counter] = {}
    ranks = layers["rank"] if "rank" in layers else pd.Series(0, index=layers.index)
    for r, lay, s in zip(ranks, layers["layer"], layers["splits_used"], strict=True):
        if pd.isna(r) or pd.isna(lay):
            continue
        c = got.setdefault((int(r), int(lay)), Counter())
        if not pd.isna(s):
            c[int(s)] += 1
    return {k: (min(c, key=lambda s: (-c[s], s)) if c else None) for k, c in got.items()}


@pytest.mark.parametrize("seed", range(40))
def test_mode_s_is_the_most_frequent_s_smallest_of_a_tie(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 120))
    layers = pd.DataFrame({
        "rank": rng.integers(0, 3, n),
        "layer": rng.integers(0, 4, n).astype(float),
        "splits_used": rng.choice([1.0, 2.0, 4.0, 16.0, np.nan], n),
    })  # fmt: skip
    if n > 3 and seed % 3 == 0:
        layers.loc[layers.index[:2], "layer"] = np.nan  # a layer record without its number
    if seed % 4 == 0:
        layers = layers.drop(columns="rank")  # one rank's trace
    got = _mode_s(layers, ["rank", "layer"])
    assert got == _by_hand(layers)
    assert all(v is None or type(v) is int for v in got.values())


def test_a_group_without_s_is_none_beside_groups_with_one() -> None:
    layers = pd.DataFrame({"rank": [0, 0, 1, 1, 1], "layer": [0, 0, 0, 0, 0],
                           "splits_used": [np.nan, np.nan, 2.0, 4.0, 4.0]})  # fmt: skip
    assert _mode_s(layers, ["rank", "layer"]) == {(0, 0): None, (1, 0): 4}
