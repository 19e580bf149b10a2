"""``mlaprof`` command line: one module per verb under ``mlaprof.commands`` (memray's layout).

Each command module defines ``register(subparsers) -> None`` which adds its parser and sets
``func`` (a callable taking the parsed args and returning an exit code). User errors raise
:class:`~mlaprof.errors.MlaprofError`: one line on stderr, exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from mlaprof import __version__
from mlaprof.errors import MlaprofError

# verb modules, in the order --help lists them
COMMANDS = (
    "run",
    "report",
    "runs",
    "tui",
    "import_cmd",
    "export",
    "whatif",
    "plan_capture",
    "check",
)

DESCRIPTION = """\
Profile the graph-captured MLA verify path of speculative decoding.

Typical session:
  mlaprof run                       # default scenario on the CPU: syncs, KV splits, padding
  mlaprof run --backend legacy-flat --layers 3   # the pre-fix path: 4 syncs per layer
  mlaprof report traces/<run>       # findings of a stored run (--json, --html)
  mlaprof tui traces/               # live dashboard / run picker
  mlaprof whatif                    # before running: where S collapses, what padding costs
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (exit 2) instead of usage + error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"mlaprof: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mlaprof",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mlaprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"mlaprof.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a bad argument (already reported)
        return int(e.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except MlaprofError as e:
        print(f"mlaprof: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("mlaprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
