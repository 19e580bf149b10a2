"""Each published split heuristic pinned on hand-computed cases (AITER v0.1.19/v0.1.20 aiter/mla.py and mla_gluon.py; vLLM 0.32's sources)."""

import dataclasses

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.metadata import BatchShape, build_metadata
from mlaprof.scenario import DEVICES
from mlaprof.splits.policies import (
    PARTITION_FLOOR,
    POLICIES,
    SplitInput,
    aiter_asm,
    aiter_asm_fp8,
    applicable,
    asm_total_kv,
    gluon_active_splits,
    gluon_bh16_v0119,
    gluon_bh16_v0119_post2,
    gluon_bh16_v0120,
    gluon_bh64,
    gluon_fp8_v0119,
    gluon_gfx942_pr4582,
    vllm_triton,
)
from mlaprof.step_splits import step_splits


def x(b=1, qlen=4, h=16, min_kv=1040, max_seq=None, total=None, units=256):
    return SplitInput(b, qlen, h, min_kv, max_seq or min_kv, total or b * min_kv, units)


def test_gluon_v0119_gives_the_seed_17():
    # 256 // (1*4) = 64; ceil(1040 / 64) = 17 -> 17 (vLLM PR #51171's "17")
    assert gluon_bh16_v0119(x(min_kv=1040)) == 17
    assert gluon_bh16_v0119(x(min_kv=1088)) == 17
    assert gluon_bh16_v0119(x(min_kv=1089)) == 18
    assert gluon_bh16_v0119(x(b=16, min_kv=100_000)) == 4  # 256 // 64


def test_padding_rows_collapse_v0119_to_one():
    # 3 real requests + 1 padding row pinned to qlen = 4: min over all rows = 4 -> ceil(4/64) = 1
    assert gluon_bh16_v0119(x(b=4, min_kv=4)) == 1
    assert gluon_bh16_v0119(x(b=4, min_kv=1040)) == 16  # min over active rows: min(16, 17)


def test_post2_counts_head_groups():
    # H = 48 -> ceil(48/16) = 3: 256 // (1*4*3) = 21 vs ceil(5000/64) = 79
    assert gluon_bh16_v0119_post2(x(h=48, min_kv=5000)) == 21
    assert gluon_bh16_v0119(x(h=48, min_kv=5000)) == 64


def test_fp8_v0119():
    assert gluon_fp8_v0119(x(qlen=2, min_kv=100)) == 100  # min(128, 100)
    with pytest.raises(MlaprofError, match="B == 1"):
        gluon_fp8_v0119(x(b=2))


def test_fp8_bh16_counts_head_groups_from_v0119_post1():
    """v0.1.19.post1 and .post2 (one mla_gluon.py) send fp8 KV with up to 96 heads to
    bh16bn128 and divide the 256-program budget by the head blocks: S = max(1, min(256 //
    (B*qlen*ceil(H/16)), min_kv)) (aiter ``mla_gluon.py`` v0.1.19.post1 L894, L949-960). The
    installed-AITER backend runs this policy for every release before v0.1.20; v0.1.19 takes
    H <= 16, one head block, so its S is unchanged."""
    fp8 = dataclasses.replace(x(b=1, qlen=4, h=48, min_kv=5000), kv_fp8=True)
    assert gluon_fp8_v0119(fp8) == 21  # 256 // (1*4*3) = 21 < 5000 (64 without head blocks)
    assert gluon_fp8_v0119(dataclasses.replace(fp8, qlen=1, heads=96)) == 42  # 256 // 6
    assert gluon_fp8_v0119(dataclasses.replace(fp8, heads=16)) == 64  # 256 // 4: one block
    assert gluon_fp8_v0119(dataclasses.replace(fp8, heads=17, min_kv_seq_len=20)) == 20
    from mlaprof.whatif.vector import splits as vector_splits

    pol = POLICIES["aiter-gluon-fp8-v0.1.19"]
    assert list(vector_splits(pol, fp8)) == [21]  # the what-if grid's numpy twin agrees


