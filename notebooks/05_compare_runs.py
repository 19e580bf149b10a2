# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Did my fix help? Two runs side by side
#
# Run A is the pre-fix verify path (`legacy-flat`: per-layer syncs, `min_kv_seq_len` over all
# rows); run B the fix (native 4-D entry, `min_kv_seq_len` over active rows). Shipped runs from
# `traces/demo/` are used when present, otherwise both are recorded on this CPU once.
# `mlaprof report A --compare B --html report.html` writes the same comparison to one file.

# %%
from IPython.display import display

import mlaprof
from mlaprof import figures
from mlaprof.analysis.diff import diff as summary_diff
from mlaprof.notebook_runs import bug_and_fix

a, b = (mlaprof.load(p) for p in bug_and_fix())
# one summary per run, built once: the table, the diff and every figure below draw from them
sa, sb = mlaprof.build_summary(a), mlaprof.build_summary(b)
print("A:", sa.run, sa.backend, sa.scenario.min_kv_mode)
print("B:", sb.run, sb.backend, sb.scenario.min_kv_mode)

# %% [markdown]
# ## What changed, and by how much
# One row per metric both runs have; `verdict` is from B's point of view.

# %%
d = summary_diff(sa, sb)
diff = figures.diff_table(d)
display(diff)

# %%
figures.run_diff(d)

# %% [markdown]
# The fix removed every sync: counted where a run's sync probe watched its steps, and where it
# did not (the row's B is empty, "not checked"), shown by its FULL graph capturing, which a sync
# inside the captured region would have failed.

# %%
syncs = diff.set_index("metric").loc["sync / allocation sites in the region"]
b_clean = syncs["b"] == 0 if syncs["b"] == syncs["b"] else sb.capture.status == "captured"
if not (syncs["a"] > 0 and b_clean):
    raise RuntimeError("the fix must remove every sync from the verify path")
print(
    "B:", "0 sync sites" if syncs["b"] == syncs["b"] else f"not checked; capture {sb.capture.text}"
)

# %% [markdown]
# ## KV splits, before and after
# Same policy, same requests: the fix gives the real rows the splits they deserve.

# %%
figures.splits_used_vs_deserved(sa, by="step")

# %%
figures.splits_used_vs_deserved(sb, by="step")

# %%
figures.occupancy(sb)

# %% [markdown]
# ## Time per step
# On the CPU these are wall-clock times of the reference path (the sync watch makes step 0 of
# each run slower); GPU runs time FULL-graph replays and fallbacks.

# %%
figures.full_vs_fallback(sa)

# %%
figures.full_vs_fallback(sb)
