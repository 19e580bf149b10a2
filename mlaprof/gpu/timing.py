"""Replay-timing arithmetic of the capture runner (pure Python: tested on the CPU).

External timing events cost about 2.5 us each inside a CUDA graph (PyTorch CUDA graph behaviour measured on an H200), so the graph
that serves steps has none; a twin graph with one event node before every layer and one after the
last is replayed on a sample of steps instead. Each interval between two consecutive event nodes
holds one layer and one event node, so a layer's time is its interval minus the calibrated cost of
one node, and the cost is calibrated per capture size from replays of both graphs side by side:
``cost = (median twin replay - median serving replay) / event nodes``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from mlaprof.errors import MlaprofError


def sample_schedule(steps: int, rate: float) -> list[bool]:
    """Which steps replay the instrumented twin: evenly spaced, the first step included, so that
    ``sum(schedule) == ceil(steps * rate)``; rate 0 samples none, rate 1 every step."""
    if not 0.0 <= rate <= 1.0:
        raise MlaprofError(f"sample rate must be in 0..1, got {rate}")
    if steps < 0:
        raise MlaprofError(f"steps must be >= 0, got {steps}")
    want = -(-int(round(steps * rate * 1e6)) // 1_000_000) if rate > 0 else 0
    want = min(steps, want)
    out = [False] * steps
    for k in range(want):
        out[(k * steps) // want] = True
    return out


@dataclass(frozen=True)
class Calibration:
    serving_ns: float  # median device time of one serving-graph replay
    twin_ns: float  # median device time of one twin replay
    event_nodes: int
    event_ns: float  # cost of one event node (never negative)

    @property
    def overhead(self) -> float:
        """Relative slowdown of a twin replay over a serving replay."""
        return self.twin_ns / self.serving_ns - 1.0 if self.serving_ns > 0 else 0.0


def calibrate(
    serving_ns: Sequence[float], twin_ns: Sequence[float], event_nodes: int
) -> Calibration:
    """Cost of one event node from replays of the serving graph and its twin side by side."""
    if not serving_ns or not twin_ns:
        raise MlaprofError("calibration needs at least one replay of each graph")
    if event_nodes < 1:
        raise MlaprofError(f"the twin graph needs at least one event node, got {event_nodes}")
    s = statistics.median(serving_ns)
    t = statistics.median(twin_ns)
    return Calibration(s, t, event_nodes, max(0.0, (t - s) / event_nodes))


def layer_times(stamps_ns: Sequence[float], event_ns: float) -> list[float]:
    """Per-layer device times from the twin's event timestamps (relative to the first event):
    each interval minus the cost of the event node it holds, never below zero."""
    if len(stamps_ns) < 2:
        raise MlaprofError("need an event before and after at least one layer")
    return [max(0.0, b - a - event_ns) for a, b in pairwise(stamps_ns)]


def twin_step_ns(measured_ns: float, cal: Calibration) -> float:
    """A twin replay's step time with the event nodes' cost taken out."""
    return max(0.0, measured_ns - cal.event_nodes * cal.event_ns)
