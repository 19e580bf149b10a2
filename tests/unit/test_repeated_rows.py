"""A dispatch record written twice is the row equal in every field to the row before it. The
check looks at one column first and at every field only where that one repeats: on random
traces with copies, near-copies (one field apart) and NULLs it marks the rows that the plain
every-field comparison marks."""

from __future__ import annotations

import numpy as np
import pytest

from mlaprof.importers.annotate import NULL, KernelColumns
from mlaprof.importers.duplicates import drop_repeated_dispatches, repeated_rows

COLS = ("start_ns", "end_ns", "correlation", "device", "grid_x")


def _every_field(kc: KernelColumns) -> np.ndarray:
    """The rule as written: every field (NULL as -1) and the name equal to the row before."""
    rows = [
        (int(kc.name_idx[i]),
         *(NULL if c in kc.masks and kc.masks[c][i] else int(kc.ints[c][i]) for c in kc.ints))
        for i in range(kc.n)
    ]  # fmt: skip
    return np.array([i > 0 and rows[i] == rows[i - 1] for i in range(kc.n)], bool)


def _trace(seed: int, with_start: bool) -> KernelColumns:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 80))
    base = {c: rng.integers(0, 4, n).astype(np.int64) for c in COLS}  # few values: many ties
    idx = rng.integers(0, 3, n).astype(np.int32)
    masks = {"grid_x": rng.random(n) < 0.3, "correlation": rng.random(n) < 0.2}
    for i in range(1, n):
        r = rng.random()
        if r < 0.3:  # a copy of the row before
            for c in COLS:
                base[c][i] = base[c][i - 1]
                if c in masks:
                    masks[c][i] = masks[c][i - 1]
            idx[i] = idx[i - 1]
        elif r < 0.5:  # a near-copy: one field apart (a masked value differing under its NULL)
            for c in COLS:
                base[c][i] = base[c][i - 1]
            idx[i] = idx[i - 1]
            c = COLS[int(rng.integers(0, len(COLS)))]
            base[c][i] += 1
    ints = {c: v for c, v in base.items() if with_start or c != "start_ns"}
    return KernelColumns(["a", "b", "c"], idx, ints, {c: m for c, m in masks.items() if m.any()})


@pytest.mark.parametrize("with_start", [True, False])
@pytest.mark.parametrize("seed", range(60))
def test_repeated_rows_are_the_rows_equal_in_every_field(seed: int, with_start: bool) -> None:
    kc = _trace(seed, with_start)
    want = _every_field(kc)
    assert repeated_rows(kc).tolist() == want.tolist()
    kept, n = drop_repeated_dispatches(kc)
    assert n == int(want.sum()) and kept.n == kc.n - n
