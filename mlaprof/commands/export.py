"""``mlaprof export RUN --format perfetto|rocpd|csv [-o PATH]``: write a run for the tools people
already use (Perfetto UI, the rocpd tools, spreadsheets)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mlaprof.commands.common import ENDED_EARLY, add_traces_arg, resolve_run
from mlaprof.errors import MlaprofError
from mlaprof.export_targets import FORMATS, default_output, exporter
from mlaprof.textsafe import plain, plain_lines


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a run to Perfetto JSON, a rocpd database or rocprofv3-style CSV",
        description="Export a run. perfetto: Chrome JSON trace for ui.perfetto.dev (kernels, "
        "per-layer slices, S used/deserved, padding and capture-memory counters, launch->kernel "
        "flows). rocpd: SQLite database in rocprofv3's rocpd schema (kernels, regions, "
        "top_kernels views). csv: a folder of rocprofv3 7.x CSVs (kernel_trace.csv, ...), which "
        "carry kernels, API calls and transfers only: mlaprof's own tables (steps, layers, syncs, "
        "splits, padding, capture memory and attempts), the scenario, device and the run's status "
        "are not in them, so an import of the CSVs reads another run (steps counted from the "
        "kernels, no capture verdict, a killed run as finished); the export prints what this "
        "run loses (rocpd keeps every table). A run "
        "of several ranks keeps them apart: a process track each (perfetto), a set of CSVs or "
        "a rocpd database each, in rocprofv3's <host>/<pid>_ layout where every rank's host "
        "and pid are known, else rank<N>/ (csv, rocpd: a folder), so that an import reads "
        "them back as ranks.",
    )
    p.add_argument("run", help="run folder, run name under the traces folder, or 'latest'")
    p.add_argument("--format", required=True, choices=sorted(FORMATS), help="output format")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="output path (default: ./out/<run><suffix> under the current directory, never "
        "overwriting; the path is printed)",
    )
    add_traces_arg(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from mlaprof.store import load

    run_dir = resolve_run(args.run, args.traces)
    with load(run_dir) as run:
        out = args.output or default_output(run_dir, args.format, ranks=len(run.ranks))
        if os.path.lexists(out):  # a dangling symlink too: never written through
            raise MlaprofError(f"{out} already exists; choose another -o")
        out.parent.mkdir(parents=True, exist_ok=True)
        if run.status in ENDED_EARLY and run.count("steps") == 0:
            why = f": {run.reason}" if run.reason else ""
            raise MlaprofError(f"run {run_dir.name} {run.status} before recording a step{why}")
        lost = ""
        if args.format == "csv":  # what the layout cannot carry, said before it is dropped
            from mlaprof.exporters.csv_export import csv_losses, losses_text

            lost = losses_text(csv_losses(run))
        counts = exporter(args.format)(run, out)
        ranks = len(run.ranks)
    shown = ", ".join(f"{n} {k}" for k, n in counts.items())
    if ranks > 1:  # the counts add every rank's rows: said so, never a silent sum
        shown += f"; counted over its {ranks} ranks, each exported as its own process"
    print(plain(f"exported {run_dir.name} as {args.format} -> {out} ({shown})"))
    if lost:
        print(f"mlaprof: warning: {plain_lines(lost)}", end="", file=sys.stderr)
    if counts and not any(counts.values()):
        print(
            f"mlaprof: warning: {plain(run_dir.name)} has nothing to export ({shown})",
            file=sys.stderr,
        )
    return 0
