"""Do two trees import the same traces to the same run? Each trace is imported by both
(``python -m mlaprof import rocprof FILE --traces DIR --name one`` with ``PYTHONPATH=<tree>``, in
child processes, from copies of the sources outside both trees, so the paths recorded agree), and the two runs compared:

- every Parquet file (same relative paths; ``pyarrow.parquet.read_table(a).equals(b)``, and
  whether the files' bytes are identical, reported beside it);
- every table of every SQLite database of the run, rows sorted (the ``meta`` table's start and
  finish times and process id left out);
- ``run.json`` without its timestamps and ids (``created``, ``run_id``, ``git``, ``finished``).

    python bench/same_import.py TREE_A TREE_B FILE_OR_FOLDER... [--keep DIR]

Exits 1 when any run differs (each difference printed), 0 when all agree. A rocpd ``.db`` is
imported the same way (``mlaprof import rocprof`` takes it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# values that name a moment or a process, not what was imported
RUN_JSON_SKIP = {"created", "run_id", "git", "finished", "started", "updated"}
META_SKIP = {"started", "finished", "pid"}


def _import(tree: Path, src: Path, traces: Path, cwd: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "mlaprof", "import", "rocprof", str(src), "--traces",
           str(traces), "--name", "one"]  # fmt: skip
    got = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    if got.returncode != 0:
        raise SystemExit(f"{tree}: import of {src} failed:\n{got.stdout}\n{got.stderr}")
    return traces / "one"


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst / src.name)
    else:
        shutil.copy2(src, dst / src.name)
    return dst / src.name


def _scrub(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _scrub(x) for k, x in v.items() if k not in RUN_JSON_SKIP}
    if isinstance(v, list):
        return [_scrub(x) for x in v]
    return v


def _rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {}
        for t in sorted(names):
            rows = con.execute(f'SELECT * FROM "{t}"').fetchall()
            if t == "meta":
                rows = [r for r in rows if r[0] not in META_SKIP]
            out[t] = sorted(rows, key=repr)
        return out
    finally:
        con.close()


def compare(a: Path, b: Path) -> tuple[list[str], dict[str, int]]:
    """Differences between runs ``a`` and ``b`` (empty: the same), and what was compared."""
    import pyarrow.parquet as pq

    diffs: list[str] = []
    seen = {"parquet": 0, "parquet_bytes_identical": 0, "sqlite_tables": 0, "sqlite_rows": 0}
    fa = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    if fa != fb:
        diffs.append(f"files differ: only in A {sorted(fa - fb)}, only in B {sorted(fb - fa)}")
    for rel in sorted(fa & fb):
        pa_, pb_ = a / rel, b / rel
        if rel.endswith(".parquet"):
            seen["parquet"] += 1
            ta, tb = pq.read_table(pa_), pq.read_table(pb_)
            if not ta.equals(tb):
                diffs.append(f"{rel}: tables differ ({ta.num_rows} vs {tb.num_rows} rows)")
            elif ta.schema.metadata != tb.schema.metadata:
                diffs.append(f"{rel}: schema metadata differs")
            seen["parquet_bytes_identical"] += pa_.read_bytes() == pb_.read_bytes()
        elif rel.endswith(".db"):
            ra, rb = _rows(pa_), _rows(pb_)
            if set(ra) != set(rb):
                diffs.append(f"{rel}: tables differ {sorted(set(ra) ^ set(rb))}")
            for t in sorted(set(ra) & set(rb)):
                seen["sqlite_tables"] += 1
                seen["sqlite_rows"] += len(ra[t])
                if ra[t] != rb[t]:
                    diffs.append(f"{rel}: table {t} differs ({len(ra[t])} vs {len(rb[t])} rows)")
        elif rel == "run.json":
            ja, jb = (_scrub(json.loads(p.read_text())) for p in (pa_, pb_))
            if ja != jb:
                keys = sorted(k for k in set(ja) | set(jb) if ja.get(k) != jb.get(k))
                diffs.append(f"run.json differs in {keys}")
    return diffs, seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree_a", type=Path)
    ap.add_argument("tree_b", type=Path)
    ap.add_argument("sources", type=Path, nargs="+")
    ap.add_argument(
        "--keep", type=Path, help="import into this folder (kept) instead of a temp one"
    )
    args = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for i, src in enumerate(args.sources):
            # a copy outside both trees: a recorded path is made relative to the tree that
            # imports it, so a source inside one of them would be recorded differently
            src = _copy(src.resolve(), root / f"src-{i}")
            ra = _import(args.tree_a.resolve(), src, root / f"{i}-a", root)
            rb = _import(args.tree_b.resolve(), src, root / f"{i}-b", root)
            diffs, seen = compare(ra, rb)
            bad += bool(diffs)
            what = ", ".join(f"{k} {v}" for k, v in seen.items())
            print(f"{'SAME' if not diffs else 'DIFF'} {src.name}: {what}")
            for d in diffs:
                print(f"    {d}")
    print(f"{len(args.sources) - bad} of {len(args.sources)} imports the same")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
