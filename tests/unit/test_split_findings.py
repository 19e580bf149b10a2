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


def test_a_pre_fix_rule_under_a_fixed_vllm_version_says_it_is_modelled_on_purpose() -> None:
    """vLLM 0.32.0 takes min_kv_seq_len over active rows (the merged vLLM PR #51171): a run that
    models all rows under it says so in every collapse it explains; under pre-51171 it does not."""
    from mlaprof.analysis.paths import pre_fix_rule

    note = pre_fix_rule({"min_kv_mode": "all-rows", "vllm_version": "0.32.0"})
    assert note is not None and "modelled on purpose" in note and "0.32.0" in note
    assert pre_fix_rule({"min_kv_mode": "all-rows", "vllm_version": "pre-51171"}) is None
    assert pre_fix_rule({"min_kv_mode": "active-rows", "vllm_version": "0.32.0"}) is None
