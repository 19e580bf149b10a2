"""A notebook user reads one status, one reason and one name per run: ``run.meta`` (run.json) says
what ``run.status``, ``run.reason``, ``run.name`` and the summary say, and keeps what run.json
itself wrote under ``written_<field>`` (a killed run's run.json still says ``running``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import mlaprof
from mlaprof.exporters import rocpd_export
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import create_run


def _killed(traces: Path, name: str = "r") -> Path:
    """A run whose writer died without closing its record: lock freed, run.json 'running'."""
    w = create_run(traces, name, {"source": "test"})
    for i in range(3):
        w.add("kernels", name="k", device=0, stream=0, correlation=i + 1,
              start_ns=1000 + 400 * i, end_ns=1300 + 400 * i)  # fmt: skip
        w.add("steps", step=i, t_start_ns=1000 + 400 * i, duration_ns=390, graph_mode="FULL")
    w._con.commit()
    w._lock.release()
    return w.run_dir


def _agree(run: mlaprof.store.Run) -> None:
    meta = run.meta
    s = mlaprof.build_summary(run)
    if not (meta["status"] == run.status == s.status == s.state.status):
        raise AssertionError((meta["status"], run.status, s.status, s.state.status))
    # one "no reason": None in run.meta, Run.reason and the summary's state alike
    if not (meta.get("reason") == run.reason == s.state.reason):
        raise AssertionError((meta.get("reason"), run.reason, s.state.reason))
    if meta["name"] != run.name or s.run != run.name:
        raise AssertionError((meta["name"], run.name, s.run))


def test_a_killed_runs_meta_says_the_judged_status_and_keeps_the_written_one(
    tmp_path: Path,
) -> None:
    path = _killed(tmp_path / "t")
    with mlaprof.load(path) as run:
        assert run.written_meta["status"] == "running"  # the file is not rewritten
        assert run.meta["written_status"] == "running"
        assert run.status == "incomplete"
        # the rank's own record, as the notebook reads it, says the same
        assert run.rank_meta(0)["status"] == "incomplete"
        assert run.rank_meta(0)["written_status"] == "running"
        _agree(run)


def test_an_import_of_an_exported_killed_run_reads_one_status_and_reason(tmp_path: Path) -> None:
    # run.json of the import says it finished importing; the run it came from was killed
    with mlaprof.load(_killed(tmp_path / "t")) as run:
        rocpd_export.export_rocpd(run, tmp_path / "r.db")
    back, _ = import_rocprof(tmp_path / "r.db", tmp_path / "t", "back")
    with mlaprof.load(back) as b:
        assert b.status == "incomplete" and b.meta["status"] == "incomplete"
        assert b.meta["reason"] == b.reason and (b.reason or "").startswith("the run this was")
        # the export carried run.json as written, never the judged copy's extra fields
        assert "written_status" not in b.written_meta
        _agree(b)


@pytest.mark.parametrize("finish", [True, False])
def test_a_copied_runs_meta_names_the_folder_every_view_names(tmp_path: Path, finish: bool) -> None:
    w = create_run(tmp_path / "t", "recorded", {"source": "test"})
    w.add("steps", step=0, t_start_ns=1, duration_ns=2, graph_mode="FULL")
    if finish:
        w.finish()
    else:
        w._con.commit()
        w._lock.release()
    copy = tmp_path / "t" / "copied"
    shutil.copytree(w.run_dir, copy)
    with mlaprof.load(copy) as run:
        assert run.meta["written_name"] == "recorded" and run.meta["name"] == "copied"
        _agree(run)
