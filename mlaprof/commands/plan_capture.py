"""``mlaprof plan-capture``: cudagraph capture sizes for a decode batch-size distribution."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlaprof.commands.common import add_traces_arg, int_list, resolve_run
from mlaprof.errors import MlaprofError

EPILOG = """\
the plan is MODELLED: expected padding from the distribution and vLLM's padding rule; capture
memory as its source says (measured and fitted / a vLLM log total spread by size / your model),
extrapolated beyond the measured sizes and labelled so. The vLLM version compared with is
--vllm-version's, else the one the run names (--from-run, then --memory-from-run), else the
newest modelled release; the output says which and where it came from.

examples:
  mlaprof plan-capture --counts examples/batches.txt --spec 3 --max-num-seqs 64
  mlaprof plan-capture --from-run latest   batch sizes a recorded run saw
  mlaprof plan-capture --from-run traces/demo/fix-native-kernel-full-graph --memory-from-run traces/demo/fix-native-kernel-full-graph
                        (capture memory per size as that run measured it, on the device its
                        run.json names; the vLLM version its scenario names)
  mlaprof plan-capture --counts examples/batches.json --spec 3 --memory-log tests/data/vllm/tp2_two_starts.log --budget-gib 1.5
  mlaprof plan-capture --counts examples/batches.txt --spec 3 --max-graphs 8 --json

