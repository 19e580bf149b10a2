"""Question 2: how many KV splits does the kernel run with, and how many should it?"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.capture_status import CaptureStatus

# the one collapse rule and wording (mlaprof.analysis.collapse), re-exported for the views
from mlaprof.analysis.collapse import (  # noqa: F401
    collapse_finding,
    collapsed,
    is_collapsed,
    three_numbers,
)
from mlaprof.analysis.findings import Finding, on_purpose
from mlaprof.analysis.sections import (
    FROZEN_IF_CAPTURES,
    ReplayedSplits,
    SplitStep,
    not_runnable_reason,
    what_if_words,
)
from mlaprof.splits.policies import HOST_FALLBACK, POLICIES
from mlaprof.splits.policies import over_split as over_split_rule
from mlaprof.splits.routing import own_kernel

if TYPE_CHECKING:
    from mlaprof.analysis.claims import Claims
    from mlaprof.analysis.sections import Route


def decided_on_device(policy: str) -> bool:
    """True for a policy whose S the kernel decides on the device at every replay (the
    persistent ASM schedule): no graph freezes it, and the host has no S "used" to show."""
    p = POLICIES.get(policy)
    return bool(p is not None and p.on_device)


MEASURED_REPLAY = ("graph-replay", "graph-replay-twin")  # steps timed as replays of a graph


def replayed_splits(
    steps: pd.DataFrame, layers: pd.DataFrame, policy: str = ""
) -> ReplayedSplits | None:
    """The S a captured FULL graph replayed, measured: the layer records of steps timed as graph
    replays (min, max, steps), or None where no step was (a CPU run, an eager run,
    an import). Measured beats the modelled S a capture-time dummy run would freeze.
    ``policy``: the run's split policy; where its backend's kernel decides S on the device at
    each replay (mlaprof.backends.registry.device_decides_splits), a record holds the launch
    grid's split axis, the cap: said as ``grid_cap``, never as the S replayed (not recorded)."""
    if steps.empty or layers.empty or "timing" not in steps:
        return None
    st = steps[steps["timing"].isin(MEASURED_REPLAY) & (steps["graph_mode"] == "FULL")]
    keys = ["rank", "step"] if "rank" in st and "rank" in layers else ["step"]
    ly = layers.merge(st[keys + _backend(st)].drop_duplicates(keys), on=keys)
    ly = ly.assign(_s=pd.to_numeric(ly["splits_used"], errors="coerce")).dropna(subset=["_s"])
    if ly.empty:
        return None
    dev = _device_decided(ly, policy)
    host, cap = ly["_s"][~dev], ly["_s"][dev]
    if host.empty:  # every replay's S decided on the device: the grid's split axis is its cap
        return ReplayedSplits(
            min=None,
            max=None,
            steps=int(len(ly[keys].drop_duplicates())),
            provenance="measured: the launch grid's split axis (its cap); the S each row ran "
            "with is decided on the device per replay and not recorded",
            grid_cap=int(cap.max()),
        )
    return ReplayedSplits(
        min=int(host.min()),
        max=int(host.max()),
        steps=int(len(ly.loc[~dev, keys].drop_duplicates())),
        provenance="measured: the S of the captured graph's replays",
        grid_cap=None if cap.empty else int(cap.max()),
    )


def grid_caps(steps: pd.DataFrame, layers: pd.DataFrame, policy: str = "") -> pd.Series:
    """Per layer record (``layers``' index): True where its step's kernel decided S on the
    device (the run's ``policy`` on its step's backend: backends.registry.device_decides_splits),
    so its ``splits_used`` is the launch grid's split axis, the cap, not the S any row ran
    with. The one rule every section made of layer records reads (layers, S per MLA layer, the
    ranks side by side, the figures' S per layer): a cap is never shown as an S."""
    none = pd.Series(False, index=layers.index)
    if not policy or layers.empty or steps.empty or "backend" not in steps:
        return none
    keys = ["rank", "step"] if "rank" in steps and "rank" in layers else ["step"]
    st = steps[[*keys, "backend"]].drop_duplicates(keys)
    ly = layers[keys].merge(st, on=keys, how="left")
    return pd.Series(_device_decided(ly, policy).to_numpy(), index=layers.index)


