"""What AITER would do with exactly a recorded engine's verify batches, modelled ("shadow"): each
verify step's rows fed through the same scenario / metadata / split-policy code ``mlaprof run``
uses (:func:`mlaprof.metadata.batch_shape`, :func:`mlaprof.metadata.build_metadata`,
:func:`mlaprof.step_splits.step_splits`) for a chosen AITER version and device: the route, S with
the padding bug, with the fix and frozen at capture, occupancy, and the padding rows vLLM's
capture sizes would add.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import AiterRuleSection, ShadowSection, ShadowStep
from mlaprof.analysis.typed_json import over_ranks_label
from mlaprof.capture_sizes import capture_plan, rule_for
from mlaprof.errors import MlaprofError
from mlaprof.scenario import DEVICES, DevicePreset
from mlaprof.splits import releases
from mlaprof.splits.policies import is_collapsed
from mlaprof.splits.routing import (
    DEFAULT_VERSION,
    RouteConfig,
    non_rocm_route,
    path_policy,
    verify_route,
)

if TYPE_CHECKING:  # built in shadow() only: check_shadow runs before any run is opened
    import pandas as pd

    from mlaprof.analysis.step_records import EngineStep

SHADOW_DEVICE = "mi355x"
SHADOW_AITER = "0.1.20"


def route(
    heads: int, qlen: int, device: DevicePreset, aiter: str, version: str = DEFAULT_VERSION
) -> tuple[str, str, str]:
    """(path, split policy, why) of a verify batch on ``device`` with AITER ``aiter``: the path
    is vLLM's (mlaprof.splits.routing, bf16 KV, causal), the policy the kernel's S rule (for a
    release mlaprof does not model: the nearest modelled rule, mlaprof.splits.releases)."""
    if not device.arch.startswith("gfx"):
        r = non_rocm_route(device.name, version, arch=device.arch)
    else:
        r = verify_route(
            RouteConfig(heads=heads, qlen=qlen, arch=device.arch, mtp_decode_qlen=qlen), version
        )
    policy = path_policy(r.path, aiter)
    if policy is None:
        # no modelled split rule for vLLM's FlashAttention / FlashMLA backends: say so
        return (
            r.path,
            "vllm-triton",
            r.reason
            + ("; its split count is not modelled: vLLM's Triton MLA rule stands in (UNVERIFIED)"),
        )
    return r.path, policy, r.reason


def check_shadow(device: str | None = None, aiter: str | None = None) -> None:
    """Raise MlaprofError for a device preset or AITER version the shadow analysis cannot model."""
    if device is not None and device not in DEVICES:
        raise MlaprofError(f"unknown device {device!r}; known: {', '.join(DEVICES)}")
    if aiter is not None:
        releases.aiter_rule(aiter)  # raises for junk and for releases older than v0.1.19


def shadow(
    steps: list[EngineStep],
    device: str = SHADOW_DEVICE,
    aiter: str = SHADOW_AITER,
    heads: int | None = None,
    vllm_version: str = DEFAULT_VERSION,
) -> pd.DataFrame:
    """Per recorded verify step: what AITER ``aiter`` on ``device`` would do with these rows,
    routed, captured and dispatched as vLLM ``vllm_version`` does."""
    # the metadata builder (torch) only for an engine run's shadow: other reports never load it
    from mlaprof.metadata import batch_shape, build_metadata
    from mlaprof.recording import padding_row
    from mlaprof.step_splits import step_splits

    check_shadow(device, aiter)
    dev = DEVICES[device]
    label = f"modelled from recorded batches (AITER {aiter}: {releases.aiter_rule(aiter).label}; on {device})"
    rows: list[dict[str, Any]] = []
    for s in steps:
        if s.kind != "verify" or not s.seq_lens_upper_bound or s.draft_tokens is None:
            continue
        k = int(s.num_speculative_tokens or max(s.draft_tokens))
        qlen = 1 + k
        drafts, seq = s.draft_tokens, s.seq_lens_upper_bound
        verify = [i for i, d in enumerate(drafts) if d > 0 and i < len(seq)]
        kv = [max(seq[i], qlen) for i in verify]  # KV lengths include the verify tokens
        h = heads or s.heads
        path, policy, why = route(h, qlen, dev, aiter, vllm_version)
        mns = int(s.max_num_seqs or len(kv))
        plan = capture_plan(rule_for(vllm_version), mns, k, device=device)  # version + runner
        shape = batch_shape(kv, qlen, "FULL", plan)
        meta = build_metadata(shape, 1, "active-rows", shuffle_pages=False)
        mml, seqs = s.max_model_len or 0, s.max_num_seqs
        buf = seqs * mml if seqs and mml else None  # vLLM's kv_indices buffer: the ASM total_kv
        # full_graphs: batch_shape above dispatched it as a FULL-graph engine does
        (sp,) = step_splits(
            meta, h, dev, shape.graph_mode, mml, [policy], kv_buffer_len=buf, full_graphs=True
        )
        pad = padding_row(s.step, meta, shape)
        notes = [why] + ([sp.note] if sp.note else [])
        short = sum(1 for i in verify if drafts[i] < k)
        if short:
            notes.append(f"{short} rows had fewer than {k} drafts: modelled padded to qlen {qlen}")
        rows.append(
            {
                "rank": s.rank,
                "step": s.step,
                "path": path,
                "policy": policy,
                "heads": h,
                "qlen": qlen,
                "real_rows": shape.num_real,
                "rows": shape.num_reqs,
                "capture_size": shape.capture_size,
                "graph_mode": shape.graph_mode,
                "padding_rows": pad["padding_rows"],
                "padding_tokens": pad["padding_tokens"],
                "min_kv_all_rows": meta.min_kv_seq_len_all,
                "min_kv_active_rows": meta.min_kv_seq_len_active,
                "s_bug": sp.all_rows,
                "s_fix": sp.active_rows,
                "s_frozen": sp.frozen,
                "s_deserved": sp.deserved,
                "occupancy_fix": sp.occupancy_used,
                "occupancy_deserved": sp.occupancy_deserved,
                "target": dev.name,
                "aiter": aiter,
                "provenance": label,
                "note": "; ".join(notes),
            }
        )
    import pandas as pd

    frame = pd.DataFrame(rows)
    for col in ("s_bug", "s_fix", "s_frozen", "s_deserved", "occupancy_fix"):
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def shadow_summary(frame: pd.DataFrame, device: str, aiter: str) -> ShadowSection | None:
    if frame.empty:
        return None

    def rng(col: str) -> list[int | None]:
        v = frame[col].dropna()
        return [int(v.min()), int(v.max())] if len(v) else [None, None]

    rule = releases.aiter_rule(aiter)
    return ShadowSection(
        provenance=f"modelled from recorded batches (AITER {aiter}: {rule.label}; on {device})",
        aiter_rule=AiterRuleSection(**rule.to_dict()),
        device=device,
        aiter=aiter,
        steps=len(frame),
        paths=dict(Counter(frame["path"])),
        policies=sorted(set(frame["policy"])),
        s_bug=rng("s_bug"),
        s_fix=rng("s_fix"),
        s_frozen=rng("s_frozen"),
        s_deserved=rng("s_deserved"),
        occupancy_fix=[float(frame["occupancy_fix"].min()), float(frame["occupancy_fix"].max())],
        capture_sizes=sorted({int(x) for x in frame["capture_size"].dropna()}),
        padding_rows=int(frame["padding_rows"].sum()),
        real_rows=int(frame["real_rows"].sum()),
        # the one collapse rule (mlaprof.splits.policies.is_collapsed), with the fix as reference
        steps_collapsed_by_bug=int(is_collapsed(frame["s_bug"], frame["s_fix"]).sum()),
        steps_frozen_below_fix=int(is_collapsed(frame["s_frozen"], frame["s_fix"]).sum()),
        per_step=[
            ShadowStep(**x) for x in frame.drop(columns=["provenance"]).to_dict(orient="records")
        ],
    )


def shadow_findings(sh: ShadowSection | None) -> list[Finding]:
    """What the modelled AITER would do with the recorded batches (each finding tagged with the
    model's provenance). ``sh`` None: no verify batch to model."""
    out: list[Finding] = []
    if not sh:
        return out
    tag = f"[{sh.provenance}]"
    lo_hi = {k: f"{getattr(sh, k)[0]}-{getattr(sh, k)[1]}" for k in ("s_bug", "s_fix", "s_frozen")}
    n, steps = sh.steps_collapsed_by_bug, sh.steps
    # the counts add every rank's verify batches: said, in the sections' one wording
    summed = over_ranks_label("sum", {p.rank for p in sh.per_step})
    if n:  # the one collapse finding (mlaprof.analysis.collapse), tagged as modelled
        # imported here: collapse reads frames (pandas), and a report that exits on a missing
        # run imports this module without building a finding
        from mlaprof.analysis.collapse import collapse_finding

        out.append(
            collapse_finding(
                f"with min_kv_seq_len over all rows (the padding bug) on {n} of {steps} "
                f"steps{summed}",
                used=int(sh.s_bug[0]),  # type: ignore[arg-type]
                fix=int(sh.s_fix[0]),  # type: ignore[arg-type]
                deserved=None,
                evidence=f"padding rows pinned to qlen under capture sizes {sh.capture_sizes}; "
                f"policy {', '.join(sh.policies)}; S {lo_hi['s_bug']} with the bug, "
                f"{lo_hi['s_fix']} with the fix",
                fix_text="compute min_kv_seq_len over active rows (vLLM #51171, in vLLM >= 0.32)",
                data={"steps": n, "of_steps": steps, "policies": list(sh.policies)},
                modelled=sh.provenance,
            )
        )
    specs = (  # (applies, kind, severity, title, evidence, fix)
        (sh.steps_frozen_below_fix, "split-frozen", "warning",
         f"a FULL graph captured with the dummy run would freeze S at {lo_hi['s_frozen']} where "
         f"these rows get {lo_hi['s_fix']} ({sh.steps_frozen_below_fix} steps{summed})",
         "S is a host-side constant baked into the captured graph",
         "an S independent of KV length (AITER >= 0.1.20) or capture at real lengths"),
        (sh.padding_rows, "padding", "info",
         f"FULL-graph padding would add {sh.padding_rows} rows to {sh.real_rows} real "
         f"verify rows over {sh.steps} steps{summed}",
         f"batches padded to vLLM capture sizes {sh.capture_sizes} (tokens)",
         "capture sizes closer to the batch sizes the server sees"),
    )  # fmt: skip
    for applies, kind, severity, title, evidence, fix in specs:
        if applies:
            out.append(Finding(kind, severity, f"{tag} {title}", evidence, fix))
    return out
