"""Per-step cost of the mlaprof plugin in a real vLLM engine: the tiny MLA model
(tests/data/vllm_tiny_mla) with ngram speculation, generation timed with and without the plugin,
alternating runs. Writes bench/results/vllm_engine_overhead.json.

    python bench/vllm_engine_overhead.py [--pairs 3] [--prompts 8] [--max-tokens 96]

Run it with the Python of a vLLM install where mlaprof's entry point is registered.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one(plugin: bool, args: argparse.Namespace, traces: str, i: int) -> dict:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "MLAPROF_TRACES": traces,
           "MLAPROF_RUN": f"bench-{i}", "MLAPROF_VLLM": "1" if plugin else "0",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    cmd = [sys.executable, str(ROOT / "scripts" / "vllm_tiny_engine.py"), "--prompts",
           str(args.prompts), "--max-tokens", str(args.max_tokens)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=traces)
    line = next(x for x in out.stdout.splitlines() if x.startswith("MLAPROF_ENGINE_RESULT "))
    return json.loads(line.split(" ", 1)[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    import vllm

    import mlaprof

    with_p, without = [], []
    steps = None
    with tempfile.TemporaryDirectory() as traces:
        for i in range(args.pairs):
            for plugin in (True, False) if i % 2 == 0 else (False, True):
                r = one(plugin, args, traces, i)
                (with_p if plugin else without).append(r["generate_s"])
                if plugin and steps is None:
                    steps = mlaprof.load(Path(traces) / f"bench-{i}").count("steps")
    w, wo = statistics.median(with_p), statistics.median(without)
    doc = {
        "bench": "vllm_engine_overhead",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": f"CPU ({platform.processor() or platform.machine()}), {os.cpu_count()} cores",
        "versions": {"vllm": vllm.__version__, "python": platform.python_version()},
        "model": "tests/data/vllm_tiny_mla (2 layers, 8 heads, dummy weights), ngram k=3",
        "prompts": args.prompts,
        "max_tokens": args.max_tokens,
        "engine_steps": steps,
        "generate_s_with_plugin": with_p,
        "generate_s_without_plugin": without,
        "per_step_ms_with_plugin": round(w / steps * 1e3, 3) if steps else None,
        "per_step_ms_without_plugin": round(wo / steps * 1e3, 3) if steps else None,
        "difference_per_step_us": round((w - wo) / steps * 1e6, 1) if steps else None,
        "note": "medians over alternating runs of the whole generate() call on a shared machine; "
        "the difference is within run-to-run noise unless it exceeds the spread",
    }
    out = ROOT / "bench" / "results" / "vllm_engine_overhead.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
