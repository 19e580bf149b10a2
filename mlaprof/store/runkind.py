"""What kind of run a folder holds: written into ``run.json`` (``kind``) when the run is made.

The analysis turns each kind into the same typed evidence with its own adapter
(:mod:`mlaprof.analysis.evidence`); it reads the kind from here and never guesses it again.
Runs recorded before the field existed are inferred once, by :func:`infer_kind`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class RunKind(StrEnum):
    SCENARIO = "scenario"  # `mlaprof run` (CPU or GPU) or a synthetic run: a scenario preset
    ENGINE = "engine"  # a live vLLM engine recorded by the mlaprof plugin
    TRACE = "trace"  # an imported rocprofv3 / Kineto trace
    LOG = "log"  # an imported vLLM server/engine log


# the ``source`` each importer or producer writes, and the kind it makes
_SOURCES = {
    "vllm plugin": RunKind.ENGINE,
    "vllm-log": RunKind.LOG,
    "rocprof": RunKind.TRACE,
    "kineto": RunKind.TRACE,
}

# the kinds whose evidence is the committed rows alone (their adapters read nothing else): every
# committed step is one of the report's steps; an imported trace or log is written once and its
# adapter reads the files beside the databases (and may leave steps out: warm-ups, drafter passes)
ROWS_ONLY = frozenset({RunKind.SCENARIO, RunKind.ENGINE})
PLUGIN_DEVICE = "engine"  # what the plugin's run.json holds in its device field: no device


def infer_kind(meta: Mapping[str, Any]) -> RunKind:
    """The kind of a run whose ``run.json`` predates the ``kind`` field. An mlaprof export carried
    back through an importer keeps its scenario, and reads as the scenario run it was."""
    kind = _SOURCES.get(str(meta.get("source") or ""))
    if kind is RunKind.TRACE and isinstance(meta.get("scenario"), dict):
        return RunKind.SCENARIO
    return kind or RunKind.SCENARIO


def run_kind(meta: Mapping[str, Any]) -> RunKind:
    """The run's kind: ``run.json``'s ``kind`` when it holds a known one, else inferred."""
    try:
        return RunKind(str(meta.get("kind")))
    except ValueError:
        return infer_kind(meta)
