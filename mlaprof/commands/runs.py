"""``mlaprof runs``: list the runs in a traces folder, newest first."""

from __future__ import annotations

import argparse

from mlaprof.commands.common import add_traces_arg, traces_dir
from mlaprof.errors import MlaprofError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "runs",
        help="list recorded runs",
        description="List the runs under a traces folder (newest first) with their status, "
        "backend, device, split policy and min_kv_seq_len mode (all-rows: the padding bug; "
        "active-rows: the fix), scenario and step count.",
    )
    p.add_argument("folder", nargs="?", help="traces folder (default: $MLAPROF_TRACES or ./traces)")
    add_traces_arg(p)  # the folder as every other command takes it
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table

    from mlaprof.store.reader import list_runs_nested
    from mlaprof.textsafe import term

    if args.folder and args.traces and args.folder != args.traces:
        raise MlaprofError(f"two traces folders given: {args.folder} and --traces {args.traces}")
    given = args.folder or args.traces
    folder = traces_dir(given)
    if given is None and not folder.exists():  # a first-time user: nothing recorded yet
        print(f"no runs yet under {folder}/: try 'mlaprof run'")
        return 0
    # the runs of the folder and one folder down (traces/demo/...), as the TUI picker lists them
    runs = list_runs_nested(folder)
    fields = [
        (
            term(r.name),
            term(r.status_text()) if not r.error else f"[red]{term(r.status_text())}[/]",
            term(r.backend or "-"),
            term(r.device or "-"),
            term(r.policy or "-"),
            term(r.min_kv_mode or "-"),
            term(r.scenario or "-"),
            r.steps_text(),
            term(r.created[:16].replace("T", " ")),
        )
        for r in runs  # every field may come from an imported trace or log: data, not markup
    ]
    title = f"runs in {term(folder)} (newest first)"
    t = Table(title=title, title_justify="left")
    for col in ("run", "status", "backend", "device", "policy", "min_kv_mode", "scenario"):
        t.add_column(col, no_wrap=True)
    t.add_column("steps", justify="right")
    t.add_column("created", no_wrap=True)
    for row in fields:
        t.add_row(*row)
    console = Console()
    need = Measurement.get(console, console.options.update_width(10_000), t).maximum
    if need <= console.width:
        console.print(t)
    else:  # a narrow terminal: one block per run, every field kept (a table would cut them)
        console.print(title, markup=False)
        console.print(
            "[dim]status, backend on device, policy, min_kv_mode, scenario, steps, created[/dim]"
        )
        for r, (name, status, backend, device, policy, mode, scenario, _, created) in zip(
            runs, fields, strict=True
        ):
            console.print(f"[bold]{name}[/bold]")
            console.print(
                f"  {status}  {backend} on {device}  {policy}  {mode}  {scenario}  "
                f"{r.steps_text('steps')}  {created}"
            )
    if not runs:
        print("no runs yet: try 'mlaprof run'")
    return 0
