"""A documented cost model of one split-KV MLA verify call: predicted time from the bytes its
programs read and how many programs run at once.

    time = t0 + bytes / (bw_max * (1 - exp(-programs / p0)))

* ``bytes``: every program streams its split of the request's KV (576 values x 2 bytes a token);
  programs per request and split = (qlen if the kernel launches one program per verify token,
  else 1) x head groups. L2 reuse between programs is not modelled (an upper bound on bytes).
* ``programs``: real rows' programs over the splits that hold KV (padding rows exit at once).
  Few programs cannot saturate memory: one program streams ``bw_max / p0``.
* ``t0``: the fixed cost of a call (launch, stage-2 reduction, tail).

H200: fitted (least squares on log time) to the seven measurements of vLLM's Triton MLA kernel
under graph replay in H200 measurements, torch 2.11, triton 3.6 (H200, 16 heads, bf16, torch 2.11, triton 3.6); the fit's
residuals are within +-12% (``fit_h200``, ``tests/unit/test_whatif.py``). AMD presets: NOT measured;
derived from the H200 fit by scaling ``bw_max`` with the vendor's peak HBM bandwidth and ``p0``
with the CU count, and labelled as such in every output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlaprof.scenario import DEVICES, KV_DIM

KV_BYTES_PER_TOKEN = KV_DIM * 2  # bf16 latent + rope

# H200 measurements, torch 2.11, triton 3.6: (B, ctx, rows the kernel saw, S, seconds); rows = B*qlen when flattened
H200_TRITON_MEASURED: tuple[tuple[int, int, int, int, float], ...] = (
    (1, 131072, 1, 1, 14.10e-3),
    (1, 131072, 1, 256, 161e-6),
    (1, 131072, 4, 256, 421e-6),
    (8, 131072, 8, 256, 778e-6),
    (8, 131072, 32, 256, 2.35e-3),
    (64, 32768, 64, 64, 1.32e-3),
    (64, 32768, 256, 64, 4.45e-3),
)

# vendor peak HBM bandwidth (TB/s), spec sheets: only used to scale the H200 fit to AMD presets
PEAK_HBM_TBPS = {"h200": 4.8, "mi300x": 5.3, "mi325x": 6.0, "mi355x": 8.0}

# result of fit_h200() (kept as constants so a run does not refit; the test refits and compares)
H200_FIT = {"bw_max": 1.97e12, "p0": 179.2, "t0": 72e-6}


@dataclass(frozen=True)
class CostModel:
    device: str
    bw_max: float  # bytes/s at full parallelism
    p0: float  # programs for 1 - 1/e of bw_max
    t0: float  # seconds per call
    provenance: str

    def seconds(self, programs: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        programs = np.maximum(np.asarray(programs, dtype=float), 1.0)
        bw = self.bw_max * -np.expm1(-programs / self.p0)
        return self.t0 + np.asarray(nbytes, dtype=float) / bw


def measured_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """programs, bytes and seconds of the H200 measurements (vLLM's Triton grid is (rows, head
    groups = 1 at 16 heads, S); every program reads its split of one row's KV)."""
    rows = np.array(
        [(r * s, r * c * KV_BYTES_PER_TOKEN, t) for _, c, r, s, t in H200_TRITON_MEASURED]
    )
    return rows[:, 0], rows[:, 1], rows[:, 2]


def fit_h200() -> dict[str, float]:
    """Grid search of (p0, t0, bw_max) minimising the squared log error on the measurements."""
    programs, nbytes, secs = measured_inputs()
    best: tuple[float, dict[str, float]] = (float("inf"), {})
    bws = np.linspace(0.8e12, 3.0e12, 221)
    for p0 in np.geomspace(20, 2000, 400):
        eff = -np.expm1(-programs / p0)
        for t0 in np.linspace(0, 150e-6, 151):
            pred = t0 + nbytes[None, :] / (bws[:, None] * eff[None, :])
            sse = (np.log(pred / secs[None, :]) ** 2).sum(axis=1)
            i = int(sse.argmin())
            if sse[i] < best[0]:
                best = (float(sse[i]), {"bw_max": float(bws[i]), "p0": float(p0), "t0": float(t0)})
    return best[1]


def cost_model(device: str) -> CostModel | None:
    """The model for a device preset, or None where mlaprof has none (the CPU)."""
    if device == "h200":
        return CostModel(
            "h200",
            **H200_FIT,
            provenance="fitted to H200 measurements of vLLM's Triton MLA kernel (H200 measurements, torch 2.11, triton 3.6)",
        )
    if device in PEAK_HBM_TBPS and device in DEVICES:
        h = DEVICES["h200"]
        d = DEVICES[device]
        return CostModel(
            device,
            bw_max=H200_FIT["bw_max"] * PEAK_HBM_TBPS[device] / PEAK_HBM_TBPS["h200"],
            p0=H200_FIT["p0"] * d.units / h.units,
            t0=H200_FIT["t0"],
            provenance=(
                f"model, not measured on {device}: the H200 fit scaled by peak HBM bandwidth "
                f"({PEAK_HBM_TBPS[device]} vs 4.8 TB/s) and {d.unit_name} count ({d.units} vs {h.units})"
            ),
        )
    return None
