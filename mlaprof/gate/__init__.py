"""A CI gate for graph breaks and split collapse, for any attention backend's test suite.

* :func:`assert_capturable` / :func:`run_gated`: a callable inside a (simulated on the CPU, real
  on a GPU) captured region; every sync or data-dependent allocation with layer, op, file:line.
* :func:`assert_splits_hold`: a metadata builder's S for padded batches does not collapse.
* the pytest plugin (:mod:`mlaprof.gate.plugin`, entry point ``pytest11``): the ``capture_gate``
  fixture and marker. ``mlaprof check MODULE:CALLABLE`` does the same from a script.

Names load lazily: pytest imports the plugin (this package) in every session, and torch should
only load when a gated test runs.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "CaptureGateError": "mlaprof.gate.core",
    "GateReport": "mlaprof.gate.core",
    "assert_capturable": "mlaprof.gate.core",
    "run_gated": "mlaprof.gate.core",
    "SplitCollapseError": "mlaprof.gate.splits",
    "assert_splits_hold": "mlaprof.gate.splits",
    "check_splits": "mlaprof.gate.splits",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'mlaprof.gate' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)


__all__ = sorted(_WHERE)
