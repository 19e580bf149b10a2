"""vLLM's own environment has no duckdb: a recorded engine run (its kernels, if any, in its
databases, never in an import's Parquet files) must summarise and draw without it. DuckDB is made
unavailable here the way a missing install makes it (mlaprof.store.sqlengine.duckdb_module)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.store import load, sqlengine

ENGINE_RUN = Path(__file__).resolve().parents[1] / "data" / "vllm" / "engine_ngram_run"


def test_an_engine_run_summarises_and_draws_without_duckdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.figures.timeline import step_timeline

    def missing() -> None:
        raise MlaprofError("duckdb is not installed")

    monkeypatch.setattr(sqlengine, "duckdb_module", missing)
    run_dir = tmp_path / ENGINE_RUN.name
    shutil.copytree(ENGINE_RUN, run_dir)  # a reader must not write beside the shipped run
    with load(run_dir) as run:
        s = build_summary(run)
        assert s.engine is not None and s.engine.verify_steps > 0
        assert s.series is not None and s.series.ranks
        step_timeline(run, max_kernels=10)  # another window: read from the run again
