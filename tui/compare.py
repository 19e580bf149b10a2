"""Numbers a fix is judged by, for two runs side by side (used by the compare screen and --once)."""

from __future__ import annotations

from typing import Any

from tui.state import View, fmt_bytes, fmt_ms, fmt_pct


def _num(v: float | None) -> float | None:
    return None if v is None else float(v)


def compare_rows(a: View, b: View) -> list[list[str]]:
    """metric, A, B, change: the numbers a fix is judged by."""

    def splits(v: View) -> tuple[int | None, int | None, float | None]:
        """The S the run's kernel used (layers table) and the occupancy of its own policy."""
        used = [r["used"] for r in v.layers if r.get("used") is not None]
        deserved = [r["deserved"] for r in v.layers if r.get("deserved") is not None]
        occ = [r["occupancy"] for r in v.layers if r.get("occupancy") is not None]
        return (
            min(used) if used else None,
            max(deserved) if deserved else None,
            min(occ) if occ else None,
        )

    def crit(v: View) -> int:
        return sum(f.severity == "critical" for f in v.findings)

    def mem(v: View) -> int:
        return sum(m.get("pool_bytes") or 0 for m in v.memory)

    sa, sb = splits(a), splits(b)
    metrics: list[tuple[str, Any, Any, str]] = [
        ("steps", a.steps, b.steps, "n"),
        ("step latency p50 ms", a.latency["p50"], b.latency["p50"], "ms"),
        ("step latency mean ms", a.latency["mean"], b.latency["mean"], "ms"),
        (
            "syncs in watched region",
            sum(s["count"] for s in a.syncs),
            sum(s["count"] for s in b.syncs),
            "n",
        ),
        (
            "layers with syncs",
            sum(1 for r in a.layers if r.get("syncs")),
            sum(1 for r in b.layers if r.get("syncs")),
            "n",
        ),
        ("KV splits S used (min)", sa[0], sb[0], "n"),
        ("  S deserved (max)", sa[1], sb[1], "n"),
        ("  occupancy", sa[2], sb[2], "pct"),
        ("padding waste", a.padding_total.get("waste"), b.padding_total.get("waste"), "pct"),
        ("capture memory", mem(a), mem(b), "bytes"),
        ("critical findings", crit(a), crit(b), "n"),
    ]
    fmt = {
        "n": lambda x: "-" if x is None else str(x),
        "ms": fmt_ms,
        "pct": fmt_pct,
        "bytes": fmt_bytes,
    }
    out = []
    for name, x, y, kind in metrics:
        change = "-"
        if _num(x) is not None and _num(y) is not None:
            if kind == "ms" and x:
                change = f"{(y / x - 1) * 100:+.0f}%"
            elif kind == "pct":
                change = f"{(y - x) * 100:+.0f} pt"
            elif kind == "bytes":
                change = fmt_bytes(y - x) if y >= x else "-" + fmt_bytes(x - y)
            else:
                change = f"{y - x:+g}"
        out.append([name, fmt[kind](x), fmt[kind](y), change])
    out.append(["capture", a.capture.split(" (")[0], b.capture.split(" (")[0], ""])
    out.append(["graph mode", a.graph_mode, b.graph_mode, ""])
    out.append(["backend", a.backend, b.backend, ""])
    out.append(["split policy", a.policy or "-", b.policy or "-", ""])
    return out
