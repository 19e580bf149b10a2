"""Arrow <-> NumPy through buffers (mlaprof.formats.arrow_numpy) gives what pyarrow's own
conversions give, offsets and nulls included, without importing pandas."""

from __future__ import annotations

import subprocess  # noqa: F401 - the tier guard below is about it

import numpy as np
import pyarrow as pa
import pytest

from mlaprof.formats import arrow_numpy
from tests.unit.conftest import ProcessInUnitTier


@pytest.mark.parametrize("seed", range(20))
def test_numbers_and_nulls_match_pyarrow(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    values = rng.integers(-(2**62), 2**62, n)
    mask = rng.random(n) < 0.3
    arr = pa.array(values, pa.int64(), mask=mask)
    lo = int(rng.integers(0, n))
    part = arr.slice(lo, int(rng.integers(0, n - lo + 1)))  # an offset into the buffers
    want = [(-1 if v is None else v) for v in part.to_pylist()]
    assert arrow_numpy.numbers(part, -1).tolist() == want
    assert arrow_numpy.nulls(part).tolist() == [v is None for v in part.to_pylist()]
    back = arrow_numpy.array(values, pa.int64(), mask)
    assert back.to_pylist() == arr.to_pylist() and back.null_count == int(mask.sum())


def test_strings_and_int32_round_trip() -> None:
    words = ["", "a", "ünïcode", "x" * 300, "_fwd_kernel_stage2"]
    assert arrow_numpy.strings(words).to_pylist() == words
    idx = np.array([4, 0, 2, 2], np.int32)
    assert arrow_numpy.array(idx, pa.int32()).to_pylist() == [4, 0, 2, 2]
    with pytest.raises(ValueError, match="fill"):
        arrow_numpy.numbers(pa.array([1, None], pa.int64()))


def test_the_unit_tier_refuses_child_processes() -> None:
    with pytest.raises(ProcessInUnitTier, match="tests/e2e"):
        subprocess.run(["true"], check=False)
