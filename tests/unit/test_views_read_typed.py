"""No view module reads a run summary (or the diff) by string key: the terminal report, the
Markdown and HTML reports, the figures, the rows layer and the TUI read the typed sections'
attributes (mlaprof.analysis.sections), so a renamed or retyped field fails where it is read,
and a field added to a section reaches every view through the rows layer. Held by reading the
views' source (AST): every ``x["key"]``, ``x.get("key")``, ``to_json()`` and ``to_json(x)`` in
them is listed here, each with what it reads instead of a summary."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
VIEWS = [
    *sorted((ROOT / "mlaprof" / "reporters").glob("*.py")),
    *sorted((ROOT / "mlaprof" / "figures").glob("*.py")),
    *sorted((ROOT / "mlaprof" / "tui").glob("*.py")),
    *sorted((ROOT / "mlaprof" / "tui" / "widgets").glob("*.py")),
    *sorted((ROOT / "mlaprof" / "tui" / "screens").glob("*.py")),
]
# views of something else than a run summary: the what-if grid (a modelled DataFrame)
OTHER = {
    "mlaprof/reporters/whatif.py",
    "mlaprof/tui/screens/whatif.py",
    "mlaprof/figures/whatif.py",
}
# (module, function) -> what its string keys read, which is no summary
ALLOWED = {
    ("mlaprof/reporters/renderer.py", "render"): "the JSON view writes the document itself",
    ("mlaprof/reporters/rows.py", "summary_blocks"): "the rows layer's own title registry",
    ("mlaprof/tui/view.py", "build_view"): "run.json's meta, shown before a summary lands",
    ("mlaprof/tui/widgets/styles.py", "notify_style_update"): "the widget's own style cache",
    ("mlaprof/figures/_common.py", "table"): "a notebook's DataFrame column",
    ("mlaprof/figures/_common.py", "is_empty"): "the figure's own layout meta",
    ("mlaprof/figures/diff.py", "diff_table"): "the diff's typed rows as a notebook DataFrame",
    ("mlaprof/figures/diff.py", "run_diff"): "that DataFrame's column",
    ("mlaprof/figures/png.py", "find_chrome"): "the environment",
    ("mlaprof/figures/png.py", "write_pngs"): "the environment",
}


def key_reads(path: Path) -> list[tuple[str, int, str]]:
    """(enclosing function, line, source) of every read by string key or to_json() call."""
    out: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, func: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = node.name
        hit = (
            (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            )
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "to_json"
            )
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and (
                    node.func.attr == "to_json"
                    or (
                        node.func.attr == "get"
                        and bool(node.args)
                        and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str)
                    )
                )
            )
        )
        if hit:
            out.append((func, node.lineno, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, func)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return out


def test_no_view_reads_a_summary_by_string_key() -> None:
    bad = []
    for path in VIEWS:
        rel = path.relative_to(ROOT).as_posix()
        if rel in OTHER:
            continue
        for func, line, src in key_reads(path):
            if (rel, func) not in ALLOWED:
                bad.append(f"{rel}:{line} in {func}(): {src}")
    assert not bad, "views reading by string key (read the typed section instead):\n" + "\n".join(
        bad
    )


def test_the_scan_sees_a_string_key_read(tmp_path: Path) -> None:
    """The scan is not blind: a summary read as a dict, or through its JSON, is found."""
    src = tmp_path / "v.py"
    src.write_text(
        "def render(s):\n"
        "    doc = s.to_json()\n"
        "    pad = to_json(s.padding)\n"
        "    return doc['capture']['text'] + s.padding.get('text') + pad\n",
        encoding="utf-8",
    )
    found = [code for _, _, code in key_reads(src)]
    assert "s.to_json()" in found and "doc['capture']" in found
    assert "s.padding.get('text')" in found and "to_json(s.padding)" in found
    assert all(func == "render" for func, _, _ in key_reads(src))
