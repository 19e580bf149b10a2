"""Dashboard refresh cost on a run with about one million events (target: median <= 50 ms).

Writes a run shaped like a long legacy-flat profile (61 layers, a sync record per layer-step),
then measures, on this machine (CPU only; the dashboard never touches a GPU):

- catch-up: the first poll over the whole run (aggregated in SQL over rowid ranges);
- live refresh: a writer appends one step (its layers, syncs, splits, padding), then the
  dashboard polls and redraws. Timed twice: follower poll + view build (the data path), and the
  whole dashboard cycle in a headless Textual app (poll + refresh_views + the app settling);
- step selection: the layer table for one step (rowid-range query);
- the naive alternative: reloading the layers table as a DataFrame and grouping it.

Usage: python bench/tui_bench.py [--steps 8000] [--layers 61] [--refreshes 40]
Results: bench/results/tui_bench.json (and the section in docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlaprof.store import RunWriter, create_run, load  # noqa: E402
from mlaprof.synthetic.dashboard import meta, write_captures  # noqa: E402
from mlaprof.tui.follower import RunFollower  # noqa: E402

SIZES = (1, 2, 4, 8, 16, 32)


def step_rows(step: int, layers: int) -> dict[str, list[dict]]:
    size = SIZES[step % len(SIZES)]
    base = 2_000_000 + 13_000 * ((step * 7) % 17)
    return {
        "steps": [
            dict(
                step=step,
                t_start_ns=step * 5_000_000,
                duration_ns=base,
                num_reqs=size,
                num_real_reqs=max(1, size - 1),
                qlen=4,
                real_tokens=4 * max(1, size - 1),
                padded_tokens=4 * size,
                graph_mode="FULL",
                backend="legacy-flat",
                timing="cpu-wall",
            )
        ],
        "layers": [
            dict(
                step=step,
                layer=i,
                t_start_ns=step * 5_000_000 + i * 30_000,
                duration_ns=base // layers,
                syncs=1,
                splits_used=1,
                splits_deserved=16,
            )
            for i in range(layers)
        ],
        "syncs": [
            dict(
                step=step,
                layer=i,
                kind="sync",
                op="aten._local_scalar_dense",
                location="mla/legacy.py:100",
                function="build_kv_indices",
                detail="host read",
            )
            for i in range(layers)
        ],
        "splits": [
            dict(
                step=step,
                capture_size=size,
                policy=p,
                used=1,
                deserved=16,
                frozen=1,
                occupancy_used=0.12,
                occupancy_deserved=1.0,
                target="H200",
            )
            for p in ("aiter-gluon", "vllm-triton")
        ],
        "padding": [
            dict(
                step=step,
                capture_size=size,
                real_rows=max(1, size - 1),
                padding_rows=size - max(1, size - 1),
                real_tokens=4 * max(1, size - 1),
                padding_tokens=4 * (size - max(1, size - 1)),
                kv_bytes_real=1 << 20,
                kv_bytes_padding=1 << 18,
            )
        ],
    }


def write_steps(w: RunWriter, first: int, n: int, layers: int) -> int:
    """Append ``n`` steps in one transaction; returns rows written."""
    batch: dict[str, list[dict]] = {}
    for s in range(first, first + n):
        for table, rows in step_rows(s, layers).items():
            batch.setdefault(table, []).extend(rows)
    total = 0
    with w.transaction():
        for table, rows in batch.items():
            sql = w._insert_sql(table)
            w._con.executemany(sql, [w._values(table, r) for r in rows])
            total += len(rows)
    return total


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


async def app_cycle(
    path: Path, w: RunWriter, first: int, layers: int, n: int, size: tuple[int, int]
) -> dict[str, list[float]]:
    """Dashboard cycles in a headless app: append a step, then time the refresh (poll + view +
    widget updates, what the dashboard does per refresh) and the paint that follows (Textual
    composing the screen, awaited with ``pilot.pause()``; ``idle`` is that wait with nothing new).
    """
    from mlaprof.tui.app import MlaprofApp
    from mlaprof.tui.screens.dashboard import DashboardScreen

    app = MlaprofApp(path, interval=3600)  # the worker catches up once; the bench drives refreshes
    out: dict[str, list[float]] = {
        k: [] for k in ("refresh", "paint", "idle", "refresh_cpu", "paint_cpu")
    }
    async with app.run_test(size=size) as pilot:
        for _ in range(2400):
            d = app.screen
            # steady state: caught up, and the first findings pass (a thread) is over
            if isinstance(d, DashboardScreen) and d.follower.analyses and not d.follower.behind:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        for i in range(n):
            write_steps(w, first + i, 1, layers)
            c0, t0 = time.process_time(), time.perf_counter()
            d.follower.poll()
            d.refresh_views()
            c1, t1 = time.process_time(), time.perf_counter()
            await pilot.pause()
            c2, t2 = time.process_time(), time.perf_counter()
            await pilot.pause()
            out["refresh"].append(t1 - t0)
            out["paint"].append(t2 - t1)
            out["idle"].append(time.perf_counter() - t2)
            # CPU time of this process: what the work costs without the machine's contention
            out["refresh_cpu"].append(c1 - c0)
            out["paint_cpu"].append(c2 - c1)
        d.stop.set()
        out["analysis"] = d.follower.analyses[:1]
    return out


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(xs) * 1e3, 2),
        "p90": round(pct(xs, 0.9) * 1e3, 2),
        "n": len(xs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--refreshes", type=int, default=40)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/tui_bench.json")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tui-bench-"))
    w = create_run(tmp, "million", meta("million", True))
    write_captures(w, True)
    t0 = time.perf_counter()
    events = 0
    for first in range(0, args.steps, 500):
        events += write_steps(w, first, min(500, args.steps - first), args.layers)
    write_s = time.perf_counter() - t0
    path = tmp / "million"
    print(f"wrote {events} events in {write_s:.1f} s", flush=True)

    f = RunFollower(path)
    t0 = time.perf_counter()
    slices = []
    f.poll()
    slices.append(time.perf_counter() - t0)
    while f.behind:
        t1 = time.perf_counter()
        f.poll()
        slices.append(time.perf_counter() - t1)
    catch_up = time.perf_counter() - t0
    v = f.view()
    if v.steps != args.steps:
        raise SystemExit(f"follower saw {v.steps} steps, wrote {args.steps}")

    # live refresh, data path: append one step, poll + build the view
    data: list[float] = []
    data_cpu: list[float] = []
    step = args.steps
    for _ in range(args.refreshes):
        write_steps(w, step, 1, args.layers)
        step += 1
        c0, t0 = time.process_time(), time.perf_counter()
        f.poll()
        v = f.view()
        data.append(time.perf_counter() - t0)
        data_cpu.append(time.process_time() - c0)
    if v.steps != step:
        raise SystemExit("follower missed appended steps")

    # step selection: the layer table of one step
    sel = []
    for s in range(0, args.steps, max(1, args.steps // 20)):
        t0 = time.perf_counter()
        rows = f.view(step=s).layers
        sel.append(time.perf_counter() - t0)
        if len(rows) != args.layers:
            raise SystemExit(f"step {s}: {len(rows)} layer rows")

    # the whole dashboard cycle, at both pinned terminal sizes
    cycles = {}
    for size in ((160, 48), (80, 24)):
        cycles[f"{size[0]}x{size[1]}"] = asyncio.run(
            app_cycle(path, w, step, args.layers, args.refreshes, size)
        )
        step += args.refreshes

    # naive: reload the layers table and group it (what a refresh without increments costs)
    t0 = time.perf_counter()
    with load(path) as run:
        run.layers.groupby("layer")["duration_ns"].mean()
    naive = time.perf_counter() - t0
    w.finish()

    ms = 1e3
    res = {
        "bench": "tui_bench",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
        },
        "run": {"steps": step, "layers": args.layers, "events_initial": events},
        "write_s": round(write_s, 2),
        "catch_up_ms": round(catch_up * ms, 1),
        "catch_up_slice_ms": {"max": round(max(slices) * ms, 1), "n": len(slices)},
        "refresh_data_ms": summary(data),
        "refresh_data_cpu_ms": summary(data_cpu),
        "dashboard_ms": {size: {k: summary(v) for k, v in c.items()} for size, c in cycles.items()},
        "step_select_ms": {"median": round(statistics.median(sel) * ms, 2), "n": len(sel)},
        "naive_reload_group_ms": round(naive * ms, 1),
        "target_refresh_median_ms": 50,
    }
    res["load_average"] = [round(x, 2) for x in os.getloadavg()]
    res["cpus"] = os.cpu_count()
    res["pass"] = all(c["refresh"]["median"] <= 50 for c in res["dashboard_ms"].values())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
