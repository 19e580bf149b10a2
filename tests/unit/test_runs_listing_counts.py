"""The run listing (``runs``, ``tui --once``, the picker) counts a run's steps and names its
device as the report does: an imported trace whose drafter passes the analysis leaves out lists
the report's 3 steps, never its 12 committed rows as steps; a plugin engine run lists the report's
device ("cpu"), never run.json's placeholder "engine". Where no report has counted the run yet
the listing says so instead of a count of its own."""

from __future__ import annotations

import shutil
from pathlib import Path

from mlaprof.rank_counts import per_rank_count
from mlaprof.store import summary_cache
from mlaprof.store.reader import NOT_ANALYSED, list_runs, load, run_info
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
DRAFTER = "aiter-asm_mtp_drafter"  # 12 committed steps: 3 verify steps, 9 drafter passes
ENGINE = "engine-engine_ngram_run"  # run.json's device: "engine"; the report's: "cpu"


def _copy(name: str, traces: Path) -> Path:
    src = shipped_runs.run_dir(name)
    dst = traces / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(summary_cache.CACHE_NAME))
    return dst


def _keep_report(run_dir: Path) -> object:
    """What ``report --json`` does: build the summary and keep its document in the run folder."""
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.reporters.renderer import JsonRenderer

    with load(run_dir) as run:
        kept = summary_cache.key(run)
        s = build_summary(run, series=False)
        if not summary_cache.write(run, kept, JsonRenderer().render(s)):
            raise AssertionError("the report document was not kept")
    return s


def test_an_import_lists_the_reports_steps_not_its_drafter_passes(tmp_path: Path) -> None:
    run_dir = _copy(DRAFTER, tmp_path)
    before = run_info(run_dir)
    assert sum((before.rank_steps or {}).values()) == 12  # the rows the import committed
    # not counted by a report yet: the rows, said as such, never "12" as the run's steps
    assert before.steps_text() == "12 committed"
    assert before.device == NOT_ANALYSED
    s = _keep_report(run_dir)
    counts = {r.rank: r.steps_committed for r in s.state.per_rank}  # type: ignore[attr-defined]
    assert counts == {0: 3}
    (after,) = list_runs(tmp_path)
    assert after.rank_steps == counts
    assert after.steps_text() == per_rank_count(counts) == "3"
    assert after.steps_text("steps") == "3 steps"
    assert after.device == s.device  # type: ignore[attr-defined]


def test_an_engine_run_lists_the_reports_device(tmp_path: Path) -> None:
    run_dir = _copy(ENGINE, tmp_path)
    before = run_info(run_dir)
    assert before.device == NOT_ANALYSED  # never the plugin's placeholder "engine"
    assert before.counted  # an engine's committed steps are its report's steps
    s = _keep_report(run_dir)
    after = run_info(run_dir)
    assert after.device == s.device == "cpu"  # type: ignore[attr-defined]
    counts = {r.rank: r.steps_committed for r in s.state.per_rank}  # type: ignore[attr-defined]
    assert after.steps_text() == before.steps_text() == per_rank_count(counts)


def test_a_scenario_run_is_listed_without_the_analysis(tmp_path: Path) -> None:
    """A scenario run's committed steps and device are its report's: no document is read."""
    run_dir = _copy("demo-fix-padding-active-rows-c16", tmp_path)
    info = run_info(run_dir)
    assert info.counted and info.steps_text() == "32" and info.device == "cuda"
