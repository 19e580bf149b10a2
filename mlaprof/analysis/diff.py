"""Question 6: did my fix help? The one diff of two runs: a table of metrics with verdicts.

Every metric is read from :func:`mlaprof.analysis.summary` (the numbers the report prints), so
the terminal report, ``--json``, the HTML report, the diff figure and the TUI's compare screen
all show the same values and the same verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlaprof.analysis.capture import CAPTURE_MEMORY_MEASURE, FAILED_CAPTURE
from mlaprof.analysis.headline import own_split
from mlaprof.analysis.timing import CPU_TIMINGS, cpu_spread

VERDICTS = ("better", "worse", "same", "within spread", "n/a")
COLUMNS = ("metric", "unit", "a", "b", "change", "change_pct", "ratio", "verdict", "provenance")
MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    lower_is_better: bool
    value: Callable[[dict[str, Any]], float | None]
    timing: bool = False  # a time: CPU reference timings are judged against the run spread
    short: str = ""  # the name where columns are few (an 80-column terminal)


def _split(key: str, scale: float = 1.0) -> Callable[[dict[str, Any]], float | None]:
    def get(s: dict[str, Any]) -> float | None:
        r = own_split(s)
        return None if r is None or r.get(key) is None else float(r[key]) * scale

    return get


def _sites(s: dict[str, Any]) -> float | None:
    """Distinct (op, source line) pairs that synced or allocated inside the watched region
    (an imported trace names no source lines: its API calls are counted instead)."""
    if s.get("trace"):
        return None
    rows = (s.get("syncs") or []) + (s.get("allocations") or [])
    if not rows and not s["timing"]["steps"]:
        return None
    return float(len({(r["op"], r["location"]) for r in rows}))


def _trace_syncs(s: dict[str, Any]) -> float | None:
    """Syncs an imported trace's API calls show in the region (None: the trace cannot tell)."""
    tr = s.get("trace")
    n = tr["syncs"]["count"] if tr else None
    return None if n is None else float(n)


def _trace_s(s: dict[str, Any]) -> float | None:
    """S per MLA layer as an imported trace's grids show it (median over layer records; live
    runs record split metadata per policy instead)."""
    if not s.get("trace"):
        return None
    known = sorted((r["splits"], r["records"]) for r in s.get("layer_splits", []) if r["splits"])
    total = sum(n for _, n in known)
    seen = 0
    for v, n in known:
        seen += n
        if seen * 2 >= total:
            return float(v)
    return None


def _memory_mib(s: dict[str, Any]) -> float | None:
    b = s["capture"].get("memory_bytes")
    return None if b is None else b / MIB


def _opt(v: Any, scale: float = 1.0) -> float | None:
    return None if v is None else float(v) * scale


METRICS: tuple[Metric, ...] = (
    Metric(
        "median step time",
        "µs",
        True,
        lambda s: _opt(s["timing"]["step_median_us"]),
        timing=True,
        short="step time",
    ),
    Metric(
        "median layer time",
        "µs",
        True,
        lambda s: _opt(s["timing"]["layer_median_us"]),
        timing=True,
        short="layer time",
    ),
    Metric(
        "sync / allocation sites in the region", "count", True, _sites, short="sync/alloc sites"
    ),
    Metric(
        "syncs in the region (imported trace)", "count", True, _trace_syncs, short="syncs (trace)"
    ),
    Metric(
        "steps replayed as a graph",
        "%",
        False,
        lambda s: _opt(s["timing"]["full_share"], 100.0),
        short="FULL replays",
    ),
    Metric(
        "KV splits per MLA layer (trace grids, median)",
        "S",
        False,
        lambda s: _trace_s(s),
        short="S (trace grids)",
    ),
    Metric(
        "capture fails (failed or predicted)",
        "yes=1",
        True,
        lambda s: float(s["capture"]["status"] in FAILED_CAPTURE),
        short="capture fails",
    ),
    Metric(
        "KV splits S used (run's policy, worst step)", "S", False, _split("used"), short="S used"
    ),
    Metric("S deserved by the real rows", "S", False, _split("deserved"), short="S deserved"),
    Metric(
        "occupancy with S used (model)",
        "%",
        False,
        _split("occupancy", 100.0),
        short="occupancy (model)",
    ),
    Metric(
        "padding waste (share of verify tokens)",
        "%",
        True,
        lambda s: (
            _opt(s["padding"]["padding_fraction"], 100.0)
            if s["padding"]["steps_padded"] or s["padding"]["real_rows"]
            else None
        ),
        short="padding waste",
    ),
    Metric(
        f"capture memory ({CAPTURE_MEMORY_MEASURE})",
        "MiB",
        True,
        _memory_mib,
        short="capture memory",
    ),
    Metric(
        "critical findings",
        "count",
        True,
        lambda s: float(sum(f["severity"] == "critical" for f in s["findings"])),
        short="critical findings",
    ),
)


SHORT_NAMES = {m.name: m.short or m.name for m in METRICS}


