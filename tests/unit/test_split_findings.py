"""The split findings of a FULL-graph run: S frozen by the capture-time dummy run under a
host-decided policy; "decided on the device, not frozen" under mlaprof's Triton kernel, whose
rows pick their S from seq_lens at replay (issue 16)."""

import pandas as pd

from mlaprof.analysis.sections import Scenario
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
                # AITER's kernels on gfx950, where they run (on an NVIDIA target they cannot)
                "target": "mi355x" if policy.startswith("aiter-") else "h200",
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

    note = pre_fix_rule(Scenario(min_kv_mode="all-rows", vllm_version="0.32.0"))
    assert note is not None and "modelled on purpose" in note and "0.32.0" in note
    assert pre_fix_rule(Scenario(min_kv_mode="all-rows", vllm_version="pre-51171")) is None
    assert pre_fix_rule(Scenario(min_kv_mode="active-rows", vllm_version="0.32.0")) is None


def test_vllm_triton_frozen_far_above_its_rows_is_over_split():
    """vLLM 0.32 triton_mla sizes S from max_model_len at capture (131072 // 512 -> 256) for
    rows that deserve 16 (8192 // 512): an over-splitting finding with the occupancy and the
    programs it costs; the same run with S frozen at what the rows use has none."""
    over = split_findings(_splits("vllm-triton", 16, 16, 256), "vllm-triton", "FULL")
    (f,) = [f for f in over if f.kind == "split-over"]
    assert "S = 256 frozen into the FULL graph, the real rows use 16 (16x" in f.title
    assert "50.0% of the h200 units" in f.evidence and f.data["splits"] == 256
    fine = split_findings(_splits("vllm-triton", 16, 16, 16), "vllm-triton", "FULL")
    assert not [f for f in fine if f.kind == "split-over"]
    # the rule is at least twice: 31 for 16 is not over-split
    near = split_findings(_splits("vllm-triton", 16, 16, 31), "vllm-triton", "FULL")
    assert not [f for f in near if f.kind == "split-over"]


def test_a_persistent_row_decided_on_the_host_is_not_a_device_finding():
    """AITER drops the persistent kernel at B >= 32 (gfx950 bf16 16 heads qlen 1, aiter/mla.py
    v0.1.20 L401-422): that row's S is get_meta_param's, frozen into the graph."""
    from mlaprof.splits.policies import host_fallback_note

    sp = _splits("aiter-asm-persistent", 8, 16, 8).assign(note=host_fallback_note("x"))
    out = split_findings(sp, "aiter-asm-persistent", "FULL")
    assert not [f for f in out if f.kind == "split-device"]
    assert [f for f in out if f.kind == "split-frozen"]  # 8 for 16: frozen at half
    dev = _splits("aiter-asm-persistent", 256, 256, None).assign(note="")
    assert [f.kind for f in split_findings(dev, "aiter-asm-persistent", "FULL")] == ["split-device"]


# one collapse finding: a scenario's modelled rows and a trace's grid rows say it in one wording
ONE_WORDING = (
    r"^KV splits collapsed (under \S+|on the \S+ path)( on \d+ of \d+ ranks \([\d, .]+\))?: "
    r"S = \d+ used( on \d+ rows x qlen \d+)?, the fix gives \d+( \(padding rows still count in "
    r"B\))?, (\d+|unknown) without padding rows"
)


def _grid_collapse():
    from mlaprof.analysis.collapse import collapse_findings
    from mlaprof.analysis.step_stats import step_stats

    # a gluon v0.1.19 graph replay of 15 rows x qlen 4 at S = 1, as the trace importer files it
    steps = pd.DataFrame([{"rank": 0, "step": 0, "backend": "aiter-gluon _mla_gluon",
                           "num_reqs": 15, "qlen": 4, "graph_mode": "graph"}])  # fmt: skip
    layers = pd.DataFrame([{"rank": 0, "step": 0, "layer": i, "splits_used": 1,
                            "duration_ns": 1000} for i in range(2)])  # fmt: skip
    return collapse_findings(None, "imported from t.csv", steps, step_stats(layers))


