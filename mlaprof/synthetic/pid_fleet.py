"""A fleet of rocprofv3 processes from one rank's trace: N copies, each on its own GPU, shifted in
time and numbering its correlation ids from the same start, as every process of a real server
does (for the multi-rank export tests and ``bench/perfetto_fleet_bench.py``)."""

from __future__ import annotations

import csv
from pathlib import Path


def pid_fleet(src: Path, dst: Path, ranks: int) -> Path:
    """``ranks`` processes of one server as rocprofv3 writes them (``<pid>_kernel_trace.csv``,
    ``<pid>_hip_api_trace.csv``) from the one-process folder ``src`` (pid 4242), each on its
    own GPU and shifted in time: every process numbers its correlation ids the same way."""
    dst.mkdir(parents=True)
    for r in range(ranks):
        pid = 4242 + r
        for f in src.iterdir():
            text = f.read_text().replace('"Agent 2"', f'"Agent {2 + r}"')
            lines = text.splitlines()
            head = lines[0].split(",")
            i0, i1 = head.index("Start_Timestamp"), head.index("End_Timestamp")
            out = [lines[0]]
            for line in lines[1:]:
                cells = line.split(",")  # no commas inside these files' names
                for i in (i0, i1):
                    cells[-len(head) + i] = str(int(cells[-len(head) + i]) + r * 7_000)
                out.append(",".join(cells))
            (dst / f.name.replace("4242", str(pid))).write_text("\n".join(out) + "\n")
    return dst


def launched_kernels(src: Path, ranks: int) -> int:
    """Kernels whose correlation id a HIP call of their own process carries (read from the
    files of ``src``), over ``ranks`` copies."""
    with open(src / "4242_hip_api_trace.csv") as f:
        api = {int(r["Correlation_Id"]) for r in csv.DictReader(f)}
    with open(src / "4242_kernel_trace.csv") as f:
        per_rank = sum(int(r["Correlation_Id"]) in api for r in csv.DictReader(f))
    return per_rank * ranks
