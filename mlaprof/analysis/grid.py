"""What an imported trace's kernel grids and import checks hold, per rank: the stage-1 pattern
rows the import matched, the path and kernel variant of each step, each rank's step-model checks,
and the head count a path ran with. Read by the analyzers of an imported trace's rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RunMeta
    from mlaprof.analysis.run_checks import RunChecks


def _origin(meta: RunMeta) -> str:
    return meta.origin


def _split_backend(steps: pd.DataFrame) -> pd.DataFrame:
    st = steps.copy()
    parts = st["backend"].fillna("").astype(str).str.partition(" ")  # "<path> <kernel variant>"
    st["path"], st["variant"] = parts[0], parts[2]
    return st


def step_checks_by_rank(checks: RunChecks) -> dict[int, dict[str, Any]]:
    """Each rank's step-model checks (the import stores them per rank); an older import that
    kept only its ranks' sum has none of any rank's (its sum is never one rank's)."""
    return {r: c.group("steps") for r, c in checks.ranks().items()}


def value_range(v: pd.Series) -> str | None:
    """``lo`` or ``lo-hi`` of the known values (None when none is known)."""
    v = v.dropna()
    if v.empty:
        return None
    lo, hi = int(v.min()), int(v.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def trace_heads(heads: Mapping[str, Mapping[str, int]] | None, path: str) -> tuple[int, str]:
    """The head count a path ran with, and where it came from: stage 2's grid where the trace
    shows one value (``heads``: the trace checks' heads seen per path); else 16 (one head
    group: vLLM sends gluon verify fewer than 16 heads)."""
    seen = (heads or {}).get(path) or {}
    if len(seen) == 1:
        (h,) = seen
        return int(h), f"{h} heads from stage 2's grid axis y"
    if len(seen) > 1:
        h = max(seen, key=lambda k: seen[k])
        return int(
            h
        ), f"{h} heads (the most common of {', '.join(sorted(seen))} on stage 2's grids)"
    return 16, "heads not on the trace (no stage 2): one head group assumed, as vLLM routes verify"