def _timing_provenance(sa: dict[str, Any], sb: dict[str, Any]) -> str:
    la, lb = sa["timing"]["timing_label"], sb["timing"]["timing_label"]
    ta, tb = _threads(sa), _threads(sb)
    if la == lb and _is_cpu(sa) and ta != tb:  # CPU times at two thread counts: say so
        return f"A: {la} ({_n_threads(ta)}), B: {lb} ({_n_threads(tb)})"
    return la if la == lb else f"A: {la}, B: {lb}"


def _is_cpu(s: dict[str, Any]) -> bool:
    return s["timing"].get("timing") in CPU_TIMINGS


def _threads(s: dict[str, Any]) -> int | None:
    return s["timing"].get("threads")


def _n_threads(n: int | None) -> str:
    return "threads not recorded" if n is None else f"{n} thread{'s' if n != 1 else ''}"


def run_spread(sa: dict[str, Any], sb: dict[str, Any]) -> float | None:
    """The CPU run-to-run spread that applies to A vs B: the wider of the spreads measured at
    each CPU side's clock and thread count; None when neither side is timed on the CPU."""
    spreads = [cpu_spread(_threads(s), s["timing"].get("timing")) for s in (sa, sb) if _is_cpu(s)]
    return max(spreads) if spreads else None


def diff_table(sa: dict[str, Any], sb: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per metric either run has: A, B, change and the verdict from B's point of view
    (``better`` / ``worse`` / ``same`` / ``within spread`` / ``n/a``)."""
    rows = []
    spread = run_spread(sa, sb)
    for m in METRICS:
        va, vb = m.value(sa), m.value(sb)
        if va is None and vb is None:
            continue
        change = vb - va if va is not None and vb is not None else None
        ratio = vb / va if change is not None and va else None
        if change is None:
            verdict = "n/a"
        elif abs(change) <= 1e-9 * max(1.0, abs(va or 0.0)):
            verdict = "same"
        elif m.timing and spread is not None and ratio is not None and 1 / spread < ratio < spread:
            verdict = "within spread"
        else:
            verdict = "better" if (change < 0) == m.lower_is_better else "worse"
        provenance = _timing_provenance(sa, sb) if m.timing else ""
        rows.append(
            {
                "metric": m.name,
                "unit": m.unit,
                "a": va,
                "b": vb,
                "change": change,
                "change_pct": 100.0 * change / abs(va) if change is not None and va else None,
                "ratio": ratio,
                "verdict": verdict,
                "provenance": provenance,
            }
        )
    return rows


def capture_label(s: dict[str, Any]) -> str:
    """The capture verdict as the report words it (an imported trace's own label)."""
    return str(s["capture"].get("label") or s["capture"]["status"])


def diff_summaries(sa: dict[str, Any], sb: dict[str, Any]) -> dict[str, Any]:
    """The diff as one JSON-ready object (``report --json --compare``): the metric table with
    verdicts, then what has no number (capture verdict, vLLM route, S per kernel variant of
    imported traces)."""
    return {
        "before": sa["run"],
        "after": sb["run"],
        "capture": {"before": capture_label(sa), "after": capture_label(sb)},
        "route": {
            "before": (sa.get("route") or {}).get("path"),
            "after": (sb.get("route") or {}).get("path"),
        },
        "backend": {"before": backend_text(sa), "after": backend_text(sb)},
        "trace_splits": _trace_splits(sa.get("trace"), sb.get("trace")),
        "cpu_spread": run_spread(sa, sb),
        "table": diff_table(sa, sb),
    }


def backend_text(s: dict[str, Any]) -> str:
    """The run's backend as every view names it; an imported trace records none (it names
    kernels): said, with the verify paths its kernels show, never "None"."""
    if s.get("backend"):
        return str(s["backend"])
    paths = list(dict.fromkeys(p["path"] for p in (s.get("trace") or {}).get("paths", [])))
    return "not recorded" + (f" (the trace's kernels: {', '.join(paths)})" if paths else "")


def _trace_splits(a: dict | None, b: dict | None) -> list[dict[str, Any]]:
    """S and batch rows per (path, kernel variant) of two imported traces, as read from them."""
    pa = {(p["path"], p["variant"]): p for p in (a or {}).get("paths", [])}
    pb = {(p["path"], p["variant"]): p for p in (b or {}).get("paths", [])}
    out = []
    for key in dict.fromkeys([*pa, *pb]):
        x, y = pa.get(key, {}), pb.get(key, {})
        out.append(
            {
                "path": key[0],
                "variant": key[1],
                "S_before": x.get("S"),
                "S_after": y.get("S"),
                "rows_before": x.get("rows"),
                "rows_after": y.get("rows"),
                "source": "imported traces (S from the kernels' grids)",
            }
        )
    return out


def diff_runs(a: Any, b: Any) -> dict[str, Any]:
    """What changed from run ``a`` (before) to run ``b`` (after), and by how much."""
    from mlaprof.analysis.run_summary import summary

    return diff_summaries(summary(a), summary(b))


def fmt_value(v: float | None) -> str:
    """A diff value as every view prints it."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.3g}"


def fmt_change(r: dict[str, Any]) -> str:
    if r["change_pct"] is not None:
        return f"{r['change_pct']:+.0f}%"
    return "-" if r["change"] is None else f"{r['change']:+g}"
