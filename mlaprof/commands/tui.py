"""``mlaprof tui [RUN | FOLDER]``: the live dashboard (follows a run as it is written)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlaprof.errors import MissingExtraError, MlaprofError

DEFAULT_FOLDER = Path("traces")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "tui",
        help="live dashboard of a run (or a picker over a folder of runs)",
        description="Follow a run live while it is written, or replay a finished one. A folder "
        "of runs opens a picker, newest first. Keys: ? in the dashboard.",
    )
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=DEFAULT_FOLDER,
        metavar="RUN|FOLDER",
        help="a run folder, a run's name as `mlaprof runs` lists it (demo/bug, latest), or a "
        "folder of runs (default: traces/)",
    )
    p.add_argument("--once", action="store_true", help="print a plain-text snapshot and exit")
    p.add_argument(
        "--compare",
        type=Path,
        metavar="RUN2",
        help="compare with RUN2 (bug vs fix): a folder or a run's name",
    )
    p.add_argument("--rank", type=int, metavar="N", help="show rank N (default: all ranks)")
    p.set_defaults(func=run)


def _named(path: Path) -> Path:
    """A folder as given, else a run name as ``mlaprof runs`` prints it (``demo/bug``,
    ``latest``) under $MLAPROF_TRACES or ./traces: the rule every command shares."""
    if path.exists():
        return path
    from mlaprof.commands.common import resolve_run

    try:
        return resolve_run(str(path))
    except MlaprofError:
        return path  # not a name either: waited for, or refused below as before


def wait_for(path: Path, poll_s: float = 0.5, timeout_s: float | None = None) -> bool:
    """Wait until ``path`` exists (a run about to start: ``mlaprof tui traces/<run>`` opened
    before the engine writes it). False on timeout."""
    import time

    end = None if timeout_s is None else time.monotonic() + timeout_s
    while not path.exists():
        if end is not None and time.monotonic() > end:
            return False
        time.sleep(poll_s)
    return True


def run(args: argparse.Namespace) -> int:
    path: Path = _named(args.path)
    # at a terminal, a run about to start is waited for; a script gets the error at once
    if not path.exists() and not args.once and path.parent.is_dir() and sys.stdout.isatty():
        print(f"waiting for {path} to appear (a run about to start; Ctrl-C to stop)...",
              file=sys.stderr, flush=True)  # fmt: skip
        wait_for(path)
    if not path.exists():
        raise MlaprofError(f"{path} does not exist (give a run folder or a folder of runs)")
    if not path.is_dir():
        raise MlaprofError(f"{path} is not a folder (give a run folder or a folder of runs)")
    from mlaprof.store import integrity, is_run_folder, is_run_json_folder  # lazy: no pandas

    if is_run_folder(path):  # a run, not a folder of runs: judged as `report` judges it
        integrity.check_folder(path)
    if args.compare is not None:
        args.compare = _named(args.compare)
        integrity.check_folder(args.compare)  # rank databases without run.json: said so first
        if not is_run_json_folder(args.compare):
            raise MlaprofError(f"--compare {args.compare} is not a run folder (no run.json)")
    if args.rank is not None and args.rank < 0:
        raise MlaprofError(f"--rank must be >= 0, got {args.rank}")
    if args.once:  # plain text: needs no textual
        from mlaprof.tui.once import snapshot

        print(snapshot(path, compare=args.compare, rank=args.rank), end="")
        return 0
    try:
        from mlaprof.tui.app import run_app
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] == "textual":
            raise MissingExtraError("the dashboard (textual)", "") from None  # a core dependency
        raise
    from mlaprof.commands.common import traces_dir

    return run_app(path, once=args.once, compare=args.compare, rank=args.rank,
                   traces=traces_dir(None))  # fmt: skip
