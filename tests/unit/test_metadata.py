import pytest
import torch

from mlaprof.errors import MlaprofError
from mlaprof.metadata import NULL_PAGE, BatchShape, build_metadata


def shape(kv, pad, qlen=4):
    return BatchShape(kv, qlen, len(kv) + pad, (len(kv) + pad) * qlen, "FULL")


def test_page_size_one_metadata_is_exact():
    m = build_metadata(shape([10, 7], pad=2), page_size=1, seed=3)
    assert m.qo_lens.tolist() == [4, 4, 0, 0]
    # vLLM's kernel qo_indptr under FULL padding is uniform: padding rows count qlen tokens,
    # while query_start_loc gives them 0
    assert m.qo_indptr.tolist() == [0, 4, 8, 12, 16]
    assert m.host_query_start_loc == [0, 4, 8, 8, 8]
    assert m.seq_lens.tolist() == [10, 7, 4, 4]  # padding pinned to qlen
    assert m.kv_indptr.tolist() == [0, 10, 17, 21, 25]
    assert m.last_page_len.tolist() == [1, 1, 1, 1]
    real = m.kv_indices[:17].tolist()
    assert sorted(real) == list(range(1, 18))  # every real page once, page 0 reserved
    assert m.kv_indices[17:].tolist() == [NULL_PAGE] * 8
    assert (m.min_kv_seq_len_all, m.min_kv_seq_len_active) == (4, 7)
    assert m.kv_indptr.dtype == torch.int32


def test_page_size_n():
    m = build_metadata(shape([10, 16, 17], pad=0), page_size=8)
    assert m.kv_indptr.tolist() == [0, 2, 4, 7]
    assert m.last_page_len.tolist() == [2, 8, 1]


def test_min_kv_modes():
    m = build_metadata(shape([3000, 1030], pad=1), min_kv_mode="all-rows")
    assert m.min_kv_seq_len == 4
    m = build_metadata(shape([3000, 1030], pad=1), min_kv_mode="active-rows")
    assert m.min_kv_seq_len == 1030


def test_kv_shorter_than_verify_tokens_is_rejected():
    with pytest.raises(MlaprofError, match="shorter than"):
        build_metadata(shape([3], pad=0))


def test_qo_indptr_follows_query_start_loc_without_padding():
    m = build_metadata(shape([10, 7], pad=0))
    assert m.qo_indptr.tolist() == m.host_query_start_loc == [0, 4, 8]
    assert not m.padded_uniform


def test_qlen_one_padding_is_not_uniform():
    """vLLM pads uniformly only for qlen > 1: a qlen-1 padding row keeps 0 tokens and KV 0."""
    m = build_metadata(shape([10, 7], pad=1, qlen=1))
    assert m.qo_indptr.tolist() == [0, 1, 2, 2]
    assert m.seq_lens.tolist() == [10, 7, 0]
    assert m.kv_indptr.tolist() == [0, 10, 17, 17]
    assert m.last_page_len.tolist() == [1, 1, 1]


def test_kernel_min_kv_seq_len_is_vllms():
    m = build_metadata(shape([3000, 1030], pad=1))
    assert m.kernel_min_kv_seq_len(on_gluon_verify=True) == 1030  # active rows when padded
    assert m.kernel_min_kv_seq_len(on_gluon_verify=False) == 1  # vLLM's default off gluon
    m = build_metadata(shape([3000, 1030], pad=0))
    assert m.kernel_min_kv_seq_len(on_gluon_verify=True) == 1030