def test_bh64_asserts_bf16_kv_in_every_release():
    """mla_gluon's bh64 asserts bf16 KV (v0.1.19 L920-922, v0.1.19.post2 L937-939, v0.1.20
    L947-949): 64 or 128 heads over an fp8 cache are not runnable, never an S (was 4)."""
    from mlaprof.whatif.vector import splits as vector_splits

    fp8 = dataclasses.replace(x(b=64, qlen=1, h=64, min_kv=5000), kv_fp8=True)
    with pytest.raises(MlaprofError, match="bf16 KV"):
        gluon_bh64(fp8)
    with pytest.raises(MlaprofError, match="bf16 KV"):
        gluon_bh16_v0120(dataclasses.replace(fp8, heads=128))
    assert gluon_bh64(dataclasses.replace(fp8, kv_fp8=False)) == 4
    assert list(vector_splits(POLICIES["aiter-gluon-bh64"], fp8)) == [0]  # refused
    assert "asserts bf16 KV" in applicable("aiter-gluon-bh64", 64, 64, 1, "gfx950", kv_fp8=True)
    assert applicable("aiter-gluon-bh64", 64, 64, 1, "gfx950") is None


def test_v0120_ignores_min_kv():
    assert gluon_bh16_v0120(x(b=4, min_kv=4)) == 16
    assert gluon_bh16_v0120(x(b=4, h=32, min_kv=4)) == 8
    assert gluon_bh16_v0120(x(b=100)) == 1
    # per row: L = max(64, seq // S), active splits = min(ceil(seq / L), S)
    assert gluon_active_splits(1000, 16) == 16
    assert gluon_active_splits(100, 16) == 2
    assert gluon_active_splits(4, 16) == 1


def test_active_splits_are_each_release_kernels_cut():
    """mla_gluon's stage 1 (aiter mla_gluon.py _mla_gluon): v0.1.19..post2 cut L = seq // S with
    the last split taking the rest (every split busy once seq >= S); v0.1.20 cuts
    L = max(BLOCK_N, seq // S), BLOCK_N 128 for fp8 KV (bh16bn128), 64 for bf16."""
    v0120 = POLICIES["aiter-gluon-v0.1.20"]
    assert v0120.active_splits(200, 16, 16, kv_fp8=True) == 2  # L = 128: ceil(200/128)
    assert v0120.active_splits(200, 16, 16) == 4  # bf16, L = 64: ceil(200/64)
    assert v0120.active_splits(129, 256, 96, kv_fp8=True) == 2
    assert v0120.active_splits(128, 256, 96, kv_fp8=True) == 1
    assert POLICIES["aiter-gluon-v0.1.20-pr4758"].active_splits(300, 8, 16, kv_fp8=True) == 3
    fp8 = POLICIES["aiter-gluon-fp8-v0.1.19"]
    assert fp8.active_splits(100, 100, 16, kv_fp8=True) == 100  # L = 1: every split busy
    assert fp8.active_splits(99, 100, 16, kv_fp8=True) == 1  # L = 0: only the last split
    for name in ("aiter-gluon-v0.1.19", "aiter-gluon-v0.1.19.post2"):
        assert POLICIES[name].active_splits(100, 16, 16) == 16  # L = 6, not max(64, 6)
    assert POLICIES["aiter-gluon-gfx942-pr4582"].active_splits(100, 64, 12) == 64
    # bh64 in either release: its assert keeps seq > S*(3*64 + S), every split busy
    assert POLICIES["aiter-gluon-bh64"].active_splits(785, 4, 64) == 4
    assert gluon_active_splits(100, 16, PARTITION_FLOOR, 128) == 16
    # kernels other than mla_gluon keep the block cut with 64-token blocks (not modelled)
    assert POLICIES["aiter-asm"].partition(16, True) == ("block", 64)
    assert gluon_active_splits(0, 16, PARTITION_FLOOR) == 0
    with pytest.raises(MlaprofError, match="unknown KV partition"):
        gluon_active_splits(100, 16, "round")


def test_occupancy_counts_the_splits_the_fp8_v0119_kernel_keeps_busy():
    # B 1, min_kv 100, qlen 1: S = min(256, 100) = 100, all 100 splits hold KV (L = 1)
    meta = build_metadata(BatchShape([100], 1, 1, None, "NONE"), min_kv_mode="active-rows")
    (g,) = step_splits(meta, 16, DEVICES["mi355x"], "NONE", 131072, ["aiter-gluon-fp8-v0.1.19"])
    assert (g.used, g.deserved) == (100, 100)
    assert g.occupancy_used == pytest.approx(100 / 256)  # was 2 / 256
    assert g.occupancy_deserved == pytest.approx(100 / 256)


