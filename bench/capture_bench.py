"""GPU-suite sections about capture: FULL vs fallback memory and time per capture size, the
profiler's overhead on graph replay, per-layer accuracy, neutrality, and a Kineto trace."""

from __future__ import annotations

import gzip
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from benchkit import bench_scenario

from mlaprof.gpu.capture_runner import _timed_replay, scenario_splits, serve_step
from mlaprof.gpu.hostwork import HostQueue
from mlaprof.gpu.probe import probe_in_child
from mlaprof.gpu.session import CudaSession
from mlaprof.gpu.timing import layer_times
from mlaprof.probes.sync_checker import SyncChecker

if TYPE_CHECKING:
    from mlaprof.scenario import Scenario

UNITS = 132


_sc = bench_scenario  # the capture benchmarks' scenario (bench/benchkit.py)


def _session(sc: Scenario, backend: str) -> CudaSession:
    return CudaSession(sc, backend, lambda st, m, sh: scenario_splits(sc, m, UNITS), seed=1)


def _eager_us(sess: CudaSession, grp, reps: int) -> float:
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        z = torch.cuda.Event(enable_timing=True)
        a.record()
        sess.forward_layers(grp)
        z.record()
        z.synchronize()
        times.append(a.elapsed_time(z) * 1e3)
    return statistics.median(times)


def capture_sizes(log: Callable) -> list[dict]:
    rows = []
    for nreq in (1, 4, 16, 32):
        sc = _sc(kv_lens=[4096] * nreq)
        sess = _session(sc, "triton")
        grp = sess.load_step(0)
        sess.warmup(grp)
        g = sess.capture(grp)
        replay = statistics.median(_timed_replay(g.graph, torch) for _ in range(20)) / 1e3
        ws = sess.backend.workspace
        row = {
            "requests": nreq,
            "capture_size": grp.capture_size,
            "layers": sc.layers,
            "S": grp.splits,
            "full_capture_ms": g.memory.capture_ns / 1e6,
            "full_pool_bytes": g.memory.pool_bytes,
            "full_allocator_bytes": g.memory.allocator_bytes,
            "full_driver_bytes": g.memory.driver_bytes,
            "workspace_bytes": (ws.o.numel() + ws.lse.numel()) * 4 if ws.o is not None else 0,
            "full_replay_us": replay,
            "triton_eager_us": _eager_us(sess, grp, 10),
        }
        del g, sess
        torch.cuda.empty_cache()
        lf = _session(sc, "legacy-flat")
        lg = lf.load_step(0)
        lf.forward_layers(lg)
        torch.cuda.synchronize()
        row["legacy_flat_eager_us"] = _eager_us(lf, lg, 3)
        row["fallback_pool_bytes"] = 0  # nothing captured: attention runs between pieces
        row["cost_of_not_capturing"] = row["legacy_flat_eager_us"] / row["full_replay_us"]
        del lf
        torch.cuda.empty_cache()
        rows.append(row)
        log(f"capture {row}")
    return rows


def capture_failure(log: Callable) -> dict:
    """The child-process probe on legacy-flat: the failed capture names its offender."""
    sc = _sc(kv_lens=[1040, 2600, 6000], layers=4)
    out = {}
    for backend in ("legacy-flat", "triton"):
        splits = {4: scenario_splits(sc, _session_meta(sc), UNITS)}
        t = time.time()
        o = probe_in_child(sc.to_dict(), backend, splits)
        out[backend] = {
            "status": o.status,
            "op": o.op,
            "layer": o.layer,
            "location": o.location,
            "message": o.message,
            "probe_s": round(time.time() - t, 1),
        }
        log(f"probe {backend}: {out[backend]}")
    return out


def _session_meta(sc: Scenario):
    from mlaprof.metadata import step_metadata

    return step_metadata(sc, 0)