def test_one_collapse_wording_for_modelled_and_grid_rows():
    import re

    modelled = [
        f
        for f in split_findings(_splits("aiter-gluon-v0.1.19", 1, 17, None), "", "PIECEWISE")
        if f.kind == "split-collapse"
    ]
    grid = [f for f in _grid_collapse() if f.kind == "split-collapse"]
    assert len(modelled) == 1 and len(grid) == 1
    for f in modelled + grid:
        assert re.match(ONE_WORDING, f.title), f.title
        assert f.severity == "critical"  # S = 1 on the run's own rule
    assert "unknown without padding rows" in grid[0].title  # a grid counts padding rows
    assert "17 without padding rows" in modelled[0].title


def _claims(capture_status: str) -> object:
    from mlaprof.analysis.claims import Claims

    return Claims(graph_mode="FULL", capture_status=capture_status, device="cuda")


def test_a_failed_capture_claims_no_s_frozen_into_a_graph():
    """A FULL capture that failed serves no FULL graph: the S the dummy run would freeze is
    neither warned of nor said to be what the steps ran (vLLM 0.32 triton_mla's 256 for rows
    that deserve 16 is over-split only where the graph serves); the same run captured is."""
    rows = _splits("vllm-triton", 16, 16, 256)
    failed = split_findings(rows, "vllm-triton", "FULL", claims=_claims("failed"))
    assert [f.kind for f in failed] == []
    captured = split_findings(rows, "vllm-triton", "FULL", claims=_claims("captured"))
    assert [f.kind for f in captured] == ["split-over"]
    assert "frozen into the FULL graph" in captured[0].title
    aiter = _splits("aiter-gluon-v0.1.19", 17, 17, 1)
    assert split_findings(aiter, "aiter-gluon-v0.1.19", "FULL", claims=_claims("failed")) == []


def test_a_measured_replay_is_what_the_over_split_rule_reads():
    """The graph ran what it ran: a measured replay of S 16 is not over-split though the dummy
    run's model says 256; a measured 64 for rows that deserve 16 is."""
    from mlaprof.analysis.sections import ReplayedSplits

    rows = _splits("vllm-triton", 16, 16, 256)
    measured = ReplayedSplits(min=16, max=16, steps=4, provenance="measured")
    assert split_findings(rows, "vllm-triton", "FULL", replayed=measured) == []
    wide = ReplayedSplits(min=64, max=64, steps=4, provenance="measured")
    (f,) = split_findings(rows, "vllm-triton", "FULL", replayed=wide)
    assert f.kind == "split-over" and f.data["splits"] == 64
    # where the S comes from, said with it: measured here, modelled or recorded elsewhere
    assert "S = 64 replayed by the FULL graph" in f.title
    assert f.evidence.startswith("S = 64 measured")
    (modelled,) = split_findings(rows, "vllm-triton", "FULL", claims=_claims("captured"))
    assert modelled.evidence.startswith("S = 256 modelled: vLLM's capture-time dummy run")
    eager = split_findings(_splits("vllm-triton", 64, 16, 256), "vllm-triton", "PIECEWISE")
    assert [x.evidence.split(";")[0] for x in eager] == ["S = 64 recorded: the steps' metadata"]


def test_the_run_policy_row_is_judged_wherever_it_stands_among_the_policies():
    """The run's own policy listed after others (vLLM's Triton after AITER's rows) is still
    warned of: another row's S never stands in for the measured replay."""
    rows = pd.concat(
        [_splits("aiter-asm", 16, 16, 16), _splits("aiter-gluon-v0.1.19", 17, 17, 1)],
        ignore_index=True,
    )
    kinds = [f.kind for f in split_findings(rows, "aiter-gluon-v0.1.19", "FULL")]
    assert kinds == ["split-frozen"]


def test_a_frozen_s_under_a_capture_nothing_decided_is_said_on_that_condition():
    """A FULL run whose capture was neither attempted nor predicted (its sync probe off): the
    frozen S is modelled for the FULL graph asked for, and the warning says it holds only if
    that graph captures; where the capture is known, the plain warning."""
    rows = _splits("aiter-gluon-v0.1.19", 17, 17, 1)
    (unsure,) = split_findings(rows, "aiter-gluon-v0.1.19", "FULL", claims=_claims("unknown"))
    assert unsure.kind == "split-frozen"
    assert "would be frozen into the FULL graph" in unsure.title
    assert ", if it captures (this run does not say)" in unsure.title, unsure.title
    (sure,) = split_findings(rows, "aiter-gluon-v0.1.19", "FULL", claims=_claims("captured"))
    assert "if it captures" not in sure.title
