"""Commands that need no frame, no SQL engine and no tensor start without pandas, DuckDB or
torch: ``--version``, ``--help`` (the whole line's and every command's), ``runs``, an error
message about a run that is not there, ``whatif``, ``plan-capture`` from a file of counts (and
its error for a file that is not there), and ``report --json`` of a run whose document its folder
keeps (mlaprof.store.summary_cache; not even NumPy); a small run's first ``report --json``
loads pandas for its analysis, and neither the ADBC driver, DuckDB, torch nor the figures'
series. Checked on the modules a fresh interpreter holds after each command (modules, not
seconds: the machine's load cannot fail it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mlaprof.cli import COMMANDS
from tests import shipped_demo

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pandas", "duckdb", "torch")
SECTIONS = "mlaprof.analysis.sections"
DEMO = shipped_demo.run("fix-padding-active-rows-c16")  # a copy: tests never touch traces/

# each command in turn in ONE fresh interpreter: the heavy modules present after each are
# recorded, so the first command that pulls one in is the one named
CHILD = """
import contextlib, io, json, sys
from mlaprof.cli import main
heavy, out = {heavy!r}, {{}}
for argv in {argvs!r}:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        rc = main(argv)
    out[" ".join(argv)] = {{"rc": rc, "heavy": sorted(m for m in heavy if m in sys.modules),
                            "said": buf.getvalue()[-300:]}}
print(json.dumps(out))
"""


def _light_commands(traces: Path) -> list[list[str]]:
    return [
        ["--version"],
        ["--help"],
        *([verb, "--help"] for verb in COMMANDS),
        ["runs", str(traces)],
        ["report", "no-such-run", "--traces", str(traces)],
        ["report", "no-such-run", "--traces", str(traces), "--json"],
        ["export", "no-such-run", "--traces", str(traces), "--format", "csv"],
        # the models and the planner from a file: arrays and words, no frame
        ["whatif", "--policy", "all", "--device", "mi355x,h200", "--json"],
        [
            "plan-capture",
            "--counts",
            str(ROOT / "examples" / "batches.txt"),
            "--spec",
            "3",
            "--json",
        ],
        ["plan-capture", "--counts", str(traces / "no-such-counts.txt"), "--spec", "3"],
    ]


def _run_child(argvs: list[list[str]], heavy: tuple[str, ...] = HEAVY) -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = CHILD.format(heavy=heavy, argvs=argvs)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_light_commands_import_no_pandas_duckdb_or_torch(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copytree(DEMO, traces / DEMO.name)  # `runs` lists a real run (opened, counted)
    # nor the summary's ~130 section classes (their dataclass generation: ~0.05 s CPU)
    got = _run_child(_light_commands(traces), (*HEAVY, SECTIONS))
    assert got["--version"]["rc"] == 0 and "mlaprof" in got["--version"]["said"]
    assert DEMO.name in got[f"runs {traces}"]["said"]
    assert got[f"report no-such-run --traces {traces}"]["rc"] == 2  # an error, in one line
    assert "not found" in got[f"report no-such-run --traces {traces}"]["said"]
    plans = [r for cmd, r in got.items() if cmd.startswith("plan-capture --counts")]
    assert [r["rc"] for r in plans] == [0, 2] and "cannot read" in plans[1]["said"]
    loaded = {cmd: r["heavy"] for cmd, r in got.items() if r["heavy"]}
    assert loaded == {}, f"commands that imported {(*HEAVY, SECTIONS)}: {loaded}"


def test_a_kept_json_report_is_light(tmp_path: Path) -> None:
    """The first ``report --json`` analyses the run (pandas) and its folder keeps the document;
    the next, in a fresh interpreter, prints the same text with none of them loaded."""
    traces = tmp_path / "traces"
    shutil.copytree(DEMO, traces / DEMO.name)
    argv = ["report", DEMO.name, "--traces", str(traces), "--json"]
    heavy = (*HEAVY, "numpy", SECTIONS)
    (first,) = _run_child([argv], heavy).values()
    (again,) = _run_child([argv], heavy).values()
    assert first["rc"] == again["rc"] == 0 and "pandas" in first["heavy"]
    assert again["heavy"] == [] and again["said"] == first["said"]


# what a small run's first ``report --json`` (analysed: pandas) still leaves out: the ADBC
# driver (its import loads pyarrow.dataset; a recorded run's tables are few rows, read through
# SQLite), DuckDB and torch, the figures' series (the JSON document holds none), and the
# adapters of the other run kinds with the analyses only they call (an imported trace's), and
# the kernel table (its patterns compiled: only a trace's kernels are matched against it)
NOT_FOR_A_FIRST_REPORT = ("adbc_driver_manager", "pyarrow.dataset", "duckdb", "torch",
                          "mlaprof.analysis.series", "mlaprof.analysis.evidence.trace",
                          "mlaprof.analysis.evidence.engine", "mlaprof.analysis.replay_time",
                          "mlaprof.kernel_table")  # fmt: skip


def test_a_first_json_report_of_a_small_run_loads_only_the_analysis(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(DEMO, traces / DEMO.name)
    argv = ["report", DEMO.name, "--traces", str(traces), "--json", "--no-cache"]
    (rec,) = _run_child([argv], ("pandas", *NOT_FOR_A_FIRST_REPORT)).values()
    assert rec["rc"] == 0 and rec["heavy"] == ["pandas"], rec["heavy"]


def test_a_csv_import_loads_neither_pandas_nor_importlib_metadata(tmp_path: Path) -> None:
    """A rocprofv3 CSV import writes run.json's versions without ``importlib.metadata`` (its
    import loads the email package, mlaprof.installed reads the same) and its rows without
    pandas, DuckDB or torch."""
    src = ROOT / "tests" / "data" / "aiter" / "asm_16heads"
    argv = ["import", "rocprof", str(src), "--traces", str(tmp_path), "--name", "t"]
    got = _run_child([argv], (*HEAVY, "importlib.metadata", "email"))[" ".join(argv)]
    assert got["rc"] == 0, got["said"]
    assert got["heavy"] == []
    versions = json.loads((tmp_path / "t" / "run.json").read_text())["versions"]
    assert versions["torch"] is not None  # read all the same


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    """The child's record is not blind: a report of a real run does load pandas."""
    traces = tmp_path / "traces"
    shutil.copytree(DEMO, traces / DEMO.name)
    got = _run_child([["report", DEMO.name, "--traces", str(traces), "--json", "--no-cache"]])
    (rec,) = got.values()
    assert rec["rc"] == 0 and "pandas" in rec["heavy"]


