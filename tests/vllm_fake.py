"""Minimal stand-ins for the vLLM classes the plugin wraps (same names, same signatures), for tests
on machines without vLLM. tests/e2e/test_vllm_install.py checks the real classes instead.

The fake common builder files rows past ``reorder_batch_threshold`` as prefills (as the CPU MLA
backend does with verify rows); the fake AITER builder overrides ``build`` and calls
``super().build`` (so a build must be recorded once), computing ``min_kv_seq_len`` over active
rows (the fix) or over all rows (``min_over="all"``, the bug)."""

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


@dataclass
class Metadata:
    num_decodes: int
    num_prefills: int
    num_decode_tokens: int
    max_seq_len: int
    decode: DecodeMetadata | None


@dataclass
class ModelConfig:
    max_model_len: int = 131072


@dataclass
class ParallelConfig:
    """vLLM's ParallelConfig, reduced to what places an engine among data-parallel engines
    (vllm/config/parallel.py: ``world_size`` is PP x TP x PCP, set in ``__post_init__``)."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    prefill_context_parallel_size: int = 1
    data_parallel_size: int = 1
    data_parallel_rank: int = 0
    data_parallel_rank_local: int | None = None
    nnodes: int = 1
    distributed_executor_backend: str | None = "mp"
    enable_elastic_ep: bool = False
    world_size: int = field(init=False)
    data_parallel_index: int = field(init=False)

    def __post_init__(self) -> None:
        self.world_size = (
            self.pipeline_parallel_size
            * self.tensor_parallel_size
            * self.prefill_context_parallel_size
        )
        self.data_parallel_index = self.data_parallel_rank

    def reconfigure_for_independent_dp_rank(self) -> None:
        self.data_parallel_size = 1
        self.data_parallel_rank = 0


@dataclass
class VllmConfig:
    model_config: ModelConfig = field(default_factory=ModelConfig)
    parallel_config: ParallelConfig = field(default_factory=ParallelConfig)


# the config vLLM's set_current_vllm_config sets (vllm/config/vllm.py): a worker's own around its
# initialize_from_config (vllm/v1/worker/worker_base.py), where the cudagraph mode is resolved
current_vllm_config: VllmConfig | None = None


def get_current_vllm_config_or_none() -> VllmConfig | None:
    return current_vllm_config


class QueryLenSupport(enum.Enum):
    SINGLE_ONLY = "single_only"
    UNIFORM = "uniform"


class MLACommonMetadataBuilder:
    """vLLM's common MLA builder, reduced to what the plugin reads: rows with a query length up
    to ``reorder_batch_threshold`` at the front are decodes, the rest prefills (so with
    SINGLE_ONLY, the CPU backend's threshold 1, verify rows are filed as prefills)."""

    _cudagraph_support = AttentionCGSupport.NEVER
    query_len_support = QueryLenSupport.SINGLE_ONLY

    def __init__(self, heads: int = 8, threshold: int = 1) -> None:
        self.num_heads = heads
        self.dcp_world_size = 1
        self.reorder_batch_threshold = threshold
        self.vllm_config = VllmConfig()

    def build_for_cudagraph_capture(self, common_attn_metadata: CommonAttentionMetadata) -> Any:
        return self.build(0, common_attn_metadata)

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> Metadata:  # fmt: skip
        m = common_attn_metadata
        qo = (m.query_start_loc_cpu[1:] - m.query_start_loc_cpu[:-1]).tolist()
        n_dec = 0
        while n_dec < len(qo) and qo[n_dec] <= self.reorder_batch_threshold:
            n_dec += 1
        decode = self._build_decode(m, n_dec) if n_dec else None
        return Metadata(n_dec, len(qo) - n_dec, sum(qo[:n_dec]), m.max_seq_len, decode)

    def _build_decode(self, m: CommonAttentionMetadata, n: int) -> DecodeMetadata:
        return DecodeMetadata(max_qo_len=self.reorder_batch_threshold)


class AiterMLAMetadataBuilder(MLACommonMetadataBuilder):
    """Overrides build and calls super().build, as vLLM's does: must be recorded once."""

    _cudagraph_support = AttentionCGSupport.UNIFORM_BATCH
    query_len_support = QueryLenSupport.UNIFORM

    def __init__(self, heads: int = 16, min_over: str = "active", threshold: int = 4) -> None:
        super().__init__(heads, threshold)
        self._decode_num_heads = heads
        self.min_over = min_over

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> Metadata:  # fmt: skip
        self._decode_causal = True
        return super().build(common_prefix_len, common_attn_metadata, fast_build)

    def _build_decode(self, m: CommonAttentionMetadata, n: int) -> DecodeMetadata:
        qo = m.query_start_loc_cpu[1 : n + 1] - m.query_start_loc_cpu[:n]
        qlen = int(qo.max())
        seq = torch.where(qo > 0, m.seq_lens[:n], torch.full_like(m.seq_lens[:n], qlen))
        rows = seq[qo > 0] if self.min_over == "active" else seq
        min_kv = int(rows.min().item())  # the builder's own sync
        return DecodeMetadata(qlen, min_kv, use_gluon_verify=True)


@dataclass
class BatchDescriptor:
    num_tokens: int
    num_reqs: int | None = None


@dataclass
class SchedulerConfig:
    max_num_seqs: int = 8


@dataclass
class SpeculativeConfig:
    num_speculative_tokens: int = 3
    method: str = "ngram"


@dataclass
class AttentionGroup:
    backend: Any
    layer_names: list[str]
    metadata_builders: list[Any]


class GPUModelRunner:
    """The runner's per-step order: draft tokens, graph mode + padding, target build(s), then the
    drafter's builds (fast_build=True)."""

    def __init__(self, builders: list[MLACommonMetadataBuilder], backend: str = "CPU_MLA",
                 mode: CUDAGraphMode = CUDAGraphMode.NONE, sizes: list[int] | None = None,
                 drafter: MLACommonMetadataBuilder | None = None,
                 vllm_config: VllmConfig | None = None) -> None:  # fmt: skip
        self.builders = builders
        self.vllm_config = vllm_config or VllmConfig()  # its worker's (its engine's) config
        be = types.SimpleNamespace(get_name=lambda: backend)
        self.attn_groups = [[AttentionGroup(be, [f"model.layers.{i}.self_attn.attn"], [b])]
                            for i, b in enumerate(builders)]  # fmt: skip
        self.mode = mode
        self.sizes = sizes or []
        self.drafter = drafter
        self.scheduler_config = SchedulerConfig()
        self.speculative_config = SpeculativeConfig()

    def _determine_batch_execution_and_padding(
        self, num_tokens: int, num_reqs: int, num_scheduled_tokens_np: Any,
        max_num_scheduled_tokens: int, use_cascade_attn: bool = False,
    ) -> tuple[Any, ...]:  # fmt: skip
        padded = next((s for s in self.sizes if s >= num_tokens), num_tokens)
        reqs = padded // max_num_scheduled_tokens if self.mode == CUDAGraphMode.FULL else None
        return self.mode, BatchDescriptor(padded, reqs), False, None, None

    def _calc_spec_decode_metadata(self, num_draft_tokens: Any, cu_num_scheduled_tokens: Any):
        return types.SimpleNamespace(num_draft_tokens=list(num_draft_tokens))

    def execute(self, kv_lens: list[int], drafts: list[int]) -> list[Metadata]:
        """One engine step: each request verifies its drafts (query length 1 + drafts)."""
        import numpy as np

        qo = [1 + d for d in drafts]
        sched = np.array(qo, dtype=np.int32)
        self._calc_spec_decode_metadata(np.array(drafts, dtype=np.int32), np.cumsum(sched))
        mode, desc, *_ = self._determine_batch_execution_and_padding(
            sum(qo), len(qo), sched, max(qo)
        )
        n = desc.num_reqs if desc.num_reqs else len(qo)
        cam = batch(kv_lens, qo, padded_reqs=n)
        out = [b.build(0, cam) for b in self.builders]
        if self.drafter is not None:
            for _ in range(max(drafts)):
                self.drafter.build(0, batch(kv_lens, [1] * len(kv_lens)), fast_build=True)
        return out

    # vLLM 0.32's step as EngineCore.step drives it (vllm/v1/engine/core.py): execute_model runs
    # the forward and returns None, then sample_tokens returns the step's output
    def execute_model(self, scheduler_output: Any, intermediate_tensors: Any = None) -> None:
        kv_lens, drafts = scheduler_output
        self._state = self.execute(kv_lens, drafts)
        return None

    def sample_tokens(self, grammar_output: Any) -> list[Metadata]:
        out, self._state = self._state, None
        return out


class SpecDecodingStats:
    def __init__(self) -> None:
        self.num_drafts = self.num_draft_tokens = self.num_accepted_tokens = 0

    def observe_draft(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens


class Scheduler:
    """vLLM's v1 Scheduler, reduced: built by keyword in ``EngineCore.__init__``, it keeps the
    config, and counts each verified request's drafts into the step's ``SpecDecodingStats``
    (``make_spec_decoding_stats``, by keyword, as vllm/v1/core/sched/scheduler.py does)."""

    def __init__(
        self, vllm_config: VllmConfig, kv_cache_config: Any, structured_output_manager: Any,
        block_size: int, hash_block_size: int | None = None, mm_registry: Any = None,
        include_finished_set: bool = False, log_stats: bool = False,
    ) -> None:  # fmt: skip
        self.vllm_config = vllm_config
        self.parallel_config = vllm_config.parallel_config
        self.log_stats = log_stats

    def make_spec_decoding_stats(
        self, spec_decoding_stats: SpecDecodingStats | None, num_draft_tokens: int,
        num_accepted_tokens: int,
    ) -> SpecDecodingStats | None:  # fmt: skip
        if not self.log_stats or not num_draft_tokens:
            return None
        if spec_decoding_stats is None:
            spec_decoding_stats = SpecDecodingStats()
        spec_decoding_stats.observe_draft(
            num_draft_tokens=num_draft_tokens, num_accepted_tokens=num_accepted_tokens
        )
        return spec_decoding_stats


class AsyncScheduler(Scheduler):
    """The default scheduler under async scheduling: its ``__init__`` calls the base one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)


def run_engine_core(
    vllm_config: VllmConfig, dp_rank: int = 0, local_dp_rank: int = 0, is_moe: bool = True
) -> Scheduler:
    """One EngineCore process up to its scheduler, as ``EngineCoreProc.run_engine_core`` and
    ``EngineCore.__init__`` do it (vllm/v1/engine/core.py): a MoE engine of several takes its
    DP rank into its parallel config, any other is made independent (DP size 1); the engine
    loads the general plugins, then builds the scheduler by keyword. The process has no
    distributed rank of its own (its workers are other processes)."""
    from mlaprof.integrations import vllm_plugin

    parallel_config = vllm_config.parallel_config
    data_parallel = parallel_config.data_parallel_size > 1 or dp_rank > 0
    if data_parallel:
        parallel_config.data_parallel_rank_local = local_dp_rank
    parallel_config.data_parallel_index = dp_rank
    if data_parallel and is_moe:
        parallel_config.data_parallel_rank = dp_rank
    else:
        parallel_config.reconfigure_for_independent_dp_rank()
    vllm_plugin.register()  # load_general_plugins(), first thing in EngineCore.__init__
    return AsyncScheduler(
        vllm_config=vllm_config, kv_cache_config=None, structured_output_manager=None,
        include_finished_set=False, log_stats=True, block_size=16, hash_block_size=None,
    )  # fmt: skip


class CompilationConfig:
    def __init__(self, mode: CUDAGraphMode = CUDAGraphMode.FULL_AND_PIECEWISE) -> None:
        self.cudagraph_mode = mode
        self.cudagraph_capture_sizes = [4, 8, 12, 16]

    def resolve_cudagraph_mode_and_sizes(
        self, min_cg_support: AttentionCGSupport, min_cg_attn_backend: str | None,
        uniform_decode_query_len: int = 1, use_v2_model_runner: bool = False,
    ) -> CUDAGraphMode:  # fmt: skip
        mode = self.cudagraph_mode
        if min_cg_support == AttentionCGSupport.NEVER:
            mode = CUDAGraphMode.NONE
        elif min_cg_support != AttentionCGSupport.ALWAYS:
            mode = CUDAGraphMode.FULL_DECODE_ONLY
        self.cudagraph_mode = mode
        return mode


# -- the model runner V2 (vLLM 0.34: vllm/v1/worker/gpu/) -----------------------------------------
@dataclass(frozen=True)
class BatchExecutionDescriptor:
    cg_mode: CUDAGraphMode
    num_tokens: int
    num_reqs: int | None
    uniform_token_count: int | None = None


class CudaGraphManager:
    """vLLM 0.34's manager, reduced: decode graphs by request count (FULL), else PIECEWISE at
    the first token size, else eager; ``capture`` fails where told to."""

    def __init__(self, decode_reqs: list[int], qlen: int, max_num_reqs: int = 8,
                 fail: str | None = None, spec_tokens: int = 3) -> None:  # fmt: skip
        self.decode_reqs, self.qlen, self.max_num_reqs, self.fail = (
            decode_reqs,
            qlen,
            max_num_reqs,
            fail,
        )
        self.vllm_config = types.SimpleNamespace(
            speculative_config=SpeculativeConfig(spec_tokens, "mtp")
        )
        self._capture_descs = {CUDAGraphMode.FULL: [BatchExecutionDescriptor(
            CUDAGraphMode.FULL, n * qlen, n, qlen) for n in decode_reqs]}  # fmt: skip
        self.graphs: dict[Any, Any] = {}

    def capture(self, create_forward_fn: Any, progress_bar_desc: str = "Capturing CUDA graphs",
                stream: Any = None) -> None:  # fmt: skip
        for descs in self._capture_descs.values():
            for d in descs:
                if self.fail:
                    raise RuntimeError(self.fail)
                self.graphs[d] = object()

    def dispatch(self, num_reqs: int, num_tokens: int, uniform_token_count: int | None,
                 num_active_loras: int, max_query_len: int | None = None,
                 num_ubatches: int = 1) -> BatchExecutionDescriptor:  # fmt: skip
        for n in self.decode_reqs:
            if uniform_token_count == self.qlen and n >= num_reqs:
                return BatchExecutionDescriptor(CUDAGraphMode.FULL, n * self.qlen, n, self.qlen)
        return BatchExecutionDescriptor(CUDAGraphMode.NONE, num_tokens, num_reqs)


class ModelCudaGraphManager(CudaGraphManager):
    pass


class SpeculatorCudaGraphManager(CudaGraphManager):
    def __init__(self, *a: Any, captured_k: tuple[int, ...] = (3,), **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.captured_k = captured_k

    def specialize_spec_tokens(self, desc: BatchExecutionDescriptor,
                               num_speculative_tokens: int) -> BatchExecutionDescriptor:  # fmt: skip
        if desc.cg_mode != CUDAGraphMode.FULL or num_speculative_tokens in self.captured_k:
            return desc
        return BatchExecutionDescriptor(CUDAGraphMode.NONE, desc.num_tokens, desc.num_reqs)


class GPUModelRunnerV2:
    """The V2 runner's step: the target manager's dispatch, the target builds, then the
    speculator's draft-decode dispatch (one token a request) specialized to k."""

    def __init__(self, builders: list[MLACommonMetadataBuilder], target: ModelCudaGraphManager,
                 drafter: SpeculatorCudaGraphManager | None = None,
                 backend: str = "ROCM_AITER_MLA") -> None:  # fmt: skip
        self.builders, self.target, self.drafter = builders, target, drafter
        be = types.SimpleNamespace(get_name=lambda: backend)
        self.attn_groups = [[AttentionGroup(be, [f"model.layers.{i}.self_attn.attn"], [b])]
                            for i, b in enumerate(builders)]  # fmt: skip

    def execute_model(self, scheduler_output: Any, intermediate_tensors: Any = None) -> None:
        kv_lens, k = scheduler_output
        q = 1 + k
        desc = self.target.dispatch(len(kv_lens), len(kv_lens) * q, q, 0)
        cam = batch(kv_lens, q, padded_reqs=desc.num_reqs or len(kv_lens))
        self._state = [b.build(0, cam) for b in self.builders]
        if self.drafter is not None:
            d = self.drafter.dispatch(len(kv_lens), len(kv_lens), 1, 0)
            self.drafter.specialize_spec_tokens(d, k)
        return None

    def sample_tokens(self, grammar_output: Any) -> Any:
        out, self._state = self._state, None
        return out


MODULES = {
    vllm_patches.MLA_COMMON_MODULE: {"MLACommonMetadataBuilder": MLACommonMetadataBuilder},
    vllm_patches.V2_GRAPHS_MODULE: {"CudaGraphManager": CudaGraphManager,
                                    "ModelCudaGraphManager": ModelCudaGraphManager},
    vllm_patches.V2_SPEC_GRAPHS_MODULE: {"SpeculatorCudaGraphManager": SpeculatorCudaGraphManager},
    vllm_patches.V2_RUNNER_MODULE: {"GPUModelRunner": GPUModelRunnerV2},
    vllm_patches.RUNNER_MODULE: {"GPUModelRunner": GPUModelRunner},
    vllm_patches.SPEC_METRICS_MODULE: {"SpecDecodingStats": SpecDecodingStats},
    vllm_patches.SCHEDULER_MODULE: {"Scheduler": Scheduler, "AsyncScheduler": AsyncScheduler},
    vllm_patches.COMPILATION_MODULE: {"CompilationConfig": CompilationConfig},
    "vllm.config": {"get_current_vllm_config_or_none": get_current_vllm_config_or_none},
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


def batch(kv_lens: list[int], qo: list[int] | int, padded_reqs: int | None = None,
          upper_bound: bool = True) -> CommonAttentionMetadata:  # fmt: skip
    """A batch as vLLM's runner hands it to ``build``: real requests first, then padding
    requests with query length 0 (uniform-batch FULL-graph padding)."""
    qo = [qo] * len(kv_lens) if isinstance(qo, int) else list(qo)
    n = max(padded_reqs or 0, len(kv_lens))
    qo = qo + [0] * (n - len(kv_lens))
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
        num_actual_tokens=sum(qo),
        max_query_len=max(qo),
        max_seq_len=max(kv_lens),
        block_table_tensor=torch.zeros(n, 8, dtype=torch.int32),
        slot_mapping=torch.zeros(sum(qo), dtype=torch.int64),
        seq_lens_cpu_upper_bound=torch.tensor(seq, dtype=torch.int32) if upper_bound else None,
    )
