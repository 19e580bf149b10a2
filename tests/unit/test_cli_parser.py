"""The command line builds only the parser of the command it runs; every command's parser is
then the one the whole command line has (same options, same defaults)."""

from __future__ import annotations

import argparse

import pytest

from mlaprof.cli import COMMANDS, _verb, build_parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _shape(p: argparse.ArgumentParser) -> list[tuple]:
    return [(tuple(a.option_strings), a.dest, repr(a.default), a.nargs) for a in p._actions]


def test_every_module_registers_the_verb_it_is_listed_under() -> None:
    assert list(_subparsers(build_parser())) == list(COMMANDS)


@pytest.mark.parametrize("verb", list(COMMANDS))
def test_one_verbs_parser_is_the_whole_lines(verb: str) -> None:
    alone = _subparsers(build_parser(verb))
    assert list(alone) == [verb]
    assert _shape(alone[verb]) == _shape(_subparsers(build_parser())[verb])


def test_what_gets_the_whole_parser() -> None:
    assert _verb(["import", "rocprof", "x"]) == "import"
    assert _verb(["plan-capture"]) == "plan-capture"
    for argv in ([], ["--help"], ["--version"], ["bogus"], ["import_cmd"], ["-h", "run"]):
        assert _verb(argv) is None


def test_a_stop_signal_is_the_commands_own(monkeypatch, capsys) -> None:
    """A stop signal noted during one command ends it (exit 128 + signum, one line) and is
    forgotten with it: later reads in the same process (a notebook, the next command) run."""
    import signal

    from mlaprof import cli
    from mlaprof.commands import runs
    from mlaprof.errors import Terminated, note_signal, signal_received

    def stopped(_args: argparse.Namespace) -> int:
        assert signal_received() is None  # an earlier command's signal is not this one's
        note_signal(signal.SIGTERM)
        raise Terminated(signal.SIGTERM)

    monkeypatch.setattr(runs, "main", stopped)
    for _ in range(2):
        assert cli.main(["runs"]) == 128 + signal.SIGTERM
        assert capsys.readouterr().err == "mlaprof: terminated by SIGTERM\n"
        assert signal_received() is None


def test_a_stop_signal_inside_a_duckdb_query_ends_as_that_signal(monkeypatch, capsys) -> None:
    """DuckDB turns the handler's exception into its own RuntimeError("Query interrupted"):
    the noted signal ends the command (one line, 128 + signum), never a traceback; any other
    RuntimeError is not taken for a signal."""
    import signal

    from mlaprof import cli
    from mlaprof.commands import runs
    from mlaprof.errors import note_signal

    def in_query(_args: argparse.Namespace) -> int:
        note_signal(signal.SIGTERM)
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(runs, "main", in_query)
    assert cli.main(["runs"]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "mlaprof: terminated by SIGTERM\n"

    def other(_args: argparse.Namespace) -> int:
        raise RuntimeError("Query interrupted")  # no signal noted: a real error

    monkeypatch.setattr(runs, "main", other)
    with pytest.raises(RuntimeError):
        cli.main(["runs"])
