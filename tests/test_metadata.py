import pytest
import torch

from mlaprof.errors import MlaprofError
from mlaprof.metadata import NULL_PAGE, BatchShape, build_metadata


def shape(kv, pad, qlen=4):
    return BatchShape(kv, qlen, len(kv) + pad, (len(kv) + pad) * qlen, "FULL")


def test_page_size_one_metadata_is_exact():
    m = build_metadata(shape([10, 7], pad=2), page_size=1, seed=3)
    assert m.qo_lens.tolist() == [4, 4, 0, 0]
    assert m.qo_indptr.tolist() == [0, 4, 8, 8, 8]
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
