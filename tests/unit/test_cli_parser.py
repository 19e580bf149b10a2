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
