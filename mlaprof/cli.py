"""``mlaprof`` command line: one module per verb under ``mlaprof.commands`` (memray's layout).

Each command module defines ``register(subparsers) -> None`` which adds its parser and sets
``func`` (a callable taking the parsed args and returning an exit code). User errors raise
:class:`~mlaprof.errors.MlaprofError`: one line on stderr, exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import zlib
from collections.abc import Sequence

from mlaprof import __version__
from mlaprof.errors import (
    MlaprofError,
    Terminated,
    clear_signals,
    note_signal,
    signal_received,
    stop_exception,
)

# verb -> its module, in the order --help lists them
COMMANDS = {
    "run": "run",
    "report": "report",
    "runs": "runs",
    "tui": "tui",
    "import": "import_cmd",
    "export": "export",
    "whatif": "whatif",
    "plan-capture": "plan_capture",
    "check": "check",
}

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


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (``verb``: a known command) only that command's parser: a
    command then starts without importing the other eight modules and what they import."""
    parser = _Parser(
        prog="mlaprof",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mlaprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module in COMMANDS.items():
        if verb is None or verb == name:
            importlib.import_module(f"mlaprof.commands.{module}").register(sub)
    return parser


def _verb(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names first, when it names a known one (anything else, an option
    before it included, gets the whole parser and its messages)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def _db_errors() -> tuple[type[BaseException], ...]:
    """sqlite3's errors, if anything imported sqlite3 (only the store and the rocpd modules do;
    the CLI itself stays free of it, and no database error can come from a module never loaded)."""
    mod = sys.modules.get("sqlite3")
    return (mod.Error,) if mod is not None else ()


def entry() -> None:
    """The ``mlaprof`` command (console script and ``python -m mlaprof``): :func:`main`, then
    the process ends without the interpreter's teardown (:mod:`mlaprof.quick_exit`)."""
    from mlaprof import import_gc, library_env, quick_exit

    quick_exit.arm()
    import_gc.command_process()
    library_env.command_process()
    code = main()
    quick_exit.done(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(_verb(sys.argv[1:] if argv is None else list(argv)))
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a bad argument (already reported)
        return int(e.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    previous = _stop_on_signals()
    try:
        return int(args.func(args) or 0)
    except MlaprofError as e:
        print(f"mlaprof: error: {one_line(str(e))}", file=sys.stderr)
        return e.exit_code
    except Terminated as e:
        print(f"mlaprof: terminated by {signal.Signals(e.signum).name}", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("mlaprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except RuntimeError as e:
        # a stop signal inside a DuckDB query: DuckDB swallows the handler's exception and
        # raises its own "Query interrupted"; the signal was noted, so it ends as that signal
        signum = signal_received()
        if signum is None or "interrupted" not in str(e).lower():
            raise
        if signum == signal.SIGINT:
            print("mlaprof: interrupted", file=sys.stderr)
            return 130
        print(f"mlaprof: terminated by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
    except (OSError, *_db_errors()) as e:
        # full disk, read-only target, missing permission, a database another process damaged
        print(f"mlaprof: error: {one_line(_os_message(e))}", file=sys.stderr)
        return 2
    except (UnicodeError, RecursionError, OverflowError, zlib.error, EOFError) as e:
        from mlaprof.store.validate import describe

        print(f"mlaprof: error: damaged input ({one_line(describe(e))})", file=sys.stderr)
        return 2
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        clear_signals()  # handled here: later library calls in this process must not see it


def _stop_on_signals() -> dict[int, object]:
    """SIGTERM unwinds like Ctrl-C (finally blocks run: staging folders go, runs are marked),
    instead of killing the process where it stands; both signals are also noted for C code
    that cannot take an exception (errors.signal_received). Main thread only (signal's rule)."""

    def handler(signum: int, frame: object) -> None:
        note_signal(signum)
        raise stop_exception(signum)

    clear_signals()
    previous: dict[int, object] = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        if signum == signal.SIGINT and signal.getsignal(signum) is not signal.default_int_handler:
            continue  # someone (a test runner, a notebook) handles Ctrl-C: leave it
        try:
            previous[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread (e.g. called from a test runner's worker)
            break
    return previous


MAX_MESSAGE = 600  # characters: an error names the problem, it does not replay the input


def one_line(msg: str) -> str:
    """An error message as one printable line: an SQLite error quoting a multi-line view, a file
    name with an escape sequence or a very long value would otherwise break the one-line rule."""
    from mlaprof.textsafe import plain

    msg = plain(" ".join(msg.split("\n")).replace("\r", " "))
    msg = " ".join(msg.split())
    return msg if len(msg) <= MAX_MESSAGE else msg[: MAX_MESSAGE - 3] + "..."


def _os_message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        where = f"{e.filename}: " if e.filename else ""
        return f"{where}{e.strerror}"
    return str(e).splitlines()[0] if str(e) else type(e).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
