"""A run folder never reads "abandoned" while its writer is starting: run.json appears only once
a live lock stands behind it (a writer's own, or the launcher's of ``mlaprof run --ranks N``
while its rank processes start). A reader looking in between (the dashboard follows a run from
its first file) read the run "an empty run abandoned before its first record"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mlaprof.store import liveness, runmeta
from mlaprof.store.writer import create_run


def _seen_at_run_json(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What a reader calls the folder at the moment its run.json is written."""
    seen: list[str] = []
    write = runmeta.write_run_json

    def probe(run_dir: Path, meta: Any) -> None:
        write(run_dir, meta)
        seen.append(str(liveness.empty_run(run_dir, runmeta.read(run_dir))[0]))

    monkeypatch.setattr(runmeta, "write_run_json", probe)
    return seen


def test_writer_holds_its_lock_before_run_json(tmp_path: Path, monkeypatch) -> None:
    seen = _seen_at_run_json(monkeypatch)
    w = create_run(tmp_path, "r", {"source": "test"})
    try:
        assert seen == [liveness.EmptyStatus.STARTING]
        assert (w.run_dir / runmeta.META_FILE).is_file()
    finally:
        w.finish()
    # the writer gone, the folder holds its database: read as a run, not an empty one
    assert (w.run_dir / "rank0.db").is_file()


def test_launcher_holds_a_lock_while_ranks_start(tmp_path: Path, monkeypatch) -> None:
    from mlaprof import multirank
    from mlaprof.cli import main

    seen = _seen_at_run_json(monkeypatch)
    during: list[str] = []

    def fake_launch(argv, world, device, run_dir, progress=None):  # noqa: ANN001, ARG001
        # the ranks have not taken their locks yet: the launcher's stands behind run.json
        during.append(str(liveness.empty_run(run_dir, runmeta.read(run_dir))[0]))
        return [multirank.RankOutcome(rank=r, code=0, message="", pid=None) for r in range(world)]

    monkeypatch.setattr(multirank, "launch", fake_launch)
    traces = tmp_path / "traces"
    main(["run", "--ranks", "2", "--traces", str(traces), "--name", "tp2"])
    assert seen == [liveness.EmptyStatus.STARTING]
    assert during == [liveness.EmptyStatus.STARTING]
    # once the launcher is done its lock is free: a folder with no database reads abandoned
    status = liveness.empty_run(traces / "tp2", runmeta.read(traces / "tp2"))[0]
    assert status == liveness.EmptyStatus.ABANDONED
