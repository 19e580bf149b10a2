"""Run store: a run is a folder with run.json and one SQLite (WAL) database per rank."""

from mlaprof.store.reader import Run, RunInfo, list_runs, load
from mlaprof.store.schema import SCHEMA_VERSION, TABLES
from mlaprof.store.writer import RunWriter, create_run

__all__ = [
    "Run",
    "RunInfo",
    "RunWriter",
    "SCHEMA_VERSION",
    "TABLES",
    "create_run",
    "list_runs",
    "load",
]
