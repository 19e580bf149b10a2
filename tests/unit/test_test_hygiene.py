"""The suite's own rules: random data is seeded (a failure reproduces), and the tiers hold."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

TESTS = ROOT / "tests"
# draws that take no seed: numpy's fresh generator, the random module's global functions, an
# unseeded Random, and torch's global generator (a generator= argument seeds it)
UNSEEDED = [
    (re.compile(r"default_rng\(\s*\)"), "np.random.default_rng() without a seed"),
    (re.compile(r"\brandom\.Random\(\s*\)"), "random.Random() without a seed"),
    (
        re.compile(r"(?<![\w.])random\.(randrange|randint|random|choice|choices|shuffle|sample)\("),
        "the random module's global generator",
    ),
    (re.compile(r"np\.random\.(rand|randn|randint|random|choice|normal)\("), "numpy's global generator"),
    (re.compile(r"torch\.(rand|randn|randint|randperm)\((?![^)]*generator=)[^)]*\)"), "torch's global generator"),
]  # fmt: skip


def unseeded_draws(text: str) -> list[tuple[int, str]]:
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        out += [(no, why) for rx, why in UNSEEDED if rx.search(code)]
    return out


@pytest.mark.parametrize(
    "line, bad",
    [
        ("rng = np.random.default_rng()", True),
        ("rng = np.random.default_rng(7)", False),
        ("x = random.randrange(10)", True),
        ("x = rng.randrange(10)", False),
        ("r = random.Random()", True),
        ("r = random.Random(3)", False),
        ("q = torch.randn(4, 8)", True),
        ("q = torch.randn(4, 8, generator=g)", False),
        ("x = np.random.rand(3)", True),
    ],
)
def test_the_rule_sees_unseeded_draws(line: str, bad: bool) -> None:
    assert bool(unseeded_draws(line)) is bad


def test_every_test_seeds_its_random_data() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{no}: {why}"
        for p in sorted(TESTS.rglob("*.py"))
        if p.name != "test_test_hygiene.py"
        for no, why in unseeded_draws(p.read_text())
    ]
    assert not found, "unseeded random data:\n" + "\n".join(found)


def test_tests_live_in_a_tier() -> None:
    loose = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert not loose, f"move into tests/unit or tests/e2e: {loose}"
    assert (TESTS / "unit").is_dir() and (TESTS / "e2e").is_dir()


@pytest.mark.parametrize(
    "body, check",
    [
        ("with pytest.raises(MlaprofError, match='bad'):\n    load(p)", True),
        ("assert main(['report', 'zzz']) == 2", True),
        ("assert 'mlaprof: error:' in err", True),
        ("assert any('UNRELIABLE' in w for w in run.warnings)", True),
        ("assert res.rc == 0 and 'refused' in res.err", True),
        ("assert split_count(8, 4) == 20", False),
        ("assert main(['report', 'bug']) == 0", False),
    ],
    ids=["raises", "exit-2", "error-line", "warning", "refused", "number", "exit-0"],
)
def test_the_minus_o_run_takes_the_tests_that_expect_a_refusal(body: str, check: bool) -> None:
    """scripts/test.sh runs the tests marked ``checks`` under ``python -O``: those whose body
    expects a refusal, an error or a warning (tests/conftest.py marks them by their source)."""
    from tests.conftest import exercises_a_check

    assert exercises_a_check(body) is check


def test_the_marker_is_on_the_collected_tests(request: pytest.FixtureRequest) -> None:
    marked = {i.name.split("[")[0] for i in request.session.items if i.get_closest_marker("checks")}
    assert "test_the_minus_o_run_takes_the_tests_that_expect_a_refusal" in marked
    assert "test_the_rule_sees_unseeded_draws" not in marked


# a test that names the working tree's traces/ or out/, or runs a child there: the suite reads
# a copy of the shipped runs (tests/shipped_demo.py) and runs commands in temporary folders
USER_FOLDER = re.compile(
    r"""(ROOT|parents\[\d\]|\.parent)\s*/\s*["'](traces|out)\b|["']traces/demo\b|cwd=ROOT\b"""
)


