"""An eager step in the middle of a trace (every MLA kernel launched on its own, no graph) that
lost MLA kernels of one of its layers: which layer is missing is decided as for a graph replay
(tests/unit/test_short_replay_layers.py), by aligning its kernel sequence to a complete eager
step running the same kernels where every placement agrees, and said unknown where they
disagree (its layers left out of the per-layer figures), never numbered from 0 over what is
left. A drafter's passes (fewer layers, as often as the target's steps or more) are steps of
their own, and a step the window cut at the trace's edge is left out as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mlaprof.cli import main
from mlaprof.store import load
from tests import step_shapes as shapes
from tests.conftest import EACH_TEST
from tests.trace_io_helpers import import_and_report, write_kineto

WORKER_GROUP = EACH_TEST

UNKNOWN = "a layer is missing; which one is unknown"
SHORT = "1 eager step short of MLA layers"  # one short step: the noun agrees
LAYERS = shapes.LAYERS
MIDDLE = 2  # the short step: neither the first nor the last (not a window's edge)


def _eager(drop: str, steps: int = 6) -> shapes.Shape:
    """``steps`` eager steps of the 8-layer model (each closed by the rejection sampler); step
    MIDDLE lost layer 0's stage-1 kernel (``s1``: its stage 2 and the kernels around place it)
    or every kernel of layer 0 (``layer``: seven layer bodies fit eight places, so which one went
    is unknown)."""
    p = shapes.Process()
    for _ in range(steps):
        shapes.step_eager(p, rows=6, s=10, qlen=4, layers=LAYERS)
    s1 = next(k for k in p.kernels if k.name == shapes.GLUON_S1
              and sum(q.name == shapes.GLUON_S1 for q in p.kernels[: p.kernels.index(k)])
              == MIDDLE * LAYERS)  # fmt: skip
    i = p.kernels.index(s1)
    # layer 0 of an eager step: RMSNORM, ROPE, S1, S2, GEMM
    gone = [s1] if drop == "s1" else p.kernels[i - 2 : i + 3]
    if [k.name for k in gone][-1] != (shapes.GLUON_S1 if drop == "s1" else shapes.GEMM):
        raise AssertionError("not the layer's kernels")
    for k in gone:
        p.kernels.remove(k)
    return shapes.Shape(f"eager_{drop}", [p], {})


_import = import_and_report


def _step_layers(run: Path) -> dict[int, list[int]]:
    with load(run) as r:
        ly = r.layers
        return {int(s): sorted(int(v) for v in ly[ly["step"] == s]["layer"])
                for s in sorted(set(r.steps["step"]))}  # fmt: skip


def _counts(doc: dict) -> tuple[Any, ...]:
    c = doc["trace"]["checks"]["replays"]
    return tuple(c.get(k) for k in ("eager_steps_missing_layers", "eager_steps_layers_aligned",
                                    "eager_steps_layers_unknown", "layers_unknown"))  # fmt: skip


@pytest.mark.parametrize("fmt", ["csv", "rocpd-3.0.3", "json"])
def test_a_lost_first_stage1_is_layer_0_by_the_kernel_sequence(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Layer 0's stage-1 kernel lost: the step's other kernels place its 7 stage-1 kernels at
    layers 1-7 of the complete eager steps, so layer 0 is the one missing (it read layers 0-6,
    the last layer missing)."""
    run, doc = _import(shapes.write(_eager("s1"), fmt, tmp_path / "in"), tmp_path, capsys)
    layers = _step_layers(run)
    assert layers[MIDDLE] == list(range(1, LAYERS))
    assert all(v == list(range(LAYERS)) for s, v in layers.items() if s != MIDDLE)
    assert len(layers) == 6
    with load(run) as r:
        k = r.kernels
        s1 = k[(k["step"] == MIDDLE) & (k["name"] == shapes.GLUON_S1)].sort_values("start_ns")
        assert [int(v) for v in s1["layer"]] == list(range(1, LAYERS))
        assert set(r.steps["graph_mode"]) == {"eager"}
    assert _counts(doc) == (1, 1, 0, 0)
    (why,) = doc["trace"]["trust"]["reasons"]
    assert SHORT in why and "numbered by aligning their kernel sequence" in why
    assert UNKNOWN not in why


