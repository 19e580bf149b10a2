"""The split findings of a FULL-graph run: S frozen by the capture-time dummy run under a
host-decided policy; "decided on the device, not frozen" under mlaprof's Triton kernel, whose
rows pick their S from seq_lens at replay (issue 16)."""

import pandas as pd

from mlaprof.analysis.splits import split_findings


def _splits(policy: str, used: int, deserved: int, frozen: int | None) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "step": 0,
                "capture_size": 4,
                "policy": policy,
                "used": used,
                "deserved": deserved,
                "frozen": frozen,
                "all_rows": used,
                "active_rows": used,
                "min_kv_used": 4000,
                "min_kv_deserved": 4000,
                "occupancy_used": 0.5,
                "occupancy_deserved": 0.5,
                "target": "h200",
            }
        ]
    )


def test_mlaprof_triton_is_decided_on_the_device():
    f = split_findings(_splits("mlaprof-triton", 16, 16, None), "mlaprof-triton", "FULL")
    assert [x.kind for x in f] == ["split-device"]
    assert "decided on the device" in f[0].title and "seq_lens" in f[0].evidence


def test_a_host_policy_on_the_same_run_is_frozen():
    aiter = _splits("aiter-gluon-v0.1.19", 17, 17, 1)
    kinds = [x.kind for x in split_findings(aiter, "aiter-gluon-v0.1.19", "FULL")]
    assert kinds == ["split-frozen"]
    assert split_findings(aiter, "aiter-gluon-v0.1.19", "PIECEWISE") == []
