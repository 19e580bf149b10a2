"""Run store: a run is a folder with run.json and one SQLite (WAL) database per rank.

The names below load their module on first use: ``import mlaprof.store.runmeta`` (what an import
or a run needs) does not load the reader, and with it pandas."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlaprof.store.reader import (
        Run,
        RunInfo,
        has_ranks,
        is_run_folder,
        is_run_json_folder,
        list_runs,
        list_runs_nested,
        load,
        ranks_written,
    )
    from mlaprof.store.schema import SCHEMA_VERSION, TABLES
    from mlaprof.store.writer import RunWriter, create_run

_WHERE = {
    "Run": "reader",
    "RunInfo": "reader",
    "has_ranks": "reader",
    "ranks_written": "reader",
    "is_run_folder": "reader",
    "is_run_json_folder": "reader",
    "list_runs": "reader",
    "list_runs_nested": "reader",
    "load": "reader",
    "SCHEMA_VERSION": "schema",
    "TABLES": "schema",
    "RunWriter": "writer",
    "create_run": "writer",
}
__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "Run",
    "RunInfo",
    "RunWriter",
    "create_run",
    "has_ranks",
    "ranks_written",
    "is_run_folder",
    "is_run_json_folder",
    "list_runs",
    "list_runs_nested",
    "load",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mlaprof.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"mlaprof.store.{module}"), name)
    globals()[name] = value
    return value