def test_bh64():
    # base = 8 * ceil(128/64) * 1 * (64/8) = 128 -> next_pow2(ceil(256/128)) = 2
    assert gluon_bh64(x(b=64, qlen=1, h=128, min_kv=5000)) == 2
    # base = 8 * 1 * 1 * 8 = 64 -> 4; the kernel asserts min_kv > S*(3*64+S) = 784
    assert gluon_bh64(x(b=64, qlen=1, h=64, min_kv=785)) == 4
    with pytest.raises(MlaprofError, match="min_kv_seq_len >"):
        gluon_bh64(x(b=64, qlen=1, h=64, min_kv=784))
    with pytest.raises(MlaprofError, match="B % 64 == 0"):  # the kernel's other assert
        gluon_bh64(x(b=8, qlen=2, h=128, min_kv=2000))


def test_64_and_128_heads_take_bh64_in_every_release():
    """mla_gluon's entry checks nhead in (64, 128) first and takes bh64 (aiter mla_gluon.py
    v0.1.19 L879, v0.1.19.post2 L892, v0.1.20 L902): bh16's rule would give 256 // (64*1*4) = 1
    here, and v0.1.19 is no exception (it was "not runnable: bh16 handles at most 16 heads")."""
    x64 = x(b=64, qlen=1, h=64, min_kv=5000)
    for name in (
        "aiter-gluon-v0.1.19",
        "aiter-gluon-v0.1.19.post2",
        "aiter-gluon-v0.1.20",
        "aiter-gluon-v0.1.20.post1",
    ):
        assert POLICIES[name].splits(x64) == 4, name
        assert applicable(name, 64, 8) == (
            "64 heads take the bh64 kernel, which asserts B % 64 == 0, got B = 8"
        )
        assert applicable(name, 64, 64) is None
    for name in ("aiter-gluon-v0.1.19.post2", "aiter-gluon-v0.1.20"):
        assert applicable(name, 32, 8) is None  # bh16 with 2 head groups
    # v0.1.19's bh16 serves at most 16 heads (L881-892): 32 heads is its assert
    assert "at most 16 heads" in applicable("aiter-gluon-v0.1.19", 32, 8)
    # S 1 or 2, as v0.1.19's L897-905 gives: base = 8*ceil(H/64)*qlen*(B/8), S =
    # next_pow2(ceil(256/base)): 128 heads x 128 rows -> 256 -> 1; 64 heads x 128 rows -> 2
    assert gluon_bh16_v0119(x(b=128, qlen=1, h=128, min_kv=5000)) == 1
    assert gluon_bh16_v0119(x(b=128, qlen=1, h=64, min_kv=5000)) == 2
    # fp8 KV with 64 heads: v0.1.19 still takes bh64, which asserts bf16 KV
    with pytest.raises(MlaprofError, match="bf16 KV"):
        gluon_fp8_v0119(x(b=1, qlen=1, h=64, min_kv=5000))
    assert "asserts bf16 KV" in applicable("aiter-gluon-fp8-v0.1.19", 64, 64)


def test_gluon_runs_only_on_its_arch():
    """mla_gluon asserts gfx950 (aiter v0.1.19 mla_gluon.py L865); the open PR's kernel is
    gfx942's. On an MI300X a gluon cell is not runnable, not an S."""
    assert "asserts gfx950" in applicable("aiter-gluon-v0.1.20", 8, 4, 4, "gfx942")
    assert applicable("aiter-gluon-v0.1.20", 8, 4, 4, "gfx950") is None
    assert applicable("aiter-gluon-gfx942-pr4582", 12, 4, 4, "gfx942") is None
    # and no gluon runs on a non-AMD target (h200): mla_gluon asserts gfx950 there too
    assert "asserts gfx950" in applicable("aiter-gluon-v0.1.20", 8, 4, 4, "sm_90")
    assert "asserts gfx942" in applicable("aiter-gluon-gfx942-pr4582", 12, 4, 4, "sm_90")


