"""Conformance corpus: traces written the way rocprofv3 and rocpd write them (from their source,
not from mlaprof's exporter), with what each must import as.

- ``model.py``: the abstract trace (kernels with grids and launch correlation, API calls,
  roctx ranges and marks) and its expected counts.
- ``shapes.py``: the shapes (graph replays, eager, roctx-marked steps); add one there.
- one writer module per format: ``rocpd.py``, ``rocprof_json.py``, ``rocprof_csv.py``.

``FORMATS`` names every rendering; :func:`render` writes one shape in one of them and returns the
path to import and the marker messages that format keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conformance.model import RANGE_OP, Trace
from tests.conformance.rocpd import write_rocpd
from tests.conformance.rocprof_csv import write_csv
from tests.conformance.rocprof_json import write_json


def _rocpd(schema: str) -> Callable[[Trace, Path], Path]:
    return lambda tr, d: write_rocpd(tr, d / tr.host / f"{tr.pid}_results.db", schema)


def _csv(layout: str, agent_index: str = "relative") -> Callable[[Trace, Path], Path]:
    def w(tr: Trace, d: Path) -> Path:
        write_csv(tr, d / tr.host, layout, agent_index=agent_index)
        return d

    return w


# format name -> writer(trace, folder) returning what ``mlaprof import rocprof`` is given
FORMATS: dict[str, Callable[[Trace, Path], Path]] = {
    "rocpd-3": _rocpd("3"),
    "rocpd-3.0.1": _rocpd("3.0.1"),
    "rocpd-3.0.3": _rocpd("3.0.3"),
    "json": lambda tr, d: write_json(tr, d / tr.host / f"{tr.pid}_results.json"),
    "csv-7": _csv("7"),
    "csv-6.3": _csv("6.3"),
    "csv-convert": _csv("convert"),
    # rocprofv3 --agent-index type-relative / rocpd convert --agent-index-value type-relative
    "csv-7-type": _csv("7", "type-relative"),
    "csv-convert-type": _csv("convert", "type-relative"),
}


def render(trace: Trace, fmt: str, folder: Path) -> tuple[Path, list[str]]:
    """Write ``trace`` as ``fmt`` under ``folder``: (path to import, the marker rows' Function
    as the format keeps it: the messages, but ``rocpd convert``'s region CSV names a range by
    its operation and leaves marks (samples) out)."""
    path = FORMATS[fmt](trace, folder)
    if fmt.startswith("csv-convert"):
        return path, [RANGE_OP for m in trace.markers if not m.is_mark]
    return path, list(trace.expected.markers) if trace.expected else []
