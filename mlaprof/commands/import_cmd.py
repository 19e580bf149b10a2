"""``mlaprof import rocprof|kineto|vllm-log PATH``: turn a profiler trace or an engine log into a
run (all or nothing: a failed import leaves no run folder behind)."""

from __future__ import annotations

import argparse
import importlib
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mlaprof.commands.common import add_traces_arg, check_traces, traces_dir
from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import counted
from mlaprof.textsafe import plain_lines

if TYPE_CHECKING:
    from mlaprof.importers.common import ImportSummary


@dataclass(frozen=True)
class Importer:
    """One trace or log format: what it reads, and the function that imports it (a
    ``module:function`` imported on use, so ``import kineto`` never loads the rocpd reader)."""

    reads: str  # what PATH is, for --help
    entry: str  # "mlaprof.importers.<module>:<function>"(path, traces, name[, matcher])
    kernels: bool  # the importer recognises MLA kernels (takes the kernel matcher)

    def load(self) -> Callable[..., tuple[Path, ImportSummary]]:
        module, func = self.entry.split(":")
        return getattr(importlib.import_module(module), func)


# the one table of formats ``mlaprof import`` reads: adding a format is one row here
IMPORTERS: dict[str, Importer] = {
    "rocprof": Importer(
        "rocprofv3 output: a CSV or JSON file, a rocpd .db, or an output folder",
        "mlaprof.importers.rocprof:import_rocprof",
        True,
    ),
    "kineto": Importer(
        "PyTorch profiler (Kineto) trace, .json or .json.gz, or a folder of them (vLLM's "
        "torch profiler: one rank per worker)",
        "mlaprof.importers.kineto:import_kineto",
        True,
    ),
    "vllm-log": Importer(
        "vLLM server/engine log (starts, config, backends, spec decoding, graph capture)",
        "mlaprof.importers.vllm_log:import_vllm_log",
        False,
    ),
}
KINDS = {k: v.reads for k, v in IMPORTERS.items()}


EPILOG = """\
examples:
  mlaprof import rocprof out/                         a rocprofv3 output folder (CSV, JSON or .db)
  mlaprof import rocprof out/ --name bug && mlaprof report bug
  mlaprof import kineto tests/data/kineto_graph_replay.json.gz   a PyTorch profiler trace
  mlaprof import kineto tests/data/vllm/cpu_mla_profile   vLLM's profiler folder (ranks)
  mlaprof import vllm-log tests/data/vllm/cpu_ngram_serve.log   a real vllm serve log
  mlaprof import rocprof out/ --mla-pattern y:my_fork_mla_kernel   S on grid y
  mlaprof import rocprof out/ --patterns examples/my_kernels.toml   see docs/trace_io.md
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="import a rocprofv3 / Kineto trace or a vLLM log as a run",
        description=textwrap.fill(
            "Import a trace or log into the run store. "
            + "; ".join(f"{k}: {v}" for k, v in KINDS.items())
            + ". MLA kernels are recognised by whole name from one table of every AITER / vLLM "
            "path (docs/trace_io.md); S and the batch rows are read from the grid axis each path "
            "uses (gluon: y, ASM and Triton: z; the persistent ASM kernel decides S on the "
            "device).",
            78,
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kind", choices=sorted(KINDS), help="what PATH is")
    p.add_argument("path", type=Path, help="file or folder to import")
    add_traces_arg(p)
    p.add_argument("--name", help="run name (default: derived from PATH)")
    p.add_argument(
        "--mla-pattern",
        action="append",
        default=[],
        metavar="[AXIS:]REGEX",
        help="extra stage-1 MLA kernel (whole-name regex) with the grid axis holding S: "
        "x, y, z, device (S not on the grid) or none; plain REGEX reads S from z. Known "
        "kernels keep their own axes (gluon: y, ASM: z). Repeatable",
    )
    p.add_argument(
        "--patterns",
        type=Path,
        metavar="FILE",
        help="JSON list or TOML [[pattern]] tables extending the kernel table, checked first: "
        "name (whole-name regex), role (stage1, stage2, reduce, metadata), split_axis "
        "(x, y, z, device, none; required for stage1), rows_axis, qlen_axis, path; or the "
        "name aiter-pr4758 (open AITER PR #4758: split-major gluon grid)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import threading

    from mlaprof import library_env
    from mlaprof.kernel_table import KernelMatcher, load_patterns
    from mlaprof.store import runmeta

    library_env.one_malloc_arena()  # before any thread of the import allocates

    # what run.json records of the tool (package versions, git revision) is asked while the
    # importer's first reads run, not after them
    threading.Thread(target=runmeta.provenance, daemon=True).start()

    if args.name is not None:  # refuse a name that leaves the traces folder before any work
        from mlaprof.store.runmeta import folder_name

        folder_name(args.name)
    matcher = KernelMatcher()
    if args.patterns:
        matcher = matcher.with_user(load_patterns(args.patterns))
    if args.mla_pattern:
        matcher = matcher.with_extra(args.mla_pattern)
    traces = check_traces(traces_dir(args.traces))
    _readable_input(args.path)
    importer = IMPORTERS[args.kind]
    extra = (matcher,) if importer.kernels else ()
    try:
        run, summary = importer.load()(args.path, traces, args.name, *extra)
    except MlaprofError as e:
        from mlaprof.importers.foreign import ForeignInput, foreign_in, other_reader

        if isinstance(e, ForeignInput):
            raise  # the reader named the format already (with what lies beside it)
        # a format mlaprof does not read (an Nsight Systems report, the legacy rocprof's CSV),
        # the file or one in the folder: said for what it is
        known = foreign_in(args.path)
        if known is not None:
            raise known[1].error(known[0]) from None
        # a file another kind reads (a Kineto trace given to import rocprof): said with the
        # reader's own error, which stays first
        hint = other_reader(args.path, args.kind)
        if hint is None:
            raise
        raise MlaprofError(f"{e}; {hint}") from None
    print(plain_lines(format_summary(run, summary)))  # file names and notes are data
    return 0


def _readable_input(path: Path) -> None:
    """The checks every kind makes first, in the same words: a missing path, an empty file."""
    if not path.exists():
        raise MlaprofError(f"{path} does not exist")
    if path.is_file() and path.stat().st_size == 0:
        raise MlaprofError(f"{path} is empty")


def format_summary(run: Path, s: ImportSummary) -> str:
    rows = ", ".join(f"{n} {t}" for t, n in s.rows.items() if n) or "no rows"
    lines = [
        f"imported {s.source} ({counted(len(s.files), 'file(s)')}) -> {run}",
        f"  rows: {rows}",
    ]
    if s.mla_kernels:
        lines.append(
            f"  MLA kernels: {s.mla_kernels}; graph replays with MLA: {s.replays}; "
            f"eager MLA steps: {s.eager_steps}; layer records: {s.layers}"
        )
        for p in s.patterns:
            if p["role"] == "stage1":
                lines.append(f"  {p['path']}: S {p['s_source']}")
    lines += [f"  note: {n}" for n in s.notes]
    return "\n".join(lines)
