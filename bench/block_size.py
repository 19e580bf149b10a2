"""The CSV kernel reader's block size, side by side: CPU, wall and peak memory of the parse
alone and of a whole ``import`` at each size, alternating sizes within each round (whole child
processes, medians of the rounds). Inputs: bench/import_bench.py's 1M-dispatch file and one rank
of bench/fleet_bench.py's fleet (1.25M dispatches, long names).

    python bench/block_size.py [--rounds 5] [--sizes 1,2,4] [--work DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from mlaprof.importers import rocprof_csv
rocprof_csv.BLOCK_BYTES = {mib} << 20
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c, w = cpu(), time.perf_counter()
if {whole}:
    from mlaprof.cli import main
    main(["import", "rocprof", {src!r}, "--traces", {traces!r}, "--name", "b"])
else:
    rocprof_csv.read_kernel_file(Path({src!r}), rocprof_csv.free_cores())
print(cpu() - c, time.perf_counter() - w, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def one(src: Path, mib: int, whole: bool, work: Path) -> dict[str, float]:
    traces = work / "t"
    shutil.rmtree(traces, ignore_errors=True)
    code = CHILD.format(root=str(ROOT), mib=mib, whole=whole, src=str(src), traces=str(traces))
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    shutil.rmtree(traces, ignore_errors=True)
    return {"cpu_s": float(out[-3]), "wall_s": float(out[-2]), "peak_mib": float(out[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1,2,4", help="block sizes in MiB, comma-separated")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    import fleet_bench
    import import_bench

    work = a.work or Path(tempfile.mkdtemp(prefix="mlaprof-block-"))
    work.mkdir(parents=True, exist_ok=True)
    inputs = {"one_1m": work / "one.csv", "fleet_rank": work / "rank.csv"}
    if not inputs["one_1m"].exists():
        import_bench.generate(inputs["one_1m"], 1_000_000)
    if not inputs["fleet_rank"].exists():
        fleet_bench.write_csv(inputs["fleet_rank"], 1_250_000, 2)
    sizes = [int(s) for s in a.sizes.split(",")]
    rows: dict[str, list[dict[str, float]]] = {}
    for r in range(a.rounds):
        for name, src in inputs.items():
            for whole in (False, True):
                for mib in sizes if r % 2 == 0 else sizes[::-1]:
                    key = f"{name}/{'import' if whole else 'parse'}/{mib}MiB"
                    rows.setdefault(key, []).append(one(src, mib, whole, work))
        print(f"round {r + 1} of {a.rounds} done", file=sys.stderr)
    doc = {
        "what": "CSV kernel reader block size: medians over alternating rounds (child processes)",
        "machine": {
            "node": platform.node(),
            "cpus": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)),
        },  # fmt: skip
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "1"),
        "rounds": a.rounds,
        "medians": {
            k: {m: round(statistics.median(x[m] for x in v), 3) for m in v[0]}
            for k, v in rows.items()
        },  # fmt: skip
        "spread": {
            k: {m: [round(min(x[m] for x in v), 3), round(max(x[m] for x in v), 3)] for m in v[0]}
            for k, v in rows.items()
        },  # fmt: skip
    }
    text = json.dumps(doc, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
