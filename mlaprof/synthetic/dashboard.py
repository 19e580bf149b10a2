"""Runs for the dashboard tests, written through the real RunWriter (rows shaped like the schema).

``bug=True`` looks like the pre-fix path: a sync per layer inside the captured region, KV splits
collapsed by padding rows; ``bug=False`` looks like the fix. Times are deterministic.
"""

from __future__ import annotations

from pathlib import Path

from mlaprof.recording import attempt_memory_row, capture_row
from mlaprof.store import RunWriter, create_run

SIZES = (4, 8)
SYNC_OPS = (
    ("aten._local_scalar_dense", "mla/legacy.py:{}", "build_kv_indices"),
    ("Tensor.tolist", "mla/legacy.py:{}", "seq_lens_host"),
)


def meta(name: str, bug: bool) -> dict:
    return {
        "scenario": {
            "name": "dsv3-mtp3" if bug else "dsv3-mtp3-fixed",
            "policy": "aiter-gluon",
            "min_kv_mode": "all-rows" if bug else "active-rows",
            "graph_mode": "FULL",
        },
        "device": "NVIDIA H200 (test)",
        "backend": "legacy-flat" if bug else "triton",
        "graph_mode": "FULL",
    }


def write_step(w: RunWriter, step: int, layers: int, bug: bool) -> None:
    """One verify step: the step row, its layers, syncs, splits and padding (one commit)."""
    size = SIZES[step % len(SIZES)]
    real = size - 1 if bug else size
    base = 1_000_000 + 37_000 * ((step * 7) % 11) + (400_000 if bug else 0)
    with w.transaction():
        w.add(
            "steps",
            step=step,
            t_start_ns=step * 10_000_000,
            duration_ns=base,
            num_reqs=size,
            num_real_reqs=real,
            qlen=4,
            real_tokens=real * 4,
            padded_tokens=size * 4,
            graph_mode="FULL",
            backend="legacy-flat" if bug else "triton",
            timing="cpu-wall",
        )
        for layer in range(layers):
            used, deserved = (1, 16) if bug else (16, 16)
            syncs = len(SYNC_OPS) if bug else 0
            w.add(
                "layers",
                step=step,
                layer=layer,
                t_start_ns=step * 10_000_000 + layer * 100_000,
                duration_ns=base // layers + layer * 1000,
                syncs=syncs,
                splits_used=used,
                splits_deserved=deserved,
            )
            if bug:
                for i, (op, loc, fn) in enumerate(SYNC_OPS):
                    w.add(
                        "syncs",
                        step=step,
                        layer=layer,
                        kind="sync",
                        op=op,
                        location=loc.format(100 + 10 * i),
                        function=fn,
                        detail="host read of a device tensor",
                    )
        for policy in ("aiter-gluon", "vllm-triton"):
            used = 1 if bug and policy == "aiter-gluon" else 16
            w.add(
                "splits",
                step=step,
                capture_size=size,
                policy=policy,
                used=used,
                deserved=16,
                frozen=1 if bug else 16,
                min_kv_used=0 if bug else 4096,
                min_kv_deserved=4096,
                occupancy_used=min(1.0, used * 16 / 132),
                occupancy_deserved=min(1.0, 256 / 132),
                target="H200",
            )
        w.add(
            "padding",
            step=step,
            capture_size=size,
            real_rows=real,
            padding_rows=size - real,
            real_tokens=real * 4,
            padding_tokens=(size - real) * 4,
            kv_bytes_real=real * 4096 * 576 * 2,
            kv_bytes_padding=(size - real) * (4096 * 576 * 2 if bug else 0),
        )


def write_captures(w: RunWriter, bug: bool) -> None:
    for size in SIZES:
        # as the GPU runner records them: a failed FULL attempt measured its time, no bytes
        if bug:
            w.add("memory", **attempt_memory_row(size, size * 1_500_000))
        else:
            w.add(
                "memory",
                capture_size=size,
                graph_mode="FULL",
                pool_bytes=size * 3 * 1024 * 1024,
                allocator_bytes=size * 2 * 1024 * 1024,
                driver_bytes=size * 4 * 1024 * 1024,
                capture_ns=size * 1_500_000,
            )
        cap = capture_row(
            size,
            "FULL",
            "failed" if bug else "captured",
            "operation not permitted when stream is capturing" if bug else None,
            fallback="PIECEWISE" if bug else None,
            op="aten._local_scalar_dense" if bug else None,
            layer=0 if bug else None,
            location="mla/legacy.py:100" if bug else None,
        )
        w.add("captures", **cap)


def make_run(
    traces: Path,
    name: str,
    steps: int = 12,
    layers: int = 3,
    bug: bool = True,
    ranks: int = 1,
    finish: bool = True,
) -> Path:
    """Write a complete run; returns its folder."""
    path = traces / name
    for rank in range(ranks):
        w = create_run(traces, name, meta(name, bug), rank=rank)
        write_captures(w, bug)
        for s in range(steps):
            write_step(w, s, layers, bug)
        if finish:
            w.finish()
    return path
