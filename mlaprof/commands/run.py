"""``mlaprof run``: run a scenario through a verify backend, record it, print the findings."""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

from mlaprof.commands.common import (
    add_engine_model_args,
    add_traces_arg,
    add_vllm_version_arg,
    check_traces,
    traces_dir,
)
from mlaprof.errors import MlaprofError, Terminated
from mlaprof.scenario import (
    DEFAULT_THREADS,
    DEVICES,
    KV_CACHE_DTYPES,
    MIN_KV_MODES,
    MODELS,
    SCENARIOS,
    load_scenario,
)

EPILOG = """\
examples:
  mlaprof run                                    default scenario, native path (torch, CPU)
  mlaprof run --backend legacy-flat --layers 3   the pre-fix path: 4 syncs per layer
  mlaprof run --min-kv-mode active-rows          the fix: min_kv_seq_len over active rows
  mlaprof run --scenario deepseek-v3-tp8         16 heads: vLLM's persistent ASM decode
  mlaprof run --scenario examples/scenario.toml   a scenario file (keys = Scenario fields)
  mlaprof run --device cuda --backend triton     real FULL-graph capture on a GPU
  mlaprof run --live                             run in the background and watch it in the TUI
  mlaprof run --ranks 2                          2 tensor-parallel ranks (gloo), one database each
  mlaprof run --device cuda --backend triton --ranks 8   8 GPUs, all-reduce inside the FULL graph
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a scenario and record a run",
        description="Run a verify scenario through a backend, watching every layer for syncs, "
        "and record steps, layers, syncs, KV splits and padding into a run folder.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--scenario",
        default="default",
        help=f"preset ({', '.join(SCENARIOS)}) or a .toml file (default: default)",
    )
    p.add_argument(
        "--backend",
        default="torch",
        help="torch (reference, native 4-D), legacy-flat (pre-fix), triton, aiter",
    )
    p.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="where to execute (cuda: real graph capture, memory and replay timing)",
    )
    p.add_argument("--layers", type=int, help="layers to run (default: the scenario's)")
    p.add_argument("--steps", type=int, help="engine steps (default: the scenario's)")
    p.add_argument("--model", choices=sorted(MODELS), help="model preset (heads after TP)")
    p.add_argument(
        "--spec-tokens",
        type=int,
        dest="num_speculative_tokens",
        help="num_speculative_tokens, 0..7 (qlen = 1 + this)",
    )
    p.add_argument("--kv-lens", help="comma-separated KV lengths of the real requests")
    p.add_argument(
        "--min-kv-mode",
        choices=MIN_KV_MODES,
        help="min_kv_seq_len over all rows (the bug) or active rows (the fix)",
    )
    p.add_argument("--graph-mode", choices=("FULL", "PIECEWISE", "NONE"))
    p.add_argument("--policy", help="split policy driving the backend (see mlaprof.splits)")
    p.add_argument(
        "--target",
        choices=sorted(DEVICES),
        help="device preset for the split/occupancy model (default: mi355x)",
    )
    p.add_argument(
        "--kv-cache-dtype",
        choices=KV_CACHE_DTYPES,
        help="vLLM cache_dtype (auto = the model's bf16; fp8 routes verify to the ASM decode)",
    )
    add_vllm_version_arg(p)
    add_engine_model_args(p)
    p.add_argument(
        "--check-syncs",
        default="first",
        choices=("first", "all", "off"),
        help="watch the first step (default), every step, or none for syncs",
    )
    p.add_argument(
        "--ranges",
        action="store_true",
        help="emit a roctx/NVTX range per layer (rocprofv3 --marker-trace, Nsight)",
    )
    p.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help="run N tensor-parallel ranks side by side (torch.distributed: gloo on the CPU, NCCL "
        "with one GPU per rank), an all-reduce after each attention layer, every rank recorded",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help=f"torch CPU threads for the run (default {DEFAULT_THREADS}: CPU step times that "
        "a loaded machine does not multiply)",
    )
    p.add_argument("--name", help="run folder name (default: timestamp-scenario-backend-device)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or table")
    p.add_argument(
        "--live", action="store_true", help="run in a child process and follow it in the TUI"
    )
    add_traces_arg(p)
    p.set_defaults(func=main)


def scenario_from_args(args: argparse.Namespace):  # noqa: ANN201
    sc = load_scenario(args.scenario)
    over: dict = {}
    for k in (
        "layers",
        "steps",
        "model",
        "num_speculative_tokens",
        "min_kv_mode",
        "graph_mode",
        "policy",
        "target",
        "kv_cache_dtype",
        "vllm_version",
    ):
        v = getattr(args, k, None)
        if v is not None:
            over[k] = v
    if args.kv_lens is not None:  # "" too: an empty list is refused, never the default
        try:
            over["kv_lens"] = [int(x) for x in args.kv_lens.split(",") if x.strip()]
        except ValueError:
            raise MlaprofError(
                f"--kv-lens must be comma-separated integers, got {args.kv_lens!r}"
            ) from None
    if getattr(args, "max_num_batched_tokens", None) is not None:
        over["max_num_batched_tokens"] = args.max_num_batched_tokens
    if getattr(args, "aiter", None):
        from mlaprof.splits import releases

        over["aiter_version"] = args.aiter
        if args.policy is None and sc.policy.startswith("aiter-gluon-v0.1."):
            over["policy"] = releases.policy_for(args.aiter)
    if args.device == "cuda" and args.target is None:
        over["target"] = "h200"
    return dataclasses.replace(sc, **over).validate()


def main(args: argparse.Namespace) -> int:
    if args.name is not None:  # refuse a name that leaves the traces folder before any work
        from mlaprof.store.runmeta import folder_name

        folder_name(args.name)
    sc = scenario_from_args(args)
    traces = check_traces(traces_dir(args.traces))
    if args.device == "cuda":  # before torch loads and before a run folder exists
        from mlaprof.gpu.visible import check_cuda_visible

        check_cuda_visible()

    from mlaprof import multirank

    rank_ctx = multirank.from_env()
    if args.ranks is not None and rank_ctx is None:
        if args.live:
            raise MlaprofError("--live follows one process; run --ranks without it, then tui")
        return _launch_ranks(args, sc, traces)
    if args.live:
        return _live(args, traces)
    from mlaprof.backends.registry import BACKENDS

    if args.backend not in BACKENDS:
        raise MlaprofError(f"unknown backend {args.backend!r}; choose one of {', '.join(BACKENDS)}")
    from mlaprof.backends.registry import get_backend
    from mlaprof.import_gc import uncollected

    with uncollected():  # torch
        from mlaprof.cpu_runner import run_cpu, start_run, use_threads

    threads = use_threads(args.threads)

    if args.backend == "triton":  # refuse before a run folder exists
        from mlaprof.backends.triton_backend import check_runnable

        check_runnable(args.device)
    prepare = getattr(get_backend(args.backend), "prepare", None)
    if prepare is not None:  # refuse before a run folder exists (e.g. aiter without ROCm)
        prepare()
    t0 = time.perf_counter()
    rank = rank_ctx.rank if rank_ctx else 0
    writer = start_run(sc, args.backend, args.device, traces, args.name, threads, rank=rank)
    status, reason = "failed", None
    tp = None
    try:
        if rank_ctx is not None:
            tp = multirank.TensorParallel(rank_ctx, args.device)
        with _progress(args.quiet or args.json, sc.steps * sc.layers) as progress:
            if args.device == "cuda":
                try:
                    from mlaprof.gpu.capture_runner import run_cuda
                except ModuleNotFoundError as e:
                    raise MlaprofError(f"the CUDA runner is not available ({e})") from None
                run_cuda(sc, args.backend, writer, progress,
                         collective=tp.after_attention if tp else None)  # fmt: skip
            else:
                run_cpu(sc, args.backend, writer, progress, args.check_syncs, args.ranges,
                        collective=tp.after_attention if tp else None)  # fmt: skip
        status = "finished"
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (errors.Terminated)
        status = "interrupted"
        reason = f"terminated by signal {e.signum}" if isinstance(e, Terminated) else "Ctrl-C"
        raise
    except Exception as e:  # e.g. disk full: the run says why it ended
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise
    finally:
        writer.finish(status, reason)
        if tp is not None:
            tp.close()
    elapsed = time.perf_counter() - t0
    if rank_ctx is not None:  # a rank of a launched run: the launcher reports
        return 0
    _print_summary(writer.run_dir, args)
    print(f"run written to {writer.run_dir} in {elapsed:.1f} s", file=sys.stderr)
    return 0


def _launch_ranks(args: argparse.Namespace, sc, traces: Path) -> int:  # noqa: ANN001
    """``--ranks N``: the run folder first, then N rank processes into it, then the report."""
    from mlaprof import multirank
    from mlaprof.scenario_meta import run_meta
    from mlaprof.store import liveness, ranks_written, runmeta

    if not 1 <= args.ranks <= multirank.MAX_RANKS:
        raise MlaprofError(f"--ranks must be 1..{multirank.MAX_RANKS}, got {args.ranks}")
    if args.device == "cuda":
        from mlaprof.backends.triton_backend import check_runnable

        if args.backend == "triton":
            check_runnable(args.device)
    label = f"{sc.name}-{args.backend}-{args.device}-tp{args.ranks}"
    name = args.name or runmeta.reserve(traces, runmeta.new_run_name(label))
    if args.threads < 1:
        raise MlaprofError(f"--threads must be >= 1, got {args.threads}")
    meta = {
        # each rank sets torch's threads to --threads (cpu_runner.use_threads), as one rank does
        **run_meta(sc, args.backend, args.device, threads=args.threads),
        "tp": multirank.tp_meta(args.ranks, args.device),
    }
    run_dir = runmeta.make_run_dir(traces, name, join=True)
    # held from before run.json until the ranks are done: while they start (seconds), the folder
    # reads "starting", never "abandoned"
    launcher = liveness.WriterLock(run_dir, 0, liveness.LAUNCHER)
    try:
        runmeta.write_run_json(run_dir, meta)
    except BaseException:
        launcher.release()
        raise
    t0 = time.perf_counter()
    status, reason, sources = "failed", None, None
    try:
        outcomes = multirank.launch(sys.argv[1:], args.ranks, args.device, run_dir)
        reason = multirank.failure_reason(outcomes)
        status = "failed" if reason else "finished"
        sources = multirank.rank_sources(outcomes, args.ranks)
    except KeyboardInterrupt:
        status, reason = "interrupted", "Ctrl-C"
        raise
    finally:
        fields = {"status": status, **({"reason": reason} if reason else {})}
        if sources:
            fields["rank_sources"] = sources
        # the ranks whose databases were written, as an import records them: one deleted later
        # is named by every view (mlaprof.store.integrity), never read as a smaller healthy run
        fields["ranks"] = [r for r in ranks_written(run_dir) if r < args.ranks]
        try:
            runmeta.update(run_dir, **fields)
        finally:
            launcher.release()
    elapsed = time.perf_counter() - t0
    _print_summary(run_dir, args)
    if reason:
        print(f"mlaprof: error: {reason}; what the ranks recorded is in {run_dir}", file=sys.stderr)
        return 1
    print(f"run written to {run_dir} ({args.ranks} ranks) in {elapsed:.1f} s", file=sys.stderr)
    return 0


class _progress:
    """A rich progress bar on stderr (silent when quiet or not a terminal)."""

    def __init__(self, quiet: bool, total: int) -> None:
        self.quiet, self.total = quiet, total

    def __enter__(self):  # noqa: ANN204
        # nothing to draw on a pipe or file: rich (~0.06 s to import) and its refresh thread
        # are left out
        self.quiet = self.quiet or not sys.stderr.isatty()
        if self.quiet:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self._p = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._p.__enter__()
        task = self._p.add_task("layers", total=self.total)
        return lambda done, total: self._p.update(task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if not self.quiet:
            self._p.__exit__(*exc)


def _live(args: argparse.Namespace, traces: Path) -> int:
    """Start the run in a child process and follow it in the dashboard."""
    from mlaprof.store import has_ranks, runmeta

    # a default name is reserved (suffixed if taken); the child joins the folder it was given
    name = args.name or runmeta.reserve(
        traces, runmeta.new_run_name(f"{args.scenario}-{args.backend}-live")
    )
    from mlaprof.argv import child_run_command

    cmd = child_run_command(sys.argv[1:], name, traces, switches=("--live",))
    log = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the child
    child = subprocess.Popen(cmd, stdout=log, stderr=log)
    run_dir = traces / name
    for _ in range(200):  # wait for the run folder to appear (up to 20 s)
        if has_ranks(run_dir) or child.poll() is not None:
            break
        time.sleep(0.1)
    if not has_ranks(run_dir):
        raise MlaprofError(f"the run did not start (child exited with {child.poll()})")
    try:
        from mlaprof.tui.app import run_app
    except ModuleNotFoundError as e:
        child.terminate()
        from mlaprof.errors import MissingExtraError

        raise MissingExtraError("the live dashboard", "", str(e)) from None  # core: textual
    try:
        return run_app(run_dir)
    finally:
        running = child.poll() is None
        if running:
            child.terminate()
        print(live_exit_note(run_dir, running))


def live_exit_note(run_dir: Path, stopped: bool) -> str:
    """The line ``run --live`` prints when the dashboard closes: where the run is."""
    what = "run stopped early; what it recorded is in" if stopped else "run written to"
    return f"{what} {run_dir}  (mlaprof report {run_dir})"


def _print_summary(run_dir: Path, args: argparse.Namespace) -> None:
    """The finished run's summary (JSON with --json, the findings otherwise, nothing with
    --quiet); its JSON document is kept in the run folder, so the next ``report --json`` of the
    run reads it back instead of analysing it again (:mod:`mlaprof.store.summary_cache`)."""
    if args.quiet and not args.json:
        return
    from mlaprof.import_gc import uncollected

    with uncollected():  # the analysis: pandas
        from mlaprof.analysis.run_summary import build_summary
        from mlaprof.reporters.renderer import JsonRenderer
    from mlaprof.store import summary_cache
    from mlaprof.store.reader import load

    with load(run_dir) as run:
        kept = summary_cache.key(run)  # before the analysis reads the run
        s = build_summary(run, series=False)  # neither view below draws figures
        text = JsonRenderer().render(s)
        summary_cache.write(run, kept, text)
    if args.json:
        sys.stdout.write(text)
        return
    from mlaprof.reporters.terminal import print_report

    print_report(s, sections=False)
