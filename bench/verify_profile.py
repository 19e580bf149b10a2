"""One stage-1 launch of a verify kernel at (B, ctx, qlen), for Nsight Compute to profile.

    ncu --clock-control none -k regex:stage1 --launch-skip 1 --launch-count 1 \\
        python3 bench/verify_profile.py --kernel gluon --shape 8,131072,4

Runs the stage-1 kernel twice (the first launch compiles); prints its registers and spills.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_suite import H, make_case, policy_s  # noqa: E402

from mlaprof.backends.triton_backend import LaunchConfig, TritonBackend, default_config  # noqa: E402
from mlaprof.scenario import LATENT  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="gluon", choices=("gluon", "triton"))
    ap.add_argument("--shape", default="8,131072,4")
    args = ap.parse_args()
    b, ctx, qlen = (int(x) for x in args.shape.split(","))
    meta, inp = make_case(b, ctx, qlen, seed=1)
    s = policy_s("mlaprof-triton", meta)
    if args.kernel == "gluon":
        cfg = LaunchConfig(kernel="gluon")
    else:
        cfg = LaunchConfig(**{**default_config(qlen, hopper=True).__dict__, "kernel": "triton"})
    be = TritonBackend(cfg)
    be.skip_stage2 = True
    out = torch.empty(b, qlen, H, LATENT, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):
        be.forward(inp, meta, out, None, num_splits=s)
    torch.cuda.synchronize()
    print(f"{args.kernel} B={b} ctx={ctx} qlen={qlen} S={s}: {be.last_launch}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
