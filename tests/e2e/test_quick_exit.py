"""The ``mlaprof`` command ends its process without the interpreter's teardown
(mlaprof.quick_exit), and nothing it prints, writes or returns changes: stdout and stderr are
flushed, the exit code is the command's, ``atexit`` handlers registered during the command run,
and a command that raised gets Python's own shutdown (its traceback and status)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mlaprof.cli import main
from tests import shipped_demo

ROOT = Path(__file__).resolve().parents[2]
DEMO = shipped_demo.run("fix-padding-active-rows-c16")  # a copy: tests never touch traces/

# a child whose command is replaced: it prints a lot, registers an atexit handler, and keeps an
# object whose finaliser only the interpreter's teardown would call
CHILD = """
import atexit, sys
from mlaprof import cli
if {before!r}:  # a program that runs the command inside its own registers a handler first
    atexit.register(lambda: sys.__stderr__.write("its own handler ran\\n"))

class Teardown:
    def __del__(self):
        sys.__stderr__.write("teardown ran\\n")

kept = Teardown()

def command(argv=None):
    atexit.register(lambda: open({marker!r}, "w").write("ran"))
    sys.stdout.write("x" * 1_000_000)  # written through: past any buffer
    sys.stdout.write("end")  # held in the buffers until something flushes them
    sys.stderr.write("warned")
    if {fail!r}:
        raise ValueError("the command failed")
    return 3

cli.main = command
cli.entry()
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("COVERAGE_PROCESS_START", None)
    env.pop("PYTHONUNBUFFERED", None)  # buffered, as a pipe's streams are: the flush is tested
    return env


def _child(tmp_path: Path, fail: bool, before: bool = False) -> subprocess.CompletedProcess[str]:
    code = CHILD.format(marker=str(tmp_path / "marker"), fail=fail, before=before)
    return subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                          text=True, check=False)  # fmt: skip


def test_the_command_ends_without_teardown_and_loses_nothing(tmp_path: Path) -> None:
    got = _child(tmp_path, fail=False)
    assert got.returncode == 3
    assert got.stdout == "x" * 1_000_000 + "end"  # flushed through the pipe
    assert got.stderr == "warned"
    assert (tmp_path / "marker").read_text() == "ran"  # the command's atexit handler ran
    assert "teardown ran" not in got.stderr  # the interpreter was not torn down


def test_a_command_that_raised_gets_pythons_own_shutdown(tmp_path: Path) -> None:
    got = _child(tmp_path, fail=True)
    assert got.returncode == 1
    assert "ValueError: the command failed" in got.stderr
    assert "teardown ran" in got.stderr
    assert (tmp_path / "marker").read_text() == "ran"


def test_a_program_that_registered_a_handler_first_keeps_its_shutdown(tmp_path: Path) -> None:
    got = _child(tmp_path, fail=False, before=True)
    assert got.returncode == 3 and len(got.stdout) == 1_000_003
    assert "its own handler ran" in got.stderr and "teardown ran" in got.stderr


def test_a_report_reads_the_same_from_the_process_as_in_it(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(DEMO, traces / DEMO.name)
    argv = ["report", DEMO.name, "--traces", str(traces), "--json", "--no-cache"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    got = subprocess.run([sys.executable, "-m", "mlaprof", *argv], env=_env(), cwd=tmp_path,
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert got.returncode == 0 and got.stdout == buf.getvalue()
    bad = subprocess.run([sys.executable, "-m", "mlaprof", "report", "nope", "--traces",
                          str(traces)], env=_env(), capture_output=True, text=True, check=False)  # fmt: skip
    assert bad.returncode == 2 and "not found" in bad.stderr
