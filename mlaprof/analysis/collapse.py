"""The one split-collapse rule and the one collapse finding, for every run whose rows hold an S.

A collapse is S at most half what the reference gives the same rows (:func:`is_collapsed`). The
reference is the S without padding rows where the run models it (a scenario's splits rows), or
for rows read off kernel grids (which count padding rows, so the padding-free S is unknown) the S
the newer AITER rule gives those rows for any KV length. Both are said by :func:`collapse_finding`
in one wording: used, what the fix gives, and without padding rows (or "unknown").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.grid import _split_backend, trace_heads
from mlaprof.analysis.step_stats import for_steps
from mlaprof.analysis.typed_json import over_ranks_label
from mlaprof.rank_counts import per_rank_count, ranks_of
from mlaprof.splits import releases
from mlaprof.splits.policies import POLICIES, SplitInput
from mlaprof.splits.policies import collapsed_known as is_collapsed  # noqa: F401 - re-exported
from mlaprof.splits.policies import is_collapsed as collapse_rule

if TYPE_CHECKING:
    from mlaprof.analysis.sections import TraceChecks


def collapsed(used: pd.Series, ref: pd.Series) -> pd.Series:
    """:func:`is_collapsed` on every record at once (unknown values are never a collapse)."""
    known = used.notna() & ref.notna()
    out = pd.Series(False, index=used.index)
    out[known] = collapse_rule(used[known].astype(float), ref[known].astype(float))
    return out


def three_numbers(used: int, fix: int | None, deserved: int | None, batch: str = "") -> str:
    """ "S = used, the fix gives F, D without padding rows": what a split finding must state
    (``deserved`` None: the rows count padding, so the padding-free S is "unknown")."""
    head = f"S = {used} used{batch}"
    if fix is None:
        return f"{head}, {deserved if deserved is not None else 'unknown'} without padding rows"
    why = " (padding rows still count in B)" if deserved is not None and fix < deserved else ""
    tail = f"{deserved} without padding rows" if deserved is not None else (
        "unknown without padding rows")  # fmt: skip
    return f"{head}, the fix gives {fix}{why}, {tail}"


def collapse_finding(
    scope: str,
    used: int,
    fix: int | None,
    deserved: int | None,
    evidence: str,
    fix_text: str,
    data: dict[str, Any],
    main: bool = True,
    batch: str = "",
    note: str = "",
    modelled: str = "",
) -> Finding:
    """The one collapse finding: ``scope`` names where ("under <policy>", "on the <path> path on
    2 of 8 ranks"), ``main`` whether it is the run's own policy (critical at S = 1; another
    policy's collapse is information), ``note`` what the title adds after the numbers.
    ``modelled`` (the model's provenance) marks a collapse predicted for recorded batches rather
    than seen: a warning under that tag, never critical."""
    severity = "critical" if main and used == 1 else "warning" if main else "info"
    tag = f"[{modelled}] " if modelled else ""
    return Finding(
        kind="split-collapse",
        severity="warning" if modelled and main else severity,
        title=f"{tag}KV splits collapsed {scope}: {three_numbers(used, fix, deserved, batch)}{note}",
        evidence=evidence,
        fix=fix_text,
        data=data,
    )


# -- S read off kernel grids: judged against the newer rule for the same rows ----------------------
# paths whose stage-1 S is chosen on the host from grid-visible inputs (rows, qlen): a collapse
# can be judged from the trace alone; policy per path (the one vLLM's verify route calls)
# (the release whose rule the grid's S is judged under, the release whose rule is the reference)
COLLAPSE_RELEASES = {"aiter-gluon": ("0.1.19", "0.1.20")}
COLLAPSE_POLICIES = tuple(COLLAPSE_RELEASES)  # the paths a grid's S can be judged on


def collapse_policies(path: str) -> tuple[str, str]:
    """(rule judged, reference rule) of ``path``, as the one AITER version -> policy selection
    (:func:`mlaprof.splits.releases.policy_for`) names them."""
    old, new = COLLAPSE_RELEASES[path]
    return releases.policy_for(old), releases.policy_for(new)


HUGE_KV = 1 << 30  # "KV long enough not to bound S": the formula's cap for these rows


def _cap(policy: str, rows: int, qlen: int, heads: int = 16) -> int:
    """The policy's S for these rows when KV length does not bound it."""
    x = SplitInput(
        num_reqs=rows, qlen=qlen, heads=heads, min_kv_seq_len=HUGE_KV, max_seq_len=HUGE_KV,
        total_kv=HUGE_KV * rows, units=256,
    )  # fmt: skip
    return POLICIES[policy].splits(x)


def _judged_steps(
    heads: Mapping[str, Mapping[str, int]] | None, steps: pd.DataFrame, stats: pd.DataFrame
) -> pd.DataFrame:
    """Steps of a path whose S is chosen on the host from grid-visible inputs, with S, rows,
    qlen, how they ran and the S the newer rule gives for the same rows (``fix``), per rank
    (``heads``: the trace checks' head counts seen per path, :func:`trace_heads`)."""
    cols = ["rank", "step", "path", "variant", "num_reqs", "qlen", "graph_mode", "S", "fix"]
    if steps.empty or stats.empty:
        return pd.DataFrame(columns=cols)
    st = _split_backend(steps[steps["backend"].notna()])
    st["S"] = for_steps(st, stats, "S")
    st = st[st["path"].isin(COLLAPSE_POLICIES) & st["S"].notna() & st["num_reqs"].notna()
            & st["qlen"].notna()].copy()  # fmt: skip
    caps: dict[tuple[str, int, int], int] = {}
    for key in set(
        zip(st["path"], st["num_reqs"].astype(int), st["qlen"].astype(int), strict=True)
    ):
        n_heads = trace_heads(heads, key[0])[0]
        caps[key] = _cap(collapse_policies(key[0])[1], key[1], key[2], n_heads)
    st["fix"] = [
        caps[(p, int(r), int(q))]
        for p, r, q in zip(st["path"], st["num_reqs"], st["qlen"], strict=True)
    ]
    st["graph_mode"] = st["graph_mode"].fillna("unknown")
    return st[cols]


# What a small S on a host-chosen path can come from, with the evidence a trace gives for it.
# A graph replay replays the grid of its capture: S was chosen when the graph was captured, from
# the capture-time dummy run's metadata (KV = qlen) or padding rows pinned to qlen; vLLM pads
# only graph batches, so an eager step has no padding row and its small S comes from a short
# real KV under the version's KV-bounded rule (v0.1.19: ceil(min_kv_seq_len / 64)).
CAUSE_CAPTURE = "capture-or-padding"
CAUSE_SHORT_KV = "short-kv"
CAUSE_UNKNOWN = "unknown"


def small_s_cause(graph_mode: str) -> str:
    """The cause a step's small S can be attributed to from how it ran (PIECEWISE attention
    runs eagerly, without padding rows: vLLM 0.32 pads attention only under FULL graphs)."""
    return {"graph": CAUSE_CAPTURE, "eager": CAUSE_SHORT_KV, "piecewise": CAUSE_SHORT_KV}.get(
        graph_mode, CAUSE_UNKNOWN
    )


def layer_reference(
    heads: Mapping[str, Mapping[str, int]] | None, steps: pd.DataFrame, stats: pd.DataFrame
) -> pd.DataFrame:
    """``rank, step, fix``: the S each judged step is compared with (the collapse rule's
    reference for a trace, whose grids count padding rows so the deserved S is unknown). Only
    steps where padding rows or the capture can be the cause: an eager step's small S is its
    short KV, not a collapse."""
    st = _judged_steps(heads, steps, stats)
    st = st[st["graph_mode"].map(small_s_cause) != CAUSE_SHORT_KV]
    return st[["rank", "step", "fix"]]


def collapse_findings(
    checks: TraceChecks | None, origin: str, steps: pd.DataFrame, stats: pd.DataFrame | None
) -> list[Finding]:
    """S read off kernel grids at most half what the newer rule gives these rows; one finding
    per (variant, rows, qlen, S, cause) naming the ranks it holds on and the cause the trace can
    show. ``checks``: the trace's own checks (heads, stage 2, qlen), ``origin``: where it came
    from (RunMeta.origin). ``stats`` None: the run's steps carry no grid S (nothing to judge)."""
    if stats is None:
        return []
    heads_seen = checks.heads if checks is not None else None
    st = _judged_steps(heads_seen, steps, stats)
    if st.empty:
        return []
    stage2_checks = (checks.stage2 if checks is not None else None) or {}
    qlen_checks = checks.qlen if checks is not None else None
    qlen_src = (
        "pinned by stage 2" if qlen_checks and qlen_checks.from_stage2 else "from grid axis z"
    )
    n_ranks = int(steps["rank"].nunique())
    st["cause"] = st["graph_mode"].map(small_s_cause)
    out = []
    for path in COLLAPSE_POLICIES:
        old, new = collapse_policies(path)
        g = st[st["path"] == path]
        for (variant, rows, qlen, s, cause), gg in g.groupby(
            ["variant", "num_reqs", "qlen", "S", "cause"]
        ):
            rows, qlen, s = int(rows), int(qlen), int(s)
            cap = int(gg["fix"].iloc[0])
            if not is_collapsed(s, cap):  # the one collapse rule
                continue
            ranks = sorted(int(r) for r in gg["rank"].unique())
            on_ranks = f" on {ranks_of(ranks, n_ranks)}" if n_ranks > 1 else ""
            c = stage2_checks.get(path)
            stage2 = (
                # the trace's checks add every rank's layers: said, in the one wording
                f"; no stage-2 kernel in {c.s1_without_stage2}{over_ranks_label('sum', n_ranks)} "
                "of its S = 1 layers (consistent: stage 2 is not launched when S == 1)"
                if s == 1 and c is not None
                else ""
            )
            heads, heads_src = trace_heads(heads_seen, path)
            # per rank, never a sum over ranks (the sections count steps per rank)
            per_rank = {int(r): int(n) for r, n in gg.groupby("rank").size().items()}
            kind = "graph replay" if cause == CAUSE_CAPTURE else "eager"
            where = (
                f"{per_rank_count(per_rank, f'{kind} step(s)')} of "
                f"{variant} ({origin}: S from grid axis y, rows from grid axis x, qlen "
                f"{qlen_src}; "
                f"{heads_src}{stage2})"
            )
            rule = (
                f"Modelled with {old} ({POLICIES[old].source}): S = max(1, min(256 // "
                f"({rows}*{qlen}), ceil(min_kv_seq_len/64))), so S = {s} means min_kv_seq_len <= "
                f"{64 * s}; {new} gives {cap} for any KV length ({heads} heads)"
            )
            data = {
                "path": path, "variant": variant, "used": s, "fix_gives": cap,
                "without_padding": None, "rows": rows, "qlen": qlen, "heads": heads,
                **_steps_data(per_rank), "ranks": ranks, "policy": old, "policy_fixed": new,
                "cause": cause, "provenance": origin, "s_source": f"grid axis y of {variant}",
                "model": f"modelled with {old} and {new}",
            }  # fmt: skip
            if cause == CAUSE_SHORT_KV:
                out.append(_short_kv_finding(path, on_ranks, s, rows, qlen, cap, new, where, rule,
                                             data))  # fmt: skip
                continue
            kv_needed = 64 * (cap - 1) + 1
            why = (
                "a graph replay replays the grid of its capture: S was chosen when the graph was "
                f"captured, from the capture-time dummy run (KV = qlen = {qlen} tokens) or from "
                "padding rows pinned to qlen feeding the minimum"
                if cause == CAUSE_CAPTURE
                else "the trace does not say whether these steps were graph replays"
            )
            out.append(
                collapse_finding(
                    f"on the {path} path{on_ranks}",
                    s,
                    cap,
                    None,  # the grid counts padding rows: the padding-free S is unknown
                    evidence=(
                        f"{where}. {rule}. Cause: {why}. With min_kv_seq_len over active rows "
                        f"S = {cap} once real rows hold >= {kv_needed} KV tokens. The grid counts "
                        "padding rows, so the padding-free S is not in the trace"
                    ),
                    fix_text=(
                        "compute min_kv_seq_len in the metadata builder over active rows "
                        "(qo_len > 0) only (vLLM #51171) and capture with representative KV "
                        "lengths, or run aiter >= v0.1.20 (S no longer depends on the KV)"
                    ),
                    data=data,
                    batch=f" on {rows} rows x qlen {qlen}",
                )
            )
    return out


def _steps_data(per_rank: dict[int, int]) -> dict[str, Any]:
    """A finding's step count as its text says it: one rank's ``steps``; several ranks'
    ``steps_per_rank`` (rank -> steps), never their sum."""
    if len(per_rank) <= 1:
        return {"steps": sum(per_rank.values())}
    return {"steps_per_rank": {str(r): n for r, n in sorted(per_rank.items())}}


def _short_kv_finding(
    path: str, on_ranks: str, s: int, rows: int, qlen: int, cap: int, new: str, where: str,
    rule: str, data: dict[str, Any],
) -> Finding:  # fmt: skip
    """A small S from a short real KV: no padding row and no capture is involved, so it is not
    a collapse; the #51171 fix gives the same S and only the newer rule gives more."""
    return Finding(
        kind="split-short-kv",
        severity="info",
        title=(
            f"S = {s} on the {path} path{on_ranks} from a short KV, not padding: {rows} rows x "
            f"qlen {qlen} ran eagerly (no padding rows); {new} would give {cap}"
        ),
        evidence=(
            f"{where}. {rule}. Eager steps carry no padding rows and no captured grid, so the "
            "minimum over the real rows' KV bounded S; min_kv_seq_len over active rows (vLLM "
            "#51171) gives the same S here"
        ),
        fix=f"upgrade AITER to {new.replace('aiter-gluon-', '')} (S no longer bounded by the KV); "
        "otherwise nothing to fix: the KV is short",
        data=data,
    )
