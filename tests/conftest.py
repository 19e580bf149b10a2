"""Shared fixtures: small scenarios and runs made on the CPU."""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlaprof.scenario import Scenario

ROOT = Path(__file__).resolve().parents[1]
TIERS = ("unit", "e2e")
# a test that exercises a check: it expects a refusal, an error, a warning or exit status 2
CHECKS = re.compile(
    r"pytest\.raises|UsageError|SystemExit|\berror|refus|reject|invalid|warn|== 2\b|\brc\b"
)


def exercises_a_check(source: str) -> bool:
    return bool(CHECKS.search(source))


# pytest-xdist's ``--dist loadgroup`` (scripts/test.sh) runs each group on one worker. A test's
# group is its file (module fixtures are made once), unless the module names another:
# ``WORKER_GROUP = "name"`` joins the files that share a per-process cache (tests/shipped_runs.py:
# the shipped runs imported and summarised once per worker), ``WORKER_GROUP = EACH_TEST`` spreads
# a file whose tests are independent child processes over the workers.
EACH_TEST = "each-test"


def worker_group(item: pytest.Item) -> str:
    group = getattr(getattr(item, "module", None), "WORKER_GROUP", None)
    if group == EACH_TEST:
        return item.nodeid
    return str(group) if group else str(Path(str(item.fspath)).resolve().relative_to(ROOT))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test carries the marker of its tier folder, so ``-m unit`` selects what ``tests/unit``
    holds (and a file outside both tiers is an error, not a test that no tier runs). A test whose
    body expects a refusal is marked ``checks``: scripts/test.sh runs those under ``python -O``.
    Each test gets its worker group (:func:`worker_group`)."""
    tiers: dict[str, str] = {}  # per file: its tier folder
    checks: dict[object, bool] = {}  # per test function (a parametrized one read once)
    for item in items:
        path = str(item.fspath)
        if path not in tiers:
            tiers[path] = Path(path).resolve().relative_to(ROOT / "tests").parts[0]
        if tiers[path] not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: tests live in tests/unit or tests/e2e")
        item.add_marker(tiers[path])
        item.add_marker(pytest.mark.xdist_group(worker_group(item)))
        fn = getattr(item, "function", None)
        if fn not in checks:
            try:
                source = inspect.getsource(fn) if fn is not None else ""
            except (OSError, TypeError):
                source = ""
            # unknown source: keep it in the -O run
            checks[fn] = not source or exercises_a_check(source)
        if checks[fn]:
            item.add_marker("checks")


def pytest_addoption(parser: pytest.Parser) -> None:
    # pyproject.toml sets pytest-asyncio's asyncio_mode; an environment without that plugin
    # (the vLLM tier's, scripts/test_vllm.sh, which runs no async test) would warn "unknown
    # config option" at every run: the key is declared here only where the plugin is absent
    import importlib.util

    if importlib.util.find_spec("pytest_asyncio") is None:
        parser.addini("asyncio_mode", "pytest-asyncio's mode (the plugin is not installed here)")


def pytest_configure(config: pytest.Config) -> None:
    # scripts/test.sh's -O run: every process of it (xdist workers too) has asserts compiled out
    if os.environ.get("MLAPROF_EXPECT_O") == "1" and not sys.flags.optimize:
        raise pytest.UsageError(
            "MLAPROF_EXPECT_O=1 but asserts are on here (an xdist worker needs PYTHONOPTIMIZE=1)"
        )


_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not os.environ.get("MLAPROF_TEST_CPU"):
        return
    if report.outcome != "passed" and _OUTCOMES.get(report.nodeid) != "failed":
        _OUTCOMES[report.nodeid] = report.outcome  # the worst phase's: failed, else skipped


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ANN201
    """``MLAPROF_TEST_CPU=FILE`` appends one JSON line per test: its wall time and the CPU time
    of this process and of the child processes it waited for (set-up and teardown included). On
    a shared machine CPU time, not wall time, says where a tier's time goes."""
    out = os.environ.get("MLAPROF_TEST_CPU")
    if not out:
        yield
        return
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0, c0 = time.perf_counter(), time.process_time()
    yield
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = {
        "test": item.nodeid,
        "wall": round(time.perf_counter() - w0, 4),
        "cpu": round(time.process_time() - c0, 4),
        "children": round(kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime, 4),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "outcome": _OUTCOMES.pop(item.nodeid, "passed"),
    }
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.fixture(autouse=True)
def _seeded(request: pytest.FixtureRequest) -> None:
    """Every test starts from seeds of its own name: random data reproduces whatever the order
    (tests that draw data pass their own seeds as well)."""
    seed = zlib.crc32(request.node.nodeid.encode())
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


# the working tree's folders a user's runs and exports live in: no test reads or writes them
# (tests/shipped_demo.py copies the shipped demo runs; a command runs in a temporary folder)
USER_FOLDERS = ("traces", "out")
# the committed inputs, checked once per session: a command run on a shipped run in place would
# write beside it (a report keeps its JSON document in the run folder)
COMMITTED_DATA = ("tests/data",)