def _backend(steps: pd.DataFrame) -> list[str]:
    return ["backend"] if "backend" in steps else []


def _device_decided(ly: pd.DataFrame, policy: str) -> pd.Series:
    """Per layer record: whether its step's kernel decided S on the device (its backend's own
    policy, marked on_device), so the record holds the grid's cap, not an S."""
    from mlaprof.backends.registry import device_decides_splits

    if not policy or "backend" not in ly:
        return pd.Series(False, index=ly.index)
    said = {b: device_decides_splits(str(b), policy) for b in ly["backend"].dropna().unique()}
    return ly["backend"].map(said).fillna(False).astype(bool)


def frozen_stands(
    policy: str, run_policy: str, full_graph: bool, replayed: ReplayedSplits | None
) -> bool:
    """Whether the S vLLM's capture-time dummy run would freeze (modelled) stands for a policy's
    row in this run: only where a FULL graph serves the steps (a failed capture, a PIECEWISE or
    eager run freezes nothing), and for the run's own policy only where no replay of its graph
    was measured (measured over modelled: the graph ran what it ran). The one rule behind the
    splits table's "frozen" cells, the figures' frozen series, the headline and the findings."""
    own = policy == run_policy or not run_policy
    return full_graph and not (own and replayed is not None)


def frozen_condition(capture_status: str | None) -> str | None:
    """The condition a modelled frozen S holds on, said with it wherever it is shown (the splits
    rows' ``frozen_if``, the split-frozen and over-split findings, the headline, the
    full_graph_splits section, the figures): "if it captures" where a FULL graph was asked for
    and nothing decided its capture (the verdict is unknown); None where the capture is known."""
    return FROZEN_IF_CAPTURES if str(capture_status) == CaptureStatus.UNKNOWN else None


def frozen_what_if(policy: str, route: Route | None) -> str | None:
    """Where ``policy`` models a kernel the run's verify route does not launch (:func:`off_route`),
    the condition its modelled frozen S holds on: "if vLLM ran <policy>", with the route vLLM
    takes instead and its vLLM version; None where the route runs it or no route is modelled
    (an on-route frozen S stands as it is). The one rule behind the splits rows'
    ``frozen_what_if`` and ``what_if``, the split series' points, the headline, the compare,
    full_graph_splits and the what-if collapse findings."""
    if route is None or not off_route(policy, route):
        return None
    tag = "" if route.verified else " UNVERIFIED"
    said = f"a what-if: this configuration takes {route.path} [vLLM {route.version}{tag}]"
    return what_if_words(policy, said)


def what_if_rule(route: Route | None) -> Callable[[str], str | None]:
    """:func:`frozen_what_if` for one run, as a function of the policy (what the summary's
    splits rows and the figures' split series are both given, beside :func:`frozen_rule`)."""
    return lambda policy: frozen_what_if(policy, route)


def frozen_rule(
    run_policy: str, full_graph: bool, replayed: ReplayedSplits | None
) -> Callable[[str], bool]:
    """:func:`frozen_stands` for one run, as a predicate on the policy (what the summary's
    splits rows and the figures' split series are both given)."""
    return lambda policy: frozen_stands(policy, run_policy, full_graph, replayed)


# a splits record's S and occupancy columns: none where the policy's kernel cannot run
_S_COLUMNS = ("used", "deserved", "frozen", "all_rows", "active_rows", "occupancy_used",
              "occupancy_deserved")  # fmt: skip


