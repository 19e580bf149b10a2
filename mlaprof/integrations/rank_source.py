"""Which rule named a vLLM process's database rank, as the plugin records it in the database's
meta (:mod:`mlaprof.integrations.vllm_plugin` writes it, the analysis reads it): a module of
names only, so the analysis reads the vocabulary without loading the plugin."""

# the meta key of the rule that named a scheduler database's rank, and of its engine's layout
RANK_SOURCE_KEY = "rank_source"
ENGINE_KEY = "engine_parallel"
# the rules: this process's own distributed rank, its engine's data-parallel layout, the
# environment (the variable's own name, RANK or LOCAL_RANK), or none (0)
FROM_TORCH = "torch.distributed"
FROM_VLLM_WORLD = "vllm-world-group"
FROM_ENGINE = "engine-data-parallel-rank"
FROM_DEFAULT = "default"
