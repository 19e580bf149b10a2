"""Question 3: how many rows does FULL-graph padding add, and what do they cost?"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import Padding, RankPadding
from mlaprof.analysis.share import share_text
from mlaprof.analysis.typed_json import over_ranks_label, to_json
from mlaprof.rank_counts import counted, per_rank_count

WASTE_WARNING = 0.25  # padding share of verify tokens from which padding is a warning
NOT_RECORDED = "not recorded"  # the padding text of a run without padding records


UNRECORDED_SHARE = "an unrecorded share"  # the padding share where no token count was recorded


def padding_waste(real_tokens: float | None, padding_tokens: float | None) -> float | None:
    """The one padding-waste measure: padding tokens as a share of all verify tokens
    (``None`` when no tokens were recorded)."""
    total = (real_tokens or 0) + (padding_tokens or 0)
    return (padding_tokens or 0) / total if total else None


def padding_severity(waste: float) -> str:
    return "warning" if waste >= WASTE_WARNING else "info"


def padding_summary(padding: pd.DataFrame) -> Padding:
    """The run's padding, one definition for every view: totals over every recorded step (rows,
    tokens, KV bytes), the per-step range of padding rows beside them, and the capture size when
    every step ran the same one (``capture_sizes`` lists them all)."""
    if padding.empty:
        # nothing recorded: every count unknown (a 0 or 0.0% would read as "no padding");
        # ranks and per_rank left out: no rank recorded any
        return Padding(
            steps=None,
            real_rows=None,
            padding_rows=None,
            real_tokens=None,
            padding_tokens=None,
            capture_size=None,
            capture_sizes=None,
            padding_rows_per_step=None,
            padding_fraction=None,
            steps_padded=None,
            kv_bytes_padding=None,
            text=NOT_RECORDED,
        )

    def total(col: str) -> int:
        return int(padding[col].fillna(0).sum())

    sizes = padded_sizes(padding)
    per_step = padding["padding_rows"].fillna(0)
    per_rank = [
        RankPadding(
            rank=int(r),
            steps=int(len(g)),
            real_rows=int(g["real_rows"].fillna(0).sum()),
            padding_rows=int(g["padding_rows"].fillna(0).sum()),
        )
        for r, g in (padding.groupby("rank") if "rank" in padding else [(0, padding)])
    ]
    steps, real_rows, padding_rows = len(padding), total("real_rows"), total("padding_rows")
    lo_hi = [int(per_step.min()), int(per_step.max())]
    real, pad, over = _amounts(steps, real_rows, padding_rows, per_rank)
    return Padding(
        steps=steps,
        real_rows=real_rows,
        padding_rows=padding_rows,
        real_tokens=total("real_tokens"),
        padding_tokens=total("padding_tokens"),
        capture_size=sizes[0] if len(sizes) == 1 else None,
        capture_sizes=sizes,
        padding_rows_per_step=lo_hi,
        # None where the records hold no token counts: never a 0% that reads as measured
        padding_fraction=padding_waste(total("real_tokens"), total("padding_tokens")),
        steps_padded=int((per_step > 0).sum()),
        kv_bytes_padding=total("kv_bytes_padding"),
        ranks=len(per_rank),
        per_rank=per_rank,
        text=f"{real} real + {pad} padding rows {over} ({_scope(lo_hi, sizes)})",
    )


def amounts(s: Padding) -> tuple[int, int, str]:
    """``(real rows, padding rows, "over N step(s)...")`` as every text says them: one rank's
    counts; where ranks agree, the counts of each rank "per rank"; where they differ, the sums,
    said to be sums over ranks, with each rank's steps (ranks are never summed silently)."""
    return _amounts(s.steps, s.real_rows, s.padding_rows, s.per_rank or [])


def _amounts(
    steps: int, real_rows: int, padding_rows: int, per: list[RankPadding]
) -> tuple[int, int, str]:
    if len(per) <= 1:
        return real_rows, padding_rows, f"over {counted(steps, 'step(s)')}"
    steps_text = per_rank_count({r.rank: r.steps for r in per}, "step(s)")
    same = {(r.steps, r.real_rows, r.padding_rows) for r in per}
    if len(same) == 1:
        r = per[0]
        return r.real_rows, r.padding_rows, f"over {steps_text}"
    summed = over_ranks_label("sum", [r.rank for r in per]).lstrip()
    return real_rows, padding_rows, f"{summed} over {steps_text}"


def scope_text(s: Padding) -> str:
    """``"padding rows per step 1, capture size 16"``: what the run totals are made of."""
    return _scope(s.padding_rows_per_step, s.capture_sizes)


def _scope(per_step: list[int] | None, sizes: list[int]) -> str:
    lo, hi = per_step or (0, 0)
    per = f"padding rows per step {lo}" if lo == hi else f"padding rows per step {lo}-{hi}"
    return f"{per}, {size_text(sizes)}"


def padded_sizes(padding: pd.DataFrame) -> list[int]:
    """The capture sizes the run's steps were padded to (its padding records), in order: the
    padding section's ``capture_sizes`` and the capture section's configured sizes."""
    if padding.empty:
        return []
    return sorted({int(v) for v in padding["capture_size"].dropna()})


def size_text(sizes: list[int]) -> str:
    """``"capture size 16"``: the padded capture sizes in the one wording the padding section
    and the capture section's sizes both say."""
    if not sizes:
        return "capture size unknown: the run did not record one"
    if len(sizes) == 1:
        return f"capture size {sizes[0]}"
    return "capture sizes " + ", ".join(map(str, sizes))


def padding_findings(padding: pd.DataFrame) -> list[Finding]:
    s = padding_summary(padding)
    if not s.padding_rows and not s.steps_padded:
        return []
    frac = s.padding_fraction  # None: no token counts recorded
    real, pad, over = amounts(s)
    return [
        Finding(
            kind="padding",
            severity=padding_severity(frac) if frac is not None else "info",
            title=(
                f"FULL-graph padding adds {counted(pad, 'padding row(s)')} to "
                f"{counted(real, 'real request(s)')} {over} "
                f"({scope_text(s)})"
            ),
            evidence=(
                f"{share_text(frac, 1, none=UNRECORDED_SHARE)} of verify tokens over "
                f"{counted(s.steps_padded, 'step(s)')}{over_ranks_label('sum', s.ranks or 0)}"
                + " are padding; "
                "padding rows have qo_len 0 in query_start_loc, KV length pinned to qlen, and "
                "qlen query tokens in the kernel's uniform qo_indptr (as vLLM builds it), so the "
                "kernel computes them as qlen-token rows and they count in B for every split "
                "heuristic"
            ),
            fix=(
                "keep padding rows out of every heuristic (min_kv_seq_len, batch size) and make "
                "kernels skip rows with qo_len == 0"
            ),
            data=to_json(s),
        )
    ]
