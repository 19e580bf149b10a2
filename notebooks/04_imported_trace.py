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
# # 04 · Analysing an imported rocprofv3 trace
#
# `mlaprof import` (and `mlaprof.importers`) turns rocprofv3 output (CSV of ROCm 6.3 or 7.x,
# JSON, rocpd SQLite) and Kineto JSON traces into a run folder, so the same tables and figures
# work on traces other tools recorded. Here: a real rocprofv3 decode trace (kernel trace, HIP API
# trace and counters) shipped with the repository under `tests/data/rocprof/`.
# For a Kineto trace use `mlaprof.importers.kineto.import_kineto(path, traces)` the same way.

# %%
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

import mlaprof
from mlaprof import figures
from mlaprof.analysis.capture import trace_capture_text
from mlaprof.analysis.syncs import trace_sync_text
from mlaprof.figures._common import kernel_label
from mlaprof.importers.rocprof import import_rocprof


def fixtures() -> Path:
    env = os.environ.get("MLAPROF_ROCPROF_FIXTURES")
    here = Path.cwd().resolve()
    for cand in ([Path(env)] if env else []) + [
        d / sub
        for d in (here, *here.parents)
        for sub in ("tests/data/rocprof", "shared/fixtures/rocprof")
    ]:
        if cand.is_dir():
            return cand
    raise FileNotFoundError("no tests/data/rocprof here or above: set MLAPROF_ROCPROF_FIXTURES")


work = Path(tempfile.mkdtemp(prefix="mlaprof-nb04-"))
trace_dir = work / "decode"
trace_dir.mkdir()
for f in fixtures().glob("rocprof-unified-viewer__decode_*.csv"):
    shutil.copy(f, trace_dir / f.name)  # one profiling session: its three CSV files
run_dir, imported = import_rocprof(trace_dir, work / "traces", name="decode")
run = mlaprof.load(run_dir)
print(imported.rows, imported.notes)
summary = mlaprof.build_summary(run)  # the analysis, once: every figure below draws from it

# %% [markdown]
# ## Where the GPU time goes, per kernel
# Kernel names are demangled C++; `kernel_label` drops `void` and the argument list.

# %%
k = run.kernels.assign(
    kernel=lambda t: t["name"].map(kernel_label),
    dur_us=lambda t: (t["end_ns"] - t["start_ns"]) / 1e3,
)
top = (
    k.groupby("kernel")["dur_us"]
    .agg(calls="size", total_us="sum", mean_us="mean")
    .sort_values("total_us", ascending=False)
)
top["share_%"] = 100 * top["total_us"] / top["total_us"].sum()
top.head(10).round(2)

# %% [markdown]
# The same as a figure (the one the HTML report shows):

# %%
figures.time_breakdown(summary, by="kernel")

# %% [markdown]
# ## Timeline of the kernels
# No steps or layers in a plain rocprofv3 trace: one lane per stream, the eight kernels with the
# most GPU time have their own colour.

# %%
figures.step_timeline(summary)

# %% [markdown]
# ## Host side: HIP API calls
# The API table keeps rocprofv3's field names; launch calls correlate to kernels through
# `correlation`.

# %%
api = run.api.assign(dur_us=lambda t: (t["end_ns"] - t["start_ns"]) / 1e3)
api.groupby("function")["dur_us"].agg(calls="size", total_us="sum").sort_values(
    "total_us", ascending=False
).head(8).round(1)

# %%
launch_to_kernel = api.merge(run.kernels, on="correlation", suffixes=("_api", "_kernel"))
lag_us = (launch_to_kernel["start_ns_kernel"] - launch_to_kernel["start_ns_api"]) / 1e3
pd.Series(lag_us.describe().round(1), name="launch -> kernel start (µs)")

# %% [markdown]
# ## Counters
# rocprofv3 counter collection lands in the `counters` table (one row per dispatch and counter).

# %%
run.counters.groupby("name")["value"].describe().round(2)

# %% [markdown]
# ## A Kineto trace of FULL-graph replays (PyTorch profiler, NVIDIA H200)
# `tests/data/kineto_graph_replay.json.gz`: 3 replays of a 4-layer FULL graph of mlaprof's Triton
# verify kernel. Kernels inside a graph replay all correlate to its `cudaGraphLaunch`; the
# importer groups them into steps, assigns layers, and reads the KV-split count S from the grid
# of the split-KV kernel (there is no metadata in a profiler trace).

# %%
from mlaprof.importers.kineto import import_kineto  # noqa: E402

here = Path.cwd().resolve()
kineto = next(
    d / "tests" / "data" / "kineto_graph_replay.json.gz"
    for d in (here, *here.parents)
    if (d / "tests" / "data" / "kineto_graph_replay.json.gz").is_file()
)
kin_dir, kin_imported = import_kineto(kineto, work / "traces")
kin = mlaprof.load(kin_dir)
print(kin.meta.get("device"), kin_imported.rows, f"replays {kin_imported.replays}")
kin_summary = mlaprof.build_summary(kin)
kin.kernels[["step", "layer", "name", "grid_x", "grid_y", "grid_z", "splits"]].head(4)

# %%
figures.step_timeline(kin_summary)

# %%
figures.time_breakdown(kin_summary, by="kernel")

# %% [markdown]
# ## An AITER MLA trace: which kernel ran, with which S, and can the trace be trusted
# `tests/data/aiter/` holds rocprofv3 traces made from the real AITER kernel names and grids
# (`tests/data/README.md` gives the arithmetic). The gluon bug trace: 15 rows (8 real + 7
# padding) at qlen 4 under FULL graphs. The analysis reads S from grid axis y of `_mla_gluon`,
# compares it with the AITER formula for those rows, and gives capture and sync verdicts only
# where the trace holds evidence; `mlaprof report` prints the same object.

# %%
aiter = fixtures().parent / "aiter"
verdicts = {}
for name in ("gluon_v0119_bug", "gluon_v0119_fix"):
    rd, _ = import_rocprof(aiter / name, work / "traces", name=name)
    with mlaprof.load(rd) as r:
        s = mlaprof.build_summary(r)  # one typed summary per run
    verdicts[name] = s
    # the capture and sync line in the analysis' words, as `mlaprof report` prints it
    capture, syncs = trace_capture_text(s.trace.capture), trace_sync_text(s.trace.syncs, s.ranks)
    print(name, "| capture:", capture, "| syncs:", syncs)
    for p in s.trace.paths:
        print("  ", p.path, p.variant, "S", p.S, "rows", p.rows, "qlen", p.qlen)
    for f in s.findings:
        print("  ", f.severity.upper(), f.title)

# %% [markdown]
# Where the time goes inside the bug trace's graph replays: per layer (the window from the end of
# the layer before to the end of its MLA kernels) and per kernel.

# %%
from dataclasses import asdict  # noqa: E402

rt = verdicts["gluon_v0119_bug"].trace.replay_time
pd.DataFrame([asdict(x) for x in rt.layers])

# %% [markdown]
# Can the trace be trusted? The same trace with two replays that lost every third dispatch (as
# ROCm 7.2.0-7.2.1 did) and a graph launch with no kernel: the run and its findings say
# `unreliable`, with the counts.

# %%
rd, _ = import_rocprof(aiter / "gluon_v0119_fix_dropped", work / "traces", name="dropped")
with mlaprof.load(rd) as r:
    trust = mlaprof.build_summary(r).trace.trust
print(trust.verdict, trust.counts)
