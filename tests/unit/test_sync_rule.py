"""The sync-counting rule lives in the analysis once (mlaprof.analysis.syncs.fill_layer_syncs):
the store returns a layer's sync count as its producer wrote it (empty where the producer
watched only some steps), and the summary, the live fold and one step's layer rows count the
recorded sync rows of the watched steps by that one rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlaprof.analysis.run_summary import build_summary
from mlaprof.store import create_run, load


def _watched_run(tmp_path: Path) -> Path:
    """Two steps of two layers, layer syncs left empty; step 0 watched (two syncs on layer 1,
    one allocation on layer 0), step 1 not watched."""
    w = create_run(tmp_path, "w", {"kind": "scenario", "device": "cpu"})
    with w.transaction():
        for step in (0, 1):
            w.add("steps", step=step, t_start_ns=step * 1000, duration_ns=900, graph_mode="NONE")
            for layer in (0, 1):
                w.add("layers", step=step, layer=layer, t_start_ns=step * 1000 + layer,
                      duration_ns=400, syncs=None)  # fmt: skip
        for kind, layer in (("sync", 1), ("sync", 1), ("alloc", 0)):
            w.add("syncs", step=0, layer=layer, kind=kind, op="aten.nonzero",
                  location="m.py:3", function="f")  # fmt: skip
    w.finish()
    return tmp_path / "w"


def test_the_store_gives_rows_as_recorded_and_the_analysis_counts(tmp_path: Path) -> None:
    with load(_watched_run(tmp_path)) as run:
        assert run.layers["syncs"].isna().all()  # as the producer wrote them: no rule here
        assert run.read_tables(["layers"])["layers"]["syncs"].isna().all()
        s = build_summary(run)
        from mlaprof.analysis.evidence import collect

        lay = collect(run).tables["layers"].sort_values(["step", "layer"])
    # the evidence the analyzers and figures read: watched step 0 counted, step 1 left unknown
    assert [None if v != v else v for v in lay["syncs"]] == [0, 2, None, None]
    got = {(r.layer, r.syncs) for r in s.layers}
    # step 0 watched: layer 1 saw 2 syncs, layer 0 none (an allocation is no sync); the layer
    # table is per layer over the watched steps; step 1 was not watched and adds nothing
    assert got == {(0, 0.0), (1, 2.0)}
    assert s.sync_counts.total == 2 and s.sync_counts.checked


def test_the_live_fold_counts_by_the_same_rule(tmp_path: Path) -> None:
    from mlaprof.tui.follower import RunFollower

    f = RunFollower(_watched_run(tmp_path))
    f.poll()
    rows = {r.layer: r.syncs for r in f.step_layers(0, None)}
    assert rows == {0: 0, 1: 2}
    assert all(r.syncs is None for r in f.step_layers(1, None))  # not watched: not checked
    f.close()


def test_store_reader_holds_no_sync_rule() -> None:
    import mlaprof.store.reader as reader

    src = Path(reader.__file__).read_text(encoding="utf-8")
    assert "def fill_layer_syncs" not in src and "sync_kinds" not in src
    with pytest.raises(AttributeError):
        reader.fill_layer_syncs  # noqa: B018 - moved to mlaprof.analysis.syncs
