"""What several GPU benchmark scripts share, in one module that imports none of them: the
provenance every results file carries and the capture benchmarks' scenario. (The scripts used to
import these from each other in a circle: gpu_suite -> capture_bench -> replay_overhead ->
gpu_suite.)"""

from __future__ import annotations

import datetime as dt
from typing import Any

from mlaprof.scenario import Scenario


def env_info() -> dict[str, Any]:
    """Device, library versions and date: the provenance every results file carries."""
    import torch
    import triton

    props = torch.cuda.get_device_properties(0)
    return {
        "device": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def bench_scenario(**kw: Any) -> Scenario:
    """The capture benchmarks' scenario: DeepSeek-V3 at TP8, 3 speculative tokens, FULL graphs,
    the fix's min_kv rule, mlaprof's kernel policy on the H200 preset; ``kw`` overrides."""
    base = dict(
        model="deepseek-v3-tp8",
        num_speculative_tokens=3,
        graph_mode="FULL",
        min_kv_mode="active-rows",
        policy="mlaprof-triton",
        target="h200",
        steps=2,
        layers=16,
    )
    return Scenario(**{**base, **kw}).validate()
