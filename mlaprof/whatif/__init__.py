"""What-if exploration before running anything: split collapse, padding and predicted verify time
over a grid of shapes (:mod:`.grid`), and capture sizes planned from a batch-size distribution
(:mod:`.plan`). Everything here is modelled and says so in its provenance."""

from mlaprof.whatif.grid import GridSpec, WhatIf, compute

__all__ = ["GridSpec", "WhatIf", "compute"]