def on_target(splits: pd.DataFrame) -> pd.DataFrame:
    """``splits`` with every record whose policy's kernel does not exist or run on its target's
    architecture (mlaprof.splits.policies.arch_refusal, the rule the runs apply when they
    record) not runnable: its S and occupancy gone, its note the reason, as a run recorded
    since writes it; a run recorded before the rule (AITER's ASM kernels on an NVIDIA target)
    reads the same. Records of an unknown target are kept as they are."""
    from mlaprof.devices import DEVICES
    from mlaprof.splits.policies import NOT_RUNNABLE, arch_refusal

    if splits.empty or "target" not in splits or "policy" not in splits:
        return splits
    pairs = splits[["policy", "target"]].dropna().drop_duplicates()
    why = {
        (pol, tgt): reason
        for pol, tgt in pairs.itertuples(index=False)
        if str(tgt) in DEVICES and (reason := arch_refusal(str(pol), DEVICES[str(tgt)].arch))
    }
    if not why:
        return splits
    said = pd.Series(
        [why.get(k) for k in zip(splits["policy"], splits["target"], strict=True)],
        index=splits.index,
        dtype=object,
    )
    gone = said.notna()
    if not gone.any():
        return splits
    out = splits.copy()
    for c in _S_COLUMNS:
        if c in out:
            out[c] = out[c].where(~gone)  # NaN / NA, as the store reads a NULL
    out["note"] = out.get("note", pd.Series(None, index=out.index)).astype(object)
    out.loc[gone, "note"] = NOT_RUNNABLE + ": " + said[gone]
    return out


def split_summary(splits: pd.DataFrame) -> pd.DataFrame:
    """Per rank and policy: the step where S used is worst relative to S deserved. A policy
    whose S is decided on the device (no host S) keeps its latest row, so every view lists the
    same policies; a policy whose kernel cannot run on the target is not runnable
    (:func:`on_target`)."""
    if splits.empty:
        return splits
    df = on_target(splits).copy()
    if "rank" in df:  # a row without a rank is rank 0's (single-process producers)
        df["rank"] = df["rank"].fillna(0)
    df["ratio"] = df["used"].astype(float) / df["deserved"].astype(float)
    keys = ["rank", "policy"] if "rank" in df else ["policy"]
    known = df.dropna(subset=["ratio"])
    idx = list(known.groupby(keys, sort=False)["ratio"].idxmin())
    rest = df[~df.set_index(keys).index.isin(known.set_index(keys).index)]
    idx += list(rest.groupby(keys, sort=False).tail(1).index)
    out = df.loc[idx]
    # rank by rank, policies in the order the run recorded them
    first = {k: i for i, k in reversed(list(enumerate(zip(*(df[c] for c in keys), strict=True))))}
    order = [first[k] for k in zip(*(out[c] for c in keys), strict=True)]
    return out.assign(_o=order).sort_values("_o").drop(columns="_o").reset_index(drop=True)


