"""Kineto import: kernels of CUDA-graph replays grouped per replay (correlated to the graph
launch), layers numbered per replay, S from the grid, exact ns from fractional microseconds."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.importers.kineto import import_kineto
from mlaprof.store import load
from tests.trace_io_helpers import KINETO_REAL, db_rows, kernel_dicts, kineto_trace, write_kineto


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_synthetic_graph_replays(tmp_path: Path, suffix: str) -> None:
    trace, exp = kineto_trace(replays=3, layers=4, splits=8)
    p = write_kineto(tmp_path / f"trace{suffix}", trace)
    run, summary = import_kineto(p, tmp_path, "k")
    ks = kernel_dicts(run)
    assert len(ks) == len(exp)
    for k, e in zip(ks, exp, strict=True):
        for f in ("name", "start_ns", "end_ns", "replay", "layer", "splits", "correlation"):
            assert k[f] == e[f], (f, k, e)
        assert k["graph_id"] == e["graph_id"]
    # every kernel of a replay is correlated to that replay's cudaGraphLaunch
    launches = {r[4]: r for r in db_rows(run, "api") if r[1] == "cudaGraphLaunch"}
    assert len(launches) == 3
    for k in ks:
        if k["replay"] is not None:
            assert k["correlation"] in launches
    assert summary.replays == 3 and summary.mla_kernels == 12
    r = load(run)
    assert r.count("steps") == 3 and r.count("layers") == 12
    assert r.meta["grid_units"] == "blocks" and r.meta["device"] == "NVIDIA H200"
    layers = db_rows(run, "layers")
    # a layer spans stage 1 to the end of its stage 2
    first = [k for k in ks if k["replay"] == 0 and k["layer"] == 0]
    assert layers[0][2] == first[0]["start_ns"]
    assert layers[0][2] + layers[0][3] == first[1]["end_ns"]


def test_no_graph_ids_and_head_groups(tmp_path: Path) -> None:
    trace, exp = kineto_trace(replays=2, layers=2, splits=32, heads=128, graph_ids=False)
    p = write_kineto(tmp_path / "t.json", trace)
    run, _ = import_kineto(p, tmp_path, "k2")
    ks = kernel_dicts(run)
    assert all(k["graph_id"] is None for k in ks)
    s1 = [k for k in ks if k["name"] == "_fwd_grouped_kernel_stage1"]
    assert {k["grid_y"] for k in s1} == {8} and {k["splits"] for k in s1} == {32}


def test_exact_ns_beyond_float_precision(tmp_path: Path) -> None:
    # 2**53 ns region: a float round trip through microseconds would lose the last digits
    p = tmp_path / "t.json"
    p.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 9007199254740.993, '
        '"dur": 0.001, "args": {"correlation": 1, "grid": [1, 1, 1], "block": [1, 1, 1]}}]}'
    )
    run, _ = import_kineto(p, tmp_path, "exact")
    k = kernel_dicts(run)[0]
    assert (k["start_ns"], k["end_ns"]) == (9007199254740993, 9007199254740994)


def test_base_time(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_text(
        '{"baseTimeNanoseconds": 1700000000000000000, "traceEvents": [{"ph": "X", "cat": '
        '"kernel", "name": "k", "ts": 12.5, "dur": 1, "args": {}}]}'
    )
    run, _ = import_kineto(p, tmp_path, "base")
    assert kernel_dicts(run)[0]["start_ns"] == 1700000000000012500


def test_base_time_after_the_events_moves_every_table(tmp_path: Path) -> None:
    """``baseTimeNanoseconds`` after ``traceEvents`` (the real traces in tests/data write it
    before them, but a JSON object's members come in any order, and the streamed reader then
    learns it last): kernels, runtime calls and copies are all moved by it, none left relative."""
    p = tmp_path / "t.json"
    ev = (
        '{{"ph": "X", "cat": "{}", "name": "{}", "ts": {}, "dur": 2, "args": {{"correlation": 9}}}}'
    )
    events = [ev.format("kernel", "k", 12.5), ev.format("cuda_runtime", "cudaLaunchKernel", 10),
              ev.format("gpu_memcpy", "Memcpy HtoD", 20)]  # fmt: skip
    p.write_text(f'{{"traceEvents": [{", ".join(events)}], "baseTimeNanoseconds": 10000000}}')
    run, _ = import_kineto(p, tmp_path, "base-last")
    assert [(k["start_ns"], k["end_ns"]) for k in kernel_dicts(run)] == [(10_012_500, 10_014_500)]
    assert [r[5:7] for r in db_rows(run, "api")] == [(10_010_000, 10_012_000)]
    assert [r[7:9] for r in db_rows(run, "transfers")] == [(10_020_000, 10_022_000)]


@pytest.mark.parametrize(
    "text, msg",
    [
        ('{"foo": []}', "no 'traceEvents'"),
        ('{"traceEvents": {}}', "not a list"),
        ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}]}', "has no 'ts'"),
        ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, '
         '"args": {"grid": 5}}]}', "grid"),
        # a complete event without its duration is not a 0 ns kernel, step or layer
        ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1}]}', "has no 'dur'"),
        ('{"traceEvents": [{"ph": "X", "cat": "gpu_memcpy", "name": "m", "ts": 1}]}',
         "has no 'dur'"),
        ('{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": '
         '"execute_context_0(0)_generation_1(1)", "ts": 1}]}', "has no 'dur'"),
        ('{"traceEvents": []}', "no kernel or runtime events"),
        ('{"traceEvents": [', "not valid JSON"),
    ],
)  # fmt: skip
def test_bad_kineto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, msg: str
) -> None:
    p = tmp_path / "bad.json"
    p.write_text(text)
    traces = tmp_path / "t"
    rc = main(["import", "kineto", str(p), "--traces", str(traces)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("mlaprof: error:") and msg in err and err.count("\n") == 1
    assert not traces.exists() or not any(traces.iterdir())


def test_gz_garbage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": []}')[:15] + b"garbage")
    rc = main(["import", "kineto", str(p), "--traces", str(tmp_path / "t")])
    assert rc == 2
    assert "gzip" in capsys.readouterr().err


@pytest.mark.skipif(not KINETO_REAL.exists(), reason="real H200 trace not committed yet")
def test_real_h200_graph_replay_trace(tmp_path: Path) -> None:
    doc = json.loads(gzip.decompress(KINETO_REAL.read_bytes()))
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    launches = {
        e["args"]["correlation"]
        for e in events
        if "GraphLaunch" in str(e.get("name")) and "correlation" in e.get("args", {})
    }
    kernel_events = [e for e in events if e.get("cat") == "kernel"]
    run, summary = import_kineto(KINETO_REAL, tmp_path, "real")
    ks = kernel_dicts(run)
    assert len(ks) == len(kernel_events)
    assert launches, "the trace should hold graph launches"
    in_replay = [k for k in ks if k["replay"] is not None]
    assert in_replay and all(k["correlation"] in launches for k in in_replay)
    # replays of one graph launch the same kernels
    per_replay: dict[int, list[str]] = {}
    for k in in_replay:
        per_replay.setdefault(k["replay"], []).append(k["name"])
    assert len(per_replay) == len(launches) == summary.replays
    assert len({tuple(v) for v in per_replay.values()}) == 1
    # mlaprof's own split-KV kernel is recognised; S is the grid's z (blocks in Kineto)
    stage1 = [k for k in ks if k["name"] == "mla_verify_stage1"]
    assert stage1 and all(k["splits"] == k["grid_z"] for k in stage1)
    n_layers = len(stage1) // len(per_replay)
    for rep in per_replay:
        assert sorted(k["layer"] for k in stage1 if k["replay"] == rep) == list(range(n_layers))
    r = load(run)
    assert r.count("steps") == len(per_replay)
    assert r.count("layers") == len(stage1) == summary.mla_kernels
