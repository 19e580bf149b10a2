"""Persistent verify buffers per configuration (the seed's third finding), modelled."""

import pytest

from mlaprof.splits.reservation import (
    MIB,
    flat_buffers_bytes,
    paged_kv_indices_bytes,
    reservations,
    source_4d,
)


def test_4d_buffer_is_vllms_paged_kv_indices():
    # vLLM 0.32 AiterMLAMetadataBuilder: max_num_seqs * max_model_len int32 (flat view: page 1)
    assert paged_kv_indices_bytes(256, 131072) == 256 * 131072 * 4 == 128 * MIB


def test_legacy_flat_buffers_hold_one_entry_per_verify_token_and_kv_token():
    assert flat_buffers_bytes(2, 4, 1000) == (2 * 4 + 1) * 4 + 4 * 1000 * 4


def test_the_seeds_figures_under_the_models_assumptions():
    """295.3 MiB sized by max_model_len vs 46.6 MiB by the KV cache (seed, PR #51171). The seed
    gives no configuration; at qlen 4 these slot counts reproduce both figures."""
    assert flat_buffers_bytes(148, 4, 148 * 130_760) / MIB == pytest.approx(295.3, abs=0.05)
    assert flat_buffers_bytes(148, 4, 3_054_000) / MIB == pytest.approx(46.6, abs=0.05)


def test_reservations_per_configuration():
    rows = {(r.path, r.sized_by): r for r in reservations(256, 131072, 4, None, "default")}
    four_d = rows[("4-D", "max_model_len")]
    legacy = rows[("legacy-flat", "max_model_len")]
    assert four_d.bytes == 128 * MIB + 2 * 257 * 4
    assert legacy.bytes == four_d.bytes + flat_buffers_bytes(256, 4, 256 * 131072)
    unknown = rows[("legacy-flat", "kv-cache")]
    assert unknown.bytes is None and "unknown without kv_cache_tokens" in unknown.provenance
    assert "UNVERIFIED" in legacy.source and "verified" in four_d.source
    sized = {(r.path, r.sized_by): r for r in reservations(256, 131072, 4, 3_000_000, "x")}
    assert sized[("legacy-flat", "kv-cache")].bytes == four_d.bytes + flat_buffers_bytes(
        256, 4, 3_000_000
    )
    assert all(r.provenance.startswith("modelled for scenario") for r in sized.values())


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_the_4d_row_names_the_routes_release_whose_wheel_sizes_it_as_modelled(version):
    """The 4-D row's source names the route's release; that release's builder (read from its
    wheel) sizes ``paged_kv_indices`` as the model does: one page per token of max_model_len
    for each of max_num_seqs rows, more only under adaptive verification (named, not modelled)."""
    import ast
    import types

    from tests import vllm_src

    path = vllm_src.source(version) / "v1/attention/backends/mla/rocm_aiter_mla.py"
    init = "AiterMLAMetadataBuilder.__init__"
    cfg = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=131072))
    per_req = vllm_src.evaluate(
        vllm_src.expression(path, init, "max_num_pages_per_req"), path, {"vllm_config": cfg}
    )
    pages = vllm_src.evaluate(
        vllm_src.expression(path, init, "max_num_pages"),
        path,
        {"max_num_reqs": 256, "max_num_pages_per_req": per_req},
    )
    assert pages * 4 == paged_kv_indices_bytes(256, 131072)
    # the only other term: under adaptive verification (the condition the source names)
    text = ast.unparse(
        vllm_src._member(vllm_src._top(vllm_src._tree(path), "AiterMLAMetadataBuilder"), "__init__")
    )
    assert (
        "max_num_pages += max_num_reqs * (speculative_config.num_speculative_tokens or 0)" in text
    )
    assert "_adaptive_varlen_verify_enabled(vllm_config)" in text
    four_d = next(r for r in reservations(256, 131072, 4, None, "x", version) if r.path == "4-D")
    assert four_d.source == source_4d(version)
    assert f"vLLM {version} " in four_d.source and "enable_adaptive_verification" in four_d.source
    assert "0.32.0" in source_4d(None) and source_4d("0.32.0") == source_4d(None)


def test_no_aiter_buffers_on_a_cuda_route():
    """vLLM's CUDA platform does not load the AITER MLA backend: a run whose route is one of its
    paths has no AITER verify buffers modelled (the route line says which backend runs); every
    AITER path keeps them, with its release in the 4-D row's source."""
    from mlaprof.analysis.reservation import reservation_summary
    from mlaprof.analysis.sections import Route, Scenario
    from mlaprof.splits.routing import OFF_AITER_PATHS, PATHS

    sc = Scenario(name="x", max_num_seqs=256, max_model_len=131072, num_speculative_tokens=3)

    def route(path: str) -> Route:
        return Route(kernel=PATHS[path], path=path, reason="", source="", verified=True,
                     version="0.34.0")  # fmt: skip

    assert reservation_summary(sc) and reservation_summary(sc, None)
    for path in PATHS:
        rows = reservation_summary(sc, route(path))
        if path in OFF_AITER_PATHS:
            assert rows == [], path
        else:
            assert rows and "vLLM 0.34.0" in rows[0].source, path
    assert set(OFF_AITER_PATHS) == {"triton-mla", "flash-attn-mla", "flashmla"}