--counts FILE: lines 'BATCH COUNT' (or CSV 'batch,count', or JSON {"8": 120}); BATCH = real
requests in a decode step, COUNT = steps seen with it.
"""


def register(sub: argparse._SubParsersAction) -> None:
    from mlaprof.capture_sizes import SIZE_RULES
    from mlaprof.splits.routing import DEFAULT_VERSION, VERSIONS

    p = sub.add_parser(
        "plan-capture",
        help="propose cudagraph_capture_sizes for a batch-size distribution",
        description="Propose the cudagraph_capture_sizes that minimise expected padded tokens "
        "for a decode batch-size distribution within a capture-memory budget (or a graph count), "
        "compared with the vLLM version's default list, and print a ready --compilation-config.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-run", metavar="RUN", help="batch sizes from a recorded run's steps")
    src.add_argument("--counts", metavar="FILE", help="batch sizes from a file of counts")
    p.add_argument(
        "--spec", type=int, help="speculative tokens (qlen = 1 + spec); default: the run's"
    )
    p.add_argument("--max-num-seqs", type=int, help="vLLM max_num_seqs (default: the run's or 256)")
    p.add_argument("--vllm", choices=sorted(SIZE_RULES),
                   help="capture-size rule to compare with instead of the --vllm-version's own")  # fmt: skip
    p.add_argument(
        "--vllm-version",
        choices=list(VERSIONS),
        help="the vLLM release whose default capture sizes and dispatch are modelled (default: "
        f"the one the run names, else {DEFAULT_VERSION}, the newest)",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=int,
        help="vLLM max_num_batched_tokens: the default list stops there "
        "(default: the run's, else not limiting)",
    )
    p.add_argument("--default-sizes", help="compare with this list instead of the rule's default")
    mem = p.add_mutually_exclusive_group()
    mem.add_argument("--memory-from-run", metavar="RUN", help="capture memory measured per size")
    mem.add_argument("--memory-log", metavar="FILE", help="vLLM log with 'took X GiB'")
    mem.add_argument("--memory-model", metavar="A+B", help="A MiB per graph + B MiB per token")
    p.add_argument(
        "--budget-gib", type=float, help="capture memory budget (default: the default list's)"
    )
    p.add_argument(
        "--max-graphs", type=int, help="at most this many graphs (instead of a memory budget)"
    )
    p.add_argument("--cover-all", action="store_true",
                   help="keep a graph for max_num_seqs even if never observed")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_traces_arg(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from mlaprof.capture_sizes import capture_plan, check_batched_tokens, dispatch_of, rule_for
    from mlaprof.scenario import Scenario
    from mlaprof.splits.routing import DEFAULT_VERSION
    from mlaprof.store import load
    from mlaprof.whatif import plan_sources as ps
    from mlaprof.whatif.plan import GIB, make_plan

    run_qlen = None
    device = None  # a GPU, unless the run's scenario names its device (capture_sizes.model_runner)
    named: list[tuple[str, str]] = []  # (vLLM version, where) each run names
    mns = args.max_num_seqs
    mnt = args.max_num_batched_tokens
    if args.spec is not None and not 0 <= args.spec <= 15:
        raise MlaprofError(f"--spec must be 0..15, got {args.spec}")
    if args.from_run:
        with load(resolve_run(args.from_run, args.traces)) as run:
            want = None if args.spec is None else 1 + args.spec
            counts, run_qlen, source = ps.counts_from_run(run, want)
            sc = run.meta.get("scenario") if isinstance(run.meta.get("scenario"), dict) else {}
            mns = mns or sc.get("max_num_seqs")
            mnt = mnt or sc.get("max_num_batched_tokens") or None
            device = sc.get("target")
            named += run_vllm_version(run.meta, f"run {run.name}")
    else:
        counts, source = ps.counts_from_file(Path(args.counts))
    qlen = 1 + args.spec if args.spec is not None else run_qlen or Scenario().qlen
    mns = int(mns or max(256, max(counts)))
    if not 1 <= mns <= 4096:
        raise MlaprofError(f"--max-num-seqs must be 1..4096, got {mns}")
    check_batched_tokens(mnt, mns)
    mem = None
    if args.memory_from_run:
        with load(resolve_run(args.memory_from_run, args.traces)) as mrun:
            mem = ps.memory_from_run(mrun)
            named += run_vllm_version(mrun.meta, f"memory run {mrun.name}")
    version, version_from, version_notes = pick_version(args.vllm_version, named, DEFAULT_VERSION)
    size_rule = args.vllm or rule_for(version)
    given = int_list(args.default_sizes, "--default-sizes") if args.default_sizes else None
    default_plan = capture_plan(size_rule, mns, qlen - 1, given, mnt, device=device)
    default = default_plan.tokens
    # 0.32/0.33 run either model runner (capture_sizes.model_runner): say which
    runner = f", model runner {default_plan.runner}" if size_rule == "vllm-0.32" else ""
    if given:
        kept = f"{default}" if default else f"{given}: none kept, see the notes"
        rule = f"given list {kept} (vLLM {version} dispatch{runner})"
    else:
        rule = (
            f"vLLM {version} ({size_rule}{runner})"
            if size_rule == rule_for(version)
            else f"rule {size_rule}, dispatched as {dispatch_of(size_rule)}"
        ) + (f", max_num_batched_tokens {mnt}" if mnt else "")
    if args.memory_log:
        mem = ps.memory_from_log(Path(args.memory_log), default, rule)
    elif args.memory_model:
        mem = ps.memory_from_spec(args.memory_model)
    if args.budget_gib is not None and args.budget_gib <= 0:
        raise MlaprofError(f"--budget-gib must be > 0, got {args.budget_gib}")
    if args.max_graphs is not None and args.max_graphs < 1:
        raise MlaprofError(f"--max-graphs must be >= 1, got {args.max_graphs}")
    plan = make_plan(
        counts,
        qlen,
        mns,
        default,
        rule,
        source,
        mem,
        budget_bytes=args.budget_gib * GIB if args.budget_gib else None,
        max_graphs=args.max_graphs,
        cover_all=args.cover_all,
        default_plan=default_plan,
        max_num_batched_tokens=mnt,
        device=device,
        vllm_version=(version, version_from),
    )
    plan.notes[:0] = version_notes
    if args.json:
        print(json.dumps(plan.to_dict(), indent=1))
    else:
        from mlaprof.reporters.plan import print_plan

        print_plan(plan)
    return 0


# where a run.json names the vLLM version its batches ran on or model: a scenario's modelled
# release, the route recorded at run start, an engine's installed vLLM (the plugin), an imported
# trace's (mlaprof.importers.kineto) or vLLM log's last start (mlaprof.importers.vllm_log). Never "versions": that is the recording machine's install.
RUN_VERSION_KEYS = (
    (("scenario", "vllm_version"), "its scenario's vllm_version"),
    (("route", "version"), "its recorded route"),
    (("vllm",), "the engine's vLLM"),
    (("vllm_version",), "the vLLM of the imported trace or log"),
)


def run_vllm_version(meta: Mapping[str, Any], run: str) -> list[tuple[str, str]]:
    """The vLLM version ``meta`` (a run.json) names first in :data:`RUN_VERSION_KEYS`, and where
    (``run``: how the output names the run); [] where it names none."""
    for keys, where in RUN_VERSION_KEYS:
        v: Any = meta
        for k in keys:
            v = v.get(k) if isinstance(v, Mapping) else None
        if v not in (None, ""):
            return [(str(v), f"{run} ({where})")]
    return []


def pick_version(
    flag: str | None, named: list[tuple[str, str]], default: str
) -> tuple[str, str, list[str]]:
    """The vLLM version modelled, where it came from, and notes: ``--vllm-version`` wins, else
    the first version a run names that mlaprof models (a release of a modelled minor stands for
    it), else ``default``, said as such. A run naming another version is noted, never dropped."""
    from mlaprof.capture_sizes import modelled_version

    notes: list[str] = []
    chosen: tuple[str, str] | None = (flag, "--vllm-version") if flag else None
    for text, where in named:
        v = modelled_version(text)
        if chosen is None and v is not None:
            same = "" if v == text else f" (names {text}: modelled as {v}, its minor release)"
            chosen = (v, where + same)
        elif v is None:
            notes.append(f"{where} names vLLM {text}, which mlaprof does not model: not used")
        elif v != chosen[0]:
            notes.append(f"{where} names vLLM {text}; the plan models {chosen[0]} ({chosen[1]})")
    if chosen is None:
        chosen = (default, "the default, the newest modelled release: nothing given names a "
                  "vLLM version mlaprof models (--vllm-version does)")  # fmt: skip
    return chosen[0], chosen[1], notes
