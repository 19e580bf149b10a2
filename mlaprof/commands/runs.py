"""``mlaprof runs``: list the runs in a traces folder, newest first."""

from __future__ import annotations

import argparse

from mlaprof.commands.common import traces_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "runs",
        help="list recorded runs",
        description="List the runs under a traces folder (newest first) with their scenario, "
        "backend, device, status and step count.",
    )
    p.add_argument("folder", nargs="?", help="traces folder (default: $MLAPROF_TRACES or ./traces)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from mlaprof.store.reader import list_runs

    folder = traces_dir(args.folder)
    if args.folder is None and not folder.exists():  # a first-time user: nothing recorded yet
        print(f"no runs yet under {folder}/: try 'mlaprof run'")
        return 0
    runs = list_runs(folder)
    t = Table(title=f"runs in {folder}", title_justify="left")
    for col in ("run", "created", "status", "scenario", "backend", "device", "steps"):
        t.add_column(col)
    for r in runs:
        t.add_row(
            r.name,
            r.created,
            r.status if not r.error else f"[red]{r.error}[/]",
            r.scenario,
            r.backend,
            r.device,
            str(r.steps),
        )
    Console().print(t)
    if not runs:
        print("no runs yet: try 'mlaprof run'")
    return 0
