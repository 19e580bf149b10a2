"""Peak memory and time of imports whose input could make them unbounded, this revision beside
a baseline revision, each command in a fresh process (``wait4``'s peak RSS of the whole process,
as ``bench/huge_trace.py`` measures it):

- ``bomb-json``: a 1.45 MB ``.pt.trace.json.gz`` inflating to 1.5 GB (``import kineto``);
- ``bomb-log``: the same bytes as a ``.log.gz`` (``import vllm-log``);
- ``bomb-json-valid``: the same size of inflated trace that is valid JSON as far as it goes
  (a streamed parse reads on until the limit; zeros are refused at once as invalid JSON);
- ``kineto-<N>k``: a Kineto trace of N thousand events (graph replays, Kineto's layout)
  (``import kineto``);
- ``log-<N>MB``: a real vLLM log (``tests/data/vllm/cpu_mtp_serve.log``, written by vLLM's own
  logger) repeated to N MB: one server start per copy (``import vllm-log``).

    nice python bench/bounded_inputs.py --baseline cc4390e --runs 3 --json bench/results/bounded_inputs.json

The baseline is the named commit's ``mlaprof`` package (``git archive``), run by the same
interpreter. Targets: every import within 1.5 GiB; a bomb refused before 1 GiB.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from huge_trace import measure, results_doc, revision  # noqa: E402

MIB = 1 << 20
LOG = ROOT / "tests" / "data" / "vllm" / "cpu_mtp_serve.log"


def bomb(path: Path, inflated: int) -> Path:
    block = b"0" * MIB
    with gzip.open(path, "wb", compresslevel=9) as z:
        for _ in range(inflated // MIB):
            z.write(block)
    return path


def json_bomb(path: Path, inflated: int) -> Path:
    """A trace that is valid JSON as far as it goes (``traceEvents`` of metadata events), so a
    streamed parse reads on until the inflate limit refuses it."""
    unit = b'{"ph": "M", "args": {"name": "' + b"x" * 1000 + b'"}}, '
    block = unit * (MIB // len(unit))
    with gzip.open(path, "wb", compresslevel=9) as z:
        z.write(b'{"traceEvents": [')
        for _ in range(inflated // len(block)):
            z.write(block)
    return path


def kineto_trace(path: Path, events: int, layers: int = 61) -> Path:
    """A PyTorch-profiler trace of ``events`` events, laid out as Kineto writes them (one key per
    line, fractional microseconds, ``baseTimeNanoseconds`` after the events): CUDA-graph replays
    of ``layers`` layers, each replay a ``cudaGraphLaunch`` and 4 kernels a layer (the MLA
    decode's stage 1 and 2 among them), every kernel correlated to its launch."""
    names = ("void rmsnorm_kernel<c10::BFloat16>(...)", "_fwd_grouped_kernel_stage1",
             "_fwd_kernel_stage2", "void cutlass::Kernel2<gemm>(...)")  # fmt: skip
    per_replay = 1 + 4 * layers
    t = 1_700_000_000_000
    with open(path, "w") as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],'
                '\n  "traceEvents": [\n')  # fmt: skip
        for r in range(events // per_replay):
            corr = 1000 + r
            sep = ",\n" if r else ""
            f.write(f'{sep}  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", '
                    f'"pid": 4242, "tid": 4242,\n    "ts": {t}.125, "dur": 7.5,\n    "args": {{\n'
                    f'      "cbid": 311, "correlation": {corr}\n    }}\n  }}')  # fmt: skip
            t += 10
            for k in range(4 * layers):
                f.write(f',\n  {{\n    "ph": "X", "cat": "kernel", "name": "{names[k % 4]}", '
                        f'"pid": 0, "tid": 7,\n    "ts": {t}.{k % 1000:03d}, "dur": 3.{k:03d},\n'
                        f'    "args": {{\n      "device": 0, "stream": 7, "correlation": {corr}, '
                        f'"grid": [4, 1, 8], "block": [128, 1, 1]\n    }}\n  }}')  # fmt: skip
                t += 5
            t += 100
        f.write('\n  ],\n  "traceName": "trace.json",\n  "displayTimeUnit": "ms",\n'
                '  "baseTimeNanoseconds": 1700000000000000000\n}\n')  # fmt: skip
    return path


def big_log(path: Path, size: int) -> Path:
    src = LOG.read_bytes()
    with open(path, "wb") as f:
        for _ in range(size // len(src) + 1):
            f.write(src)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="the revision to compare against")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cases", default="bomb-json,bomb-log,log-100MB,log-1000MB")
    ap.add_argument("--baseline-cases", default="bomb-json,bomb-log,log-100MB",
                    help="cases also run on the baseline (its 1 GB log ran past 600 s)")  # fmt: skip
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.json:
        args.json = args.json.resolve()  # the commands run from the scratch folder
    work = Path(tempfile.mkdtemp(prefix="mlaprof-bounded-"))
    base = work / "base"
    base.mkdir()
    arc = subprocess.run(["git", "archive", args.baseline, "mlaprof"], cwd=ROOT,
                         capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(base)], input=arc, check=True)
    # the commands run in the scratch folder: ``python -m`` puts the working folder first on
    # the path, which must not be a checkout (the baseline's package would lose to it)
    os.chdir(work)
    revs = {"this": (str(ROOT), revision("HEAD")), "baseline": (str(base), revision(args.baseline))}
    results: dict[str, dict[str, object]] = {}
    try:
        inputs = {}
        for case in args.cases.split(","):
            if case == "bomb-json":
                inputs[case] = ("kineto", bomb(work / "trace.pt.trace.json.gz", 1500 * MIB))
            elif case == "bomb-json-valid":
                inputs[case] = ("kineto", json_bomb(work / "valid.pt.trace.json.gz", 1500 * MIB))
            elif case.startswith("kineto-"):  # kineto-<N>k events
                n = int(case.removeprefix("kineto-").removesuffix("k")) * 1000
                inputs[case] = ("kineto", kineto_trace(work / f"{case}.pt.trace.json", n))
            elif case == "bomb-log":
                inputs[case] = ("vllm-log", bomb(work / "serve.log.gz", 1500 * MIB))
            elif case.startswith("log-"):
                mb = int(case.removeprefix("log-").removesuffix("MB"))
                inputs[case] = ("vllm-log", big_log(work / f"{case}.log", mb * MIB))
        for case, (kind, path) in inputs.items():
            for label, (pythonpath, rev) in revs.items():
                if label == "baseline" and case not in args.baseline_cases.split(","):
                    continue
                env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
                runs = []
                for i in range(args.runs if not case.endswith("1000MB") else 1):
                    traces = work / f"t-{label}-{case}-{i}"
                    res = measure(["import", kind, str(path), "--traces", str(traces)], env)
                    shutil.rmtree(traces, ignore_errors=True)
                    runs.append(res)
                    print(f"{case:10s} {label:8s} {json.dumps(res)}", flush=True)
                peaks = [r["peak_rss_mib"] for r in runs]
                walls = [r["wall_s"] for r in runs]
                results.setdefault(case, {"input_bytes": path.stat().st_size})[label] = {
                    "revision": rev,
                    "runs": runs,
                    "median_peak_rss_mib": statistics.median(peaks),
                    "peak_range_mib": [min(peaks), max(peaks)],
                    "median_wall_s": statistics.median(walls),
                    "wall_range_s": [min(walls), max(walls)],
                    "exit_codes": sorted({r["rc"] for r in runs}),
                }
        doc = results_doc(
            "whole-process peak RSS (wait4 ru_maxrss) and wall time of each import, "
            "fresh process each; wall times are the shared machine's load",
            results,
            args.baseline,
        )
        if args.json:
            args.json.write_text(json.dumps(doc, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