def split_rows(
    splits: pd.DataFrame,
    worst: pd.DataFrame | None = None,
    stands: Callable[[str], bool] | None = None,
    condition: str | None = None,
    route: Route | None = None,
) -> list[SplitStep]:
    """The worst-step row per rank and policy, with where each policy's rule was read from
    (``worst``: :func:`split_summary` of ``splits``, where the caller holds it). ``stands``:
    whether a policy's modelled frozen S stands in this run (:func:`frozen_stands`); where it
    does not, the row's ``frozen`` is None. None: every recorded frozen S is kept.
    ``condition``: what a frozen S holds on (:func:`frozen_condition`), kept beside it.
    ``route``: the verify route the split findings judge by (None: not modelled); a policy off
    it keeps its frozen S as a what-if (``on_route`` False, ``frozen_what_if``: its condition,
    :func:`frozen_what_if`), never as the S the run's graph froze, and every S of the row holds
    on the same condition (``what_if``)."""
    out = []
    for r in (split_summary(splits) if worst is None else worst).itertuples():
        p = POLICIES.get(r.policy)
        rank = _opt_int(getattr(r, "rank", 0))
        frozen = _opt_int(r.frozen) if stands is None or stands(r.policy) else None
        what_if = frozen_what_if(r.policy, route)
        out.append(
            SplitStep(
                rank=rank,
                ranks=[rank],
                policy=r.policy,
                source=None if p is None else p.provenance,
                verified=None if p is None else p.verified,
                # a persistent row AITER decided on the host (its note says so) is not on
                # device, nor is a kernel that cannot run at all (no S is decided anywhere)
                on_device=None
                if p is None
                else p.on_device
                and HOST_FALLBACK not in str(getattr(r, "note", "") or "")
                and not_runnable_reason(getattr(r, "note", None)) is None,
                used=_opt_int(r.used),
                deserved=_opt_int(r.deserved),
                frozen=frozen,
                all_rows=_opt_int(r.all_rows),
                active_rows=_opt_int(r.active_rows),
                min_kv_used=_opt_int(r.min_kv_used),
                min_kv_deserved=_opt_int(r.min_kv_deserved),
                occupancy=_opt_float(r.occupancy_used),
                occupancy_deserved=_opt_float(r.occupancy_deserved),
                occupancy_source="model",
                step=_opt_int(r.step),
                frozen_if=condition if frozen is not None else None,
                not_runnable=not_runnable_reason(getattr(r, "note", None)),
                # mlaprof's own kernel is on no route of vLLM's (SplitStep.none_reads says so)
                on_route=None if route is None or own_kernel(r.policy) else what_if is None,
                frozen_what_if=what_if if frozen is not None else None,
                what_if=what_if,
            )
        )
    return fold_rank_rows(out)


# what a row says apart from where it holds: rows equal in these fields fold into one
_FOLD_KEYS = tuple(f for f in SplitStep.__dataclass_fields__ if f not in ("rank", "ranks", "step"))


def fold_rank_rows(rows: list[SplitStep]) -> list[SplitStep]:
    """Rows that say the same for several ranks (all but rank and step equal) become one row
    with ``ranks``; rows where ranks disagree stay apart, each with its own ``ranks``."""
    out: list[SplitStep] = []
    index: dict[tuple, SplitStep] = {}
    for r in rows:
        key = tuple(getattr(r, k) for k in _FOLD_KEYS)
        if key in index:
            index[key].ranks.append(r.rank)
            continue
        index[key] = r
        out.append(r)
    return out


