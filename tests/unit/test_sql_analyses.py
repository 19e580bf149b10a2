"""The imported-trace analyses that run as SQL over the kernels' Parquet files give what the
pandas code they replaced gave, on every shipped trace (each AITER trace, the fleet, the Kineto
trace, the rocprofv3 fixtures), with the drafter's layers left out as the analysis leaves them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from mlaprof.analysis import imported
from mlaprof.analysis.evidence import trace as trace_adapter
from mlaprof.importers.kineto import import_kineto
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load
from tests.trace_io_helpers import DATA, KINETO_REAL
from tests.unit.pandas_replay_time import KERNEL_COLUMNS, pandas_replay_time

AITER = sorted(p for p in (DATA / "aiter").iterdir() if p.is_dir())
ROCPROF = [DATA / "rocprof"]


def _judged_layers(run) -> pd.DataFrame:  # noqa: ANN001
    """The layers the analysis hands to replay_time (verify steps only), caught in flight."""
    seen: dict[str, pd.DataFrame] = {}
    real = imported.replay_time

    def spy(meta, r, layers):  # noqa: ANN001, ANN202
        seen["layers"] = layers
        return real(meta, r, layers)

    imported.replay_time = spy
    try:
        trace_adapter.trace_evidence(run)
    finally:
        imported.replay_time = real
    return seen["layers"]


def _same(a: object, b: object, where: str) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None, f"{where}: {a} vs {b}"
        assert math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9), f"{where}: {a} vs {b}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def _by_name(rt: dict) -> dict:
    # equal totals may come in either order: compare kernels by name
    return {**rt, "kernels": sorted(rt["kernels"], key=lambda k: k["name"])}


def _check(run_dir: Path) -> dict:
    with load(run_dir) as run:
        layers = _judged_layers(run)
        sql = imported.replay_time(run.meta, run, layers)
        frames = (run.columns("kernels", KERNEL_COLUMNS, rank=r) for r in run.ranks)
        ref = pandas_replay_time(run.meta, frames, layers)
    _same(_by_name(sql), _by_name(ref), run_dir.name)
    return sql


@pytest.mark.parametrize("src", AITER + ROCPROF, ids=lambda p: p.name)
def test_replay_time_sql_equals_pandas(src: Path, tmp_path: Path) -> None:
    run_dir, _ = import_rocprof(src, tmp_path, "t")
    _check(run_dir)


def test_replay_time_sql_equals_pandas_on_kineto(tmp_path: Path) -> None:
    run_dir, _ = import_kineto(KINETO_REAL, tmp_path, "k")
    rt = _check(run_dir)
    assert rt["replays"] > 0 and rt["layers"]  # a trace with replays: the check is not vacuous


def test_replay_time_counts_per_rank_on_the_fleet(tmp_path: Path) -> None:
    run_dir, _ = import_rocprof(DATA / "aiter" / "fleet_dp2_tp4", tmp_path, "f")
    rt = _check(run_dir)
    with load(run_dir) as run:
        per_rank = run.sql("SELECT COUNT(DISTINCT (rank, replay)) AS n FROM kernels "
                           "WHERE replay IS NOT NULL")["n"].iloc[0]  # fmt: skip
        ranks = len(run.ranks)
    assert ranks == 8 and rt["replays"] == per_rank
