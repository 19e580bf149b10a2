"""The analysis is one set of analyzers named by question: only the evidence adapters
(``mlaprof/analysis/evidence/``) know a run's kind. Read from the source (AST), so a new branch
on the kind anywhere else fails here, and so does a module named after a run kind."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mlaprof.store.runkind import RunKind

ANALYSIS = Path(__file__).resolve().parents[2] / "mlaprof" / "analysis"
KIND_VALUES = {str(k.value) for k in RunKind}
KIND_NAMES = {"RunKind", "run_kind", "is_engine_run"}
# the attributes an Evidence branches on when code asks "which kind of run is this?"
KIND_ATTRS = {"kind", "trace"}
# the names an Evidence goes by (a summary's ``trace`` section is data a view reads, not a kind)
EVIDENCE_NAMES = {"ev", "evidence"}


def _modules() -> list[Path]:
    return sorted(
        p for p in ANALYSIS.rglob("*.py") if "evidence" not in p.relative_to(ANALYSIS).parts
    )


def _is_kind_key(node: ast.AST) -> bool:
    """``x.kind``, ``x["kind"]`` or ``x.get("kind")`` (also through ``str(...)``): where a
    run's kind is read."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "str" and node.args:
        node = node.args[0]
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        args = node.args
        return node.func.attr == "get" and bool(args) and getattr(args[0], "value", None) == "kind"
    return False


def _tests(tree: ast.AST) -> list[ast.AST]:
    """Every expression a branch is taken on."""
    out: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            out.append(n.test)
        elif isinstance(n, ast.comprehension):
            out += n.ifs
        elif isinstance(n, ast.BoolOp):
            out += n.values
        elif isinstance(n, ast.Match):
            out.append(n.subject)
    return out


def _annotation_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside type annotations: a summary field typed ``RunKind`` carries the
    kind as data, it branches on nothing."""
    roots: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.AnnAssign) or isinstance(n, ast.arg) and n.annotation is not None:
            roots.append(n.annotation)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
            roots.append(n.returns)
    return {id(x) for r in roots for x in ast.walk(r)}


def kind_branches(source: str) -> list[str]:
    """What in ``source`` branches on (or names) the run's kind, one line each."""
    tree = ast.parse(source)
    typed = _annotation_nodes(tree)
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in KIND_NAMES]
    only_typed = all(id(n) in typed for n in uses)
    bad: list[str] = []
    for n in ast.walk(tree):
        if id(n) in typed:
            continue
        if isinstance(n, ast.Name) and n.id in KIND_NAMES:
            bad.append(f"line {n.lineno}: names {n.id}")
        elif isinstance(n, ast.Attribute) and n.attr in KIND_NAMES:
            bad.append(f"line {n.lineno}: names {n.attr}")
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            mods = [n.module or ""] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names]
            names = [a.name for a in n.names]
            if (any(m.endswith("runkind") for m in mods) or "runkind" in names) and not (
                uses and only_typed
            ):
                bad.append(f"line {n.lineno}: imports mlaprof.store.runkind")
        elif isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            if any(_is_kind_key(s) for s in sides) and any(
                isinstance(s, ast.Constant) and s.value in KIND_VALUES for s in sides
            ):
                bad.append(f"line {n.lineno}: compares a kind with a run kind")
    for t in _tests(tree):
        for n in ast.walk(t):
            if (
                isinstance(n, ast.Attribute)
                and n.attr in KIND_ATTRS
                and isinstance(n.value, ast.Name)
                and n.value.id in EVIDENCE_NAMES
            ):
                bad.append(f"line {n.lineno}: branches on .{n.attr}")
    return bad


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ANALYSIS)))
def test_no_analyzer_branches_on_the_run_kind(path: Path) -> None:
    assert kind_branches(path.read_text()) == [], path


def test_no_analyzer_is_named_after_a_run_kind() -> None:
    for gone in ("imported.py", "engine.py", "engine_log.py"):
        assert not (ANALYSIS / gone).exists(), gone
    for p in _modules():
        words = set(p.stem.split("_"))
        assert not words & (KIND_VALUES | {"imported"}), p.name


@pytest.mark.parametrize(
    "source",
    [
        "if ev.trace is not None:\n    pass",
        "x = a if ev.kind is K.ENGINE else b",
        "from mlaprof.store.runkind import RunKind",
        "from mlaprof.store import runkind",
        "ok = meta.get('kind') == 'trace'",
        "ok = run.kind == 'engine'",
        "engine = str(ev.kind) == 'engine'",
        "ys = [f for f in fs if evidence.trace]",
        # typed as data and branched on: still a branch
        "from mlaprof.store.runkind import RunKind\nkind: RunKind\nok = k is RunKind.TRACE",
        "ok = ev.trace and ev.trace['x']",
    ],
)
def test_the_rule_sees_each_kind_of_branch(source: str) -> None:
    assert kind_branches(source), source


@pytest.mark.parametrize(
    "source",
    [
        "f.unreliable = f.kind != 'trust'",  # a finding's kind, not the run's
        "rows = events[events['kind'] == 'engine-step']",
        "trace = ev.trace",  # handing a section on is no branch
        "ok = steps['kind'] == 'verify'",
        "if s.trace is not None:\n    pass",  # a summary's trace section, read by a view
        # a summary field that carries the kind as data
        "from mlaprof.store.runkind import RunKind\nclass S:\n    kind: RunKind",
    ],
)
def test_the_rule_leaves_other_kinds_alone(source: str) -> None:
    assert kind_branches(source) == [], source
