"""Run store: a run is a folder with run.json and one SQLite (WAL) database per rank."""

from mlaprof.store.reader import (
    Run,
    RunInfo,
    has_ranks,
    is_run_folder,
    is_run_json_folder,
    list_runs,
    list_runs_nested,
    load,
)
from mlaprof.store.schema import SCHEMA_VERSION, TABLES
from mlaprof.store.writer import RunWriter, create_run

__all__ = [
    "Run",
    "RunInfo",
    "RunWriter",
    "SCHEMA_VERSION",
    "TABLES",
    "create_run",
    "has_ranks",
    "is_run_folder",
    "is_run_json_folder",
    "list_runs",
    "list_runs_nested",
    "load",
]