# a command's process: the wrapped imports ran without the collector, whose objects are then
# frozen, and the collector is on again for the work after them
GC_CHILD = """
import gc, sys
from mlaprof import cli
real = cli.main

def command(argv=None):
    code = real({argv!r})
    sys.stderr.write(f"gc on {{gc.isenabled()}} frozen {{gc.get_freeze_count()}}\\n")
    return code

cli.main = command
cli.entry()
"""


def test_a_commands_imports_are_frozen_and_the_collector_resumes(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(DEMO, traces / DEMO.name)
    argv = ["report", DEMO.name, "--traces", str(traces), "--json", "--no-cache"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", GC_CHILD.format(argv=argv)], env=env,
                       capture_output=True, text=True, check=False)  # fmt: skip
    assert p.returncode == 0, p.stderr
    on, frozen = p.stderr.split("gc on ")[1].split(" frozen ")
    assert on == "True" and int(frozen) > 100_000  # pandas' and the analysis' objects


def test_the_command_entry_sets_numpy_and_arrow_before_they_load() -> None:
    """The entry point, in a fresh process: NumPy imported by the command after it runs reads
    ``NUMPY_MADVISE_HUGEPAGE=0`` and starts no OpenBLAS worker thread (each would spin ~0.1 s
    CPU, waiting for BLAS work), and pyarrow's mimalloc finds ``MIMALLOC_ALLOW_THP=0`` set
    (mlaprof.library_env); a user's own setting stands."""
    code = (
        "import os\n"
        "import mlaprof.cli as c\n"
        "def main():\n"
        "    threads = len(os.listdir('/proc/self/task'))\n"
        "    import numpy\n"
        "    core = getattr(numpy, '_core', None) or numpy.core\n"
        "    started = len(os.listdir('/proc/self/task')) - threads\n"
        "    print(core.multiarray._get_madvise_hugepage(), os.environ['MIMALLOC_ALLOW_THP'],\n"
        "          os.environ['OPENBLAS_NUM_THREADS'], started)\n"
        "    return 0\n"
        "c.main = main\n"
        "c.entry()\n"
    )
    ours = ("NUMPY_MADVISE_HUGEPAGE", "MIMALLOC_ALLOW_THP", "OPENBLAS_NUM_THREADS")
    choosers = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS")
    env = {k: v for k, v in os.environ.items() if k not in ours + choosers}
    # OpenBLAS starts a worker per core past the first (none on one core)
    workers = min(2, os.cpu_count() or 1) - 1
    for chosen, said in ((None, "False 0 1 0"), ("1", f"True 1 2 {workers}")):
        if chosen is not None:
            env["NUMPY_MADVISE_HUGEPAGE"] = env["MIMALLOC_ALLOW_THP"] = chosen
            env["OPENBLAS_NUM_THREADS"] = "2"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        assert out.stdout.strip() == said
