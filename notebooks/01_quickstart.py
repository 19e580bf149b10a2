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
# # 01 · Quickstart: load a run, read its findings, look at its timeline
#
# A *run* is one folder under `traces/` written by `mlaprof run` (or imported from rocprofv3 /
# Kineto). `mlaprof.load(path)` opens it; every table is a pandas DataFrame.
#
# This notebook uses a shipped run of the pre-fix verify path (`legacy-flat` backend) from
# `traces/demo/` when there is one; otherwise it records it, and its fixed twin that notebook 05
# compares with, on this machine's CPU (a few seconds each, once).

# %%
import pandas as pd
from IPython.display import display

import mlaprof
from mlaprof import figures
from mlaprof.notebook_runs import bug_and_fix

pd.set_option("display.max_colwidth", 120)

run_dir, _ = bug_and_fix()  # the pre-fix run (and its fixed twin, used by notebook 05)
run = mlaprof.load(run_dir)
display(run)

# %% [markdown]
# ## What was recorded
# `run.meta` is the run's `run.json` (scenario, device, versions, git revision); the tables are
# `run.steps`, `run.layers`, `run.syncs`, `run.splits`, `run.padding`, `run.memory`,
# `run.captures`, `run.kernels`, ... (times in ns, sizes in bytes, one `rank` column).

# %%
sc = run.meta.get("scenario", {})
print(f"backend {run.meta.get('backend')} on {run.meta.get('device')}, model {sc.get('model')}")
print(f"qlen {1 + sc.get('num_speculative_tokens', 0)}, KV lengths {sc.get('kv_lens')}")
print({t: run.count(t) for t in ("steps", "layers", "syncs", "splits", "padding", "kernels")})
run.steps.head()

# %% [markdown]
# ## Findings
# `mlaprof.build_summary(run)` answers the questions of the design (syncs in the captured
# region, split collapse, padding waste, capture failures and memory, FULL vs fallback) with
# evidence and a fix; it is built once, and the findings and every figure below draw on it.

# %%
summary = mlaprof.build_summary(run)
findings = summary.findings
table = pd.DataFrame([f.to_dict() for f in findings])
table[["severity", "kind", "title", "evidence", "fix"]]

# %%
if not any(f.kind == "sync" for f in findings):
    raise RuntimeError("the legacy path must show its per-layer syncs")

# %% [markdown]
# ## Where the syncs are
# One row per device->host sync or data-dependent allocation, with the op and the source line
# that made it: each of them aborts CUDA/HIP graph capture.

# %%
run.syncs.groupby(["op", "location"]).size().rename("count").reset_index()

# %% [markdown]
# ## Timeline
# Steps, layers (red: layers with host syncs) and kernels on one microsecond axis. Hover a bar
# for its numbers; pick other steps with `steps=[...]`.

# %%
figures.step_timeline(summary)

# %%
figures.time_breakdown(summary, by="layer")

# %% [markdown]
# ## KV splits used vs deserved
# The legacy path computes `min_kv_seq_len` over *all* rows; padding rows pin it to `qlen`, so
# the split heuristic launches far fewer KV splits than the real rows deserve.

# %%
figures.splits_used_vs_deserved(summary, by="layer")

# %%
figures.splits_used_vs_deserved(summary, by="policy")
