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
# # 02 · Split collapse: the bug vs the fix across batch sizes, context lengths, policies, devices
#
# Under FULL graphs a verify batch is padded to a capture size; padding requests have query
# length 0 and their KV length pinned to `qlen`. The pre-fix builder took `min_kv_seq_len` over
# **all** rows, so one padding row made it `qlen` and the split heuristics that use it launched
# one KV split (vLLM PR #51171: "17 -> 1"). The fix takes the minimum over **active** rows.
#
# No run needed: this notebook calls the metadata builder and the split policies directly,
# exactly as `mlaprof run` does for each step.

# %%
import pandas as pd
import plotly.graph_objects as go
from IPython.display import display
from plotly.subplots import make_subplots

from mlaprof.capture_sizes import capture_plan, rule_for
from mlaprof.metadata import batch_shape, build_metadata
from mlaprof.scenario import DEVICES
from mlaprof.splits.policies import POLICIES, SplitInput, applicable, is_collapsed

HEADS = 8  # Kimi-K2 at TP8: vLLM sends this verify to mla_gluon (16 heads take the ASM decode)
SPEC = 3  # speculative tokens: qlen = 4
QLEN = 1 + SPEC
# the FULL decode graphs of vLLM 0.32.0, the release with the fix, on a GPU (model runner V2;
# 0.34 keys decode graphs by request count instead: `rule_for("0.34.0")`, the default, gives its)
PLAN = capture_plan(rule_for("0.32.0"), max_num_seqs=256, num_spec=SPEC)
SIZES = [n * QLEN for n in PLAN.decode]
BATCHES = list(range(1, 17))
CONTEXTS = [1088, 4096, 32768, 131072]
print("FULL capture sizes (tokens):", SIZES[:12], "...")

# %% [markdown]
# ## One table: every (batch, context, device, policy), S with the bug and with the fix
# `min_kv_seq_len_all` is the pre-fix value, `min_kv_seq_len_active` the fix; the dummy run that
# captures a FULL graph has KV length `qlen`, which is what a graph captured with a
# `min_kv`-driven policy freezes.

# %%
rows = []
for ctx in CONTEXTS:
    for b in BATCHES:
        shape = batch_shape([ctx] * b, QLEN, "FULL", PLAN)
        meta = build_metadata(shape, page_size=64, shuffle_pages=False)
        for dev in ("mi355x", "mi300x", "h200"):
            units = DEVICES[dev].units
            for name, pol in POLICIES.items():
                why = applicable(name, HEADS, meta.num_reqs, QLEN)
                if why:
                    continue

                def s_for(min_kv: int, pol=pol, meta=meta, units=units) -> int:
                    return pol.splits(
                        SplitInput(
                            num_reqs=meta.num_reqs,
                            qlen=QLEN,
                            heads=HEADS,
                            min_kv_seq_len=min_kv,
                            max_seq_len=meta.max_seq_len,
                            total_kv=meta.total_kv_real,
                            units=units,
                        )
                    )

                try:
                    bug, fix = s_for(meta.min_kv_seq_len_all), s_for(meta.min_kv_seq_len_active)
                except Exception as e:  # a kernel-side assert (e.g. bh64's min_kv bound)
                    rows.append(
                        {"policy": name, "device": dev, "batch": b, "context": ctx, "note": str(e)}
                    )
                    continue
                programs = pol.programs(meta.num_real_reqs, QLEN, HEADS, 1)
                rows.append(
                    {
                        "policy": name,
                        "device": dev,
                        "batch": b,
                        "context": ctx,
                        "rows": meta.num_reqs,
                        "padding_rows": meta.num_padding,
                        "S_bug": bug,
                        "S_fix": fix,
                        "occupancy_bug": min(1.0, programs * bug / units),
                        "occupancy_fix": min(1.0, programs * fix / units),
                    }
                )
df = pd.DataFrame(rows)
df["collapsed"] = is_collapsed(df["S_bug"], df["S_fix"])  # the rule every view uses
df.head()

# %% [markdown]
# ## Which policies collapse?
# Only policies whose S depends on `min_kv_seq_len` can be collapsed by padding rows.

# %%
summary = (
    df.dropna(subset=["S_bug"])
    .groupby("policy")
    .agg(cases=("collapsed", "size"), collapsed=("collapsed", "sum"))
    .assign(uses_min_kv=lambda t: [POLICIES[p].uses_min_kv for p in t.index])
)
display(summary)

# %%
if summary.loc["aiter-gluon-v0.1.20", "collapsed"] != 0:
    raise RuntimeError("v0.1.20 ignores min_kv_seq_len: it cannot collapse")
if summary.loc["aiter-gluon-v0.1.19", "collapsed"] == 0:
    raise RuntimeError("v0.1.19 must collapse when padding rows pin min_kv to qlen")