def test_a_lost_whole_layer_is_unknown_and_left_out_of_the_layer_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every kernel of layer 0 lost: 7 layer bodies fit the 8 places of a complete step in 8
    ways, so the step's layers are unknown: no layer row of that step, its stage-1 kernels
    without a layer, the step still a step, and every view says a layer is missing and which
    one is unknown."""
    run, doc = _import(shapes.write_csv(_eager("layer"), tmp_path / "in"), tmp_path, capsys)
    assert _step_layers(run)[MIDDLE] == []
    assert {row["layer"]: row["steps"] for row in doc["layers"]} == {i: 5 for i in range(LAYERS)}
    with load(run) as r:
        k = r.kernels
        s1 = k[(k["step"] == MIDDLE) & (k["name"] == shapes.GLUON_S1)]
        assert len(s1) == LAYERS - 1 and s1["layer"].isna().all()
        assert len(r.steps) == 6
    assert _counts(doc) == (1, 0, 1, LAYERS - 1)
    (why,) = doc["trace"]["trust"]["reasons"]
    assert SHORT in why and UNKNOWN in why and "left out of the per-layer figures" in why
    (f,) = [f for f in doc["findings"] if f["kind"] == "trust"]
    assert "1 eager step short of layers" in f["title"]
    assert main(["report", str(run)]) == 0
    assert UNKNOWN in capsys.readouterr().out


def test_no_complete_step_admits_it_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The short step also ran a kernel no other eager step runs (a MoE kernel before its last
    layer): no complete step's sequence admits it (a tracer never adds kernels), so there is
    nothing to place it in and its layers are unknown (never counted from 0)."""
    shape = _eager("s1")
    (p,) = shape.processes
    s1 = [k for k in p.kernels if k.name == shapes.GLUON_S1]
    last = s1[(MIDDLE + 1) * LAYERS - 2]  # the short step's last stage-1 kernel
    at = p.kernels.index(last)
    p.kernels.insert(at, shapes.Kernel(shapes.MOE, (24 * 256, 8, 1), shapes.W256,
                                       last.start - 900, last.start - 100, 10**6))  # fmt: skip
    run, doc = _import(shapes.write_csv(shape, tmp_path / "in"), tmp_path, capsys)
    assert _step_layers(run)[MIDDLE] == []
    with load(run) as r:
        k = r.kernels
        s1k = k[(k["step"] == MIDDLE) & (k["name"] == shapes.GLUON_S1)]
        assert len(s1k) == LAYERS - 1 and s1k["layer"].isna().all()
    assert _counts(doc) == (1, 0, 1, LAYERS - 1)
    assert UNKNOWN in " ".join(doc["trace"]["trust"]["reasons"])


def _kineto(p: shapes.Process) -> dict[str, Any]:
    """The process as a PyTorch-profiler (Kineto) trace: each kernel a ``cat: kernel`` event
    correlated to its ``cudaLaunchKernel`` (grid in blocks, times in us)."""
    ev: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0,
                                 "args": {"name": "python"}}]  # fmt: skip
    for c in p.calls:
        name = "cudaLaunchKernel" if c.name == "hipLaunchKernel" else "cudaStreamSynchronize"
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": p.pid, "tid": p.pid,
                   "ts": f"{c.start / 1000:.3f}", "dur": f"{(c.end - c.start) / 1000:.3f}",
                   "args": {"correlation": c.corr}})  # fmt: skip
    for k in p.kernels:
        grid = [g // b for g, b in zip(k.grid, k.block, strict=True)]
        ev.append({"ph": "X", "cat": "kernel", "name": k.name, "pid": 0, "tid": 7,
                   "ts": f"{k.start / 1000:.3f}", "dur": f"{(k.end - k.start) / 1000:.3f}",
                   "args": {"correlation": k.corr, "device": 0, "stream": 7, "grid": grid,
                            "block": list(k.block)}})  # fmt: skip
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X"}],
            "traceEvents": ev}  # fmt: skip