def test_gfx942_gluon_asserts_12_heads_and_bf16():
    """PR #4582's public gfx942 gluon (bb855e4 ``gfx942/attention/mla.py`` L621-623) asserts
    nhead == 12 and bf16: 8 and 16 heads are not runnable, not an S."""
    for h in (8, 16):
        assert "nhead == 12" in applicable("aiter-gluon-gfx942-pr4582", h, 4, 4, "gfx942")
    assert "fp8 KV" in applicable("aiter-gluon-gfx942-pr4582", 12, 4, 4, "gfx942", kv_fp8=True)
    assert "asserts gfx942" in applicable("aiter-gluon-gfx942-pr4582", 8, 4, 4, "gfx950")
    # the PR's kernel is named in its own message, not mla_gluon's
    pr = applicable("aiter-gluon-gfx942-pr4582", 12, 4, 4, "gfx950")
    assert pr.startswith("mla_gluon_gfx942 asserts gfx942 (aiter PR #4582")
    assert applicable("aiter-gluon-v0.1.20", 8, 4, 4, "gfx942").startswith("mla_gluon asserts")
    assert applicable("aiter-asm", 16, 4, 4, "gfx942") is None


def test_asm_fp8_block_widths_and_caps_follow_get_block_n_fp8():
    """aiter mla.py get_block_n_fp8 (v0.1.19 L189, v0.1.20 L345): the width by nhead *
    max_seqlen_q, then S = min(S, ceil(total_kv/(bs*bn))) and, if S > 1,
    S = min(S, floor(|total_kv/bs - max_seqlen_q| / bn) + 1), over the kv_indices buffer."""
    from mlaprof.splits.policies import ASM_FP8_BLOCK_N, aiter_asm, aiter_asm_fp8

    assert ASM_FP8_BLOCK_N == {8: 64, 16: 128, 24: 128, 32: 128, 48: 64, 64: 64, 128: 32,
                               256: 32, 384: 32, 512: 32}  # fmt: skip
    # 16 heads x qlen 2 = 32 -> bn 128; B = 1, buffer 300 tokens: ceil(300/128) = 3 and
    # floor(|300 - 2| / 128) + 1 = 3
    small = x(b=1, qlen=2, h=16, min_kv=300, total=300, units=304)
    assert aiter_asm(small) > 3 and aiter_asm_fp8(small) == 3
    # the caps read the buffer vLLM passes, not the live KV
    buffered = dataclasses.replace(small, kv_buffer_len=256 * 131072)
    assert aiter_asm_fp8(buffered) == aiter_asm(buffered)


def test_aiter_asm_get_meta_param():
    # B = 1 on 304 CUs: filling grows with i faster than the split overhead -> 16
    assert aiter_asm(x(b=1, min_kv=1000, total=1000, units=304)) == 16
    # B = 304: i = 1 already fills the device; more splits only add overhead
    assert aiter_asm(x(b=304, min_kv=1000, total=304_000, units=304)) == 1
    # B = 200: i=3 fills 600/608 of the CUs at 1000/1252.3 efficiency (0.788, the maximum)
    assert aiter_asm(x(b=200, min_kv=1000, total=200_000, units=304)) == 3


def test_vllm_triton():
    assert vllm_triton(x(max_seq=131072, units=132)) == 256  # min(256, 264)
    assert vllm_triton(x(max_seq=131072, units=100)) == 200
    assert vllm_triton(x(max_seq=1000)) == 1
    assert vllm_triton(x(max_seq=5000)) == 16  # next_pow2(9)


def test_step_splits_used_deserved_frozen():
    shape = BatchShape([1040, 2600, 6000], 4, 4, 16, "FULL")
    meta = build_metadata(shape, min_kv_mode="all-rows")
    rows = {s.policy: s for s in step_splits(meta, 16, DEVICES["mi355x"], "FULL", 131072)}
    g = rows["aiter-gluon-v0.1.19"]
    assert (g.used, g.all_rows, g.active_rows, g.deserved, g.frozen) == (1, 1, 16, 17, 1)
    assert g.collapsed
    # 3 real rows x qlen 4 x 1 head group x S=1 = 12 programs of 256 CUs
    assert g.occupancy_used == pytest.approx(12 / 256)
    assert rows["aiter-gluon-v0.1.20"].used == 16 and not rows["aiter-gluon-v0.1.20"].collapsed
    assert rows["vllm-triton"].frozen == 256  # sized from max_model_len at capture
    assert rows["aiter-gluon-bh64"].used is None and "not runnable" in rows["aiter-gluon-bh64"].note
    fixed = build_metadata(shape, min_kv_mode="active-rows")
    g2 = {s.policy: s for s in step_splits(fixed, 16, DEVICES["mi355x"], "FULL", 131072)}
    assert g2["aiter-gluon-v0.1.19"].used == 16 and not g2["aiter-gluon-v0.1.19"].collapsed


