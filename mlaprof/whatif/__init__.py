"""What-if exploration before running anything: split collapse, padding and predicted verify time
over a grid of shapes (:mod:`.grid`), and capture sizes planned from a batch-size distribution
(:mod:`.plan`). Everything here is modelled and says so in its provenance.

Names load lazily, so that the CLI's parser (which reads :mod:`.sizes`) imports no numpy."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "GridSpec": "mlaprof.whatif.grid",
    "WhatIf": "mlaprof.whatif.grid",
    "compute": "mlaprof.whatif.grid",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    if name in ("vector", "grid", "plan", "sizes", "costmodel", "plan_sources"):
        return importlib.import_module(f"mlaprof.whatif.{name}")
    raise AttributeError(f"module 'mlaprof.whatif' has no attribute {name!r}")


__all__ = ["GridSpec", "WhatIf", "compute"]
