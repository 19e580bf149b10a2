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
def test_replay_runs_order_is_the_sorts(case: int) -> None:
    reps, replay, start = _cases()[case]
    assert np.array_equal(step_model.replay_runs(reps, replay, start)[0],
                          _sorted_rule(reps, replay, start))  # fmt: skip


def test_a_trace_in_order_is_not_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    reps, replay, start = _cases()[2]

    def no_sort(*_a: object) -> None:
        raise AssertionError("sorted a trace already in order")

    monkeypatch.setattr(step_model.np, "lexsort", no_sort)
    assert np.array_equal(step_model.replay_runs(reps, replay, start)[0], reps)


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
    # the old rule: no neighbour check passing (step_model.replay_runs and the runs found
    # with it), every order is the sort's
    monkeypatch.setattr(step_model, "_ordered_runs", lambda *a: None)
    old, _ = import_rocprof(src, tmp_path / "old", "t")
    a, b = _stored(new), _stored(old)
    assert len(a["kernels"]) and (trace == "shipped fixtures" or len(a["layers"]))
    for key in a:
        if isinstance(a[key], pd.DataFrame):
            pd.testing.assert_frame_equal(a[key], b[key], obj=key)
        else:
            assert a[key] == b[key], key


def _sequences_by_lookup(names: np.ndarray, bounds: np.ndarray) -> tuple[list, np.ndarray]:
    """The rule before: every replay's kernel sequence looked up by its bytes."""
    sig_of: dict[bytes, int] = {}
    sigs: list[np.ndarray] = []
    k_of = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        s = names[a:b]
        k = sig_of.setdefault(s.tobytes(), len(sigs))
        if k == len(sigs):
            sigs.append(s)
        k_of.append(k)
    return sigs, np.array(k_of, np.int64)


def _replays(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Replays as (names, bounds): graphs of a few lengths, two of one length, replayed in
    order, alternating (a drafter between target passes) or at random, some lossy."""
    graphs = [rng.integers(0, 6, size=k) for k in (7, 7, 3, 12, 1)]
    if kind == "one graph":
        picks = [0] * 40
    elif kind == "alternating":
        picks = [0, 2, 2, 3] * 15
    else:
        picks = rng.integers(0, len(graphs), size=80).tolist()
    seqs = []
    for p in picks:
        s = graphs[p]
        if kind in ("lossy", "random") and len(s) > 1 and rng.random() < 0.3:
            s = np.delete(s, rng.integers(0, len(s)))  # a dispatch lost
        seqs.append(s)
    bounds = np.r_[0, np.cumsum([len(s) for s in seqs])]
    return np.concatenate(seqs).astype(np.int32), bounds


@pytest.mark.parametrize("block", [1, 9, 1 << 18])
@pytest.mark.parametrize("kind", ["one graph", "alternating", "lossy", "random"])
def test_replay_sequences_are_the_lookups(
    kind: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repeats found by comparing each replay with the last one of its length (the kernels
    ``block`` at a time) give the same sequences, numbered alike, as looking every replay up."""
    monkeypatch.setattr(step_model, "REPEAT_BLOCK", block)
    for seed in range(5):
        names, bounds = _replays(kind, np.random.default_rng(seed))
        sigs, k_of = step_model.replay_sequences(names, bounds)
        want_sigs, want_k = _sequences_by_lookup(names, bounds)
        assert np.array_equal(k_of, want_k)
        assert [s.tolist() for s in sigs] == [s.tolist() for s in want_sigs]


def test_repeated_replays_are_not_looked_up() -> None:
    """A graph replayed in order: one lookup (its first replay), the rest are repeats."""
    names, bounds = _replays("one graph", np.random.default_rng(0))
    earlier = step_model._repeats(names, bounds)
    assert earlier.tolist() == [-1, *range(len(bounds) - 2)]
