"""The verify route per configuration (mlaprof.splits.routing); tests/e2e/test_vllm_differential.py
checks the same rules against vLLM's own code where vLLM is installed."""

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.splits.routing import RouteConfig, verify_route


def route(heads, qlen=4, **kw):
    version = kw.pop("version", "0.32.0")
    return verify_route(RouteConfig(heads, qlen, **kw), version)


def test_small_heads_verify_on_gluon():
    r = route(8)  # Kimi-K2 at TP8
    assert (r.path, r.verified, r.splits_on_device) == ("gluon-verify", True, False)
    assert "mla_gluon" in r.kernel and "8 heads < 16" in r.reason
    assert "vLLM 0.32.0" in r.line()


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
    assert r.path == "gluon-verify" and r.verified and "UNVERIFIED" not in r.line()
    assert "not modelled: vLLM 0.33 adaptive variable-length verify" in r.line()
    assert r.to_dict()["not_modelled"] and not route(8).not_modelled  # 0.32 has no such path
    r942 = verify_route(RouteConfig(16, 4, arch="gfx942", mtp_decode_qlen=4), "0.33.0")
    assert any("gfx942 DCP Triton verify" in m for m in r942.not_modelled)
    legacy = route(8, version="pre-51171")
    assert legacy.path == "legacy-flat" and "flattened" in legacy.reason
    assert route(16, version="pre-51171").path == "asm-persistent"
    with pytest.raises(MlaprofError, match="unknown vLLM version"):
        route(8, version="0.1")