def split_findings(
    splits: pd.DataFrame,
    run_policy: str,
    graph_mode: str,
    pre_fix: str | None = None,
    replayed: ReplayedSplits | None = None,
    worst: pd.DataFrame | None = None,
    claims: Claims | None = None,
    route: Route | None = None,
) -> list[Finding]:
    """``pre_fix``: why the run models a min_kv_seq_len rule its vLLM version no longer has
    (said in every collapse it explains). ``replayed``: the measured S of the run's graph
    replays (:func:`replayed_splits`); where it exists, the modelled frozen S is not warned of
    (measured over modelled: the graph ran what it ran). ``worst``: :func:`split_summary` of
    ``splits``, where the caller holds it. ``claims``: the run's context; an S frozen into a
    FULL graph is warned of only where a FULL graph serves the steps (not where capture failed).
    ``route``: the verify route vLLM takes (None: not modelled); a policy that does not model
    its kernel is judged as a what-if (:func:`off_route`), never as the run's own."""
    out: list[Finding] = []
    seen_device: set[str] = set()
    full_graph = claims.full_graph if claims is not None else graph_mode == "FULL"
    stands = frozen_rule(run_policy, full_graph, replayed)
    # a FULL graph asked for whose capture nothing decided: the frozen S is said on that condition
    cond = frozen_condition(claims.capture_status) if claims is not None else None
    for r in (split_summary(splits) if worst is None else worst).itertuples():
        # runs without a scenario (the vLLM plugin) record only the policies that apply; a
        # policy of a kernel the route does not launch is no S the run's steps would run with
        other = off_route(r.policy, route)
        # the condition its S holds on, in the splits row's words (frozen_what_if)
        cond_if = frozen_what_if(r.policy, route) if other else None
        main = (r.policy == run_policy or not run_policy) and not other
        p = POLICIES.get(r.policy)
        fix = _opt_int(getattr(r, "active_rows", None))
        # AITER drops the persistent kernel for some shapes: that row's S is the host's
        host = HOST_FALLBACK in str(getattr(r, "note", "") or "")
        if p and p.on_device and not host:
            if main and r.policy not in seen_device:
                seen_device.add(r.policy)
                out.append(_device_finding(r.policy, p.provenance))
            continue
        if pd.isna(r.used) or pd.isna(r.deserved):
            continue
        used, deserved = int(r.used), int(r.deserved)
        if is_collapsed(used, deserved):
            cause = (
                f"min_kv_seq_len = {int(r.min_kv_used)} (a minimum over all rows: padding rows "
                f"are pinned to qlen) instead of {int(r.min_kv_deserved)} over active rows"
                if p and p.uses_min_kv and r.min_kv_used < r.min_kv_deserved
                else "padding rows counted in the batch size"
            )
            out.append(
                collapse_finding(
                    cond_if or f"under {r.policy}",
                    used,
                    fix,
                    deserved,
                    evidence=(
                        (f"{pre_fix}. " if pre_fix and main else "")
                        + f"step {int(r.step)}: {cause}; occupancy {_pct(r.occupancy_used)} vs "
                        f"{_pct(r.occupancy_deserved)} of the {r.target} units; policy read from "
                        f"{p.provenance if p else 'an unknown source'}"
                    ),
                    fix_text=(
                        "compute min_kv_seq_len in the metadata builder over active rows "
                        "(qo_len > 0) only"
                        if p and p.uses_min_kv
                        else "exclude padding rows from the split heuristic's batch size"
                    ),
                    data={
                        "policy": r.policy,
                        "used": used,
                        "fix": fix,
                        "deserved": deserved,
                        "rank": _opt_int(getattr(r, "rank", 0)),
                    },
                    main=main,
                    note=on_purpose("the pre-#51171 rule") if pre_fix and main else "",
                )
            )
            if other:  # the route's own words, where a what-if collapse is said
                out[-1].evidence += f"; {what_if_evidence(route)}"
                out[-1].data["route"] = route.path if route is not None else None
        if (
            main
            and stands(r.policy)
            and pd.notna(r.frozen)
            and is_collapsed(int(r.frozen), deserved)
        ):
            out.append(
                Finding(
                    kind="split-frozen",
                    severity="warning",
                    title=(
                        f"S = {int(r.frozen)} would be frozen into the FULL graph by the "
                        f"capture-time dummy run ({r.policy})"
                        + (f", {cond} (this run does not say)" if cond else "")
                        + f"; real rows deserve {deserved}"
                    ),
                    evidence=(
                        "the split count is a host-side constant captured into the graph; the "
                        "dummy run's KV length is qlen"
                    ),
                    fix="choose S at replay from the real metadata (device-side) or capture with "
                    "representative KV lengths per capture size",
                    data={
                        "policy": r.policy,
                        "frozen": int(r.frozen),
                        "deserved": deserved,
                        "rank": _opt_int(getattr(r, "rank", 0)),
                    },
                )
            )
        ran, how, source = _ran_with(r, used, stands, replayed, cond)
        if main and over_split_rule(ran, deserved):
            out.append(_over_split_finding(r, ran, deserved, p, how, source))
    return out


def off_route(policy: str, route: Route | None) -> bool:
    """Whether ``policy`` models a kernel of vLLM's that the verify route does not launch (the
    route finding's rule, :func:`mlaprof.splits.routing.policy_fits_route`); False where no
    route is modelled, and for mlaprof's own kernel (:func:`mlaprof.splits.routing.own_kernel`):
    vLLM runs it on no route, so its S is no what-if of vLLM's but what mlaprof's backend runs."""
    from mlaprof.splits.routing import policy_fits_route

    if route is None or own_kernel(policy) is not None:
        return False
    return not policy_fits_route(policy, route.path)