def test_bh64_needs_batch_a_multiple_of_64():
    assert applicable("aiter-gluon-bh64", 64, 4) == "bh64 needs B % 64 == 0, got B = 4"
    assert applicable("aiter-gluon-bh64", 128, 128) is None


def test_v0120_post1_is_v0120_and_every_policy_names_its_source():
    x0 = x(b=4, qlen=4, h=8, min_kv=4)
    assert POLICIES["aiter-gluon-v0.1.20.post1"].splits(x0) == gluon_bh16_v0120(x0)
    assert "de07f38" in POLICIES["aiter-gluon-v0.1.20.post1"].source
    for p in POLICIES.values():
        assert p.source and (p.verified or p.provenance.endswith("(UNVERIFIED)"))
    assert "PR #4582" in POLICIES["aiter-gluon-gfx942-pr4582"].provenance


def test_asm_total_kv_is_the_buffer_length():
    """vLLM hands mla_decode_fwd its whole kv_indices buffer: S follows its length, not the KV."""
    live = x(b=64, qlen=4, h=16, min_kv=200, total=64 * 200, units=304)
    buf = SplitInput(**{**live.__dict__, "kv_buffer_len": 256 * 131072})
    assert aiter_asm(live) != aiter_asm(buf)
    assert asm_total_kv(buf) == 256 * 131072 and asm_total_kv(live) == 64 * 200


def test_asm_fp8_caps():
    big = x(b=2, qlen=4, h=16, min_kv=100, total=200, units=304)
    # ceil(total_kv / (bs * bn)) = ceil(200 / 128) = 2 caps get_meta_param's choice
    assert aiter_asm(big) > 2 and aiter_asm_fp8(big) <= 2
    # S > 1: min(S, floor(|200/2 - 4| / 64) + 1) = 2
    assert aiter_asm_fp8(big) == 2
    # the second cap binds alone: avg 129 -> ceil(129/64) = 3, floor(|129 - 4| / 64) + 1 = 2
    # (the first cap rarely binds without the second: it is kept as get_block_n_fp8 states it)
    one = x(b=1, qlen=4, h=16, min_kv=129, total=129, units=304)
    assert aiter_asm(one) > 3 and aiter_asm_fp8(one) == 2
    with pytest.raises(MlaprofError, match="KeyError"):  # 16 x 5 = 80: no width in AITER
        aiter_asm_fp8(x(b=1, qlen=5, h=16, min_kv=100))
    assert "nhead*qlen = 16*5 = 80" in applicable("aiter-asm-fp8", 16, 1, 5)


def test_asm_fp8_width_keys_on_vllm_padded_heads():
    """vLLM pads q and o to 16 heads before the ASM call (0.32 ``rocm_aiter_mla.py``
    ``get_actual_mla_num_heads`` L1732-1736, ``forward_mqa`` L2399-2409) and AITER reads nhead
    from o (``aiter/mla.py`` v0.1.20 L569): 8 heads x qlen 4 key on 64 (block 64), not 32
    (block 128). At avg KV 100: floor(|100 - 4| / 64) + 1 = 2, where 128 gave 1."""
    eight = x(b=2, qlen=4, h=8, min_kv=100, total=200, units=256)
    assert aiter_asm_fp8(eight) == 2
    assert aiter_asm_fp8(dataclasses.replace(eight, heads=16)) == 2  # the same kernel shape
    # 7 heads x qlen 3: 16 x 3 = 48 is in the table once padded (21 was not)
    assert applicable("aiter-asm-fp8", 7, 1, 3) is None


def test_persistent_split_is_decided_on_the_device_and_never_frozen():
    shape = BatchShape([1040, 2600, 6000], 4, 4, 16, "FULL")
    meta = build_metadata(shape)
    (p,) = step_splits(meta, 16, DEVICES["mi355x"], "FULL", 131072, ["aiter-asm-persistent"])
    assert p.frozen is None and "decided on the device" in p.note
    assert POLICIES["aiter-asm-persistent"].on_device


