# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Capture: does the verify path capture, and what does each captured graph cost?
#
# Capture memory is measured only on a GPU (`mlaprof run --device cuda`): per capture size, the
# graph's private memory pool, the caching allocator's reserved delta and the driver's
# free-memory delta (what vLLM logs as "took X GiB"). This notebook uses a shipped GPU run from
# `traces/demo/` when there is one. On a CPU-only machine it shows what the CPU can tell:
# which capture would fail and why, and which capture sizes a FULL configuration pads to.

# %%
import pandas as pd
from IPython.display import display

import mlaprof
from mlaprof import figures
from mlaprof.metadata import batch_shape
from mlaprof.notebook_runs import bug_and_fix
from mlaprof.scenario import Scenario

legacy, fixed = (mlaprof.load(p) for p in bug_and_fix())
for r in (legacy, fixed):
    print(
        f"{r.name}: {r.meta.get('backend')} on {r.meta.get('device')}, {r.count('memory')} memory rows"
    )

# %% [markdown]
# ## Capture outcome
# One row per capture attempt. On the CPU the status is a prediction (`predicted-fail`) from the
# syncs the checker saw in the region; on a GPU it is a real capture in a child process.

# %%
pd.concat(
    [legacy.captures.assign(run=legacy.name), fixed.captures.assign(run=fixed.name)],
    ignore_index=True,
)[["run", "capture_size", "graph_mode", "status", "fallback", "op", "layer", "location"]]

# %% [markdown]
# ## Capture memory per capture size
# Three views that disagree in practice; the title gives the total in the driver's view.

# %%
# the fixed run captures its FULL graph; the pre-fix one fails, so it has nothing to measure
memory_run = fixed if fixed.count("memory") else legacy
summaries = {r.name: mlaprof.build_summary(r) for r in (legacy, fixed)}  # once per run
figures.capture_memory(summaries[memory_run.name])

# %%
figures.full_vs_fallback(summaries[legacy.name])

# %% [markdown]
# ## The capture sizes a FULL configuration captures
# vLLM 0.32 on a GPU (its default model runner V2) captures a FULL decode graph per listed size
# rounded up to `qlen`, within `qlen x max_num_seqs`; a batch of `n` requests runs in the smallest
# one that holds `n * qlen` tokens, the rest are padding rows. Each size is one more graph, and one
# more memory pool, to pay for.

# %%
sc = Scenario(max_num_seqs=32, vllm_version="0.32.0")  # 0.34 keys decode graphs by request count
plan = sc.capture_plan()  # the scenario's device (mi355x): model runner V2
sizes = [n * sc.qlen for n in plan.decode]
rows = []
for n in range(1, sc.max_num_seqs + 1):
    shape = batch_shape([2048] * n, sc.qlen, "FULL", plan)
    rows.append(
        {"requests": n, "capture_size": shape.capture_size, "padding_rows": shape.num_padding}
    )
per_size = (
    pd.DataFrame(rows)
    .groupby("capture_size")
    .agg(batches=("requests", "size"), worst_padding_rows=("padding_rows", "max"))
)
print(f"{len(sizes)} FULL graphs for max_num_seqs={sc.max_num_seqs}, qlen={sc.qlen}: {sizes}")
display(per_size)
