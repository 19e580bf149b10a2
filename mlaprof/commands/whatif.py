"""``mlaprof whatif``: where S collapses, what padding costs, before running anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mlaprof.commands.common import add_engine_model_args, add_vllm_version_arg, int_list, name_list

EPILOG = """\
every number is MODELLED (policies, metadata builder, padding model, cost model); nothing runs.

examples:
  mlaprof whatif                                   default scenario's model/policy/device, batch 1-64
  mlaprof whatif --batch 8 --context 1088 --capture-sizes 60 --policy aiter-gluon-v0.1.19,aiter-gluon-v0.1.20
                                                   vLLM PR #51171's case: 8 real + 7 padding rows, S 1 vs 4
  mlaprof whatif --policy all --device mi355x,mi300x,h200 --spec 1-4 --json > grid.json
  mlaprof whatif --model kimi-k2-tp8 --html whatif.html   heatmaps of S and predicted slowdown
  mlaprof whatif --kv-mix examples/lengths.txt --draws 64   batches drawn from a request-length mix

columns: S bug = min_kv_seq_len over all rows (padding pinned to qlen), S fix = over active rows,
S frozen = what a FULL graph captured with vLLM's dummy run (KV = qlen) replays; slowdown = predicted
verify time vs the fix (H200: fitted to measurements; AMD: derived from CU count and HBM bandwidth).
"""


def register(sub: argparse._SubParsersAction) -> None:
    from mlaprof.capture_sizes import SIZE_RULES

    p = sub.add_parser(
        "whatif",
        help="model split collapse, padding and verify time over a grid (no run needed)",
        description="Model, over batch sizes x KV lengths x speculative tokens x model presets x "
        "split policies x devices, the KV-split count S with the padding bug, with the fix and "
        "frozen at capture, occupancy, padding rows and a predicted verify time.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--batch", default="1-64", help="real requests per batch: 1,2,4 or 1-64 (default 1-64)"
    )
    p.add_argument(
        "--context",
        default="1k,2k,4k,8k,16k,32k,64k,128k",
        help="KV tokens per request: 1088,4k,128k or ranges (default 1k..128k, powers of 2)",
    )
    p.add_argument(
        "--kv-mix",
        metavar="FILE",
        help="request KV lengths to draw batches from (one a line, or 'LEN COUNT'); replaces --context",
    )
    p.add_argument(
        "--draws", type=int, default=32, help="batches drawn per batch size (default 32)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    p.add_argument("--spec", help="speculative tokens, qlen = 1 + spec (default: the scenario's)")
    p.add_argument(
        "--model", help="model presets, comma-separated or 'all' (default: the scenario's)"
    )
    p.add_argument(
        "--policy", help="split policies, comma-separated or 'all' (default: the scenario's)"
    )
    p.add_argument(
        "--device", help="device presets, comma-separated or 'all' (default: the scenario's)"
    )
    p.add_argument("--max-num-seqs", type=int, help="vLLM max_num_seqs (default: the scenario's)")
    p.add_argument("--max-model-len", type=int, help="vLLM max_model_len (default: the scenario's)")
    p.add_argument("--graph-mode", choices=("FULL", "PIECEWISE", "NONE"), default="FULL")
    p.add_argument("--capture-sizes", help="explicit cudagraph_capture_sizes (tokens), e.g. 4,8,60")
    p.add_argument(
        "--vllm",
        choices=sorted(SIZE_RULES),
        help="capture-size rule instead of the --vllm-version's own (capture sizes only)",
    )
    add_vllm_version_arg(p)
    add_engine_model_args(p)
    p.add_argument("--top", type=int, default=15, help="worst cells to list (default 15)")
    p.add_argument("--json", action="store_true", help="print one JSON object (every cell)")
    p.add_argument("--html", metavar="FILE", help="write an offline HTML page with heatmaps")
    p.add_argument("--force", action="store_true", help="overwrite the --html file if it exists")
    p.set_defaults(func=main)


def spec_from_args(args: argparse.Namespace):  # noqa: ANN201
    from mlaprof.errors import MlaprofError
    from mlaprof.scenario import DEVICES, MODELS
    from mlaprof.splits.policies import POLICIES, RELEASED_POLICIES
    from mlaprof.whatif.grid import GridSpec

    g = GridSpec()
    g.batches = int_list(args.batch, "--batch")
    g.contexts = int_list(args.context, "--context")
    if args.kv_mix:
        from pathlib import Path

        from mlaprof.whatif.plan_sources import read_counts

        mix = read_counts(Path(args.kv_mix), "KV length", single_ok=True)
        g.kv_mix, g.kv_weights = list(mix), [float(c) for c in mix.values()]
        g.draws, g.seed = args.draws, args.seed
    if args.spec:
        g.specs = int_list(args.spec, "--spec")
    if args.model:
        g.models = name_list(args.model, MODELS, "model")
    if args.policy:
        g.policies = name_list(args.policy, POLICIES, "policy")
        if args.policy.strip() == "all":  # open PRs' rules are opt-in, by name
            g.policies = [p for p in g.policies if p in RELEASED_POLICIES]
    if args.aiter:
        from mlaprof.splits import releases

        g.aiter = args.aiter
        if not args.policy:
            g.policies = [releases.policy_for(args.aiter)]
    g.max_num_batched_tokens = args.max_num_batched_tokens
    if args.device:
        g.devices = name_list(args.device, DEVICES, "device")
    if args.max_num_seqs is not None:
        g.max_num_seqs = args.max_num_seqs
    if args.max_model_len is not None:
        g.max_model_len = args.max_model_len
    g.graph_mode = args.graph_mode
    if args.capture_sizes:
        g.capture_sizes = int_list(args.capture_sizes, "--capture-sizes")
    g.size_rule = args.vllm
    if args.vllm_version:
        g.vllm_version = args.vllm_version
    if args.top < 1:
        raise MlaprofError(f"--top must be >= 1, got {args.top}")
    return g.validate()


def json_lines(doc: dict) -> str:
    """One JSON object, the header indented and one compact cell per line (grep-able, and 3x
    faster to write than an indented dump of 10,000 cells)."""
    cells = doc.pop("cells")
    head = json.dumps(doc, indent=1)
    body = ",\n".join(json.dumps(c, separators=(",", ":")) for c in cells)
    return head[:-2] + ',\n "cells": [\n' + body + "\n ]\n}"


def main(args: argparse.Namespace) -> int:
    from mlaprof.whatif.grid import compute

    w = compute(spec_from_args(args))
    if args.html:
        from mlaprof.figures.html_report import write_whatif_html

        print(f"wrote {write_whatif_html(w, Path(args.html), top=args.top, force=args.force)}")
    if args.json:
        print(json_lines(w.to_json()))
    elif not args.html:
        from mlaprof.reporters.whatif import print_whatif

        print_whatif(w, top=args.top)
    return 0
