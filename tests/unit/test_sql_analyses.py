"""The imported-trace analyses that run as SQL over the kernels' Parquet files give what the
pandas code they replaced gave, on every shipped trace (each AITER trace, the fleet, the Kineto
trace, the rocprofv3 fixtures), with the drafter's layers left out as the analysis leaves them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from mlaprof.analysis.evidence import trace as imported  # replay_time is looked up there
from mlaprof.analysis.evidence import trace as trace_adapter
from mlaprof.analysis.evidence.model import run_meta
from mlaprof.analysis.typed_json import to_json
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load
from tests import shipped_runs
from tests.trace_io_helpers import DATA, KINETO_REAL
from tests.unit.pandas_replay_time import KERNEL_COLUMNS, pandas_replay_time

AITER = sorted(p for p in (DATA / "aiter").iterdir() if p.is_dir())
ROCPROF = [DATA / "rocprof"]
# every shipped trace (the AITER traces, the Kineto traces, the rocprofv3 fixtures)
SHIPPED_TRACES = [
    n for n in shipped_runs.NAMES if n.startswith(("aiter-", "rocprof-", "kineto", "vllm_cpu"))
]
WORKER_GROUP = "shipped-runs"  # one worker builds each shipped run's summary once


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
        # the analyzer's section, as its JSON document (the reference is dict-shaped)
        sql = to_json(imported.replay_time(run_meta(run.meta), run, layers))
        frames = (run.columns("kernels", KERNEL_COLUMNS, rank=r) for r in run.ranks)
        ref = pandas_replay_time(run.meta, frames, layers)
    _same(_by_name(sql), _by_name(ref), run_dir.name)
    return sql


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every shipped trace imported once (the tests only read the runs): the AITER traces and
    the Kineto trace as tests/shipped_runs.py imports them once per worker, the rocprofv3
    fixture folder as one run here."""
    base = tmp_path_factory.mktemp("shipped")
    runs = {src.name: shipped_runs.run_dir(f"aiter-{src.name}") for src in AITER}
    runs.update({src.name: import_rocprof(src, base, f"t{i}")[0] for i, src in enumerate(ROCPROF)})
    assert shipped_runs.corpus.KINETO["kineto_graph_replay"] == KINETO_REAL
    runs["kineto"] = shipped_runs.run_dir("kineto_graph_replay")
    return runs


@pytest.mark.parametrize("src", AITER + ROCPROF, ids=lambda p: p.name)
def test_replay_time_sql_equals_pandas(src: Path, shipped: dict[str, Path]) -> None:
    _check(shipped[src.name])


def test_replay_time_sql_equals_pandas_on_kineto(shipped: dict[str, Path]) -> None:
    rt = _check(shipped["kineto"])
    assert rt["replays"] > 0 and rt["layers"]  # a trace with replays: the check is not vacuous


def test_replay_time_counts_per_rank_on_the_fleet(shipped: dict[str, Path]) -> None:
    run_dir = shipped["fleet_dp2_tp4"]
    rt = _check(run_dir)
    with load(run_dir) as run:
        per_rank = run.query("SELECT COUNT(DISTINCT (rank, replay)) AS n FROM kernels "
                           "WHERE replay IS NOT NULL")["n"].iloc[0]  # fmt: skip
        ranks = len(run.ranks)
    assert ranks == 8 and rt["replays"] == per_rank


# -- per-step layer aggregates (graph kinds, paths, steps, collapse) ------------------------------
def test_step_stats_sql_equals_pandas_on_every_shipped_trace(shipped: dict[str, Path]) -> None:
    from mlaprof.analysis.step_stats import step_stats, step_stats_sql

    judged = 0
    for run_dir in shipped.values():
        with load(run_dir) as run:
            sql, ref = step_stats_sql(run), step_stats(run.layers)
        assert list(sql.index) == list(ref.index), run_dir.name
        assert sql["n_layers"].tolist() == ref["n_layers"].tolist(), run_dir.name
        assert sql["S"].fillna(-1).tolist() == ref["S"].fillna(-1).tolist(), run_dir.name
        pd.testing.assert_series_equal(sql["median_ns"], ref["median_ns"], rtol=1e-12)
        judged += len(sql)
    assert judged > 50  # steps with layers on the shipped traces: the check is not vacuous


@pytest.mark.parametrize("name", SHIPPED_TRACES)
def test_trace_analyses_on_sql_step_stats_equal_those_on_pandas(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every analysis fed by the per-step aggregates (graph kinds and the drafter table, paths,
    the step list, the collapse findings and their reference) says the same whichever computed
    them: the database (the shipped run's summary, built once per worker), or pandas over the
    whole layers table."""
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.analysis.step_stats import step_stats

    sql = shipped_runs.summary(name).to_json()
    monkeypatch.setattr(trace_adapter, "step_stats_sql", lambda r: step_stats(r.layers))
    with load(shipped_runs.run_dir(name)) as run:
        ref = build_summary(run).to_json()
    _same(sql, ref, name)  # the whole summary: trace sections, findings, layers


def test_step_stats_on_layers_that_disagree(tmp_path: Path) -> None:
    """Layers of a step with different S, unknown S, an even count (the median between the two
    middle times) and two ranks numbering their steps alike: the database and pandas agree,
    and on the values the rules name."""
    from mlaprof.analysis.step_stats import step_stats, step_stats_sql
    from mlaprof.store import create_run

    rows = {  # rank -> (step, layer, duration_ns, splits_used)
        0: [(0, 0, 10, 2), (0, 1, 30, 4), (0, 2, 20, None), (0, 3, 50, 1), (1, 0, 7, None)],
        1: [(0, 0, 5, 8), (0, 1, 6, 8), (2, 0, 9, 3)],
    }
    for rank, rs in rows.items():
        w = create_run(tmp_path, "mixed", {"kind": "trace"}, rank=rank)
        w.add_many("layers", [dict(step=s, layer=ly, t_start_ns=0, duration_ns=d, splits_used=sp)
                              for s, ly, d, sp in rs])  # fmt: skip
        w.finish()
    with load(tmp_path / "mixed") as run:
        sql, ref = step_stats_sql(run), step_stats(run.layers)
    pd.testing.assert_frame_equal(sql, ref)
    assert sql.loc[(0, 0)].tolist() == [4, 4.0, 25.0]  # 4 layers, largest S, (20 + 30) / 2
    assert sql.loc[(0, 1), "n_layers"] == 1 and math.isnan(sql.loc[(0, 1), "S"])
    assert sql.loc[(1, 0)].tolist() == [2, 8.0, 5.5] and sql.loc[(1, 2), "S"] == 3.0
