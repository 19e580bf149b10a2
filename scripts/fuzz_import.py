"""Stress the importers with mutated inputs: N cases per format, counting tracebacks.

Every case mutates a real or documented-format fixture (tests/fuzz_inputs.py: byte flips,
truncation, huge and non-finite numbers, swapped numbers, deep nesting, encodings, gzip, dropped
CSV columns; SQL-level damage for rocpd; long lines and strings; multi-rank folders of hosts and
processes) and imports it through ``mlaprof import``. An import must either succeed whole (a
``finished`` run) or fail with exactly one ``mlaprof: error:`` line and leave nothing in the
traces folder. Every successful import then goes through what a user runs on it (``runs``,
``report``, ``--json``, ``--html``, ``tui --once``, the three exports and a re-import of the
rocpd export), each within 10 s (``--post-every N``: every Nth import only).

Usage::

    nice python scripts/fuzz_import.py --cases 10000 --json bench/results/fuzz_import.json

Exit status 1 if any case ended in a traceback or broke the contract.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlaprof.cli  # noqa: E402
from mlaprof.store.runmeta import git_revision  # noqa: E402
from tests.fuzz_classes import CLASSES, run_class  # noqa: E402
from tests.fuzz_inputs import FORMATS, make_case, run_case, seed_files  # noqa: E402

BAD = ("traceback", "bad-error", "leftover", "bad-run", "hang", "partial")
# the CLI builds its parser per call (importing every verb, ~10 ms): one parser serves every case
mlaprof.cli.build_parser = functools.cache(mlaprof.cli.build_parser)


POST_EVERY = 1  # post-import commands on every Nth successful import (set from --post-every)


def fuzz(
    fmt: str, seeds: list[Path], cases: range, work: Path, deadline: float
) -> tuple[Counter[str], Counter[str], dict[str, list[dict]]]:
    """Run the cases ``cases`` of ``fmt``: (results, refusal kinds, examples of failures)."""
    results: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    examples: dict[str, list[dict]] = {}
    imported = 0
    work.mkdir(parents=True, exist_ok=True)
    for seed in cases:
        if time.time() > deadline:
            break
        case_dir = work / "case"
        case_dir.mkdir(exist_ok=True)
        path, ops = make_case(fmt, seeds, seed, case_dir)
        out = run_case(fmt, path, work / "traces")
        if out.result == "imported":
            imported += 1
            results["post-checked"] += imported % POST_EVERY == 0
            if imported % POST_EVERY == 0:
                out = run_case(fmt, path, work / "traces", post=True)
        results[out.result] += 1
        if out.result == "refused":
            # the refusal's kind, without the file name and values
            reasons[_reason(out.detail)] += 1
        if out.result in BAD and len(examples.setdefault(out.result, [])) < 10:
            examples[out.result].append({"seed": seed, "ops": ops, "detail": out.detail})
        shutil.rmtree(case_dir, ignore_errors=True)
    return results, reasons, examples


CHUNK = 250  # cases per task when several workers share a format


def fuzz_format(
    fmt: str, seeds: list[Path], cases: int, work: Path, deadline: float, workers: int
) -> dict:
    t0 = time.time()
    chunks = [range(i, min(i + CHUNK, cases)) for i in range(0, cases, CHUNK)]
    results: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    examples: dict[str, list[dict]] = {}
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as pool:
            parts = list(pool.map(_task, [(fmt, seeds, c, work / f"w{c.start}", deadline,
                                           POST_EVERY) for c in chunks]))  # fmt: skip
    else:
        parts = [fuzz(fmt, seeds, range(cases), work, deadline)]
    for res, why, ex in parts:
        results.update(res)
        reasons.update(why)
        for k, v in ex.items():
            examples.setdefault(k, []).extend(v[: 10 - len(examples.get(k, []))])
    return {
        "cases": sum(n for k, n in results.items() if k != "post-checked"),
        "results": dict(results),
        "tracebacks": results["traceback"],
        "contract_broken": sum(results[k] for k in BAD),
        "hangs": results["hang"],
        "top_refusals": dict(reasons.most_common(15)),
        "examples": examples,
        "seconds": round(time.time() - t0, 1),
    }


def _task(args: tuple) -> tuple[Counter[str], Counter[str], dict[str, list[dict]]]:
    fmt, seeds, cases, work, deadline, post_every = args
    global POST_EVERY
    POST_EVERY = post_every
    try:
        return fuzz(fmt, seeds, cases, work, deadline)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _reason(detail: str) -> str:
    import re

    text = detail.split(": ", 1)[-1] if detail.startswith("/") else detail
    text = re.sub(r"'[^']*'|\"[^\"]*\"|-?\d[\d.e+]*", "_", text)
    return text[:90]


def fuzz_classes(names: list[str], cases: int, work: Path, deadline: float) -> dict:
    """``cases`` seeded cases of each class of :mod:`tests.fuzz_classes`."""
    out = {}
    for name in names:
        t0 = time.time()
        results: Counter[str] = Counter()
        examples: list[dict] = []
        for seed in range(cases):
            if time.time() > deadline:
                break
            kind, detail = run_class(name, seed, work / f"{name}-{seed}")
            results[kind] += 1
            if kind in ("broken", "traceback") and len(examples) < 10:
                examples.append({"seed": seed, "result": kind, "detail": detail})
            if kind == "skipped":
                examples.append({"seed": seed, "result": kind, "detail": detail})
                break
        out[name] = {"cases": sum(results.values()), "results": dict(results),
                     "broken": results["broken"] + results["traceback"],
                     "examples": examples, "seconds": round(time.time() - t0, 1)}  # fmt: skip
        print(f"{name}: {out[name]['cases']} cases, {dict(results)}, {out[name]['seconds']} s",
              flush=True)  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000, help="cases per format")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--json", type=Path, help="write the result here (also after each format)")
    ap.add_argument(
        "--hours", type=float, default=6.0,
        help="time budget, split evenly between the formats (a format stops starting cases "
        "when its share is spent; the result says how many cases ran)",
    )  # fmt: skip
    ap.add_argument("--workers", type=int, default=1, help="processes (cases split in chunks)")
    ap.add_argument("--revision", default=None, help="mlaprof revision to record (default: git)")
    ap.add_argument("--post-every", type=int, default=1,
                    help="run the post-import commands on every Nth successful import (1: all)")  # fmt: skip
    ap.add_argument("--classes", default=None,
                    help=f"run these case classes instead of the formats: {', '.join(CLASSES)} "
                    "or all (tests/fuzz_classes.py); --cases cases each")  # fmt: skip
    args = ap.parse_args()
    global POST_EVERY
    POST_EVERY = max(1, args.post_every)
    # a crafted view that never ends is cut after this (the default is 600 s)
    os.environ.setdefault("MLAPROF_ROCPD_TIMEOUT", "2")
    deadline = time.time() + args.hours * 3600
    out: dict = {
        "command": "python scripts/fuzz_import.py " + " ".join(sys.argv[1:]),
        "workers": args.workers,
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs), python {platform.python_version()}",
        "rocpd_timeout_s": float(os.environ["MLAPROF_ROCPD_TIMEOUT"]),
        "mlaprof_git": args.revision or git_revision(),
        "formats": {},
    }
    # in memory where possible: the fsyncs of thousands of staged runs are not what is tested
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    if args.classes:
        names = list(CLASSES) if args.classes == "all" else args.classes.split(",")
        unknown = set(names) - set(CLASSES)
        if unknown:
            ap.error(f"unknown classes {', '.join(sorted(unknown))}; known: {', '.join(CLASSES)}")
        with tempfile.TemporaryDirectory(prefix="mlaprof-fuzz-", dir=shm) as tmp:
            out["classes"] = fuzz_classes(names, args.cases, Path(tmp), deadline)
        del out["formats"]
        if args.json:
            args.json.write_text(json.dumps(out, indent=2) + "\n")
        broken = sum(c["broken"] for c in out["classes"].values())
        print(f"total: {sum(c['cases'] for c in out['classes'].values())} cases, {broken} broken")
        return 1 if broken else 0
    with tempfile.TemporaryDirectory(prefix="mlaprof-fuzz-", dir=shm) as tmp:
        work = Path(tmp)
        seeds = seed_files(work / "seeds")
        fmts = args.formats.split(",")
        for i, fmt in enumerate(fmts):
            share = (deadline - time.time()) / (len(fmts) - i)
            end = time.time() + share
            res = fuzz_format(fmt, seeds[fmt], args.cases, work, end, args.workers)
            out["formats"][fmt] = res
            print(f"{fmt}: {res['cases']} cases, {res['results']}, {res['seconds']} s", flush=True)
            if args.json:
                args.json.write_text(json.dumps(out, indent=2) + "\n")
    total = sum(f["cases"] for f in out["formats"].values())
    broken = sum(f["contract_broken"] for f in out["formats"].values())
    print(f"total: {total} cases, {broken} broke the contract")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
