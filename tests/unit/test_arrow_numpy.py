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


@pytest.mark.parametrize("seed", range(20))
def test_take_from_chunks_matches_numpy(seed: int) -> None:
    """Taking rows from a chunked column (chunks of any size, sliced ones included) reads what
    indexing the joined column reads."""
    rng = np.random.default_rng(seed)
    pieces = []
    for _ in range(int(rng.integers(1, 8))):
        vals = rng.integers(-(2**40), 2**40, int(rng.integers(0, 50)) + 3)
        arr = pa.array(vals, pa.int64())
        pieces.append(arr.slice(1, len(arr) - 2))  # buffers with an offset
    col = pa.chunked_array(pieces, pa.int64())
    whole = np.concatenate([p.to_numpy() for p in pieces])
    rows = np.flatnonzero(rng.random(len(whole)) < 0.4)
    assert arrow_numpy.take(col, rows).tolist() == whole[rows].tolist()
    assert arrow_numpy.take(col.combine_chunks(), rows).tolist() == whole[rows].tolist()


def test_take_refuses_what_it_cannot_read() -> None:
    col = pa.chunked_array([pa.array([1, 2, 3]), pa.array([4, 5])])
    with pytest.raises(ValueError, match="ascending"):
        arrow_numpy.take(col, np.array([3, 1]))
    with pytest.raises(IndexError):
        arrow_numpy.take(col, np.array([0, 5]))
    with pytest.raises(ValueError, match="nulls"):
        arrow_numpy.take(pa.chunked_array([pa.array([1, None])]), np.array([0]))


def test_lazy_columns_are_read_once_and_stored_as_parsed() -> None:
    """A column nothing read is stored as the parser's Arrow column; reading it makes it NumPy,
    once; rows taken from it never make it NumPy."""
    from mlaprof.importers.annotate import KernelColumns, LazyInts

    raw = pa.chunked_array([pa.array([5, 6]), pa.array([7, 8, 9])])
    ints = LazyInts({"start_ns": np.arange(5)}, {"grid_x": raw, "stream": raw})
    kc = KernelColumns(["k"], np.zeros(5, np.int64), ints, {})
    assert list(ints) == ["start_ns", "grid_x", "stream"] and "grid_x" in ints and len(ints) == 3
    got, mask = kc.take("grid_x", np.array([1, 2, 4]))
    assert got.tolist() == [6, 7, 9] and mask is None
    assert kc.storable("grid_x")[0] is raw  # still unread
    first = ints["grid_x"]
    assert first.tolist() == [5, 6, 7, 8, 9] and ints["grid_x"] is first
    assert isinstance(kc.storable("grid_x")[0], np.ndarray)
    del ints["stream"]
    assert list(ints) == ["start_ns", "grid_x"]
    with pytest.raises(KeyError):
        ints["stream"]
    ints["replay"] = np.zeros(5, np.int64)
    assert list(ints) == ["start_ns", "grid_x", "replay"]


def test_a_table_from_buffers_equals_pyarrows_own() -> None:
    """What the fleet import stores (its replay sums) is the table ``pyarrow.table`` infers:
    int64, double, bool and strings with nulls, the same types and values."""
    cols = {
        "step": np.array([0, 1, 2**40], np.int64),
        "total": np.array([0.5, 1.0, 2.25]),
        "mla": np.array([True, False, True]),
        "name": ["a", None, "ü"],
    }
    got = arrow_numpy.table(cols)
    want = pa.table({k: (pa.array(v, pa.string()) if isinstance(v, list) else v)
                     for k, v in cols.items()})  # fmt: skip
    assert got.schema == want.schema
    assert got.equals(want)
    with pytest.raises(TypeError, match="no Arrow type"):
        arrow_numpy.table({"x": np.array(["s"], object)})


@pytest.mark.parametrize("seed", range(12))
def test_coded_strings_are_the_decoded_list(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = ["gemm", "", None, "mla_é", "gemm", "x" * 300]  # a name listed twice, a NULL one
    codes = rng.integers(0, len(values), int(rng.integers(0, 40)))
    if seed % 2:
        codes = np.sort(codes)  # runs of a name, as a histogram's
    decoded = [values[c] for c in codes.tolist()]
    got = arrow_numpy.coded_strings(values, codes)
    assert got.equals(arrow_numpy.strings(decoded))
    assert got.equals(pa.array(decoded, pa.string()))  # pyarrow's own (strings is built on it)
    assert got.to_pylist() == decoded and got.null_count == decoded.count(None)
    tab = arrow_numpy.table({"name": arrow_numpy.Coded(values, codes), "n": codes})
    assert tab.equals(arrow_numpy.table({"name": decoded, "n": codes}))


def test_run_heads_are_where_the_value_changes() -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 50):
        a = np.sort(rng.integers(0, 5, n)) if n != 2 else np.array([4, 4])
        want = [i for i in range(n) if i == 0 or a[i] != a[i - 1]]
        assert arrow_numpy.run_heads(a).tolist() == want
    assert arrow_numpy.run_heads(np.array([3, 1, 1, 3, 3, 3, 0])).tolist() == [0, 1, 3, 6]
