"""The recorded-engine analysis (mlaprof.analysis.shadow): routing, the shadow S against the
published split policies, the capture line of an engine run, and bad shadow choices."""

from __future__ import annotations

import pandas as pd
import pytest

from mlaprof.analysis.evidence.engine import engine_capture
from mlaprof.analysis.shadow import route, shadow
from mlaprof.scenario import DEVICES
from mlaprof.splits.policies import gluon_bh16_v0119, gluon_bh16_v0120

MI355X, MI300X = DEVICES["mi355x"], DEVICES["mi300x"]


@pytest.mark.parametrize(
    ("heads", "qlen", "device", "aiter", "want"),
    [
        (8, 4, MI355X, "0.1.19", ("gluon-verify", "aiter-gluon-v0.1.19")),
        (8, 4, MI355X, "0.1.19.post2", ("gluon-verify", "aiter-gluon-v0.1.19.post2")),
        (8, 4, MI355X, "0.1.22", ("gluon-verify", "aiter-gluon-v0.1.20.post1")),  # nearest
        # DeepSeek-V3 at TP8: ASM with the persistent (on-device) schedule
        (16, 4, MI355X, "0.1.20", ("asm-persistent", "aiter-asm-persistent")),
        (8, 4, MI300X, "0.1.20", ("asm-persistent", "aiter-asm-persistent")),  # no gluon: gfx942
        (8, 1, MI355X, "0.1.20", ("gluon-decode", "aiter-gluon-v0.1.20")),  # a decode
        # not ROCm: sm90 tries FLASH_ATTN_MLA first (vLLM 0.32 platforms/cuda.py L146-151)
        (8, 4, DEVICES["h200"], "0.1.20", ("flash-attn-mla", "vllm-triton")),
    ],
)
def test_route_follows_vllms_use_gluon_verify(heads, qlen, device, aiter, want):
    assert route(heads, qlen, device, aiter)[:2] == want


def _step(step, seq, drafts, **kw):
    from mlaprof.analysis.step_records import EngineStep

    return EngineStep.of({"rank": 0, "step": step, "kind": "verify", "seq_lens_upper_bound": seq,
            "draft_tokens": drafts, "heads": 8, "num_speculative_tokens": 3, "max_num_seqs": 8,
            "max_model_len": 4096, "backend": "ROCM_AITER_MLA", "builder": "b", "num_tokens": 0,
            "verify_rows": len(seq), "verify_draft_tokens": sum(drafts),
            "verify_rows_as_prefill": 0, "drafter_builds": 0, **kw})  # fmt: skip


def test_shadow_s_is_the_policys_for_the_padded_batch():
    steps = [_step(0, [1100, 300, 700], [3, 3, 3]), _step(1, [2000, 90, 40], [3, 0, 3])]
    f = shadow(steps, "mi355x", "0.1.19")
    # step 0: 3 rows x qlen 4 = 12 tokens -> capture size 16 -> 4 rows, one padding row
    r = f.iloc[0]
    assert (r.real_rows, r.rows, r.capture_size, r.padding_rows) == (3, 4, 16, 1)

    def s(b, min_kv):
        return gluon_bh16_v0119(_x(b, min_kv))

    assert (r.s_fix, r.s_bug, r.s_frozen) == (s(4, 300), s(4, 4), s(4, 4)) == (5, 1, 1)
    # step 1: the request without drafts is no verify row; 40 KV tokens >= qlen
    r = f.iloc[1]
    assert (r.real_rows, r.rows, r.min_kv_active_rows) == (2, 2, 40)
    assert r.s_fix == r.s_bug == s(2, 40)  # no padding row: the bug changes nothing
    f20 = shadow(steps, "mi355x", "0.1.20")
    assert list(f20.s_fix) == [gluon_bh16_v0120(_x(4, 300)), gluon_bh16_v0120(_x(2, 40))]
    assert set(f20.provenance) == {
        "modelled from recorded batches (AITER 0.1.20: rule of v0.1.20; on mi355x)"
    }


def _x(b, min_kv):
    from mlaprof.splits.policies import SplitInput

    return SplitInput(num_reqs=b, qlen=4, heads=8, min_kv_seq_len=min_kv, max_seq_len=2000,
                      total_kv=0, units=256)  # fmt: skip


def test_engine_capture_says_what_ran():
    none = engine_capture(pd.DataFrame({"graph_mode": ["NONE", "NONE"]}), "measured")
    # the mode asked for is vLLM's resolution record's, never the mode the steps ran
    assert (none.mode, none.effective_mode, none.status) == (None, "NONE", "eager")
    mixed = engine_capture(pd.DataFrame({"graph_mode": ["FULL", "FULL", "PIECEWISE"]}), "m")
    assert (mixed.effective_mode, mixed.status, mixed.modes) == (
        "FULL", "replayed", {"FULL": 2, "PIECEWISE": 1})  # fmt: skip
    pw = engine_capture(pd.DataFrame({"graph_mode": ["PIECEWISE"]}), "m")
    assert pw.status == "piecewise"
    empty = engine_capture(pd.DataFrame(), "m")
    assert empty.status == "unknown" and "no engine step" in empty.label


def test_engine_capture_reads_the_mode_asked_for_and_a_downgrade_as_a_log_says_them():
    """The plugin records vLLM's cudagraph-mode resolution (asked, resolved): the mode asked for
    is its, and an engine resolved to another mode than asked is "downgraded", as the same
    server's log reads (mlaprof.analysis.starts.log_capture); a downgrade to a mode that keeps
    FULL decode graphs still has them (the one rule, Capture.no_full_graph)."""
    from mlaprof.analysis.evidence.engine import resolutions

    events = pd.DataFrame({
        "rank": [0, 0], "t_ns": [1, 2], "kind": ["cudagraph-mode", "engine-step"],
        "data": ['{"requested": "FULL", "resolved": "PIECEWISE"}', "{}"],
    })  # fmt: skip
    res = resolutions(events)
    assert res == {0: ("FULL", "PIECEWISE")}
    down = engine_capture(pd.DataFrame({"graph_mode": ["PIECEWISE"] * 3}), "m", res)
    assert (down.mode, down.effective_mode, down.status) == ("FULL", "PIECEWISE", "downgraded")
    assert down.no_full_graph
    kept = engine_capture(pd.DataFrame({"graph_mode": ["FULL"] * 2}), "m",
                          {0: ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")})  # fmt: skip
    assert kept.status == "downgraded" and not kept.no_full_graph
    same = engine_capture(pd.DataFrame({"graph_mode": ["FULL"]}), "m", {0: ("FULL", "FULL")})
    assert (same.mode, same.status) == ("FULL", "replayed")
    two = pd.DataFrame({"graph_mode": ["FULL", "PIECEWISE"], "rank": [0, 1]})
    per = engine_capture(two, "m", {0: ("FULL", "FULL"), 1: ("FULL", "PIECEWISE")})
    assert per.mode == "FULL" and per.status == "per-rank" and per.no_full_graph
    assert [(r.rank, r.status) for r in per.per_rank] == [(0, "replayed"), (1, "downgraded")]


def test_the_watched_region_of_a_mode_that_keeps_full_graphs_is_the_captured_one():
    from mlaprof.analysis.capture_status import capture_region

    assert capture_region("FULL_AND_PIECEWISE") == capture_region("FULL") == capture_region(None)
    assert capture_region("PIECEWISE") == "the region a FULL graph would capture"