def test_gfx942_pr4582_table():
    f = gluon_gfx942_pr4582
    assert [f(x(b=b, qlen=1)) for b in (1, 4, 8, 16, 17)] == [64, 64, 32, 16, 9]
    assert [f(x(b=b, qlen=4)) for b in (1, 8, 15, 16)] == [24, 10, 10, 6]
    assert f(x(b=1, qlen=2)) == 16 and f(x(b=3, qlen=2)) == min(64, -(-256 // 6))


def test_mlaprof_triton_is_its_cap_limited_by_the_longest_row():
    from mlaprof.splits.policies import (
        POLICIES,
        device_row_splits,
        mlaprof_triton,
        mlaprof_triton_cap,
    )

    # B = 1 on 132 SMs: next_pow2(264) = 512: 256 for decode (the cap); verify's 64-row
    # programs one wave: the largest power of 2 of programs a row that fit 132 SMs
    assert mlaprof_triton_cap(x(b=1, qlen=4, units=132)) == 128
    # one wave where units / B is a power of 2 too (a quarter of the two-wave count was half
    # a wave there): 132 programs at B 33, 256 at B 1..64 on 256 units
    assert mlaprof_triton_cap(x(b=33, qlen=4, units=132)) == 4
    assert mlaprof_triton_cap(x(b=66, qlen=4, units=132)) == 2
    assert mlaprof_triton_cap(x(b=34, qlen=4, units=132)) == 2  # 3 a row would not be a power
    assert [mlaprof_triton_cap(x(b=b, qlen=4, units=256)) for b in (1, 8, 64, 65)] == [
        256, 32, 4, 2]  # fmt: skip
    assert mlaprof_triton_cap(x(b=1, qlen=1, units=132)) == 256
    assert mlaprof_triton_cap(x(b=8, qlen=1, units=132)) == 64  # next_pow2(33)
    assert mlaprof_triton_cap(x(b=8, qlen=4, units=132)) == 16  # one wave for verify
    # decode on sm_90 runs the 64-row Gluon kernel: verify's one wave, not the 16-row S
    hop = dataclasses.replace(x(b=8, qlen=1, units=132), arch="sm_90")
    assert mlaprof_triton_cap(hop) == 16
    assert mlaprof_triton_cap(dataclasses.replace(hop, num_reqs=1)) == 128
    assert mlaprof_triton_cap(dataclasses.replace(hop, qlen=4)) == 16  # verify: unchanged
    for arch in ("gfx950", "gfx942", "cpu", None):  # elsewhere decode keeps its 16-row S
        assert mlaprof_triton_cap(dataclasses.replace(hop, arch=arch)) == 64
    # the cap ignores KV lengths; S itself does not: 256 keys a split at least
    assert mlaprof_triton(x(b=1, qlen=4, min_kv=4, units=132)) == 1  # the dummy run's length
    assert mlaprof_triton(x(b=1, qlen=4, min_kv=131072, units=132)) == 128
    assert mlaprof_triton(x(b=8, qlen=4, min_kv=3000, units=132)) == 16  # next_pow2(12) = 16
    assert mlaprof_triton(x(b=8, qlen=4, min_kv=1000, units=132)) == 4
    assert device_row_splits(3000, 16) == 16 and device_row_splits(700, 16) == 4
    assert device_row_splits(0, 16) == 1
    from mlaprof.backends.registry import device_decides_splits

    assert POLICIES["mlaprof-triton"].on_device
    assert device_decides_splits("triton", "mlaprof-triton")
    assert not device_decides_splits("aiter", "mlaprof-triton")
    assert not device_decides_splits("triton", "aiter-gluon-v0.1.19")  # the AITER demos' S


def test_gpu_runner_captures_the_cap_when_the_kernel_decides_s():
    from mlaprof.gpu.capture_runner import scenario_splits
    from mlaprof.scenario import Scenario

    sc = Scenario(policy="mlaprof-triton", num_speculative_tokens=3).validate()
    dummy = build_metadata(BatchShape([4], 4, 1, 1, "FULL"))  # KV = qlen
    real = build_metadata(BatchShape([131072], 4, 1, 1, "FULL"))
    assert scenario_splits(sc, dummy, 132) == 1  # host-decided: frozen at the dummy's S
    assert scenario_splits(sc, real, 132) == 128
    assert scenario_splits(sc, dummy, 132, on_device=True) == 128  # the grid, any length
    assert scenario_splits(sc, real, 132, on_device=True) == 128


def test_run_records_the_persistent_fallback_as_a_host_s():
    """33 real rows padded to 40 at qlen 1 with 16 heads on gfx950: AITER drops the persistent
    kernel (aiter/mla.py v0.1.20 L401-422), so `mlaprof run` records get_meta_param's S 6, frozen
    into the graph, and the row is not "decided on the device"."""
    import pandas as pd

    from mlaprof.analysis.splits import split_rows

    shape = BatchShape([8192] * 33, 1, 40, 40, "FULL")
    meta = build_metadata(shape)
    (p,) = step_splits(meta, 16, DEVICES["mi355x"], "FULL", 131072, ["aiter-asm-persistent"],
                       kv_buffer_len=256 * 131072)  # fmt: skip
    assert (p.used, p.frozen) == (6, 6) and "persistent kernel dropped" in p.note
    row = {**dataclasses.asdict(p), "step": 0, "target": "mi355x"}
    (r,) = split_rows(pd.DataFrame([row]))
    assert r.on_device is False and r.used == 6
    (gfx942,) = step_splits(meta, 16, DEVICES["mi300x"], "FULL", 131072, ["aiter-asm-persistent"])
    assert gfx942.frozen is None and "decided on the device" in gfx942.note


def test_the_policy_hears_sm_90_only_for_the_triton_backend_with_gluon(monkeypatch) -> None:
    """Decode's quarter of the splits is for the 64-row Gluon kernel: the split policy is told
    ``sm_90`` for a Hopper GPU only where the triton backend runs and its Triton has Gluon."""
    import torch

    from mlaprof.backends import registry, triton_backend

    dev = torch.device("cpu")
    assert all(registry.split_arch(b, dev) is None for b in registry.BACKENDS)  # not a Hopper
    monkeypatch.setattr(triton_backend, "is_hopper", lambda d: True)
    monkeypatch.setattr(triton_backend, "_gluon_kernels", lambda: object())
    assert registry.split_arch("triton", dev) == "sm_90"
    for other in ("torch", "legacy-flat", "aiter"):  # their kernels hold no 64-row decode
        assert registry.split_arch(other, dev) is None
    monkeypatch.setattr(triton_backend, "_gluon_kernels", lambda: None)  # Triton without Gluon
    assert registry.split_arch("triton", dev) is None


def _vllm_busy(seq: int, s: int, per: int) -> int:
    """Splits of vLLM's Triton kernels that hold KV, split by split as the kernel decides it:
    split i covers [i * per, min(i * per + per, seq)) and runs where that is not empty
    (vllm/v1/attention/ops/triton_decode_attention.py, 0.34 L366-374 and L1003-1010)."""
    return sum(1 for i in range(s) if min(i * per + per, seq) > i * per)


def test_vllm_triton_kernels_busy_splits_are_their_own_cut():
    """vLLM's Triton decode cuts a row into ceil(seq / S) tokens a split; 0.34's Triton verify
    into max(ceil(seq / S), 128) rounded up to 16 (_verify_split_len): the occupancy counts the
    splits those cuts keep busy (the gluon cut of 64-token blocks undercounted the decode)."""
    dec, ver = POLICIES["vllm-triton"], POLICIES["vllm-triton-verify"]
    assert dec.active_splits(100, 16, 16) == 15  # 7 tokens a split (was 2: 64-token blocks)
    assert dec.active_splits(1000, 16, 16) == 16 and dec.active_splits(5, 16, 16) == 5
    assert ver.active_splits(100, 16, 8) == 1  # one split of 128 holds all 100
    assert ver.active_splits(1000, 16, 8) == 8  # 128 a split
    assert ver.active_splits(5000, 16, 8) == 16  # 313 -> 320 a split
    for seq in [*range(0, 700), 1023, 1024, 1025, 4095, 4097, 65_536, 131_071]:
        for s in (1, 2, 3, 7, 8, 16, 31, 32, 64):
            per_dec = -(-seq // s) if seq else 0
            assert dec.active_splits(seq, s, 16) == (_vllm_busy(seq, s, per_dec) if seq else 0)
            per_ver = -(-max(-(-seq // s), 128) // 16) * 16
            assert ver.active_splits(seq, s, 8) == _vllm_busy(seq, s, per_ver), (seq, s)