def what_if_evidence(route: Route | None) -> str:
    """Why a what-if collapse is no finding about the run's steps: the route's kernel, and
    whether it decides S on the device (then nothing freezes or collapses its S on the host)."""
    if route is None:
        return "vLLM's route is not modelled"
    device = "; it decides S on the device at every replay" if route.splits_on_device else ""
    return f"vLLM runs {route.path} ({route.kernel}) for this configuration{device}"


def _ran_with(
    r: Any,
    used: int,
    stands: Callable[[str], bool],
    replayed: ReplayedSplits | None,
    cond: str | None = None,
) -> tuple[int, str, str]:
    """The S the run's steps ran with, as the capture findings tell it, with how a title says
    it and where it comes from: the graph's replays where they were measured (the most any
    replay used), else the S the capture-time dummy run froze where a FULL graph serves the
    steps (modelled; on ``cond``, :func:`frozen_condition`, where the run does not say it
    captures), else the S its metadata used (an eager or PIECEWISE run, and a FULL capture
    that failed: nothing was frozen)."""
    if replayed is not None:
        return replayed.max, "replayed by the FULL graph", replayed.provenance
    if stands(r.policy) and pd.notna(r.frozen):
        return (
            int(r.frozen),
            "frozen into the FULL graph" + (f" {cond}" if cond else ""),
            "modelled: vLLM's capture-time dummy run"
            + (f", {cond} (this run does not say)" if cond else ""),
        )
    return used, "used", "recorded: the steps' metadata"


def _over_split_finding(
    r: object, s: int, deserved: int, p: object, how: str, source: str
) -> Finding:
    """S far above what the real rows can use: each extra split is a program that re-reads
    its rows' queries and adds a partial to the stage-2 reduction. ``how`` / ``source``: how
    the S ran and where that S comes from (:func:`_ran_with`)."""
    occ_d = _opt_float(getattr(r, "occupancy_deserved", None))
    return Finding(
        kind="split-over",
        severity="warning",
        title=(
            f"KV splits over-split under {r.policy}: S = {s} {how}, the real rows use "
            f"{deserved} ({s / deserved:.0f}x the programs and stage-2 partials)"
        ),
        evidence=(
            f"S = {s} {source}; "
            f"step {_opt_int(r.step)}: with S = {deserved} the real rows already fill "
            f"{_pct(occ_d)} of the {r.target} units (modelled); the other {s - deserved} "
            "splits per row each re-read the row's queries for a short KV chunk and add a "
            "partial to the reduction; policy read from "
            + (getattr(p, "provenance", None) or "an unknown source")
        ),
        fix="size S from the live KV length at replay (device-side) or capture with "
        "representative KV lengths per capture size",
        data={"policy": r.policy, "splits": s, "deserved": deserved},
    )


# what reads the live KV lengths on the device, per on-device policy
_DEVICE_READER = {
    "aiter-asm-persistent": "get_mla_metadata_v1",
    "mlaprof-triton": "mlaprof's Triton kernel (each row's S from seq_lens; the grid is a cap)",
}


def _device_finding(policy: str, provenance: str) -> Finding:
    return Finding(
        kind="split-device",
        severity="info",
        title=f"S decided on the device ({policy}): not frozen into a captured graph",
        evidence=(
            f"{_DEVICE_READER.get(policy, 'the kernel')} reads the live KV lengths on the device "
            "at every replay, so neither padding rows nor the capture-time dummy run fix S; "
            f"read from {provenance}"
        ),
        fix="nothing to fix for the split count; compare replay time per batch size instead",
        data={"policy": policy},
    )


def _opt_int(v: object) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def _opt_float(v: object) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _pct(x: object) -> str:
    return "-" if x is None or pd.isna(x) else f"{100 * float(x):.1f}%"
