"""Number formatting shared by the widgets and ``--once`` (no logic, no verdicts)."""

from __future__ import annotations

from mlaprof.analysis.share import share_text


def fmt_ms(v: float | None) -> str:
    if v is None:
        return "-"
    # below 0.1 ms three significant digits (a 13.5 µs layer reads 0.0135, never 0.013 or 0.000)
    return f"{v:.3g}" if v < 0.1 else f"{v:.3f}" if v < 10 else f"{v:.1f}"


def fmt_pct(v: float | None) -> str:
    return share_text(v)


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} GiB"


def fmt_count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}k"
    return str(n)
