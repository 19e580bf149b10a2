"""The names the vLLM plugin writes into a run (:mod:`mlaprof.integrations.vllm_recorder` and
:mod:`mlaprof.integrations.vllm_plugin` write them, the analysis reads them): a module of names
only, so a report reads the plugin's vocabulary without loading the plugin, its recorder or its
patch table."""

# the EngineCore's database role (rank<N>.scheduler.db) and the events the recorder writes
SCHEDULER_ROLE = "scheduler"
STEP_EVENT = "engine-step"
ACCEPT_EVENT = "spec-accept"
GRAPH_CAPTURE_EVENT = "cudagraph-capture"  # one per CudaGraphManager.capture (model runner V2)
# the engine's cudagraph mode as asked for and as vLLM resolved it (its data: requested, resolved)
CG_MODE_EVENT = "cudagraph-mode"
DRAFT_EAGER_EVENT = "drafter-graph-eager"  # a draft decode FULL graph missing: ran eagerly

# the meta key of the rule that named a database's rank, and of its engine's layout
RANK_SOURCE_KEY = "rank_source"
ENGINE_KEY = "engine_parallel"
# the rules: this process's own distributed rank, its engine's data-parallel layout, its own
# distributed rank offset by its independent engine's data_parallel_index (a dense model's DP
# engines, which vLLM does not offset: mlaprof numbers them), the environment (the variable's
# own name, RANK or LOCAL_RANK), or none (0)
FROM_TORCH = "torch.distributed"
FROM_VLLM_WORLD = "vllm-world-group"
FROM_ENGINE = "engine-data-parallel-rank"
FROM_ENGINE_INDEX = "engine-data-parallel-index"
FROM_DEFAULT = "default"
