"""Run-store throughput on this machine: committed records per second (one transaction per
record, as the runners write steps), bulk appends, and loading a table as a DataFrame.
Writes bench/results/store_bench.json.

    python bench/store_bench.py [--records 20000] [--bulk 1000000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlaprof.store import create_run, load  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--bulk", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "store_bench.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        w = create_run(tmp, "bench", {"scenario": {"name": "bench"}})
        t0 = time.perf_counter()
        for i in range(args.records):
            w.add("steps", step=i, duration_ns=i, graph_mode="FULL", timing="cpu-wall")
        per_record = time.perf_counter() - t0
        rows = ({"step": i // 61, "layer": i % 61, "duration_ns": i} for i in range(args.bulk))
        t0 = time.perf_counter()
        w.add_many("layers", rows)
        bulk = time.perf_counter() - t0
        t0 = time.perf_counter()
        live = load(w.run_dir)  # a reader while the writer is open (WAL)
        n_live = live.count("layers")
        live_count = time.perf_counter() - t0
        w.finish()
        t0 = time.perf_counter()
        df = load(w.run_dir).layers
        load_s = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in Path(w.run_dir).iterdir())
    doc = {
        "what": "mlaprof run store (SQLite WAL, synchronous=NORMAL, one rank)",
        "records": args.records,
        "per_record_commit_us": per_record / args.records * 1e6,
        "bulk_rows": args.bulk,
        "bulk_rows_per_s": args.bulk / bulk,
        "reader_open_and_count_s": live_count,
        "reader_saw_rows": n_live,
        "load_layers_dataframe_s": load_s,
        "dataframe_rows": len(df),
        "db_bytes": size,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": dt.date.today().isoformat(),
    }
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
