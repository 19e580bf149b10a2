"""``mlaprof runs``: list the runs in a traces folder, newest first."""

from __future__ import annotations

import argparse

from mlaprof.commands.common import traces_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "runs",
        help="list recorded runs",
        description="List the runs under a traces folder (newest first) with their status, "
        "backend, device, split policy and min_kv_seq_len mode (all-rows: the padding bug; "
        "active-rows: the fix), scenario and step count.",
    )
    p.add_argument("folder", nargs="?", help="traces folder (default: $MLAPROF_TRACES or ./traces)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table

    from mlaprof.store.reader import list_runs_nested
    from mlaprof.textsafe import term

    folder = traces_dir(args.folder)
    if args.folder is None and not folder.exists():  # a first-time user: nothing recorded yet
        print(f"no runs yet under {folder}/: try 'mlaprof run'")
        return 0
    # the runs of the folder and one folder down (traces/demo/...), as the TUI picker lists them
    runs = list_runs_nested(folder)
    t = Table(title=f"runs in {term(folder)} (newest first)", title_justify="left")
    for col in ("run", "status", "backend", "device", "policy", "min_kv_mode", "scenario"):
        t.add_column(col, no_wrap=True)
    t.add_column("steps", justify="right")
    t.add_column("created", no_wrap=True)
    for r in runs:
        # every field may come from an imported trace or log: shown as data, never as markup
        t.add_row(
            term(r.name),
            term(r.status) if not r.error else f"[red]{term(r.status)}: {term(r.error)}[/]",
            term(r.backend or "-"),
            term(r.device or "-"),
            term(r.policy or "-"),
            term(r.min_kv_mode or "-"),
            term(r.scenario or "-"),
            str(r.steps),
            term(r.created[:16].replace("T", " ")),
        )
    console = Console()
    # never cut a run's policy or mode: widen past the terminal rather than fold the table
    need = Measurement.get(console, console.options.update_width(10_000), t).maximum
    Console(width=max(console.width, need)).print(t)
    if not runs:
        print("no runs yet: try 'mlaprof run'")
    return 0
