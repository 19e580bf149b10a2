"""A notebook builds one summary per run and draws from it: no figure is handed a Run (a
figure takes a run summary, its series or one rank's series: mlaprof.figures), and no notebook
reads the analysis as a dict (``mlaprof.analysis.summary``) where the typed summary is there.
Held by reading the notebooks' source (the .py of each jupytext pair: tests/e2e/test_notebooks
checks the .ipynb is its twin and runs it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def _loads(node: ast.AST) -> bool:
    """Whether ``node`` holds a ``mlaprof.load(...)`` / ``load(...)`` call."""
    return any(
        isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Attribute) and n.func.attr == "load")
            or (isinstance(n.func, ast.Name) and n.func.id == "load")
        )
        for n in ast.walk(node)
    )


def _names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def run_names(tree: ast.AST) -> set[str]:
    """Every name a notebook binds to a Run (an assignment or ``with`` of a load call)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _loads(node.value):
            for t in node.targets:
                out |= _names(t)
        elif isinstance(node, ast.With):
            for item in node.items:
                if _loads(item.context_expr) and item.optional_vars is not None:
                    out |= _names(item.optional_vars)
    return out


def figure_calls_with_a_run(source: str) -> list[str]:
    """``figures.<name>(<a Run>, ...)`` calls of a notebook's source."""
    tree = ast.parse(source)
    runs = run_names(tree)
    bad = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("figures", "F")
            and node.args
            and isinstance(node.args[0], ast.Name)  # a Run itself (not summaries[run.name])
            and node.args[0].id in runs
        ):
            bad.append(ast.unparse(node))
    return bad


def test_no_notebook_hands_a_run_to_a_figure() -> None:
    assert len(NOTEBOOKS) == 6
    bad = {p.name: figure_calls_with_a_run(p.read_text(encoding="utf-8")) for p in NOTEBOOKS}
    assert not any(bad.values()), f"figures drawn from a Run, not its summary: {bad}"


def test_notebooks_that_draw_build_one_summary_per_run_and_read_it_typed() -> None:
    for p in NOTEBOOKS:
        src = p.read_text(encoding="utf-8")
        if "figures." in src and "mlaprof.load(" in src:
            assert "build_summary(" in src, f"{p.name} draws a run without its summary"
        # the dict view of the analysis: a notebook reads the typed summary instead
        assert "from mlaprof.analysis import summary" not in src, p.name


def test_the_scan_sees_a_run_handed_to_a_figure() -> None:
    """The scan is not blind: a Run bound by assignment, unpacking or ``with`` is caught."""
    src = (
        "run = mlaprof.load(d)\n"
        "a, b = (mlaprof.load(p) for p in x)\n"
        "with mlaprof.load(d) as r:\n"
        "    s = mlaprof.build_summary(r)\n"
        "figures.step_timeline(run, steps=[0])\n"
        "figures.full_vs_fallback(b)\n"
        "figures.time_breakdown(r)\n"
        "figures.time_breakdown(s)\n"
    )
    assert figure_calls_with_a_run(src) == [
        "figures.step_timeline(run, steps=[0])",
        "figures.full_vs_fallback(b)",
        "figures.time_breakdown(r)",
    ]
