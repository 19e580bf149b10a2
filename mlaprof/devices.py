"""Device presets: how many compute units (AMD CUs / NVIDIA SMs) split-KV work fills on each
target, for the split policies' occupancy model."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePreset:
    name: str
    units: int  # compute units (AMD CUs / NVIDIA SMs) that split-KV work fills
    unit_name: str
    arch: str
    description: str


DEVICES: dict[str, DevicePreset] = {
    d.name: d
    for d in (
        DevicePreset("mi355x", 256, "CU", "gfx950", "AMD Instinct MI355X (gluon MLA needs gfx950)"),
        DevicePreset("mi300x", 304, "CU", "gfx942", "AMD Instinct MI300X"),
        DevicePreset("mi325x", 304, "CU", "gfx942", "AMD Instinct MI325X"),
        DevicePreset("h200", 132, "SM", "sm_90", "NVIDIA H200 SXM"),
        DevicePreset("cpu", max(1, os.cpu_count() or 1), "core", "cpu", "this machine's CPU"),
    )
}