def tree_state(
    root: Path = ROOT, tops: tuple[str, ...] = USER_FOLDERS
) -> dict[str, tuple[int, int]]:
    """Every file under ``root``'s ``tops`` (:data:`USER_FOLDERS`): its size and modification
    time (``__pycache__`` folders left out: importing a helper module there writes one)."""
    state = {}
    for top in tops:
        for dirpath, dirs, files in os.walk(root / top):
            # Python's bytecode cache of a module there (git ignores it): not a change
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                p = Path(dirpath) / name
                try:
                    st = p.stat()
                except FileNotFoundError:  # removed while walked: a change the next look sees
                    continue
                state[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return state


def tree_changes(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> list[str]:
    """What changed between two :func:`tree_state` looks, one line per file."""
    out = [f"added {p}" for p in sorted(after.keys() - before.keys())]
    out += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    out += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return out


@pytest.fixture(autouse=True)
def _user_folders_untouched() -> Iterator[None]:
    """A test that wrote into (or made a reader write -wal/-shm files into) the working tree's
    traces/ or out/ fails at its teardown, named: the suite is hermetic, so a user's runs never
    change what it sees and it never changes theirs."""
    before = tree_state()
    yield
    changed = tree_changes(before, tree_state())
    if changed:
        pytest.fail("the test changed the working tree's traces/ or out/ (use tmp_path):\n  "
                    + "\n  ".join(changed[:20]), pytrace=False)  # fmt: skip


_SESSION_START: dict[str, tuple[int, int]] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION_START.update(tree_state(tops=USER_FOLDERS + COMMITTED_DATA))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The whole run (module and session fixtures, xdist workers included: the controller
    looks last) left traces/, out/ and tests/data/ as they were, or the suite fails."""
    changed = tree_changes(_SESSION_START, tree_state(tops=USER_FOLDERS + COMMITTED_DATA))
    if changed:
        sys.stderr.write("\nFAILED: the test run changed the working tree's traces/, out/ or "
                         "tests/data/:\n  "
                         + "\n  ".join(changed[:20]) + "\n")  # fmt: skip
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    """Back into the collector's sight what :func:`pytest_collection_finish` froze: frozen
    objects are never freed at interpreter shutdown, and Triton's nanobind bindings (which
    vLLM loads in the vLLM tier) then printed ~27 lines of "nanobind: leaked ..." after a
    passing run, for objects this suite had only frozen."""
    import gc

    gc.unfreeze()


def small_scenario(**over) -> Scenario:
    base = Scenario(name="small", kv_lens=[70, 130, 200], layers=2, steps=2)
    return dataclasses.replace(base, **over).validate()


def child_env(**over: str) -> dict[str, str]:
    """A child process's environment that imports this checkout's mlaprof (and ``tests``) from
    any working folder: children run in temporary folders, never in the working tree."""
    e = dict(os.environ)
    e.pop("MLAPROF_TRACES", None)  # the folder a user's runs go to: never the suite's
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), e.get("PYTHONPATH")]))
    e.update(over)
    return e


def mlaprof_cli(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run the real console entry (``python -m mlaprof``) in a child process, in ``cwd`` or a
    fresh temporary folder (a command's default ``./traces`` and ``./out`` are then its own)."""
    e = child_env(**(env or {}))
    e["COLUMNS"] = "120"
    if cwd is None:
        cwd = Path(tempfile.mkdtemp(prefix="mlaprof-cli-"))
        atexit.register(shutil.rmtree, cwd, ignore_errors=True)
    return subprocess.run(
        [sys.executable, *(["-O"] if sys.flags.optimize else []), "-m", "mlaprof", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=e,
        timeout=timeout,
    )


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    d = tmp_path / "traces"
    d.mkdir()
    return d


@pytest.fixture(scope="module")
def html_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A bug run, its fix and the HTML report comparing them (bug, fix, report path)."""
    from mlaprof.figures.html_report import write_html_report
    from mlaprof.synthetic.figures import write_run

    d = tmp_path_factory.mktemp("html")
    bug = write_run(d / "traces", "bug")
    fix = write_run(d / "traces", "fix", fixed=True, fallback_steps=())
    out = write_html_report(summary_of(bug), d / "out" / "report.html", diff_of(bug, fix))
    return bug, fix, out


def summary_of(path: Path | str) -> Any:
    """The run summary of the run at ``path`` (what every view renders; views build none)."""
    import mlaprof
    from mlaprof.analysis.run_summary import build_summary

    with mlaprof.load(path) as run:
        return build_summary(run)


def diff_of(a: Path | str, b: Path | str) -> Any:
    """The analysis' typed diff of the runs at ``a`` (before) and ``b`` (after)."""
    from mlaprof.analysis.diff import diff

    return diff(summary_of(a), summary_of(b))


def pytest_collection_finish(session: pytest.Session) -> None:
    # what importing the modules and collecting made lives as long as the process: out of the
    # cyclic garbage collector's sight, its full passes no longer walk it test after test
    import gc

    gc.collect()
    gc.freeze()