def user_folder_uses(text: str) -> list[int]:
    return [
        no
        for no, line in enumerate(text.splitlines(), 1)
        if USER_FOLDER.search(line.split("#", 1)[0]) and "# in the temporary copy" not in line
    ]


@pytest.mark.parametrize(
    "line, bad",
    [
        ('DEMO = ROOT / "traces" / "demo"', True),
        ('DEMO = Path(__file__).resolve().parents[2] / "traces" / "demo"', True),
        ("subprocess.run(cmd, cwd=ROOT)", True),
        ('main(["runs", str(ROOT / "out")])', True),
        ('run = load("traces/demo/bug")', True),
        ("DEMO = shipped_demo.folder()", False),
        ('traces = tmp_path / "traces"', False),
        ('DATA = ROOT / "tests" / "data"', False),
    ],
)
def test_the_rule_sees_the_working_trees_user_folders(line: str, bad: bool) -> None:
    assert bool(user_folder_uses(line)) is bad


def test_no_test_reads_the_working_trees_traces_or_out() -> None:
    """The picker test once listed the working tree's traces/: one `mlaprof import` by a user
    widened its device column and the test failed. Only tests/shipped_demo.py (which copies the
    shipped runs out) and this file name them."""
    own = {"test_test_hygiene.py", "shipped_demo.py"}
    found = [
        f"{p.relative_to(ROOT)}:{no}"
        for p in sorted(TESTS.rglob("*.py"))
        if p.name not in own
        for no in user_folder_uses(p.read_text())
    ]
    assert not found, "the working tree's traces/ or out/ in a test:\n" + "\n".join(found)


def test_the_guard_sees_a_run_written_into_traces(tmp_path) -> None:
    """tests/conftest.py fails a test (and the suite) that changed traces/ or out/: the looks
    it compares see a new run, a changed database and a removed export."""
    from tests.conftest import tree_changes, tree_state

    (tmp_path / "traces" / "demo" / "a").mkdir(parents=True)
    (tmp_path / "traces" / "demo" / "a" / "rank0.db").write_bytes(b"x")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.csv").write_text("x")
    (tmp_path / "elsewhere").write_text("not watched")
    before = tree_state(tmp_path)
    assert tree_changes(before, tree_state(tmp_path)) == []
    (tmp_path / "traces" / "new").mkdir()
    (tmp_path / "traces" / "new" / "run.json").write_text("{}")
    (tmp_path / "traces" / "demo" / "a" / "rank0.db").write_bytes(b"xy")
    (tmp_path / "out" / "a.csv").unlink()
    (tmp_path / "elsewhere").write_text("changed, not watched")
    # a helper module imported from tests/data writes its bytecode beside it (git ignores it)
    (tmp_path / "traces" / "__pycache__").mkdir()
    (tmp_path / "traces" / "__pycache__" / "make.cpython-311.pyc").write_bytes(b"pyc")
    assert tree_changes(before, tree_state(tmp_path)) == [
        "added traces/new/run.json",
        "removed out/a.csv",
        "changed traces/demo/a/rank0.db",
    ]


def test_what_the_suite_froze_is_unfrozen_before_shutdown() -> None:
    """tests/conftest.py freezes what collection made (gc.freeze); frozen objects are never freed
    at interpreter shutdown, and Triton's nanobind bindings then reported them as leaks (27
    lines after the vLLM tier). The session's end unfreezes them."""
    import gc

    from tests.conftest import pytest_unconfigure

    gc.freeze()
    assert gc.get_freeze_count() > 0
    try:
        pytest_unconfigure(None)  # type: ignore[arg-type]
        assert gc.get_freeze_count() == 0
    finally:
        gc.freeze()  # as collection left it, for the rest of this process
