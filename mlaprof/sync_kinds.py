"""The kinds a ``syncs`` row carries, and which of them every view counts as "syncs".

Each kind breaks CUDA/HIP graph capture in its own way and is counted apart: a device->host sync
(``.item()``, ``repeat_interleave`` without ``output_size``...), an allocation sized from a value
read back from the device, a pageable host->device copy, and the error a real capture attempt
raised at its first offender. "Syncs per layer" in the report, the TUI, the HTML report and
``run.layers.syncs`` is the first kind only.
"""

from __future__ import annotations

SYNC = "sync"
ALLOC = "alloc"
H2D = "h2d"
CAPTURE_ERROR = "capture-error"
KINDS = (SYNC, ALLOC, H2D, CAPTURE_ERROR)
# what the sync checker records op by op (a capture error is the outcome of a real capture)
OPS = (SYNC, ALLOC, H2D)
# every kind aborts capture (the gate fails on any of them)
BREAKS_CAPTURE = KINDS
# what a capture prediction counts (an allocation sized from a read-back value follows a sync,
# which is counted itself)
PREDICTS_FAILURE = (SYNC, H2D, CAPTURE_ERROR)
