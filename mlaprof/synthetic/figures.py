"""Synthetic runs written with RunWriter, for the figure, HTML and PNG tests and the figures
benchmark (``bench/`` never imports ``tests/``).

Split counts come from the real policies on the real metadata of each step, so the numbers are
those ``mlaprof run`` would record for the same scenario (the bug: min over all rows).
"""

from __future__ import annotations

from pathlib import Path

from mlaprof.metadata import step_metadata
from mlaprof.recording import capture_row
from mlaprof.scenario import KV_DIM, Scenario
from mlaprof.splits.policies import POLICIES, SplitInput
from mlaprof.store import create_run

POLICY_NAMES = ("aiter-gluon-v0.1.19", "aiter-gluon-v0.1.20", "vllm-triton")
T0 = 5_000_000_000


def _split_input(meta, sc: Scenario, min_kv: int) -> SplitInput:  # noqa: ANN001
    return SplitInput(
        num_reqs=meta.num_reqs,
        qlen=meta.qlen,
        heads=sc.heads,
        min_kv_seq_len=min_kv,
        max_seq_len=meta.max_seq_len,
        total_kv=meta.total_kv_real,
        units=sc.device_preset.units,
    )


def write_run(
    traces: Path,
    name: str,
    *,
    fixed: bool = False,
    steps: int = 5,
    layers: int = 3,
    fallback_steps: tuple[int, ...] = (4,),
    rank: int = 0,
    device: str = "cpu",
) -> Path:
    """A run of the default scenario: the bug (``fixed=False``: 2 syncs per layer, min_kv over all
    rows, a failed capture) or the fix. Steps in ``fallback_steps`` ran PIECEWISE, slower.
    ``device``: "cpu" times the steps as a CPU run does (each in its mode's shape, eagerly);
    "cuda" as a GPU run does (FULL steps replayed in a graph, the fallback's on device events)."""
    sc = Scenario(
        steps=steps,
        layers=layers,
        min_kv_mode="active-rows" if fixed else "all-rows",
    ).validate()
    w = create_run(
        traces, name, {"scenario": sc.to_dict(), "backend": "torch", "device": device}, rank
    )
    t = T0
    kern_id = 0
    for step in range(steps):
        meta = step_metadata(sc, step)
        mode = "PIECEWISE" if step in fallback_steps else "FULL"
        layer_ns = 100_000 if mode == "FULL" else 450_000
        dur = layer_ns * layers + 20_000
        w.add(
            "steps",
            step=step,
            t_start_ns=t,
            duration_ns=dur,
            num_reqs=meta.num_reqs,
            num_real_reqs=meta.num_real_reqs,
            qlen=meta.qlen,
            real_tokens=meta.num_real_reqs * meta.qlen,
            padded_tokens=meta.num_reqs * meta.qlen,
            graph_mode=mode,
            backend="torch",
            timing="cpu-wall"
            if device == "cpu"
            else ("graph-replay" if mode == "FULL" else "eager-events"),
        )
        for pol in POLICY_NAMES:
            p = POLICIES[pol]
            used = p.splits(_split_input(meta, sc, meta.min_kv_seq_len))
            deserved = p.splits(_split_input(meta, sc, meta.min_kv_seq_len_active))
            frozen = p.splits(_split_input(meta, sc, meta.qlen))
            units = sc.device_preset.units
            real_prog = p.programs(meta.num_real_reqs, meta.qlen, sc.heads, 1)
            w.add(
                "splits",
                step=step,
                capture_size=meta.num_reqs * meta.qlen,
                policy=pol,
                used=used,
                deserved=deserved,
                frozen=frozen,
                min_kv_used=meta.min_kv_seq_len,
                min_kv_deserved=meta.min_kv_seq_len_active,
                occupancy_used=min(1.0, real_prog * used / units),
                occupancy_deserved=min(1.0, real_prog * deserved / units),
                target=sc.target,
            )
        own = POLICIES[sc.policy]
        s_used = own.splits(_split_input(meta, sc, meta.min_kv_seq_len))
        s_des = own.splits(_split_input(meta, sc, meta.min_kv_seq_len_active))
        for layer in range(layers):
            lt = t + 10_000 + layer * layer_ns
            w.add(
                "layers",
                step=step,
                layer=layer,
                t_start_ns=lt,
                duration_ns=layer_ns - 5_000,
                syncs=0 if fixed else 2,
                splits_used=s_used,
                splits_deserved=s_des,
            )
            if not fixed:
                for op in ("aten._local_scalar_dense", "aten.repeat_interleave.Tensor"):
                    w.add(
                        "syncs",
                        step=step,
                        layer=layer,
                        kind="sync",
                        op=op,
                        location="mlaprof/backends/legacy_flat.py:42",
                        function="forward",
                    )
            for kname, k0, k1 in (
                ("mla_split_kv_stage1", 5_000, 70_000),
                ("mla_split_kv_reduce", 72_000, 90_000),
            ):
                kern_id += 1
                w.add(
                    "kernels",
                    step=step,
                    layer=layer,
                    replay=step,
                    name=kname,
                    start_ns=lt + k0,
                    end_ns=lt + k1,
                    device=0,
                    stream=7,
                    correlation=kern_id,
                    grid_x=meta.num_reqs,
                    grid_y=1,
                    grid_z=s_used,
                    splits=s_used,
                )
        kv = meta.host_seq_lens
        real_kv = sum(s for s, q in zip(kv, meta.host_qo_lens, strict=True) if q > 0)
        pad_kv = sum(s for s, q in zip(kv, meta.host_qo_lens, strict=True) if q == 0)
        w.add(
            "padding",
            step=step,
            capture_size=meta.num_reqs * meta.qlen,
            real_rows=meta.num_real_reqs,
            padding_rows=meta.num_padding,
            real_tokens=meta.num_real_reqs * meta.qlen,
            padding_tokens=meta.num_padding * meta.qlen,
            kv_bytes_real=real_kv * KV_DIM * 2,
            kv_bytes_padding=pad_kv * KV_DIM * 2,
        )
        t += dur + 30_000
    for i, size in enumerate((4, 8, 16, 32)):
        failed = not fixed and size == 16
        cap = capture_row(
            size,
            "FULL",
            "failed" if failed else "captured",
            fallback="PIECEWISE" if failed else None,
            op="aten._local_scalar_dense" if failed else None,
            layer=0 if failed else None,
            location="mlaprof/backends/legacy_flat.py:42" if failed else None,
        )
        w.add("captures", **cap)
        if not failed:
            w.add(
                "memory",
                capture_size=size,
                graph_mode="FULL",
                pool_bytes=(i + 1) * 3 * 2**20,
                allocator_bytes=(i + 1) * 4 * 2**20,
                driver_bytes=(i + 1) * 6 * 2**20,
                capture_ns=(i + 1) * 2_000_000,
            )
    w.finish()
    return w.run_dir
