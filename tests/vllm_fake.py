"""Minimal stand-ins for the vLLM classes the plugin wraps (same names, same signatures), for tests
on machines without vLLM. tests/test_vllm_install.py checks the real classes instead.

The fake AITER builder computes what vLLM 0.32's does on the host: uniform-MTP padding rows
(query length 0) pinned to qlen, and ``min_kv_seq_len`` over active rows (the fix) or over all
rows (``min_over="all"``, the bug)."""

from __future__ import annotations

import enum
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from mlaprof.integrations import vllm_patches


class AttentionCGSupport(enum.Enum):
    ALWAYS = 3
    UNIFORM_BATCH = 2
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    NEVER = 0


class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (2, 0)
    FULL_AND_PIECEWISE = (2, 1)


@dataclass
class CommonAttentionMetadata:
    query_start_loc: torch.Tensor
    query_start_loc_cpu: torch.Tensor
    seq_lens: torch.Tensor
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: torch.Tensor
    slot_mapping: torch.Tensor
    seq_lens_cpu_upper_bound: torch.Tensor | None = None


@dataclass
class DecodeMetadata:
    max_qo_len: int
    min_kv_seq_len: int = 1
    use_gluon_verify: bool = False
    use_gluon_decode: bool = False
    has_persistent_metadata: bool = False


@dataclass
class Metadata:
    num_decodes: int
    num_decode_tokens: int
    max_seq_len: int
    decode: DecodeMetadata | None


@dataclass
class ModelConfig:
    max_model_len: int = 131072


@dataclass
class VllmConfig:
    model_config: ModelConfig = field(default_factory=ModelConfig)


class AiterMLAMetadataBuilder:
    _cudagraph_support = AttentionCGSupport.UNIFORM_BATCH

    def __init__(self, heads: int = 16, gluon: bool = True, min_over: str = "active") -> None:
        self._decode_num_heads = heads
        self.layer_names = ["model.layers.0.self_attn.attn"]
        self.vllm_config = VllmConfig()
        self.gluon = gluon
        self.min_over = min_over

    def build_for_cudagraph_capture(self, common_attn_metadata: CommonAttentionMetadata) -> Any:
        return self.build(0, common_attn_metadata)

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> Metadata:  # fmt: skip
        m = common_attn_metadata
        decode = self._build_decode(
            block_table_tensor=m.block_table_tensor,
            seq_lens_device=m.seq_lens,
            max_seq_len=m.max_seq_len,
            query_start_loc_cpu=m.query_start_loc_cpu,
            query_start_loc_device=m.query_start_loc,
            num_decode_tokens=m.num_actual_tokens,
            max_query_len=m.max_query_len,
            dcp_tot_seq_lens_device=None,
        )
        return Metadata(m.num_reqs, m.num_actual_tokens, m.max_seq_len, decode)

    def _build_decode(
        self, block_table_tensor: torch.Tensor, seq_lens_device: torch.Tensor, max_seq_len: int,
        query_start_loc_cpu: torch.Tensor, query_start_loc_device: torch.Tensor,
        num_decode_tokens: int, max_query_len: int, dcp_tot_seq_lens_device: Any,
    ) -> DecodeMetadata:  # fmt: skip
        qo = query_start_loc_cpu[1:] - query_start_loc_cpu[:-1]
        n = qo.numel()
        qlen = num_decode_tokens // n
        seq = torch.where(qo > 0, seq_lens_device, torch.full_like(seq_lens_device, qlen))
        rows = seq[qo > 0] if self.min_over == "active" else seq
        min_kv = int(rows.min().item()) if self.gluon else 1  # the builder's own sync
        return DecodeMetadata(qlen, min_kv, use_gluon_verify=self.gluon)


class AiterMLAImpl:
    calls = 0

    def forward_mqa(
        self, q: Any, kv_c_and_k_pe_cache: Any, attn_metadata: Any, layer: Any
    ) -> tuple[Any, None]:
        type(self).calls += 1
        return q, None


class TritonMLAMetadataBuilder(AiterMLAMetadataBuilder):
    _cudagraph_support = AttentionCGSupport.UNIFORM_BATCH

    def __init__(self, heads: int = 16) -> None:
        super().__init__(heads, gluon=False)
        del self._decode_num_heads
        self.num_heads = heads
        self.dcp_world_size = 1

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> Metadata:  # fmt: skip
        m = common_attn_metadata
        return Metadata(m.num_reqs, m.num_actual_tokens, m.max_seq_len, DecodeMetadata(0))


