# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · What if: split collapse, capture sizes and a CI gate, before running anything
#
# Three questions answered on the CPU, with nothing run on a GPU:
#
# 1. **Where will S collapse?** `mlaprof.whatif.compute` models, for every batch size x KV length
#    x speculative tokens x model preset x split policy x device, the KV-split count S with the
#    padding bug (min over all rows, padding pinned to qlen), with the fix (active rows) and as
#    frozen into a FULL graph by the capture-time dummy run, plus occupancy, padding rows and a
#    predicted verify time (a cost model fitted to H200 measurements; AMD derived, labelled).
# 2. **Which capture sizes?** `mlaprof.whatif.plan.make_plan` proposes `cudagraph_capture_sizes`
#    for a batch-size distribution within a memory budget.
# 3. **Did this change add a sync?** `mlaprof.gate` runs a callable in a simulated captured region.
#
# The same computations back `mlaprof whatif`, `mlaprof plan-capture` and `mlaprof check`.

# %%
from IPython.display import display

from mlaprof.figures.whatif import whatif_heatmap
from mlaprof.whatif import GridSpec, compute

# %% [markdown]
# ## The seed: 8 real + 7 padding rows, qlen 4, aiter gluon v0.1.19
# A batch of 8 requests padded to a 60-token capture (15 rows). The pre-fix builder's
# `min_kv_seq_len` is 4 (a padding row), so v0.1.19 launches `ceil(4/64) = 1` split instead of
# `256 // (15*4) = 4`; v0.1.20 no longer reads `min_kv_seq_len`.

# %%
seed = compute(
    GridSpec(
        batches=[8],
        contexts=[1088],
        specs=[3],
        models=["kimi-k2-tp8"],
        policies=["aiter-gluon-v0.1.19", "aiter-gluon-v0.1.20"],
        devices=["mi355x"],
        capture_sizes=[60],
    )
)
cols = ["policy", "batch", "rows", "padding_rows", "S_bug", "S_fix", "S_frozen", "slowdown_bug"]
display(seed.cells[cols])
v0119 = seed.cells.set_index("policy").loc["aiter-gluon-v0.1.19"]
if (v0119.S_bug, v0119.S_fix) != (1, 4):
    raise RuntimeError("the seed's collapse must read S 1 (bug) vs 4 (fix)")
print(seed.provenance["time"]["mi355x"])

# %% [markdown]
# ## A grid: three policies on two devices, batch 1-64 x KV 1k-128k
# Heatmaps of one slice: S with the bug, with the fix, frozen at capture, and the predicted
# slowdown of the bug against the fix (`*` marks batches that got padding rows).

# %%
grid = compute(
    GridSpec(
        policies=["aiter-gluon-v0.1.19", "aiter-gluon-v0.1.20", "aiter-asm"],
        devices=["mi355x", "h200"],
    )
)
print(f"{len(grid):,} cells; collapsed with the bug: {grid.count('collapsed')}, "
      f"frozen at capture: {grid.count('frozen_collapsed')}")  # fmt: skip
fig = whatif_heatmap(grid, policy="aiter-gluon-v0.1.19", device="mi355x")
display(fig)

# %% [markdown]
# ## Frozen at capture
# Even with the fix, a graph captured by vLLM's dummy run (every row's KV = qlen) replays the S it
# was captured with (vLLM #51119). The same slice, slowdown of the frozen S against the fix:

# %%
display(whatif_heatmap(grid, policy="aiter-gluon-v0.1.19", device="mi355x", slowdown="frozen"))

# %% [markdown]
# ## The worst cells of the whole grid

# %%
worst = grid.worst(10)
display(worst[["policy", "device", "batch", "context", "rows", "padding_rows", "S_bug", "S_fix",
               "S_frozen", "t_fix_us", "slowdown_bug", "slowdown_frozen"]])  # fmt: skip

# %% [markdown]
# ## Capture sizes for a batch-size distribution
# Decode steps seen per batch size (here a small example; `mlaprof plan-capture --from-run` reads
# a recorded run, `--counts` a file). Memory per graph is a user model here, and labelled so.

# %%
from mlaprof.capture_sizes import DEFAULT_RULE, default_capture_sizes  # noqa: E402
from mlaprof.whatif.plan import make_plan  # noqa: E402
from mlaprof.whatif.plan_sources import memory_from_spec  # noqa: E402

counts = {1: 500, 2: 300, 3: 200, 8: 50, 20: 10, 33: 5}
default = default_capture_sizes(DEFAULT_RULE, 64, 3)  # the list vLLM 0.32 captures
plan = make_plan(
    counts, 4, 64, default, DEFAULT_RULE, "example counts", memory_from_spec("20+0.25")
)
import pandas as pd  # noqa: E402

display(
    pd.DataFrame({"default": plan.default.to_dict(), "proposed": plan.proposed.to_dict()}).drop(
        "sizes"
    )
)
print("--compilation-config '" + plan.compilation_config() + "'")

# %% [markdown]
# ## The CI gate: the pre-fix flattened path vs the native 4-D path

# %%
import torch  # noqa: E402

from mlaprof.gate import run_gated  # noqa: E402
from mlaprof.gate.verify_case import legacy_flat, native, setup  # noqa: E402

batch = setup(torch.zeros(3, 4, 16))  # the builder side, outside the region
for fn in (legacy_flat, native):
    print(run_gated(fn, layers=1, **batch).format(), end="\n\n")