# %% [markdown]
# ## aiter gluon v0.1.19 on MI355X: S by batch size and context length
# Left the bug, right the fix. Batches whose tokens are not a capture size get padding rows
# (marked `*`), and there the bug's S falls to 1 whatever the context.

# %%
sel = df[(df["policy"] == "aiter-gluon-v0.1.19") & (df["device"] == "mi355x")]
fig = make_subplots(
    rows=1,
    cols=2,
    subplot_titles=("bug: min over all rows", "fix: min over active rows"),
    horizontal_spacing=0.08,
)
for col, key in ((1, "S_bug"), (2, "S_fix")):
    grid = sel.pivot(index="context", columns="batch", values=key)
    pad = sel.pivot(index="context", columns="batch", values="padding_rows")
    text = [
        [f"{int(v)}{'*' if p else ''}" for v, p in zip(r1, r2, strict=True)]
        for r1, r2 in zip(grid.values, pad.values, strict=True)
    ]
    fig.add_trace(
        go.Heatmap(
            z=grid.values,
            x=[str(b) for b in grid.columns],
            y=[f"{c:,}" for c in grid.index],
            text=text,
            texttemplate="%{text}",
            coloraxis="coloraxis",
            hovertemplate="batch %{x}, context %{y}: S = %{z}<extra></extra>",
        ),
        row=1,
        col=col,
    )
fig.update_layout(
    title="KV splits S, aiter-gluon-v0.1.19 on mi355x (256 CUs), 8 heads, qlen 4 "
    "(* = batch padded with padding rows)",
    coloraxis={"colorscale": "Viridis", "colorbar": {"title": "S (count)"}},
    height=420,
    template="plotly_white",
)
fig.update_xaxes(title_text="real requests in the batch")
fig.update_yaxes(title_text="KV length per request (tokens)", type="category")
display(fig)

# %% [markdown]
# ## Every policy at one context length
# One panel per policy: red dotted the bug, green solid the fix. Where the two lines coincide
# the policy does not look at `min_kv_seq_len`, and padding rows cannot collapse it.

# %%
ctx = 4096
one = df[(df["device"] == "mi355x") & (df["context"] == ctx)].dropna(subset=["S_bug"])
pols = list(dict.fromkeys(one["policy"]))
ncol = 4
fig = make_subplots(
    rows=-(-len(pols) // ncol),
    cols=ncol,
    subplot_titles=pols,
    shared_yaxes=True,
    vertical_spacing=0.14,
    horizontal_spacing=0.03,
)
for i, name in enumerate(pols):
    g = one[one["policy"] == name]
    r, c = divmod(i, ncol)
    for key, label, style in (
        ("S_bug", "bug: min over all rows", {"color": "#d62728", "dash": "dot"}),
        ("S_fix", "fix: min over active rows", {"color": "#2ca02c"}),
    ):
        fig.add_trace(
            go.Scatter(
                x=g["batch"],
                y=g[key],
                name=label,
                line=style,
                mode="lines+markers",
                marker={"size": 4},
                showlegend=i == 0,
                legendgroup=key,
            ),
            row=r + 1,
            col=c + 1,
        )
fig.update_layout(
    title=f"KV splits per policy on mi355x (256 CUs) at {ctx:,} KV tokens per request",
    template="plotly_white",
    height=560,
    legend={"orientation": "h", "y": 1.12, "x": 0},
    margin={"t": 110},
)
fig.update_xaxes(dtick=4)
fig.update_xaxes(title_text="real requests in the batch", row=-(-len(pols) // ncol))
fig.update_yaxes(type="log", tickvals=[1, 2, 4, 8, 16, 32, 64, 128, 256], range=[-0.15, 2.5])
fig.update_yaxes(title_text="KV splits S (count, log scale)", col=1)
display(fig)

# %% [markdown]
# ## Occupancy per device (aiter gluon v0.1.19, batches that get padding rows)
# The same S fills a smaller share of a device with more compute units (MI300X: 304 CUs).

# %%
occ = (
    df[(df["policy"] == "aiter-gluon-v0.1.19") & (df["padding_rows"] > 0)]
    .groupby("device")[["occupancy_bug", "occupancy_fix"]]
    .median()
    .mul(100)
)
fig = go.Figure(
    [
        go.Bar(
            x=occ.index,
            y=occ["occupancy_bug"],
            name="bug (min over all rows)",
            marker_color="#d62728",
            text=occ["occupancy_bug"].round(1),
            textposition="outside",
        ),
        go.Bar(
            x=occ.index,
            y=occ["occupancy_fix"],
            name="fix (min over active rows)",
            marker_color="#2ca02c",
            text=occ["occupancy_fix"].round(1),
            textposition="outside",
        ),
    ]
)
fig.update_layout(
    title="Occupancy with the bug vs the fix, median over padded batches",
    barmode="group",
    template="plotly_white",
    height=420,
)
fig.update_xaxes(title_text="device preset")
fig.update_yaxes(title_text="compute units busy with real work (%)", range=[0, 110])
display(fig)
