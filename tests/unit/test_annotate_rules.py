"""The annotation's cheaper rules decide what the rules they replaced decided: replay runs found
with the order (neighbours compared a block at a time) instead of from the ordered kernels, layer
numbers from one running count, kernel counts per replay from the runs instead of a bincount,
closers counted per layer group instead of looked up, a graph's layers per replay looked up in
one pass. Each is held to the old rule (tiny references below) on interleaved replays, unordered
and tied starts, NULLs (kernels in no replay) and cut replays."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mlaprof.importers import annotate, step_model
from mlaprof.importers.annotate import NULL


def _old_order(reps: np.ndarray, replay: np.ndarray, start: np.ndarray) -> np.ndarray:
    return reps[np.lexsort((reps, start[reps], replay[reps]))]


def _old_first(r_o: np.ndarray) -> np.ndarray:
    return np.r_[0, np.flatnonzero(r_o[1:] != r_o[:-1]) + 1] if len(r_o) else np.zeros(0, int)


def _traces(seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(kind, replay, start): replays of 10 kernels in order, interleaved (two streams),
    shuffled, with tied starts, with eager kernels (-1), and with every kernel in a replay but
    one replay out of place (the unordered block is the last one)."""
    rng = np.random.default_rng(seed)
    out = []
    n = 537
    base = np.repeat(np.arange(n // 10 + 1), 10)[:n].astype(np.int64)
    t = np.arange(n, dtype=np.int64) * 100
    out.append(("in order", base, t))
    out.append(("interleaved", base, (np.arange(n) % 10) * 1000 + base * 700))
    out.append(("shuffled", base, t[rng.permutation(n)]))
    out.append(("ties", base, (t // 300) * 300))
    eager = base.copy()
    eager[rng.random(n) < 0.2] = NULL
    out.append(("some eager", eager, t))
    late = base.copy()
    late[-3:] = 0  # the last kernels belong to the first replay: out of order at the end
    out.append(("late", late, t))
    out.append(("one kernel", base[:1], t[:1]))
    out.append(("empty", base[:0], t[:0]))
    return out


@pytest.mark.parametrize("block", [1, 3, 64, 1 << 16])
@pytest.mark.parametrize("seed", range(3))
def test_replay_runs_are_the_sort_and_its_runs(block: int, seed: int, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(step_model, "ORDER_BLOCK", block)
    for kind, replay, start in _traces(seed):
        reps = np.flatnonzero(replay >= 0)
        order, r_o, first = step_model.replay_runs(reps, replay, start)
        want = _old_order(reps, replay, start)
        assert np.array_equal(order, want), kind
        assert np.array_equal(r_o, replay[want]), kind
        assert np.array_equal(first, _old_first(replay[want])), kind
        runs = step_model.ascending_runs(replay)
        if (np.diff(replay) >= 0).all():
            assert np.array_equal(runs, _old_first(replay)), kind
        else:
            assert runs is None, kind


def _old_layers(group: np.ndarray, start: np.ndarray, role: np.ndarray) -> np.ndarray:
    """The rule before: a running count of stage-1 kernels, less its value before the group."""
    layer = np.full(len(group), NULL, np.int32)
    sel = np.flatnonzero(group >= 0)
    if len(sel):
        order = _old_order(sel, group, start)
        mains = (role[order] == 1).astype(np.int32)
        cs = np.cumsum(mains, dtype=np.int32)
        first = _old_first(group[order])
        cs -= np.repeat(cs[first] - mains[first], np.diff(np.r_[first, len(order)]))
        cs -= 1
        layer[order] = np.where(cs >= 0, cs, NULL)
    return layer


@pytest.mark.parametrize("ordered", [True, False])
def test_layers_in_groups_are_the_old_running_count(ordered: bool) -> None:
    rng = np.random.default_rng(46)
    for _ in range(300):
        n = int(rng.integers(0, 80))
        group = rng.integers(-1, 7, n).astype(np.int64)  # -1: in no group
        start = rng.integers(0, 30, n).astype(np.int64)  # ties
        if ordered:
            group, start = np.sort(group), np.sort(start)
        role = rng.integers(0, 4, n).astype(np.int8)  # stage 2 / reduce before stage 1 too
        got = annotate._layers_in_groups(group, start, role)
        assert np.array_equal(got, _old_layers(group, start, role))
        assert got.dtype == np.int32


@pytest.mark.parametrize("short", [False, True])
@pytest.mark.parametrize("ordered", [True, False])
def test_groups_count_the_flagged_rows_as_the_lookup_did(ordered: bool, short: bool) -> None:
    """Per key: min start, max end, max splits and flagged rows, by reduceat or (groups of at
    most SHORT_GROUP rows: a layer's kernels) by whole-array steps over each group's j-th row."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        keys = rng.integers(0, 9, n).astype(np.int64) * 13 + 2
        if short:  # groups of 1 to SHORT_GROUP rows
            k = int(rng.integers(1, 30))
            keys = np.repeat(np.arange(k) * 7, rng.integers(1, annotate.SHORT_GROUP + 1, k))
            keys = keys if ordered else keys[rng.permutation(len(keys))]
            n = len(keys)
        if ordered:
            keys = np.sort(keys)
        start = rng.integers(0, 1000, n).astype(np.int64)
        end = start + rng.integers(0, 50, n)
        splits = rng.integers(-1, 5, n).astype(np.int32)
        flag = rng.random(n) < 0.4
        key, t0, t1, sp, flagged = annotate._groups(keys, start, end, splits, flag)
        uniq = np.unique(keys)
        assert np.array_equal(key, uniq)
        want = np.bincount(np.searchsorted(key, keys[flag]), minlength=len(key))
        assert np.array_equal(flagged, want) and flagged.dtype == np.int64
        for i, k in enumerate(uniq.tolist()):
            sel = keys == k
            assert (t0[i], t1[i], sp[i]) == (start[sel].min(), end[sel].max(), splits[sel].max())


def _kc(replay: np.ndarray, start: np.ndarray, names: np.ndarray) -> SimpleNamespace:
    return SimpleNamespace(
        ints={"start_ns": start}, name_idx=names, masks={}, col=lambda c: (None, None)
    )


@pytest.mark.parametrize("seed", range(3))
def test_replay_counts_from_runs_are_the_bincounts(seed: int) -> None:
    """Kernels and stage-1 kernels per replay (kept for the checks) as bincounts over every
    replay kernel counted them; a lossy replay (kernels dropped) keeps its shorter count."""
    rng = np.random.default_rng(seed)
    for kind, replay, start in _traces(seed):
        if not len(replay):
            continue
        replay = replay.copy()
        if kind == "in order":  # a lossy replay: a dispatch dropped
            replay[rng.integers(0, len(replay))] = NULL
        role = rng.integers(0, 4, len(replay)).astype(np.int8)
        names = (role * 3 + rng.integers(0, 2, len(replay))).astype(np.int32)
        nrep = int(replay.max()) + 1 if (replay >= 0).any() else 0
        g = step_model.graph_identity(_kc(replay, start, names), replay, role, nrep)
        reps = replay[replay >= 0]
        assert np.array_equal(g.count, np.bincount(reps, minlength=nrep)), kind
        s1 = replay[(replay >= 0) & (role == 1)]
        assert np.array_equal(g.s1, np.bincount(s1, minlength=nrep)), kind


def test_graph_layers_per_replay_are_the_lookups() -> None:
    canon = np.array([2, NULL, 0, 5, 2, 7], np.int64)  # 7: a graph without layers recorded
    for layers in ({0: 3, 2: 61, 5: 0}, {}, {9: 4}):
        zeros = np.zeros(len(canon), np.int64)
        graphs = step_model.Graphs(canon, zeros, layers, {}, "x", zeros, zeros)
        want = [layers.get(int(g), 0) for g in canon]
        assert annotate._graph_layers(graphs).tolist() == want


@pytest.mark.parametrize("block", [1, 3, 1 << 16])
def test_replays_in_order_are_not_sorted(block: int, monkeypatch) -> None:  # noqa: ANN001
    """Replays listed together, each in start order, are found in order by the neighbours alone,
    whatever the starts do across replays (two streams: a replay starting before the last one
    ended); a trace that needs the sort gets it."""
    monkeypatch.setattr(step_model, "ORDER_BLOCK", block)
    sorts = []
    real = np.lexsort

    def counted(*a: object, **k: object) -> np.ndarray:
        sorts.append(1)
        return real(*a, **k)

    monkeypatch.setattr(step_model.np, "lexsort", counted)
    for kind, replay, start in _traces(0):
        reps = np.flatnonzero(replay >= 0)
        in_order = np.array_equal(_old_order(reps, replay, start), reps)
        sorts.clear()
        step_model.replay_runs(reps, replay, start)
        assert bool(sorts) == (not in_order and len(reps) > 1), kind


def _annotated(path: Path) -> tuple[dict, dict, dict, dict]:
    from mlaprof.importers import rocprof_csv
    from mlaprof.importers.common import ImportSummary
    from mlaprof.kernel_table import KernelMatcher

    kc = rocprof_csv.read_kernel_file(path)
    summary = ImportSummary(source="test")
    derived, steps, layers = annotate.annotate(
        kc, KernelMatcher(), summary, True, host=step_model.HostTrace()
    )
    return derived, steps, layers, summary.checks


def _shuffled_replays(tmp: Path) -> Path:
    """Graph replays whose rows are listed out of order (replays interleave in the file)."""
    from tests.trace_io_helpers import replay_kernel_csv

    src = tmp / "in_order.csv"
    replay_kernel_csv(src, replays=12, layers=5, splits=4)
    head, *rows = src.read_text().splitlines()
    order = np.random.default_rng(3).permutation(len(rows))
    dst = tmp / "shuffled.csv"
    dst.write_text("\n".join([head, *(rows[i] for i in order)]) + "\n")
    return dst


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)  # type: ignore[union-attr]
    return a == b


@pytest.mark.parametrize(
    "trace",
    ["asm_mtp_drafter", "persistent_eager_steps", "eager_syncs", "gluon_v0119_fix_dropped",
     "two_ranks_one_lossy", "in order", "shuffled"],
)  # fmt: skip
def test_annotation_is_the_old_rules(trace: str, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The whole annotation (derived columns, steps, layers, trace checks) under the new rules
    and under the old ones: every neighbour check failing (each sort taken, each run found by
    the sort's breaks, layer keys looked up), path codes from every step's backend string,
    head counts by np.unique, grids divided on every axis at every stage-1/2 kernel."""
    from tests.trace_io_helpers import DATA, replay_kernel_csv

    if trace == "in order":
        path = tmp_path / "k.csv"
        replay_kernel_csv(path, replays=12, layers=5, splits=4)
    elif trace == "shuffled":
        path = _shuffled_replays(tmp_path)
    else:
        path = sorted((DATA / "aiter" / trace).glob("*_kernel_trace.csv"))[0]
    new = _annotated(path)
    monkeypatch.setattr(step_model, "_ordered_runs", lambda *a: None)
    monkeypatch.setattr(annotate, "_runs_of_keys", lambda *a: None)
    real_grids = annotate._Grids
    monkeypatch.setattr(annotate, "_stage2_checks", lambda *a: _old_stage2_checks(*a[:5]))
    monkeypatch.setattr(annotate, "_value_counts", lambda v: np.unique(v, return_counts=True))
    monkeypatch.setattr(annotate, "_Grids", lambda kc, giw, rows, need: real_grids(kc, giw, rows))
    old = _annotated(path)
    assert len(new[0]["step"]) and (new[2] or trace.startswith("persistent"))
    for part, a, b in zip(("derived", "steps", "layers", "checks"), new, old, strict=True):
        assert _same(a, b), part


def _old_stage2_checks(summary, steps, lstep, splits, closers) -> None:  # noqa: ANN001
    """The rule before: every step's backend string split, every layer's step looked up."""
    path = [str(b).split(" ", 1)[0] for b in steps["backend"]]
    names = list(dict.fromkeys(path))  # paths in order of their first step
    code = np.array([names.index(p) for p in path] or [0], np.int64)
    lcode = code[np.searchsorted(steps["step"], lstep)]
    last = np.zeros(len(lcode), bool)
    last[-1:] = True
    out = {}
    for c in np.flatnonzero(np.bincount(lcode, minlength=len(names))):
        sel = lcode == c
        sp, cl, lt = splits[sel], closers[sel], last[sel]
        out[names[c]] = {
            "layers": int(sel.sum()),
            "s1_without_stage2": int(((sp == 1) & (cl == 0)).sum()),
            "s1_with_stage2": int(((sp == 1) & (cl > 0)).sum()),
            "split_without_stage2": int(((sp > 1) & (cl == 0) & ~lt).sum()),
            "split_with_stage2": int(((sp > 1) & (cl > 0)).sum()),
            "s_unknown_without_stage2": int(((sp <= 0) & (cl == 0)).sum()),
        }
    summary.checks["stage2"] = out


def test_stage2_checks_from_distinct_backends_are_the_per_step_ones() -> None:
    """Paths told once per distinct backend (in order of their first step) give the checks
    every step's backend string gave: paths interleaved over steps, a step without a path,
    layers looked up by their step's run; one path alone too."""
    from mlaprof.importers.common import ImportSummary

    rng = np.random.default_rng(5)
    backends = np.array(["", "aiter-asm a", "vllm-triton b", "aiter-asm c"], dtype=object)
    for picks in ([2, 1, 3, 2, 0, 1, 1], [1, 3, 3, 1], [2]):
        step_names = np.array(picks, np.int32)
        steps = {"step": np.arange(len(picks)), "backend": backends[step_names]}
        lstep = np.sort(rng.integers(0, len(picks), 40))
        splits = rng.integers(-1, 4, 40).astype(np.int32)
        closers = rng.integers(0, 3, 40).astype(np.int64)
        got, want = ImportSummary(source="t"), ImportSummary(source="t")
        annotate._stage2_checks(got, steps, lstep, splits, closers, step_names, backends)
        _old_stage2_checks(want, steps, lstep, splits, closers)
        assert got.checks["stage2"] == want.checks["stage2"]
        assert list(got.checks["stage2"]) == list(want.checks["stage2"])


def test_steps_as_runs_are_the_groups_of_the_kept_rows() -> None:
    """Steps found as runs among every kernel's step numbers (kernels outside any step, -1,
    between and around them) are the groups of the kernels in a step; where a step's kernels
    are split by another step's, the runs say so (None) and the caller groups them."""
    rng = np.random.default_rng(11)
    seen = {True: 0, False: 0}
    for _ in range(400):
        n = int(rng.integers(1, 40))
        keys = np.sort(rng.integers(0, 6, n)).astype(np.int32)
        keys[rng.random(n) < 0.3] = NULL  # outside any step: anywhere, the edges too
        if rng.random() < 0.3:  # a step's kernels after the next step's
            keys = keys[rng.permutation(n)]
        start = rng.integers(0, 1000, n).astype(np.int64)
        end = start + rng.integers(0, 50, n)
        got = annotate._runs_of_keys(keys, start, end)
        kept = keys >= 0
        if not kept.any():
            assert got is None
            continue
        want = annotate._groups(keys[kept], start[kept], end[kept])
        ordered = bool((np.diff(keys[kept]) >= 0).all())
        heads = np.r_[True, keys[1:] != keys[:-1]] & kept  # a run of one step begins
        one_run_each = int(heads.sum()) == len(np.unique(keys[kept]))
        seen[got is not None] += 1
        assert (got is not None) == (ordered and one_run_each)
        if got is None:
            continue
        for a, b in zip(got[:3], want[:3], strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    assert seen[True] and seen[False]


@pytest.mark.parametrize("old", [False, True])
def test_trim_edges_drops_the_cut_first_and_last_replays(old: bool, monkeypatch) -> None:  # noqa: ANN001
    """The window's first and last replays, each with fewer kernels than its graph's complete
    replays, are left out (group and layer NULL), whether the groups are found as runs or
    counted; a replay nested inside the first one's span is not the first (the first kernel's
    start orders them)."""
    if old:
        monkeypatch.setattr(step_model, "_ordered_runs", lambda *a: None)
    # replays 0 (spans 0-100, cut), 1 (10-20, inside it, complete), 2 (complete), 3 (cut)
    group = np.array([0, 0, 1, 1, 2, 2, 3, 3], np.int32)
    start = np.array([0, 100, 10, 20, 200, 210, 300, 310], np.int64)
    role = np.ones(8, np.int8)
    layer = np.array([0, 1, 0, 1, 0, 1, 0, 1], np.int32)
    count = np.array([2, 3, 3, 2], np.int64)  # kernels seen per replay: 0 and 3 lost one
    graphs = step_model.Graphs(np.zeros(4, np.int64), np.full(4, 3, np.int64), {0: 2}, {0: 4},
                               "kernel sequences", count, np.full(4, 2, np.int64))  # fmt: skip
    kc = SimpleNamespace(ints={"start_ns": start}, n=8)
    plan = step_model.Plan(step_model.SOURCE_GRAPHS)
    out = annotate._trim_edges(
        kc, group, layer, role, 4, plan, graphs, np.zeros(8, int), np.flatnonzero(role == 1)
    )
    assert out == {"first": 1, "last": 1}
    assert group.tolist() == [NULL, NULL, 1, 1, 2, 2, NULL, NULL]
    assert layer.tolist() == [NULL, NULL, 0, 1, 0, 1, NULL, NULL]


def test_host_rows_as_columns_are_the_per_column_filter() -> None:
    """The API trace's rows as int64 columns, rows with a NULL field left out, in one pass: what
    filtering the rows again for every column gave."""

    def old(rows: list[tuple], k: int) -> list[np.ndarray]:
        cols = [[r[j] for r in rows if all(v is not None for v in r)] for j in range(k)]
        return [np.array(c, np.int64) if c else np.zeros(0, np.int64) for c in cols]

    cases = [([], 1), ([], 3), ([(1,), (None,), (3,)], 1), ([(None, None)], 2),
             ([(1, 2), (None, 5), (3, None), (0, 0), (2**40, -1)], 2)]  # fmt: skip
    for rows, k in cases:
        got, want = step_model._ints(rows, k), old(rows, k)
        assert len(got) == len(want) == k
        assert all(
            a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want, strict=True)
        )