def overhead(out_dir: Path, log: Callable, layers: int = 61, rounds: int = 6) -> dict:
    """Profiled serving path vs plain replay of the same N-layer step, side by side."""
    from replay_overhead import setup

    sc, sess, writer, grp, cal, sched, ev = setup(out_dir / "overhead-runs", layers, False)
    cals = {grp.num_reqs: cal}
    plain, prof, prof4, plain_dev, prof_dev = [], [], [], [], []
    queue = HostQueue()
    for _ in range(rounds):
        for step in range(sc.steps):  # plain: refresh metadata, replay, sync
            t = time.perf_counter_ns()
            sess.load_step(step)
            ev[0].record()
            grp.serving.graph.replay()
            ev[1].record()
            ev[1].synchronize()
            plain.append(time.perf_counter_ns() - t)
            plain_dev.append(ev[0].elapsed_time(ev[1]) * 1e6)
        for every, sink in ((1, prof), (4, prof4)):  # profiled: the run_cuda serving path
            for step in range(sc.steps):
                t = time.perf_counter_ns()
                analyze = step % every == 0 or sched[step]
                serve_step(sc, "triton", writer, sess, cals, step, sched[step], ev, queue, analyze)
                sink.append(time.perf_counter_ns() - t)
                if every == 1:
                    prof_dev.append(ev[0].elapsed_time(ev[1]) * 1e6)
    queue.drain()
    writer.finish()
    # accuracy of sampled per-layer times: twin replays vs the serving replay
    sums, raw_sums, serv = [], [], []
    for _ in range(30):
        serv.append(_timed_replay(grp.serving.graph, torch))
        _timed_replay(grp.twin.graph, torch)
        e = grp.twin.events
        stamps = [0.0] + [e[0].elapsed_time(x) * 1e6 for x in e[1:]]
        sums.append(sum(layer_times(stamps, cal.event_ns)))
        raw_sums.append(stamps[-1])
    res = {
        "layers": layers,
        "steps_per_round": sc.steps,
        "rounds": rounds,
        "sample_rate": 1 / 16,
        "event_node_us": cal.event_ns / 1e3,
        "twin_overhead": cal.overhead,
        "plain_wall_us_median": statistics.median(plain) / 1e3,
        "profiled_wall_us_median": statistics.median(prof) / 1e3,
        "plain_wall_us_mean": statistics.fmean(plain) / 1e3,
        "profiled_wall_us_mean": statistics.fmean(prof) / 1e3,
        "overhead_ratio_median": statistics.median(prof) / statistics.median(plain),
        "overhead_ratio_mean": statistics.fmean(prof) / statistics.fmean(plain),
        "device_ratio_mean": statistics.fmean(prof_dev) / statistics.fmean(plain_dev),
        "analysis_every_4_ratio_median": statistics.median(prof4) / statistics.median(plain),
        "analysis_every_4_ratio_mean": statistics.fmean(prof4) / statistics.fmean(plain),
        "host_items_run": queue.ran,
        "serving_step_us": statistics.median(serv) / 1e3,
        "layer_sum_us": statistics.median(sums) / 1e3,
        "layer_sum_uncorrected_us": statistics.median(raw_sums) / 1e3,
        "layer_sum_over_step": statistics.median(sums) / statistics.median(serv),
        "uncorrected_over_step": statistics.median(raw_sums) / statistics.median(serv),
    }
    log(f"overhead {res}")
    return res


