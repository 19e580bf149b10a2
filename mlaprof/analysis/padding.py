"""Question 3: how many rows does FULL-graph padding add, and what do they cost?"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.findings import Finding

WASTE_WARNING = 0.25  # padding share of verify tokens from which padding is a warning


def padding_waste(real_tokens: float | None, padding_tokens: float | None) -> float | None:
    """The one padding-waste measure: padding tokens as a share of all verify tokens
    (``None`` when no tokens were recorded)."""
    total = (real_tokens or 0) + (padding_tokens or 0)
    return (padding_tokens or 0) / total if total else None


def padding_severity(waste: float) -> str:
    return "warning" if waste >= WASTE_WARNING else "info"


def padding_summary(padding: pd.DataFrame) -> dict[str, int | float | None]:
    if padding.empty:
        return {
            "real_rows": 0,
            "padding_rows": 0,
            "real_tokens": 0,
            "padding_tokens": 0,
            "capture_size": None,
            "padding_fraction": 0.0,
            "steps_padded": 0,
        }
    last = padding.iloc[0]
    waste = padding_waste(padding["real_tokens"].sum(), padding["padding_tokens"].sum())
    return {
        "real_rows": int(last.real_rows),
        "padding_rows": int(last.padding_rows),
        "real_tokens": int(last.real_tokens),
        "padding_tokens": int(last.padding_tokens),
        "capture_size": None if pd.isna(last.capture_size) else int(last.capture_size),
        "padding_fraction": float(waste or 0.0),
        "steps_padded": int((padding["padding_rows"] > 0).sum()),
        "kv_bytes_padding": int(padding["kv_bytes_padding"].fillna(0).sum()),
    }


def padding_findings(padding: pd.DataFrame) -> list[Finding]:
    s = padding_summary(padding)
    if not s["padding_rows"] and not s["steps_padded"]:
        return []
    frac = float(s["padding_fraction"] or 0.0)
    return [
        Finding(
            kind="padding",
            severity=padding_severity(frac),
            title=(
                f"FULL-graph padding adds {s['padding_rows']} padding row(s) to "
                f"{s['real_rows']} real request(s) (capture size {s['capture_size']})"
            ),
            evidence=(
                f"{100 * frac:.1f}% of verify tokens over {s['steps_padded']} step(s) are padding; "
                "padding rows have qo_len 0 in query_start_loc, KV length pinned to qlen, and "
                "qlen query tokens in the kernel's uniform qo_indptr (as vLLM builds it), so the "
                "kernel computes them as qlen-token rows and they count in B for every split "
                "heuristic"
            ),
            fix=(
                "keep padding rows out of every heuristic (min_kv_seq_len, batch size) and make "
                "kernels skip rows with qo_len == 0"
            ),
            data=dict(s),
        )
    ]
