"""The source of a vLLM release that cannot run here (0.33.0, 0.34.0: CUDA wheels), read from its
unpacked wheel, and its pure functions executed on the CPU.

``source(version)`` finds the unpacked ``vllm/`` (``MLAPROF_VLLM_SRC``, default
``~/.cache/mlaprof-vllm-src/<version>``), running ``scripts/vllm_wheels.sh`` to download and
unpack it when missing; the calling test module is skipped, saying why, only when the package
index cannot be reached. ``load(path, names, ns)`` compiles the named top-level functions, classes
and constants (``name``) or methods and class constants (``Class.name``) of one file out of its
syntax tree into ``ns``, without importing the module (which needs CUDA, torch builds and
vLLM's whole package): the test supplies whatever else they read. ``expression(path, function,
target)`` is the right-hand side of an assignment inside a function (a gate computed inline).
"""

from __future__ import annotations

import ast
import os
import subprocess
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def source(version: str) -> Path:
    """The unpacked ``vllm`` package of ``version`` (downloaded and unpacked when missing)."""
    base = Path(os.environ.get("MLAPROF_VLLM_SRC") or Path.home() / ".cache/mlaprof-vllm-src")
    pkg = base / version / "vllm"
    if not (pkg / "__init__.py").exists():
        res = subprocess.run(
            ["bash", str(ROOT / "scripts/vllm_wheels.sh"), version],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if res.returncode != 0 or not (pkg / "__init__.py").exists():
            why = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.skip(
                f"vLLM {version}'s wheel could not be downloaded (the package index is "
                f"unreachable?): scripts/vllm_wheels.sh exit {res.returncode}: {why[0][:160]}",
                allow_module_level=True,
            )
    return pkg


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _defines(node: ast.stmt, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    return isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name


def _top(tree: ast.Module, name: str) -> ast.stmt:
    for node in tree.body:
        if _defines(node, name):
            return node
    raise KeyError(f"{name} is not a top-level name")


def _member(cls: ast.ClassDef, name: str) -> ast.stmt:
    for node in cls.body:
        if _defines(node, name):
            return node
    raise KeyError(f"{cls.name}.{name} is not in the class")


def _exec(node: ast.stmt, path: Path, ns: dict[str, Any]) -> None:
    mod = ast.Module(body=[node], type_ignores=[])
    ast.fix_missing_locations(mod)
    exec(compile(mod, str(path), "exec"), ns)  # noqa: S102 - vLLM's own code, read from its wheel


def load(path: Path, names: list[str], ns: dict[str, Any]) -> dict[str, Any]:
    """Compile ``names`` of ``path`` into ``ns`` (see the module docstring); a method lands in
    ``ns[Class]``, a plain namespace, as a function taking ``self`` explicitly (or none, for a
    static method). Raises KeyError naming what the file no longer has."""
    tree = _tree(path)
    ns.setdefault("__name__", __name__)  # a module in sys.modules: dataclasses look it up
    for name in names:
        if "." not in name:
            _exec(_top(tree, name), path, ns)
            continue
        cls_name, member = name.split(".", 1)
        cls = _top(tree, cls_name)
        if not isinstance(cls, ast.ClassDef):
            raise KeyError(f"{cls_name} is not a class")
        node = _member(cls, member)
        holder = ns.setdefault(cls_name, types.SimpleNamespace())
        if isinstance(node, ast.FunctionDef):
            node = ast.FunctionDef(
                **{**{f: getattr(node, f) for f in node._fields}, "decorator_list": []}
            )
        missing = object()
        before = ns.get(member, missing)
        _exec(node, path, ns)  # its globals are ns: it sees what the test adds later
        setattr(holder, member, ns.pop(member))
        if before is not missing:
            ns[member] = before
    return ns


def expression(path: Path, function: str, target: str) -> ast.expr:
    """The right-hand side of ``target = ...`` in ``function`` (``Class.method`` or a top-level
    function) of ``path``."""
    tree = _tree(path)
    cls_name, _, meth = function.rpartition(".")
    fn = _member(_top(tree, cls_name), meth) if cls_name else _top(tree, meth)  # type: ignore[arg-type]
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == target for t in node.targets
        ):
            return node.value
    raise KeyError(f"{function} assigns no {target}")


def evaluate(expr: ast.expr, path: Path, names: dict[str, Any]) -> Any:
    node = ast.Expression(body=expr)
    ast.fix_missing_locations(node)
    return eval(compile(node, str(path), "eval"), dict(names))  # noqa: S307 - vLLM's own code


class RecordingLogger:
    """vLLM's ``logger`` (``warning``, ``info_once``, ...): keeps each (level, message) as vLLM's
    logging would format it, for a test that compares what vLLM says with mlaprof's words."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        level = name.removesuffix("_once").upper()
        return lambda msg, *a, **k: self.lines.append((level, msg % a if a else msg))
