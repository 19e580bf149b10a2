"""The summary is typed to its leaves: walking RunSummary's field types finds no ``Any``, no
bare ``dict``/``list`` and no ``object`` in any section, and every vocabulary the views branch
on is an enum."""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from typing import Any

from mlaprof.analysis.capture_status import CaptureStatus
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.run_summary import RunSummary, type_names
from mlaprof.analysis.sections import Capture, RunStatus
from mlaprof.analysis.typed_json import NULLS
from mlaprof.store.runkind import RunKind

SCALARS = (int, float, str, bool, type(None))
# a finding is its own record (kind, severity, title, evidence, fix) with a per-kind payload;
# it is not one of the summary's sections
NOT_A_SECTION = (Finding,)


def untyped(tp: Any, where: str, seen: set[type]) -> list[str]:
    """Where under ``tp`` a type says nothing (Any, object, a bare container)."""
    if tp is Any or tp is object or tp in (dict, list, tuple, set):
        return [f"{where}: {tp!r}"]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType, list, tuple, dict, set, frozenset):
        args = typing.get_args(tp)
        if not args:
            return [f"{where}: bare {tp!r}"]
        return [bad for a in args if a is not Ellipsis for bad in untyped(a, where, seen)]
    if tp in NOT_A_SECTION or tp in SCALARS:
        return []
    if isinstance(tp, type) and issubclass(tp, Enum):
        return []
    if dataclasses.is_dataclass(tp):
        if tp in seen:
            return []
        seen.add(tp)
        hints = typing.get_type_hints(tp, localns=type_names())
        return [
            bad
            for f in dataclasses.fields(tp)
            if not f.metadata.get(NULLS)
            for bad in untyped(hints[f.name], f"{where}.{f.name}", seen)
        ]
    return [f"{where}: unknown type {tp!r}"]


def test_no_section_is_untyped() -> None:
    assert untyped(RunSummary, "RunSummary", set()) == []


def test_the_walk_finds_an_untyped_section() -> None:
    @dataclasses.dataclass(frozen=True)
    class Bag:
        ok: list[int]
        bad: dict[str, Any]
        worse: dict

    assert untyped(Bag, "Bag", set()) == ["Bag.bad: typing.Any", "Bag.worse: <class 'dict'>"]


def test_vocabularies_are_enums_and_sections_frozen() -> None:
    hints = typing.get_type_hints(RunSummary, localns=type_names())
    assert hints["status"] is RunStatus and hints["kind"] is RunKind
    assert typing.get_type_hints(Capture)["status"] is CaptureStatus
    assert RunSummary.__dataclass_params__.frozen


def test_a_section_of_the_wrong_shape_is_an_internal_error_naming_where() -> None:
    """Nothing is dropped or guessed: a key no dataclass declares, a missing key or a value of
    the wrong type stops the summary, naming the section path."""
    import re

    import pytest

    from mlaprof.analysis.sections import TraceStep
    from mlaprof.analysis.typed_json import from_json, to_json
    from mlaprof.errors import MlaprofError

    row = {"rank": 0, "step": 1, "graph_mode": None, "capture": "replayed", "path": "p",
           "variant": "v", "rows": 4, "qlen": None, "S": 8, "layers": 61, "duration_us": 12}  # fmt: skip
    steps = from_json(list[TraceStep], [row, row], "trace.steps")
    assert to_json(steps) == [row, row] and steps[1].duration_us == 12
    for bad, why in (
        ({**row, "extra": 1}, "trace.steps[1]: TraceStep has no field ['extra']"),
        ({**row, "S": "8"}, "trace.steps[1].S: '8' is not int"),
        ({**row, "rank": None}, "trace.steps[1].rank: is None"),
        ({k: v for k, v in row.items() if k != "path"}, "trace.steps[1]: TraceStep misses 'path'"),
    ):
        with pytest.raises(MlaprofError, match=re.escape(why)):
            from_json(list[TraceStep], [row, bad], "trace.steps")
