"""The command lines mlaprof writes again: options with values and switches left out whole."""

import sys
from pathlib import Path

from mlaprof.argv import child_run_command, strip_options
from mlaprof.multirank import child_argv


def test_options_with_values_go_in_both_spellings():
    args = ["run", "--traces", "T", "--name=a", "--steps", "3", "--live", "-q"]
    assert strip_options(args, ("--traces", "--name"), ("--live",)) == ["run", "--steps", "3", "-q"]
    # a value that looks like another option is still the option's value
    assert strip_options(["--name", "--live", "x"], ("--name",), ("--live",)) == ["x"]


def test_rank_children_run_quietly_into_the_parents_folder():
    argv = [
        "run",
        "--ranks",
        "2",
        "--json",
        "--name",
        "mine",
        "--traces",
        "elsewhere",
        "--steps",
        "2",
    ]
    cmd = child_argv(argv, "tp2", Path("T"))
    assert cmd[:3] == [sys.executable, "-m", "mlaprof"]
    assert cmd[3:] == ["run", "--steps", "2", "--quiet", "--name", "tp2", "--traces", "T"]


def test_a_command_without_its_verb_gets_run():
    assert child_run_command(["--steps", "1"], "n", Path("t"))[3] == "run"