class TritonMLAImpl(AiterMLAImpl):
    pass


class CompilationConfig:
    def __init__(self, mode: CUDAGraphMode = CUDAGraphMode.FULL_AND_PIECEWISE) -> None:
        self.cudagraph_mode = mode
        self.cudagraph_capture_sizes = [4, 8, 12, 16]

    def resolve_cudagraph_mode_and_sizes(
        self, min_cg_support: AttentionCGSupport, min_cg_attn_backend: str | None,
        uniform_decode_query_len: int = 1, use_v2_model_runner: bool = False,
    ) -> CUDAGraphMode:  # fmt: skip
        mode = self.cudagraph_mode
        if min_cg_support != AttentionCGSupport.ALWAYS and mode == CUDAGraphMode.FULL_AND_PIECEWISE:
            mode = CUDAGraphMode.FULL_DECODE_ONLY
        self.cudagraph_mode = mode
        return mode


@dataclass
class BatchDescriptor:
    num_tokens: int


@dataclass
class ForwardContext:
    cudagraph_runtime_mode: CUDAGraphMode = CUDAGraphMode.NONE
    batch_descriptor: BatchDescriptor | None = None


CONTEXT: list[ForwardContext] = []


def get_forward_context() -> ForwardContext:
    return CONTEXT[-1]


def is_forward_context_available() -> bool:
    return bool(CONTEXT)


MODULES = {
    vllm_patches.AITER_MODULE: {"AiterMLAMetadataBuilder": AiterMLAMetadataBuilder,
                                "AiterMLAImpl": AiterMLAImpl},
    vllm_patches.TRITON_MODULE: {"TritonMLAMetadataBuilder": TritonMLAMetadataBuilder,
                                 "TritonMLAImpl": TritonMLAImpl},
    vllm_patches.COMPILATION_MODULE: {"CompilationConfig": CompilationConfig},
    "vllm.forward_context": {"get_forward_context": get_forward_context,
                             "is_forward_context_available": is_forward_context_available},
}  # fmt: skip


def install(monkeypatch: Any) -> None:
    """Put the fake modules (and their parent packages) into ``sys.modules``."""
    made: dict[str, types.ModuleType] = {}
    for name, attrs in MODULES.items():
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            mod_name = ".".join(parts[:i])
            if mod_name not in made:
                made[mod_name] = types.ModuleType(mod_name)
                if i > 1:
                    setattr(made[".".join(parts[: i - 1])], parts[i - 1], made[mod_name])
        for k, v in attrs.items():
            setattr(made[name], k, v)
    for name, mod in made.items():
        monkeypatch.setitem(sys.modules, name, mod)
    CONTEXT.clear()


def batch(kv_lens: list[int], qlen: int, padded_reqs: int | None = None,
          upper_bound: bool = True) -> CommonAttentionMetadata:  # fmt: skip
    """A decode batch as vLLM's runner hands it to ``build``: real requests first, then padding
    requests with query length 0 (uniform-batch FULL-graph padding)."""
    n = padded_reqs or len(kv_lens)
    qo = [qlen] * len(kv_lens) + [0] * (n - len(kv_lens))
    qsl = [0]
    for q in qo:
        qsl.append(qsl[-1] + q)
    seq = list(kv_lens) + [0] * (n - len(kv_lens))
    qsl_t = torch.tensor(qsl, dtype=torch.int32)
    return CommonAttentionMetadata(
        query_start_loc=qsl_t.clone(),  # stands in for the device copy
        query_start_loc_cpu=qsl_t,
        seq_lens=torch.tensor(seq, dtype=torch.int32),
        num_reqs=n,
        num_actual_tokens=n * qlen,
        max_query_len=qlen,
        max_seq_len=max(kv_lens),
        block_table_tensor=torch.zeros(n, 8, dtype=torch.int32),
        slot_mapping=torch.zeros(n * qlen, dtype=torch.int64),
        seq_lens_cpu_upper_bound=torch.tensor(seq, dtype=torch.int32) if upper_bound else None,
    )
