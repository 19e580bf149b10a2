"""The verify route per configuration (mlaprof.splits.routing); tests/e2e/test_vllm_differential.py
checks the same rules against vLLM's own code where vLLM is installed."""

import pytest

from mlaprof.analysis.paths import route_text
from mlaprof.analysis.sections import Route as RouteSection
from mlaprof.errors import MlaprofError
from mlaprof.splits.routing import RouteConfig, verify_route


def route(heads, qlen=4, **kw):
    version = kw.pop("version", "0.32.0")
    return verify_route(RouteConfig(heads, qlen, **kw), version)


def line(r) -> str:
    """The route as every view prints it (the run records it; the analysis says it)."""
    return route_text(RouteSection.recorded(r.to_dict()), "modelled")


def test_small_heads_verify_on_gluon():
    r = route(8)  # Kimi-K2 at TP8
    assert (r.path, r.verified, r.splits_on_device) == ("gluon-verify", True, False)
    assert "mla_gluon" in r.kernel and "8 heads < 16" in r.reason
    assert "vLLM 0.32.0" in line(r)


def test_sixteen_heads_take_persistent_asm():
    r = route(16)  # DeepSeek-V3 at TP8
    assert r.path == "asm-persistent" and r.splits_on_device
    assert "16 heads >= 16" in r.reason


@pytest.mark.parametrize(
    "kw, why",
    [
        (dict(kv_cache_dtype="fp8"), "fp8 KV"),
        (dict(arch="gfx942"), "no mla_gluon build on gfx942"),
        (dict(dcp_world_size=2), "DCP 2"),
        (dict(causal=False), "non-causal"),
        (dict(small_head_mode="asm"), "ASM_PADDING=asm"),
        (dict(kv_cache_bytes=(1 << 31) + 1), "> 2 GiB"),
    ],
)
def test_every_gluon_condition_sends_small_heads_elsewhere(kw, why):
    r = route(8, **kw)
    assert r.path != "gluon-verify" and why in r.reason


def test_kv_cache_of_exactly_two_gib_keeps_gluon():
    assert route(8, kv_cache_bytes=1 << 31).path == "gluon-verify"


def test_qlen_one_decode():
    assert route(8, qlen=1).path == "gluon-decode"
    assert route(12, qlen=1).path == "asm-persistent"  # 12 does not divide 16 (auto mode)
    assert route(12, qlen=1, small_head_mode="gluon").path == "gluon-decode"


def test_padded_small_heads_past_qlen_four_lose_the_persistent_kernel():
    assert route(8, qlen=5, arch="gfx942").path == "asm"
    assert route(8, qlen=4, arch="gfx942").path == "asm-persistent"
    assert route(8, qlen=5, arch="gfx942", kv_cache_dtype="fp8").path == "asm-persistent"


def test_versions():
    """vLLM 0.33.0's use_gluon_verify (rocm_aiter_mla.py L2158-2195), use_gluon_decode
    (L2129-2155) and persistent gate (L1694-1712, equal for DCP 1) are 0.32's: its routes are
    verified, and each lists the 0.33 verify paths mlaprof does not model that it could meet."""
    r = route(8, version="0.33.0")
    assert r.path == "gluon-verify" and r.verified and "UNVERIFIED" not in line(r)
    assert "not modelled: vLLM 0.33 adaptive variable-length verify" in line(r)
    assert r.to_dict()["not_modelled"] and not route(8).not_modelled  # 0.32 has no such path
    r942 = verify_route(RouteConfig(16, 4, arch="gfx942", mtp_decode_qlen=4), "0.33.0")
    assert any("gfx942 DCP Triton verify" in m for m in r942.not_modelled)
    legacy = route(8, version="pre-51171")
    assert legacy.path == "legacy-flat" and "flattened" in legacy.reason
    assert route(16, version="pre-51171").path == "asm-persistent"
    with pytest.raises(MlaprofError, match="unknown vLLM version"):
        route(8, version="0.1")


# -- vLLM 0.34 (checked against the wheel's own predicates in tests/e2e/test_vllm034_source.py) --
def test_034_cdna3_verify_past_qlen_4_takes_the_triton_verify():
    from mlaprof.splits.routing import DEFAULT_VERSION, RouteConfig, verify_route

    assert DEFAULT_VERSION == "0.34.0"

    def path(heads, qlen, kv="auto", arch="gfx942", version="0.34.0", mtp=None):
        cfg = RouteConfig(heads, qlen, kv, arch, mtp_decode_qlen=mtp or qlen)
        return verify_route(cfg, version).path

    assert path(8, 6) == "triton-verify" and path(8, 6, version="0.32.0") == "asm"
    assert path(16, 8) == "triton-verify" and path(16, 8, version="0.33.0") == "asm-persistent"
    assert path(64, 6, "fp8") == "triton-verify"  # 64 heads fp8: Triton
    assert path(128, 6, "fp8") == "asm-persistent"  # 128 padded heads fp8: persistent ASM stays
    assert path(16, 4) == "asm-persistent"  # qlen 4: the ASM kernels serve it
    assert path(16, 5, mtp=4) == "asm"  # reorder threshold 4: no Triton verify, no schedule
    assert path(8, 6, arch="gfx950") == "gluon-verify"  # gfx950 unchanged
    r = verify_route(RouteConfig(8, 6, "auto", "gfx942", mtp_decode_qlen=6), "0.34.0")
    assert r.verified and "[vLLM 0.34.0]" in line(r)
    assert any("adaptive variable-length verify" in m for m in r.not_modelled)


def test_034_triton_verify_split_count_is_frozen_from_max_model_len(capsys):
    """Under FULL graphs vLLM 0.34 passes max_model_len: 152 splits for 2 requests of 8 heads at
    qlen 6 on an MI300X, where 1k-token rows deserve 8: an over-split cell, route fitting."""
    import json

    from mlaprof.cli import main

    argv = ["whatif", "--vllm-version", "0.34.0", "--device", "mi300x", "--spec", "5",
            "--batch", "2", "--context", "1k", "--policy", "vllm-triton-verify", "--json"]  # fmt: skip
    assert main(argv) == 0
    (cell,) = json.loads(capsys.readouterr().out)["cells"]
    assert (cell["route"], cell["route_fits"], cell["graph"]) == ("triton-verify", True, "FULL")
    assert (cell["S_frozen"], cell["S_deserved"], cell["over_split"]) == (152, 8, True)


def test_034_triton_verify_split_count_from_max_model_len_on_eager_steps(capsys):
    """vLLM 0.34 sizes the Triton verify's S from max_model_len whenever the engine has FULL
    graphs (rocm_aiter_mla.py L1943-1950), not only in a FULL graph: 100 requests at qlen 6 run
    eagerly at 256 seqs with 3 splits where their 100-token rows deserve 1."""
    import json

    from mlaprof.cli import main

    argv = ["whatif", "--vllm-version", "0.34.0", "--device", "mi300x", "--spec", "5",
            "--batch", "100", "--context", "100", "--policy", "vllm-triton-verify", "--json"]  # fmt: skip
    assert main(argv) == 0
    (cell,) = json.loads(capsys.readouterr().out)["cells"]
    assert (cell["graph"], cell["S_frozen"], cell["S_fix"], cell["S_deserved"]) == ("NONE", 0, 3, 1)
    assert cell["over_split"]
