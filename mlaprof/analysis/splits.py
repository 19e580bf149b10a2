"""Question 2: how many KV splits does the kernel run with, and how many should it?"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.splits.policies import POLICIES


def split_summary(splits: pd.DataFrame) -> pd.DataFrame:
    """Per policy: the step where S used is worst relative to S deserved."""
    if splits.empty:
        return splits
    df = splits.dropna(subset=["used", "deserved"]).copy()
    if df.empty:
        return df
    df["ratio"] = df["used"].astype(float) / df["deserved"].astype(float)
    idx = df.groupby("policy", sort=False)["ratio"].idxmin()
    return df.loc[idx].reset_index(drop=True)


def split_findings(splits: pd.DataFrame, run_policy: str, graph_mode: str) -> list[Finding]:
    out: list[Finding] = []
    for r in split_summary(splits).itertuples():
        used, deserved = int(r.used), int(r.deserved)
        # runs without a scenario (the vLLM plugin) record only the policies that apply
        main = r.policy == run_policy or not run_policy
        p = POLICIES.get(r.policy)
        if used * 2 <= deserved:
            cause = (
                f"min_kv_seq_len = {int(r.min_kv_used)} (a minimum over all rows: padding rows "
                f"are pinned to qlen) instead of {int(r.min_kv_deserved)} over active rows"
                if p and p.uses_min_kv and r.min_kv_used < r.min_kv_deserved
                else "padding rows counted in the batch size"
            )
            out.append(
                Finding(
                    kind="split-collapse",
                    severity="critical" if main and used == 1 else "warning" if main else "info",
                    title=f"KV splits collapsed under {r.policy}: S = {used}, real rows deserve {deserved}",
                    evidence=(
                        f"step {int(r.step)}: {cause}; occupancy {_pct(r.occupancy_used)} vs "
                        f"{_pct(r.occupancy_deserved)} of the {r.target} units"
                    ),
                    fix=(
                        "compute min_kv_seq_len in the metadata builder over active rows "
                        "(qo_len > 0) only"
                        if p and p.uses_min_kv
                        else "exclude padding rows from the split heuristic's batch size"
                    ),
                    data={"policy": r.policy, "used": used, "deserved": deserved},
                )
            )
        if main and graph_mode == "FULL" and pd.notna(r.frozen) and int(r.frozen) * 2 <= deserved:
            out.append(
                Finding(
                    kind="split-frozen",
                    severity="warning",
                    title=(
                        f"S = {int(r.frozen)} would be frozen into the FULL graph by the "
                        f"capture-time dummy run ({r.policy}); real rows deserve {deserved}"
                    ),
                    evidence=(
                        "the split count is a host-side constant captured into the graph; the "
                        "dummy run's KV length is qlen"
                    ),
                    fix="choose S at replay from the real metadata (device-side) or capture with "
                    "representative KV lengths per capture size",
                    data={"policy": r.policy, "frozen": int(r.frozen), "deserved": deserved},
                )
            )
    return out


def _pct(x: object) -> str:
    return "-" if x is None or pd.isna(x) else f"{100 * float(x):.1f}%"
