"""Every shipped run and trace as a run on disk: the summary corpus (:mod:`tests.summary_corpus`:
the demo runs, every trace and log in tests/data) plus what it leaves out, the recorded vLLM
engine run and the rocprofv3 kernel traces of the documentation. Traces are imported once per
process, in this process (the importers' own entry points). Shared by the figure-equals-summary
and view-equals-view tests."""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests import summary_corpus as corpus

ENGINE = sorted(p.parent.name for p in (corpus.DATA / "vllm").glob("*/run.json"))
ROCPROF_DOCS = sorted(p.stem for p in (corpus.DATA / "rocprof").glob("*kernel_trace.csv"))
NAMES = corpus.NAMES + [f"engine-{n}" for n in ENGINE] + [f"rocprof-{n}" for n in ROCPROF_DOCS]


@functools.cache
def folder() -> Path:
    """The folder this process imports the traces and logs into (``<tmp>`` in the golden
    documents: tests/summary_corpus.py)."""
    return Path(tempfile.mkdtemp(prefix="mlaprof-shipped-"))


@functools.cache
def run_dir(name: str) -> Path:
    """The stored run ``name`` (imported once per process where it is a trace or log)."""
    if name.startswith("engine-"):  # a copy: a report keeps its document in the run folder
        src = corpus.DATA / "vllm" / name.removeprefix("engine-")
        dst = folder() / "engine" / src.name
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*-wal", "*-shm", "*-journal"))
        return dst
    if name.startswith("rocprof-"):
        from mlaprof.importers.rocprof import import_rocprof

        csv = corpus.DATA / "rocprof" / (name.removeprefix("rocprof-") + ".csv")
        return Path(import_rocprof(csv, folder(), name)[0])
    return Path(corpus.run_dir(name, folder()))


@functools.cache
def summary(name: str) -> Any:
    """The run's typed summary, built once per process and the run closed after: a frozen
    value, shared by the tests that only read it (test files that use it name the worker group
    ``shipped-runs``, so that one worker builds each summary once)."""
    import mlaprof
    from mlaprof.analysis.run_summary import build_summary

    with mlaprof.load(run_dir(name)) as run:
        return build_summary(run)
