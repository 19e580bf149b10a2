"""What a scenario run records about itself in ``run.json``: the scenario, backend, device, the
route vLLM takes and the command as a user retypes it. Torch-free: the ``--ranks`` launcher
writes it without loading torch (its rank processes do)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from mlaprof.argv import strip_options

if TYPE_CHECKING:
    from mlaprof.scenario import Scenario


def run_meta(
    sc: Scenario,
    backend: str,
    device: str,
    argv: list[str] | None = None,
    threads: int | None = None,
) -> dict:
    return {
        "source": "mlaprof run",
        "kind": "scenario",
        "scenario": sc.to_dict(),
        "backend": backend,
        "device": device,
        "target": sc.target,
        # the verify path vLLM takes for this scenario, and the AITER rule standing for the
        # release the scenario names (labelled where that release is not modelled)
        "route": {**sc.route().to_dict(), **({"aiter_rule": r} if (r := sc.aiter_rule()) else {})},
        "command": recorded_command(argv if argv is not None else sys.argv),
        # torch's intra-op threads the steps ran with (CPU timings depend on it); None: unset
        "threads": threads,
    }


def recorded_command(argv: list[str]) -> str:
    """The command as a user retypes it, without this machine's paths: ``mlaprof`` for the
    program path and no ``--traces`` folder (the run's location is its folder)."""
    out = strip_options(argv[1:], ("--traces",))
    return " ".join(["mlaprof", *out])
