"""The summary is built typed: ``build_summary`` constructs :class:`RunSummary` by keyword from
the section objects its analyzers return. No dict document is assembled and converted by
reflection on the way (``typed_json.from_json`` reads a ``report --json`` document back, and
only :meth:`RunSummary.from_json` calls it in run_summary.py)."""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from collections.abc import Callable
from typing import Any

from mlaprof.analysis import run_summary, sections
from mlaprof.analysis.run_summary import RunSummary

# the JSON readers: none of them may run while a summary is built
READERS = {"from_json", "from_sections"}
# build-path functions of run_summary.py itself
BUILD = ("build_summary", "_build", "_sections", "_findings", "_full_graph_splits", "_imported")


def _calls(fn: Callable[..., Any]) -> set[str]:
    """The names ``fn``'s body calls (``f(...)`` and ``x.f(...)``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
    return out


def _analyzers() -> dict[str, Callable[..., Any]]:
    """The functions of mlaprof.analysis that ``_build`` and ``_sections`` call directly."""
    names = _calls(run_summary._build) | _calls(run_summary._sections)
    return {
        n: f
        for n in sorted(names)
        if callable(f := getattr(run_summary, n, None))
        and inspect.isfunction(f)
        and f.__module__.startswith("mlaprof.analysis.")
    }


def test_from_sections_is_gone_and_from_json_only_reads_a_document_back() -> None:
    assert not hasattr(RunSummary, "from_sections")
    tree = ast.parse(inspect.getsource(run_summary))
    callers = {
        fn.name
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        for node in ast.walk(fn)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in READERS
    }
    assert callers == {"from_json"}  # RunSummary.from_json, the report --json reader


def test_the_build_path_calls_no_json_reader() -> None:
    """``build_summary`` and every analyzer it calls directly build sections, never read them
    from dicts (a reflection step would hide an analyzer returning the wrong shape)."""
    fns = {n: getattr(run_summary, n) for n in BUILD} | _analyzers()
    assert {"timing_summary", "split_rows", "fleet_summary", "headline"} <= set(fns)
    bad = {n: sorted(_calls(f) & READERS) for n, f in fns.items() if _calls(f) & READERS}
    assert bad == {}


def _dict_shaped(tp: Any) -> bool:
    """A dict of anything, or a union holding one (a section returned as a dict)."""
    if tp is dict or tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin is dict:
        return typing.get_args(tp)[1] is Any
    return any(_dict_shaped(a) for a in typing.get_args(tp)) if origin is not None else False


def test_every_analyzer_the_build_calls_returns_a_typed_value() -> None:
    """What each analyzer returns is its section type (or a list of them): its annotation names
    no ``dict[str, Any]``. ``split_summary`` returns the frame its rows and findings read."""
    import sys

    import pandas as pd

    bad = {}
    for name, fn in _analyzers().items():
        text = fn.__annotations__.get("return")
        # the return annotation alone, read in its module with the section types and pandas
        ns = {**vars(sys.modules[fn.__module__]), **run_summary.type_names(), "pd": pd,
              "typing": typing}  # fmt: skip
        ret = eval(text, ns) if isinstance(text, str) else text  # noqa: S307 (our own source)
        if ret is None or _dict_shaped(ret):
            bad[name] = text
    assert bad == {}


def test_sections_is_a_typed_record() -> None:
    import dataclasses

    from mlaprof.analysis.run_summary import _Sections

    assert dataclasses.is_dataclass(_Sections) and _Sections.__dataclass_params__.frozen
    ret = typing.get_type_hints(run_summary._sections, localns=vars(sections))["return"]
    assert ret is _Sections


def test_the_log_and_run_json_parts_are_built_not_reflected() -> None:
    """A log's server starts (``starts.engine_starts``) and run.json's part
    (``evidence.model.run_meta``) build their section objects: no JSON reader on the way."""
    from mlaprof.analysis import starts
    from mlaprof.analysis.evidence import model

    fns = (starts.engine_starts, starts._typed_start, model.run_meta)
    assert {f.__name__: sorted(_calls(f) & READERS) for f in fns if _calls(f) & READERS} == {}


def test_every_adapter_gathers_typed_parts_and_reflects_none() -> None:
    """Each run kind's evidence is built by keyword from its analyzers' section objects: no
    adapter calls a JSON reader, and every analyzer an adapter calls returns its section type
    (an annotation naming no dict of anything), and takes typed arguments (run.json's part as
    RunMeta): the imported trace's section and its checks, and the capture verdict of a
    scenario run and of a log."""
    import sys

    import pandas as pd

    from mlaprof.analysis.evidence import engine, log, scenario, trace

    fns = {m: [f for n, f in vars(m).items() if n.endswith(("_evidence", "_section"))
               and inspect.isfunction(f) and f.__module__ == m.__name__]
           for m in (scenario, engine, trace, log)}  # fmt: skip
    assert all(fns.values())
    assert {f.__name__: sorted(_calls(f) & READERS)
            for fs in fns.values() for f in fs if _calls(f) & READERS} == {}  # fmt: skip
    called = {
        n: f
        for m, fs in fns.items()
        for n in sorted(set().union(*(_calls(f) for f in fs)))
        if inspect.isfunction(f := getattr(m, n, None))
        and f.__module__.startswith("mlaprof.analysis.")
        and f.__module__ != m.__name__
    }
    assert {"step_mode_evidence", "trace_steps", "replay_time", "drafter_summary",
            "capture_phase", "sync_evidence", "trust_summary", "capture_summary",
            "log_capture", "signatures"} <= set(called)  # fmt: skip
    bad = {}
    for name, fn in called.items():
        text = fn.__annotations__.get("return")
        ns = {**vars(sys.modules[fn.__module__]), **vars(sections), "pd": pd, "typing": typing}
        ret = eval(text, ns) if isinstance(text, str) else text  # noqa: S307 (our own source)
        if ret is None or _dict_shaped(ret) or any(_dict_shaped(a) for a in typing.get_args(ret)):
            bad[name] = text
    assert bad == {}
    # and what they are handed is typed too: run.json's part as RunMeta, never its dict
    untyped_args = {
        (name, arg): text
        for name, fn in called.items()
        for arg, text in fn.__annotations__.items()
        if arg != "return" and ("dict[str, Any]" in str(text) or str(text) == "dict")
    }
    assert untyped_args == {}