@pytest.mark.parametrize("drop", ["s1", "layer"])
def test_kineto_short_eager_step(
    drop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same in a PyTorch-profiler trace: layers 1-7 where layer 0's stage 1 went, unknown
    where its whole layer went."""
    (p,) = _eager(drop).processes
    path = write_kineto(tmp_path / "k.json", _kineto(p))
    run, doc = _import(path, tmp_path, capsys, "kineto")
    assert _step_layers(run)[MIDDLE] == (list(range(1, LAYERS)) if drop == "s1" else [])
    assert _counts(doc)[:3] == ((1, 1, 0) if drop == "s1" else (1, 0, 1))
    why = " ".join(doc["trace"]["trust"]["reasons"])
    assert SHORT in why and (UNKNOWN in why) == (drop == "layer")


def _drafter_pass(p: shapes.Process, layers: int) -> None:
    """A speculative drafter's eager pass of ``layers`` layers, closed by its argmax."""
    for _ in range(layers):
        p.eager(shapes.RMSNORM, (24, 1, 1), shapes.W256, 2_000)
        for name, blocks, wg, dur in shapes.attention(6, 10, 4):
            p.eager(name, blocks, wg, dur)
        p.eager(shapes.GEMM, (8, 4, 1), shapes.W256, 6_000)
    p.eager(shapes.ARGMAX, (6, 1, 1), shapes.W512, 3_000)


@pytest.mark.parametrize(
    ("targets", "passes", "layers"),
    [
        (4, 2, 5),  # two passes a step: seen more often than the target's steps
        (1, 1, 1),  # one step, one pass, each seen once: a pass of 1 of the 8 layers
    ],
)
def test_a_drafters_eager_passes_are_steps_of_their_own(
    targets: int, passes: int, layers: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Eager target steps of 8 layers, each followed by a drafter's eager passes of fewer
    layers: a pass whose kernels run as often as the target's steps or more, or that holds
    half the target's layers or fewer, is not a lossy target step: its layers stay numbered
    from 0, no step is short and the trace stays reliable."""
    p = shapes.Process()
    for _ in range(targets):
        shapes.step_eager(p, rows=6, s=10, qlen=4, layers=LAYERS)
        for _ in range(passes):
            _drafter_pass(p, layers)
    run, doc = _import(shapes.write_csv(shapes.Shape("drafter", [p], {}), tmp_path / "in"),
                       tmp_path, capsys)  # fmt: skip
    got = _step_layers(run)
    assert sorted(len(v) for v in got.values()) == sorted(
        [LAYERS] * targets + [layers] * (targets * passes)
    )
    assert all(v == list(range(len(v))) for v in got.values())
    assert _counts(doc) == (None, None, None, None)
    assert doc["trace"]["trust"]["verdict"] == "reliable"


def test_a_step_the_window_cut_is_left_out_not_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The collection window opened inside the first eager step (its first three layers before
    it): that step is a partial step at the edge, left out and said so, never a short step."""
    p = shapes.Process()
    for _ in range(6):
        shapes.step_eager(p, rows=6, s=10, qlen=4, layers=LAYERS)
    s1 = [k for k in p.kernels if k.name == shapes.GLUON_S1]
    t_open = s1[3].start - 1
    p.kernels = [k for k in p.kernels if k.start >= t_open]
    p.calls = [c for c in p.calls if c.start >= t_open]
    run, doc = _import(shapes.write_csv(shapes.Shape("cut", [p], {}), tmp_path / "in"), tmp_path,
                       capsys)  # fmt: skip
    assert list(_step_layers(run).values()) == [list(range(LAYERS))] * 5
    assert doc["trace"]["checks"]["replays"]["edge_partial_steps"] == 1
    assert _counts(doc) == (None, None, None, None)
    assert doc["trace"]["trust"]["verdict"] == "reliable"
