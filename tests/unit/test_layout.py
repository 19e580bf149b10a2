"""The layout rules: no import cycles in mlaprof/ (counting lazy and type-checking
imports too), bench/ never imports tests/, only mlaprof/store opens a run's databases."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mlaprof",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports_of(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """Every project module ``path`` imports, anywhere in the file (a module named by
    ``from X import Y`` when Y is one, else X)."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, base] if base else pkg)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for t in targets:
            while t and t not in known:  # ``import mlaprof.x.y`` of a name inside a module
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, name, known) for name, path in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    found = cycles(graph())
    assert found == [], "import cycles (module -> ... -> itself): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def package_of(module: str) -> str:
    """The unit of the package-level graph: a subpackage (``mlaprof.analysis`` for every module
    under it), or a top-level module on its own (``mlaprof.scenario``)."""
    parts = module.split(".")
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def package_graph(g: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, targets in g.items():
        pa = package_of(a)
        out.setdefault(pa, set())
        out[pa] |= {package_of(b) for b in targets} - {pa}
    return out


def test_the_package_checker_folds_modules_into_packages() -> None:
    g = {"mlaprof.store.reader": {"mlaprof.importers.kineto"},
         "mlaprof.importers.kineto": {"mlaprof.store.writer"}, "mlaprof.store.writer": set()}  # fmt: skip
    assert cycles(package_graph(g)) == [["mlaprof.importers", "mlaprof.store"]]


def test_no_package_cycles() -> None:
    found = cycles(package_graph(graph()))
    assert found == [], "package cycles (package -> ... -> itself): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_bench_does_not_import_tests() -> None:
    for p in sorted((ROOT / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n == "tests" or n.startswith("tests.") for n in names), p.name


RUN_FILE = re.compile(r"rank[^ ]*\.db|run\.json")
# modules outside mlaprof/store that handle external SQLite files (rocpd databases: read, written,
# their decode errors mapped by validate), never runs
EXTERNAL_SQLITE = {
    "mlaprof.importers.rocpd_sqlite",
    "mlaprof.store.validate",
    "mlaprof.exporters.rocpd_export",
    "mlaprof.synthetic.rocpd_crafted",  # writes a crafted rocpd input for tests and bench
}


def test_only_the_store_opens_a_runs_files() -> None:
    """No sqlite3, no rank database or run.json path outside mlaprof/store (strings in
    docstrings and messages aside: only code is checked)."""
    for name, path in modules().items():
        if name.startswith("mlaprof.store") or name in EXTERNAL_SQLITE:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert "sqlite3" not in names, f"{name} imports sqlite3"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        assert not RUN_FILE.search(arg.value), (name, arg.value)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                for side in (node.left, node.right):
                    text = ast.unparse(side)
                    assert not RUN_FILE.search(text), (name, text)


def test_recording_builders_write_the_schema_columns() -> None:
    """Every row builder of mlaprof.recording names real columns of its table (a typo would be
    a run-time error on a GPU only)."""
    from mlaprof import recording
    from mlaprof.metadata import step_metadata, step_shape
    from mlaprof.scenario import Scenario
    from mlaprof.store.schema import columns

    sc = Scenario(steps=1, layers=1).validate()
    meta, shape = step_metadata(sc, 0), step_shape(sc, 0)
    rows = {
        "steps": recording.step_row(0, shape, 0, 1, "FULL", "torch", "cpu-wall"),
        "layers": recording.layer_row(0, 0, 0, 1, 0, 1, 2),
        "captures": recording.capture_row(8, "FULL", "captured", "ok"),
        "memory": recording.memory_row(8, "FULL", 1, 2, 3, 4),
        "padding": recording.padding_row(0, meta, shape),
    }
    for table, row in rows.items():
        assert set(row) <= set(columns(table)), (table, set(row) - set(columns(table)))
    # the runners build these rows there, never keyword by keyword
    by_hand = re.compile(r'writer\.add\(\s*"(steps|layers|captures|memory|padding|splits)",\s*\w+=')
    for runner in ("mlaprof/cpu_runner.py", "mlaprof/gpu/capture_runner.py"):
        assert not by_hand.search((ROOT / runner).read_text()), runner


def test_bench_scripts_import_no_circle() -> None:
    """bench/ scripts import each other by bare name (``from gpu_suite import ...``): no circle,
    and no script imports one that imports it back."""
    names = {p.stem for p in (ROOT / "bench").glob("*.py")}
    g: dict[str, set[str]] = {}
    for p in sorted((ROOT / "bench").glob("*.py")):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in names and not node.level:
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in names}
        g[p.stem] = deps - {p.stem}
    assert cycles(g) == []


def installed_packages(root: Path) -> list[str]:
    """The packages ``pip install .`` puts on the path: pyproject's ``packages.find`` rule
    applied to ``root``'s tree, as setuptools applies it."""
    import tomllib

    from setuptools import find_packages

    find = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    rule = find["find"]
    return find_packages(
        str(root), include=rule.get("include", ["*"]), exclude=rule.get("exclude", ())
    )


def test_only_mlaprof_is_installed() -> None:
    # a second top-level package (the dashboard once was ``tui``) would shadow any other
    # distribution's package of that name in the user's environment
    top = {p.split(".")[0] for p in installed_packages(ROOT)}
    if top != {"mlaprof"}:
        raise AssertionError(f"pip install would put these top-level packages on the path: {top}")
    # and no folder beside mlaprof is a package waiting for the rule to widen (tests/ is one, for
    # its own imports, and the rule above keeps it out)
    beside = sorted(
        d.name
        for d in ROOT.iterdir()
        if d.is_dir() and (d / "__init__.py").is_file() and d.name not in ("mlaprof", "tests")
    )
    if beside:
        raise AssertionError(f"top-level package folders other than mlaprof: {beside}")
