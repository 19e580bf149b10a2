"""KV splits of one step: S used (metadata as built), S deserved (real rows only), S frozen into a
FULL graph by the capture-time dummy run, and the occupancy each implies on the target device."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlaprof.errors import MlaprofError
from mlaprof.splits.policies import (
    BUILT_FROM_MAX_MODEL_LEN,
    NOT_RUNNABLE,
    POLICIES,
    RELEASED_POLICIES,
    Policy,
    SplitInput,
    applicable,
    collapsed_known,
    dummy_run_input,
    host_fallback_note,
)

if TYPE_CHECKING:
    from mlaprof.metadata import VerifyMetadata
    from mlaprof.scenario import DevicePreset


@dataclass
class StepSplits:
    policy: str
    used: int | None
    deserved: int | None
    frozen: int | None
    all_rows: int | None
    active_rows: int | None
    min_kv_used: int
    min_kv_deserved: int
    occupancy_used: float | None
    occupancy_deserved: float | None
    note: str = ""

    @property
    def collapsed(self) -> bool:
        """Materially fewer splits than the real rows deserve (at most half)."""
        return collapsed_known(self.used, self.deserved)


def _safe(policy: Policy, x: SplitInput) -> tuple[int | None, str]:
    try:
        return policy.splits(x), ""
    except MlaprofError as e:
        return None, str(e)


def occupancy(
    policy: Policy,
    real_seq_lens: list[int],
    qlen: int,
    heads: int,
    s: int,
    units: int,
    kv_fp8: bool = False,
) -> float:
    """Fraction of the device's units busy with real work: programs of real rows whose split
    holds KV as the policy's kernel cuts it (:meth:`Policy.active_splits`; a split without KV
    exits at once), over the unit count, capped at 1."""
    programs = sum(
        policy.programs(1, qlen, heads, policy.active_splits(n, s, heads, kv_fp8))
        for n in real_seq_lens
    )
    return min(1.0, programs / max(1, units))


def step_splits(
    meta: VerifyMetadata,
    heads: int,
    device: DevicePreset,
    graph_mode: str,
    max_model_len: int,
    policies: list[str] | None = None,
    kv_buffer_len: int | None = None,
    full_graphs: bool | None = None,
) -> list[StepSplits]:
    """S per policy. ``kv_buffer_len``: the kv_indices buffer length the engine passes (vLLM:
    max_num_seqs * max_model_len), which the ASM heuristic reads as total_kv. ``full_graphs``:
    whether the engine captures FULL graphs (None: the step ran in one), which the step's own
    mode does not say for its PIECEWISE and eager steps."""
    if full_graphs is None:
        full_graphs = graph_mode == "FULL"
    b, qlen = meta.num_reqs, meta.qlen
    real = [s for s, q in zip(meta.host_seq_lens, meta.host_qo_lens, strict=True) if q > 0]
    base = dict(
        qlen=qlen, heads=heads, units=device.units, kv_buffer_len=kv_buffer_len, arch=device.arch
    )
    x_all = SplitInput(
        num_reqs=b,
        min_kv_seq_len=meta.min_kv_seq_len_all,
        max_seq_len=meta.max_seq_len,
        total_kv=sum(meta.host_seq_lens),
        **base,
    )
    x_active = SplitInput(
        num_reqs=b,
        min_kv_seq_len=meta.min_kv_seq_len_active,
        max_seq_len=meta.max_seq_len,
        total_kv=sum(meta.host_seq_lens),
        **base,
    )
    x_real = SplitInput(
        num_reqs=max(1, len(real)),
        min_kv_seq_len=meta.min_kv_seq_len_active,
        max_seq_len=max(real) if real else qlen,
        total_kv=sum(real) or qlen,
        **base,
    )
    out: list[StepSplits] = []
    for name in policies or list(RELEASED_POLICIES):
        p = POLICIES[name]
        why = applicable(name, heads, b, qlen, device.arch)
        fp8 = "fp8" in name  # an fp8 policy models an fp8 KV cache
        xa, xb, xr = (dataclasses.replace(x, kv_fp8=fp8) for x in (x_all, x_active, x_real))
        if full_graphs and name in BUILT_FROM_MAX_MODEL_LEN:  # the builder's S, on every step
            xa, xb = (dataclasses.replace(x, max_seq_len=max_model_len) for x in (xa, xb))
        if why:
            out.append(
                StepSplits(
                    name,
                    None,
                    None,
                    None,
                    None,
                    None,
                    meta.min_kv_seq_len,
                    meta.min_kv_seq_len_active,
                    None,
                    None,
                    f"{NOT_RUNNABLE}: {why}",
                )
            )
            continue
        all_rows, n1 = _safe(p, xa)
        active_rows, n2 = _safe(p, xb)
        used = all_rows if meta.min_kv_mode == "all-rows" else active_rows
        deserved, n3 = _safe(p, xr)
        frozen = None
        n4 = ""
        if p.decided_on_device(xa):
            n4 = "S decided on the device at replay: not frozen into a graph"
        else:
            if p.on_device:  # AITER dropped the persistent kernel: S on the host
                n4 = host_fallback_note(name)
            if graph_mode == "FULL":
                # the ASM rule reads the buffer length, the same at capture and replay
                x_dummy = dummy_run_input(
                    name, b, qlen, heads, device.units, max_model_len,
                    kv_buffer_len=kv_buffer_len, kv_fp8=fp8, arch=device.arch,
                )  # fmt: skip
                frozen, n5 = _safe(p, x_dummy)
                n4 = "; ".join(n for n in (n4, n5) if n)
        note = "; ".join(dict.fromkeys(n for n in (n1, n2, n3, n4) if n))
        occ_u = occupancy(p, real, qlen, heads, used, device.units, fp8) if used else None
        occ_d = occupancy(p, real, qlen, heads, deserved, device.units, fp8) if deserved else None
        out.append(
            StepSplits(
                name,
                used,
                deserved,
                frozen,
                all_rows,
                active_rows,
                meta.min_kv_seq_len,
                meta.min_kv_seq_len_active,
                occ_u,
                occ_d,
                note,
            )
        )
    return out
