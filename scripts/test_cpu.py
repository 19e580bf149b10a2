"""Where a tier's time goes: read the JSON lines ``MLAPROF_TEST_CPU=FILE`` makes pytest write
(tests/conftest.py) and print the CPU time per file and the slowest tests.

    MLAPROF_TEST_CPU=/tmp/unit.jsonl .venv/bin/python -m pytest -n 2 tests/unit
    python scripts/test_cpu.py /tmp/unit.jsonl [--top 40]

CPU time (the test process's own plus the child processes it waited for) hardly moves with the
machine's load, unlike wall time: compare runs by it on a shared machine.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    for path in args.files:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        cpu = sum(r["cpu"] for r in rows)
        kids = sum(r["children"] for r in rows)
        print(f"{path}: {len(rows)} tests, CPU {cpu:.1f} s in the test processes, "
              f"{kids:.1f} s in their child processes, wall summed {sum(r['wall'] for r in rows):.1f} s")  # fmt: skip
        bad = [f"{r['outcome']}: {r['test']}" for r in rows if r.get("outcome") == "failed"]
        print("".join(f"  {b}\n" for b in bad), end="")
        workers: dict[str, float] = defaultdict(float)
        files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for r in rows:
            workers[r["worker"]] += r["cpu"] + r["children"]
            f = files[r["test"].split("::")[0]]
            f[0] += r["cpu"]
            f[1] += r["children"]
            f[2] += 1
        print("  per worker: " + ", ".join(f"{w} {s:.1f} s" for w, s in sorted(workers.items())))
        print("  CPU s (own + children) per file:")
        for name, (c, k, n) in sorted(files.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:20]:
            print(f"  {c + k:8.1f}  {n:4d} tests  {name}")
        print(f"  the {args.top} slowest tests by CPU s (own + children), wall s:")
        for r in sorted(rows, key=lambda r: -(r["cpu"] + r["children"]))[: args.top]:
            print(f"  {r['cpu'] + r['children']:8.2f}  {r['wall']:8.2f}  {r['test']}")


if __name__ == "__main__":
    main()