def neutrality(log: Callable) -> dict:
    """Probes inside the captured region: no sync (sync debug mode armed inside the capture), no
    allocation, bitwise-equal outputs with and without profiling."""
    sc = _sc(kv_lens=[1040, 2600, 6000], layers=8)
    sess = _session(sc, "triton")
    grp = sess.load_step(0)
    sess.warmup(grp)
    serving = sess.capture(grp)
    checker = SyncChecker(cuda_debug=True)

    def armed(i: int):  # noqa: ANN202
        return checker.region(layer=i, step=0)

    # which warnings the checker counts as sync-debug ones (it consumes them)
    import mlaprof.probes.sync_checker as sync_mod

    seen: list[str] = []
    real_catch = sync_mod.warnings.catch_warnings

    class _Spy(real_catch):
        def __enter__(self):  # noqa: ANN204
            self._spy_log = super().__enter__()
            return self._spy_log

        def __exit__(self, *exc):  # noqa: ANN002, ANN204
            seen.extend(str(w.message)[:300] for w in (self._spy_log or []))
            return super().__exit__(*exc)

    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sync_mod.warnings.catch_warnings = _Spy
        try:
            twin = sess.capture(grp, instrumented=True, layer_ctx=armed)
        finally:
            sync_mod.warnings.catch_warnings = real_catch

    def outs() -> list[torch.Tensor]:
        torch.cuda.synchronize()
        return [o.clone() for o in grp.out] + [x.clone() for x in grp.lse]

    serving.graph.replay()
    a = outs()
    twin.graph.replay()
    b = outs()
    sess.forward_layers(grp)
    c = outs()
    res = {
        "syncs_in_capture": len(checker.syncs()),
        "sync_debug_warnings": checker.cuda_debug_warnings,
        "checker_events": [e.to_row() for e in checker.events][:5],
        "warnings_in_capture": [str(w.message)[:200] for w in caught][:5],
        "checker_counted_warnings": seen[:5],
        "serving_pool_bytes": serving.memory.pool_bytes,
        "twin_pool_bytes": twin.memory.pool_bytes,
        "bitwise_serving_vs_twin": all(torch.equal(x, y) for x, y in zip(a, b, strict=True)),
        "bitwise_serving_vs_eager": all(torch.equal(x, y) for x, y in zip(a, c, strict=True)),
    }
    # the error mode too, armed inside the capture (its begin synchronizes): a sync would raise
    evs = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(sc.layers + 1)]

    def hook(i: int) -> None:
        if i == 0:
            torch.cuda.set_sync_debug_mode("error")
        evs[i].record()
        if i == sc.layers:
            torch.cuda.set_sync_debug_mode("default")

    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=torch.cuda.MemPool().id):
            sess.forward_layers(grp, hook=hook)
        res["capture_with_sync_debug_error"] = "ok"
    except Exception as e:
        res["capture_with_sync_debug_error"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    log(f"neutrality {res}")
    return res


def kineto(out_dir: Path, log: Callable) -> dict:
    """A small PyTorch-profiler trace of CUDA-graph replays of 4 layers of the verify kernel."""
    sc = _sc(kv_lens=[1040, 2600, 6000], layers=4)
    sess = _session(sc, "triton")
    grp = sess.load_step(0)
    sess.warmup(grp)
    g = sess.capture(grp)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            g.graph.replay()
        torch.cuda.synchronize()
    raw = out_dir / "kineto_graph_replay.json"
    prof.export_chrome_trace(str(raw))
    gz = out_dir / "kineto_graph_replay.json.gz"
    with open(raw, "rb") as f, gzip.open(gz, "wb") as z:
        z.write(f.read())
    raw.unlink()
    with gzip.open(gz) as f:
        doc = json.loads(f.read())
    kernels = [e for e in doc.get("traceEvents", []) if e.get("cat") == "kernel"]
    res = {
        "bytes": gz.stat().st_size,
        "kernel_events": len(kernels),
        "kernel_names": sorted({k["name"] for k in kernels}),
        "grids": sorted({str(k.get("args", {}).get("grid")) for k in kernels}),
        "shape": {
            "B": grp.num_reqs,
            "qlen": sc.qlen,
            "H": sc.heads,
            "S": grp.splits,
            "kv_lens": sc.kv_lens,
            "layers": sc.layers,
            "replays": 3,
        },
    }
    log(f"kineto {res}")
    return res


def capture_suite(out_dir: Path, log: Callable) -> dict:
    res: dict = {}
    for name, fn in (
        ("neutrality", lambda: neutrality(log)),
        ("failure", lambda: capture_failure(log)),
        ("sizes", lambda: capture_sizes(log)),
        ("overhead", lambda: overhead(out_dir, log)),
        ("kineto", lambda: kineto(out_dir, log)),
    ):
        try:
            res[name] = fn()
        except Exception as e:
            import traceback

            traceback.print_exc()
            res[name] = {"error": f"{type(e).__name__}: {e}"[:1000]}
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return res
