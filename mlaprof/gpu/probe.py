"""Child process that attempts one FULL capture and names the first offender.

    python -m mlaprof.gpu.probe   (reads a JSON spec on stdin, writes one result line)

One attempt per process: after a failed capture the CUDA context is unusable (even
``torch.randn`` fails), so the parent never tries a capture that might fail in its own process.
The layers are captured under the sync checker; its first finding in the failing layer names the
op and source line, the CUDA error says what the driver saw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.gpu.offender import CaptureOutcome, outcome_from_failure, parse_child_output
from mlaprof.library_env import child_env

PROBE_TIMEOUT_S = 300


def probe_in_child(
    scenario: dict[str, Any], backend: str, splits: dict[int, int]
) -> CaptureOutcome:
    """Run the capture attempt in a fresh interpreter and read its outcome."""
    spec = json.dumps({"scenario": scenario, "backend": backend, "splits": splits})
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = child_env()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        p = subprocess.run(
            [sys.executable, "-m", "mlaprof.gpu.probe"],
            input=spec,
            capture_output=True,
            text=True,
            env=env,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return CaptureOutcome(
            "failed", message=f"capture child timed out after {PROBE_TIMEOUT_S} s"
        )
    return parse_child_output(p.stdout, p.stderr, p.returncode)


def _attempt(spec: dict[str, Any]) -> CaptureOutcome:
    import torch

    from mlaprof.backends.registry import use_device_splits
    from mlaprof.gpu.session import CudaSession
    from mlaprof.probes.sync_checker import SyncChecker
    from mlaprof.scenario import scenario_from_mapping

    sc = scenario_from_mapping(spec["scenario"])
    splits = {int(k): int(v) for k, v in spec["splits"].items()}
    sess = CudaSession(sc, spec["backend"], lambda step, m, sh: splits.get(sh.num_reqs, 1))
    use_device_splits(sess.backend, spec["backend"], sc.policy)  # the kernels the run captures
    grp = sess.groups[min(sess.groups)]
    sess.load_step(grp.first_step)
    # eager pass under the checker: the first guess, found without breaking anything
    eager = SyncChecker()
    sess.forward_layers(grp, layer_ctx=lambda i: eager.region(layer=i, step=grp.first_step))
    torch.cuda.synchronize()
    sess.warmup(grp)
    checker = SyncChecker()
    current = {"layer": None}

    def ctx(i: int):  # noqa: ANN202
        current["layer"] = i
        return checker.region(layer=i, step=grp.first_step)

    t0 = time.perf_counter_ns()
    try:
        sess.capture(grp, layer_ctx=ctx)
    except Exception as e:  # the capture broke: name the offender
        events = [ev.to_row() for ev in checker.events] or [ev.to_row() for ev in eager.events]
        out = outcome_from_failure(events, current["layer"], f"{type(e).__name__}: {e}")
        out.capture_ns = time.perf_counter_ns() - t0
        return out
    return CaptureOutcome(
        "captured",
        capture_ns=time.perf_counter_ns() - t0,
        events=[ev.to_row() for ev in eager.events],
    )


def main() -> int:
    try:
        spec = json.loads(sys.stdin.read())
        out = _attempt(spec)
    except MlaprofError as e:
        out = CaptureOutcome("failed", message=str(e))
    print(out.to_json(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
