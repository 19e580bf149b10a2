"""Persistent verify buffers per configuration (the seed's third finding), modelled."""

import pytest

from mlaprof.splits.reservation import (
    MIB,
    flat_buffers_bytes,
    paged_kv_indices_bytes,
    reservations,
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
