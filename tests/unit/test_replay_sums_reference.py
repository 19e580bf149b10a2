"""The replay time's per-rank sums (mlaprof.analysis.replay_sums.rank_sums) against a plain
kernel-by-kernel reference of the same rules, on small random ranks: kernels in and out of time
order, tied ends, NULL steps and replays, steps without layers, untimed layers, kernels past the
last layer's end, durations narrow (the histogram's dense count) and wide."""

from __future__ import annotations

import numpy as np
import pytest

from mlaprof.analysis import replay_sums

NULL = -1


def _reference(idx, start, end, k_step, k_replay, k_layer, layers):  # noqa: ANN001, ANN202
    t, d = layers["t_start_ns"].tolist(), layers["duration_ns"].tolist()
    timed = [(s, ly, a + b) for s, ly, a, b in
             zip(layers["step"].tolist(), layers["layer"].tolist(), t, d, strict=True)
             if a != NULL and b != NULL]  # fmt: skip
    ends = [e for _, _, e in timed]
    if len(set(ends)) != len(ends):
        return None
    with_layers = {s for s, _, _ in timed if s != NULL}
    sums: dict[tuple[int, int], list[float]] = {}
    hist: dict[tuple[int, int], list[int]] = {}
    replays = set()
    for i in range(len(end)):
        s, r = int(k_step[i]), int(k_replay[i])
        if r == NULL or s == NULL or s not in with_layers:
            continue
        e, dur, mla = int(end[i]), int(end[i]) - int(start[i]), int(k_layer[i]) != NULL
        after = [x for x in timed if x[2] >= e]
        win = NULL
        if after:
            ls, ll, _ = min(after, key=lambda x: x[2])
            win = ll if ls == s else NULL
        cell = sums.setdefault((s, win), [0.0, 0.0])
        cell[0] += dur
        cell[1] += dur if mla else 0
        h = hist.setdefault((int(idx[i]), dur), [0, 0])
        h[0] += 1
        h[1] |= mla
        replays.add(r)
    keys = sorted(sums)
    hk = sorted(hist)
    return (
        {"step": [k[0] for k in keys], "win": [k[1] for k in keys],
         "total": [sums[k][0] for k in keys], "att": [sums[k][1] for k in keys]},
        {"name_idx": [k[0] for k in hk], "d": [k[1] for k in hk],
         "c": [hist[k][0] for k in hk], "mla": [bool(hist[k][1]) for k in hk]},
        {"layers": len(timed), "replays": len(replays), "kernels": len(end)},
    )  # fmt: skip


def _rank(rng: np.random.Generator) -> tuple:
    """One random rank: a few steps of layers, kernels around and between them."""
    n_layers, n = int(rng.integers(0, 14)), int(rng.integers(0, 80))
    horizon = int(rng.integers(20, 400))
    ly = {
        "step": rng.integers(0, 4, n_layers),
        "layer": rng.integers(0, 5, n_layers),
        "t_start_ns": rng.integers(0, horizon, n_layers),
        "duration_ns": rng.integers(0, 30, n_layers),
    }
    for col in ("t_start_ns", "duration_ns", "step"):  # untimed layers, a layer without step
        ly[col][rng.random(n_layers) < 0.1] = NULL
    wide = rng.random() < 0.25  # durations too spread for the dense histogram
    dur = rng.integers(0, 12, n) * (10**9 if wide else 1)
    end = rng.integers(0, horizon + 40, n) + dur  # some past the last layer's end, some tied
    lend = ly["t_start_ns"] + ly["duration_ns"]
    if rng.random() < 0.3 and n_layers and n:  # kernels ending on a layer's end
        hit = rng.random(n) < 0.3
        end[hit] = rng.choice(lend, int(hit.sum()))
    if rng.random() < 0.6:  # a trace's time order (ends not decreasing), else any order
        end = np.sort(end)
    start = end - dur
    k_step = rng.integers(-1, 6, n)  # NULL, steps with layers, steps without
    k_replay = rng.integers(-1, 4, n)
    k_layer = np.where(rng.random(n) < 0.3, rng.integers(0, 5, n), NULL)
    idx = rng.integers(0, 4, n)
    narrow = rng.random() < 0.5  # the import's narrow columns
    i32 = (lambda v: v.astype(np.int32)) if narrow else (lambda v: v)  # noqa: E731
    return (i32(idx), start, end, i32(k_step), i32(k_replay), i32(k_layer), ly)


@pytest.mark.parametrize("seed", range(40))
def test_rank_sums_follow_the_plain_rules(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(25):
        args = _rank(rng)
        monkeypatch.setattr(replay_sums, "CHUNK", int(rng.choice([3, 16, 1 << 18])))
        got, want = replay_sums.rank_sums(*args), _reference(*args)
        if want is None:
            assert got is None
            continue
        assert got is not None
        steps, hist, key = got
        assert {k: v.tolist() for k, v in steps.items()} == want[0]
        assert steps["step"].dtype == steps["win"].dtype == np.int64
        assert steps["total"].dtype == steps["att"].dtype == np.float64
        assert {k: v.tolist() for k, v in hist.items()} == want[1]
        assert {k: key[k] for k in want[2]} == want[2]
