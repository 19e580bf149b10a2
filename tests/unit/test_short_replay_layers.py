"""A graph replay in the middle of a trace that lost MLA kernels of one of its layers: which layer
is missing is decided by aligning its kernel sequence to its graph's complete replays where every
placement agrees, and said unknown where they disagree (its layers left out of the per-layer
figures), never numbered from 0 over what is left (which would call the last layer missing and
shift every other one by one)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from mlaprof.cli import main
from mlaprof.importers import annotate
from mlaprof.store import load
from tests import step_shapes as shapes
from tests.conftest import EACH_TEST
from tests.trace_io_helpers import import_and_report, kineto_trace, write_kineto

WORKER_GROUP = EACH_TEST

UNKNOWN = "a layer is missing; which one is unknown"
LAYERS = shapes.LAYERS
MIDDLE = 2  # the short replay: neither the first nor the last (not a window's edge)


def _shape(drop: str) -> shapes.Shape:
    """Six FULL replays of the 8-layer graph; replay MIDDLE lost layer 0's stage-1 kernel
    (``s1``: the rest of that layer's kernels decide which layer it was) or all seven kernels of
    layer 0 (``layer``: seven layer bodies fit eight places, so which one went is unknown)."""
    p = shapes.Process()
    for _ in range(6):
        shapes.step_full(p, rows=8, s=8, qlen=4, layers=LAYERS)
    corr = sorted({k.corr for k in p.kernels if k.graph_exec})[MIDDLE]
    ks = [k for k in p.kernels if k.corr == corr]
    if drop == "s1":
        gone = [next(k for k in ks if k.name == shapes.GLUON_S1)]
    else:  # EMBED, then layer 0: RMSNORM, GEMM, ROPE, S1, S2, GEMM, MOE
        gone = ks[1:8]
        assert [k.name for k in gone][3] == shapes.GLUON_S1
    for k in gone:
        p.kernels.remove(k)
    return shapes.Shape(f"short_{drop}", [p], {})


_import = import_and_report


def _step_layers(run: Path, step: int) -> list[int]:
    with load(run) as r:
        ly = r.layers
        return sorted(int(v) for v in ly[ly["step"] == step]["layer"])


def _layer_steps(doc: dict) -> dict[int, int]:
    return {row["layer"]: row["steps"] for row in doc["layers"]}


@pytest.mark.parametrize("fmt", ["csv", "rocpd-3.0.3", "json"])
def test_a_lost_first_stage1_is_layer_0_by_the_kernel_sequence(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Layer 0's stage-1 kernel lost: the replay's other kernels place its 7 stage-1 kernels at
    layers 1-7 of the complete replays (one placement only), so layer 0 is the one missing."""
    run, doc = _import(shapes.write(_shape("s1"), fmt, tmp_path / "in"), tmp_path, capsys)
    assert _step_layers(run, MIDDLE) == list(range(1, LAYERS))
    assert _layer_steps(doc) == {0: 5, **{i: 6 for i in range(1, LAYERS)}}
    with load(run) as r:
        k = r.kernels
        s1 = k[(k["step"] == MIDDLE) & (k["name"] == shapes.GLUON_S1)].sort_values("start_ns")
        assert [int(v) for v in s1["layer"]] == list(range(1, LAYERS))
    c = doc["trace"]["checks"]["replays"]
    assert (c["steps_missing_layers"], c["steps_layers_aligned"], c["steps_layers_unknown"]) == (
        1, 1, 0)  # fmt: skip
    (why,) = doc["trace"]["trust"]["reasons"]
    assert "numbered by aligning their kernel sequence" in why and UNKNOWN not in why


def test_a_lost_whole_layer_is_unknown_and_left_out_of_the_layer_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every kernel of layer 0 lost: 7 layer bodies fit the 8 places of the complete replay
    in 8 ways, so the replay's layers are unknown: no layer row of that step, its stage-1
    kernels without a layer, and every view says a layer is missing and which one is unknown."""
    run, doc = _import(shapes.write_csv(_shape("layer"), tmp_path / "in"), tmp_path, capsys)
    assert _step_layers(run, MIDDLE) == []
    assert _layer_steps(doc) == {i: 5 for i in range(LAYERS)}
    with load(run) as r:
        k = r.kernels
        s1 = k[(k["step"] == MIDDLE) & (k["name"] == shapes.GLUON_S1)]
        assert len(s1) == LAYERS - 1 and s1["layer"].isna().all()
        assert len(r.steps) == 6  # the step stays a step (its time is known)
    c = doc["trace"]["checks"]["replays"]
    assert (c["steps_layers_aligned"], c["steps_layers_unknown"], c["layers_unknown"]) == (0, 1, 7)
    (why,) = doc["trace"]["trust"]["reasons"]
    assert UNKNOWN in why and "left out of the per-layer figures" in why
    assert main(["report", str(run)]) == 0
    assert UNKNOWN in capsys.readouterr().out


def test_no_complete_replay_to_place_it_in_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every other replay lost two GEMMs (more kernels lost than the short one's one): the
    replay with the most kernels is the short one, so the graph (its graph id: rocpd 3.0.3;
    by kernel sequence the short one would be a graph of its own) has no replay holding all its
    kernels and all its layers to place it in: its layers are unknown (never counted from 0)."""
    shape = _shape("s1")
    p = shape.processes[0]
    short = sorted({k.corr for k in p.kernels if k.graph_exec})[MIDDLE]
    for c in sorted({k.corr for k in p.kernels if k.graph_exec}):
        if c != short:
            gemms = [k for k in p.kernels if k.corr == c and k.name == shapes.GEMM]
            for k in gemms[:2]:
                p.kernels.remove(k)
    run, doc = _import(shapes.write(shape, "rocpd-3.0.3", tmp_path / "in"), tmp_path, capsys)
    with load(run) as r:
        k = r.kernels
        s1 = k[(k["correlation"] == short) & (k["name"] == shapes.GLUON_S1)]
        assert len(s1) == LAYERS - 1 and s1["layer"].isna().all() and s1["step"].notna().all()
    c = doc["trace"]["checks"]["replays"]
    assert (c["steps_layers_aligned"], c["steps_layers_unknown"], c["layers_unknown"]) == (0, 1, 7)
    assert UNKNOWN in " ".join(doc["trace"]["trust"]["reasons"])


@pytest.mark.parametrize("drop", ["s1", "layer"])
def test_kineto_short_replay(drop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same in a Kineto trace (graph ids, kernels stage 1 / stage 2 per layer after one
    RMSNorm): replay 1 of 4 lost layer 0's stage 1 (its stage 2 places it: layers 1-3), or both
    of layer 0's kernels (3 layers in 4 places: unknown)."""
    trace, _ = kineto_trace(replays=4, layers=4)
    ev = trace["traceEvents"]
    launches = [e["args"]["correlation"] for e in ev if e["name"] == "cudaGraphLaunch"]
    corr = launches[1]
    mine = [e for e in ev if e.get("cat") == "kernel" and e["args"]["correlation"] == corr]
    gone = mine[1:2] if drop == "s1" else mine[1:3]
    trace["traceEvents"] = [e for e in ev if not any(e is g for g in gone)]
    path = write_kineto(tmp_path / "k.json", trace)
    run, doc = _import(path, tmp_path, capsys, "kineto")
    want = [1, 2, 3] if drop == "s1" else []
    assert _step_layers(run, 1) == want
    why = " ".join(doc["trace"]["trust"]["reasons"])
    assert (UNKNOWN in why) == (drop == "layer")


# -- the alignment rule against every placement ----------------------------------------------------
def _every_placement(ref: list[int], short: list[int], s1: list[bool]) -> list[int | None]:
    """Per kernel of ``short``: the layer (stage-1 kernels of ``ref`` up to its place, less one)
    every placement of ``short`` in ``ref`` as a subsequence gives it, else None."""
    seen: list[set[int]] = [set() for _ in short]
    la = list(itertools.accumulate(int(b) for b in s1))
    for pos in itertools.combinations(range(len(ref)), len(short)):
        if all(ref[p] == c for p, c in zip(pos, short, strict=True)):
            for i, p in enumerate(pos):
                seen[i].add(la[p] - 1)
    return [next(iter(s)) if len(s) == 1 and min(s) >= 0 else None for s in seen]


@pytest.mark.parametrize("seed", range(40))
def test_alignment_is_what_every_placement_agrees_on(seed: int) -> None:
    """:func:`annotate.align_layers` on random replays of a repeating layer pattern with random
    kernels lost: a layer where every placement gives the same one, None elsewhere (and all
    None where the replay is no subsequence of its graph's)."""
    rng = np.random.default_rng(seed)
    body = [int(v) for v in rng.integers(1, 4, size=int(rng.integers(1, 4)))] + [9]
    ref = [0, *(body * int(rng.integers(2, 4))), 5]  # 9: the stage-1 kernel
    refs, shorts, which, want = [], [], [], []
    for g in range(2):
        r = ref if g == 0 else ref[::-1]
        refs.append((np.array(r, np.int64), np.array([c == 9 for c in r])))
        for _ in range(3):
            keep = rng.random(len(r)) > rng.uniform(0.05, 0.5)
            short = [c for c, k in zip(r, keep, strict=True) if k]
            if rng.random() < 0.15:
                short.insert(int(rng.integers(0, len(short) + 1)), 7)  # not in the graph
            shorts.append(short)
            which.append(g)
            want += _every_placement(r, short, [c == 9 for c in r])
    bounds = np.cumsum([0, *map(len, shorts)])
    got = annotate.align_layers(
        refs, np.array([c for s in shorts for c in s], np.int64), bounds, np.array(which), 10
    )
    assert [None if v < 0 else int(v) for v in got.tolist()] == want
