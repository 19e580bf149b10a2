"""The import's faster rules store what the rules they replaced stored, row for row: the graph
identity's replay order found in one pass over neighbours (a trace in order) instead of a sort
over every replay kernel. Each trace is imported twice, once under the old rule, and every
stored table and the trace checks compared; the rule itself is held to the sort on random
orders, ties and interleaved replays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlaprof.importers import step_model
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load
from tests.trace_io_helpers import DATA, replay_kernel_csv


def _sorted_rule(reps: np.ndarray, replay: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The rule before: every replay kernel sorted by (replay, start, index)."""
    return reps[np.lexsort((reps, start[reps], replay[reps]))]


def _cases() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(46)
    out = []
    for n, kind in [(0, "in order"), (1, "in order"), (500, "in order"), (500, "interleaved"),
                    (500, "shuffled"), (500, "ties"), (500, "some eager")]:  # fmt: skip
        replay = np.repeat(np.arange(max(1, n // 10)), 10)[:n].astype(np.int64)
        start = np.arange(n, dtype=np.int64) * 100
        if kind == "interleaved":  # two streams: replay r+1 starts before r ends
            start = (np.arange(n) % 10) * 1000 + replay * 700
        elif kind == "shuffled":
            start = start[rng.permutation(n)]
        elif kind == "ties":
            start = (start // 300) * 300
        if kind == "some eager":
            replay[rng.random(n) < 0.2] = -1
        out.append((np.flatnonzero(replay >= 0), replay, start))
    return out


@pytest.mark.parametrize("case", range(7))
def test_replay_order_is_the_sorts(case: int) -> None:
    reps, replay, start = _cases()[case]
    assert np.array_equal(step_model.replay_order(reps, replay, start),
                          _sorted_rule(reps, replay, start))  # fmt: skip


def test_a_trace_in_order_is_not_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    reps, replay, start = _cases()[2]

    def no_sort(*_a: object) -> None:
        raise AssertionError("sorted a trace already in order")

    monkeypatch.setattr(step_model.np, "lexsort", no_sort)
    assert np.array_equal(step_model.replay_order(reps, replay, start), reps)


def _stored(run_dir) -> dict[str, object]:  # noqa: ANN001
    with load(run_dir) as run:
        out: dict[str, object] = {t: run.table(t) for t in ("kernels", "layers", "steps")}
        out["checks"] = run.trace_checks()
        out["patterns"] = run.meta.get("kernel_patterns")
    return out


def _shuffled_csv(src, dst) -> None:  # noqa: ANN001
    """The same kernels, the file's rows in another order (replays interleave)."""
    head, *rows = src.read_text().splitlines()
    order = np.random.default_rng(7).permutation(len(rows))
    dst.write_text("\n".join([head, *(rows[i] for i in order)]) + "\n")


@pytest.mark.parametrize("trace", ["in order", "shuffled", "shipped fixtures"])
def test_stored_tables_equal_the_old_rules(trace: str, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    if trace == "shipped fixtures":
        src = DATA / "rocprof"
    else:
        src = tmp_path / "kernel_trace.csv"
        replay_kernel_csv(src, replays=30, layers=6, splits=8)
        if trace == "shuffled":
            _shuffled_csv(src, tmp_path / "k2.csv")
            src = tmp_path / "k2.csv"
    new, _ = import_rocprof(src, tmp_path / "new", "t")
    monkeypatch.setattr(step_model, "replay_order", _sorted_rule)
    old, _ = import_rocprof(src, tmp_path / "old", "t")
    a, b = _stored(new), _stored(old)
    assert len(a["kernels"]) and (trace == "shipped fixtures" or len(a["layers"]))
    for key in a:
        if isinstance(a[key], pd.DataFrame):
            pd.testing.assert_frame_equal(a[key], b[key], obj=key)
        else:
            assert a[key] == b[key], key
