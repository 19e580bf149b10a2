"""The what-if grid: for every (batch, KV length, speculative tokens, model preset, policy,
device) cell, the KV-split count S with the padding bug, with the fix and as frozen at capture,
the occupancy each gives, the padding rows, and a predicted verify time (``costmodel``).

Nothing runs: each cell is the metadata the builder would produce for a batch of ``batch`` real
requests of ``context`` KV tokens each, padded as vLLM pads a FULL uniform decode batch
(:func:`mlaprof.metadata.batch_shape`), fed to the split policies of ``POLICIES`` through their
numpy twins (:mod:`.vector`). ``tests/unit/test_whatif.py`` checks random cells against the scalar
path ``build_metadata`` + ``step_splits`` that ``mlaprof run`` records.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlaprof.capture_sizes import (
    DEFAULT_MODE,
    SIZE_RULES,
    CapturePlan,
    ExplicitSizes,
    capture_plan,
    check_batched_tokens,
    dispatch_of,
    explicit_sizes,
    model_runner,
    piecewise_plan,
    rule_for,
)
from mlaprof.errors import MlaprofError
from mlaprof.scenario import DEVICES, GRAPH_MODES, MODELS, Scenario
from mlaprof.splits import releases
from mlaprof.splits.policies import (
    BUILT_FROM_MAX_MODEL_LEN,
    POLICIES,
    SplitInput,
    applicable,
    cdiv,
    dummy_run_input,
    host_fallback_note,
    is_collapsed,
    over_split,
)
from mlaprof.splits.releases import MODELLED, aiter_rule
from mlaprof.splits.routing import DEFAULT_VERSION, VERSIONS, policy_fits_route
from mlaprof.whatif import vector
from mlaprof.whatif.costmodel import KV_BYTES_PER_TOKEN, cost_model

MAX_POINTS = 1_000_000  # about 0.3 GB of columns
RELEASE_GLUON = {policy for _, policy in MODELLED.values()}  # the released tags' gluon rules


def _policy_source(name: str) -> str:
    """The policy's provenance (with "(UNVERIFIED)" where its module marks it so)."""
    p = POLICIES[name]
    return str(getattr(p, "provenance", p.source))


def _default(name: str) -> Any:
    return getattr(Scenario(), name)


@dataclass
class GridSpec:
    """The axes of the grid; defaults follow the default scenario (model, spec, policy, target)."""

    batches: list[int] = field(default_factory=lambda: list(range(1, 65)))
    contexts: list[int] = field(
        default_factory=lambda: [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    )
    specs: list[int] = field(default_factory=lambda: [_default("num_speculative_tokens")])
    models: list[str] = field(default_factory=lambda: [_default("model")])
    policies: list[str] = field(default_factory=lambda: [_default("policy")])
    devices: list[str] = field(default_factory=lambda: [_default("target")])
    max_num_seqs: int = field(default_factory=lambda: _default("max_num_seqs"))
    max_model_len: int = field(default_factory=lambda: _default("max_model_len"))
    graph_mode: str = "FULL"
    capture_sizes: list[int] | None = None  # an explicit cudagraph_capture_sizes list
    # the capture-size rule (None: the vLLM version's own, capture_sizes.RULE_OF_VERSION)
    size_rule: str | None = None
    vllm_version: str = DEFAULT_VERSION  # whose routing, capture sizes and dispatch
    # vLLM max_num_batched_tokens (None: not limiting): no capture size is larger
    max_num_batched_tokens: int | None = None
    # the AITER release the user's stack runs (None: the policies' own tags); an unmodelled
    # one is shown with the nearest modelled rule and labelled (mlaprof.splits.releases)
    aiter: str | None = None
    # a request-length distribution instead of the contexts axis: each batch size gets `draws`
    # batches whose KV lengths are drawn from kv_mix (weights: kv_weights, default equal)
    kv_mix: list[int] | None = None
    kv_weights: list[float] | None = None
    draws: int = 32
    seed: int = 0

    @property
    def rule(self) -> str:
        return self.size_rule or rule_for(self.vllm_version)

    @property
    def points(self) -> int:
        n = self.draws if self.kv_mix else len(self.contexts)
        for axis in (
            self.batches,
            self.specs,
            self.models,
            self.policies,
            self.devices,
        ):
            n *= len(axis)
        return n

    def validate(self) -> GridSpec:
        for name, known in (("models", MODELS), ("policies", POLICIES), ("devices", DEVICES)):
            for v in getattr(self, name):
                if v not in known:
                    raise MlaprofError(f"unknown {name[:-1]} {v!r}; choose from {', '.join(known)}")
        for name in ("batches", "contexts", "specs", "models", "policies", "devices"):
            if not getattr(self, name):
                raise MlaprofError(f"the grid has no {name}")
        if self.graph_mode not in GRAPH_MODES:
            raise MlaprofError(f"graph mode must be one of {', '.join(GRAPH_MODES)}")
        if self.vllm_version not in VERSIONS:
            raise MlaprofError(
                f"unknown vLLM version {self.vllm_version!r}; choose from {', '.join(VERSIONS)}"
            )
        if self.size_rule is not None and self.size_rule not in SIZE_RULES:
            raise MlaprofError(
                f"unknown capture-size rule {self.size_rule!r}; choose from {', '.join(SIZE_RULES)}"
            )
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < 1:
            raise MlaprofError(
                f"max_num_batched_tokens must be >= 1, got {self.max_num_batched_tokens}"
            )
        if not 1 <= self.max_num_seqs <= 4096:
            raise MlaprofError(f"max_num_seqs must be 1..4096, got {self.max_num_seqs}")
        check_batched_tokens(self.max_num_batched_tokens, self.max_num_seqs)
        if self.aiter is not None:
            rule, runs = aiter_rule(self.aiter), releases.policy_for(self.aiter)
            for pol in self.policies:
                if pol in RELEASE_GLUON and pol != runs:
                    raise MlaprofError(
                        f"--aiter {self.aiter} runs {runs} ({rule.label}); "
                        f"drop policy {pol} or --aiter"
                    )
        if any(not 0 <= s <= 15 for s in self.specs):
            raise MlaprofError(f"speculative tokens must be 0..15, got {self.specs}")
        if any(b < 1 or b > self.max_num_seqs for b in self.batches):
            raise MlaprofError(
                f"batch sizes must be 1..max_num_seqs ({self.max_num_seqs}), got {self.batches}"
            )
        qmax = 1 + max(self.specs)
        if self.kv_mix is not None:
            if not self.kv_mix or any(c < qmax or c > 16_777_216 for c in self.kv_mix):
                raise MlaprofError(
                    f"request KV lengths must be {qmax}..16M tokens (at least qlen), got "
                    f"{sorted(set(self.kv_mix))[:5]}..."
                )
            if self.kv_weights is not None and (
                len(self.kv_weights) != len(self.kv_mix)
                or min(self.kv_weights) < 0
                or sum(self.kv_weights) <= 0
            ):
                raise MlaprofError("kv_weights must be one non-negative weight per KV length")
            if not 1 <= self.draws <= 10_000:
                raise MlaprofError(f"draws must be 1..10000, got {self.draws}")
        elif any(c < qmax or c > 16_777_216 for c in self.contexts):
            raise MlaprofError(
                f"KV lengths must be {qmax}..16M tokens (at least qlen), got {self.contexts}"
            )
        if self.points > MAX_POINTS:
            raise MlaprofError(f"{self.points:,} grid points is more than {MAX_POINTS:,}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class WhatIf:
    """The cells of a grid as numpy columns; ``cells`` is the same as a DataFrame (built on first
    use, so the CLI's table and JSON need no pandas)."""

    def __init__(
        self, spec: GridSpec, columns: dict[str, np.ndarray], provenance: dict[str, Any]
    ) -> None:
        self.spec = spec
        self.columns = columns
        self.provenance = provenance
        self._cells: Any = None

    def __len__(self) -> int:
        return len(self.columns["batch"])

    @property
    def cells(self) -> Any:
        """Every cell as a pandas DataFrame."""
        if self._cells is None:
            import pandas as pd

            self._cells = pd.DataFrame(self.columns)
        return self._cells

    def count(self, flag: str) -> int:
        return int(np.count_nonzero(self.columns[flag]))

    def dispatch_summary(self) -> dict[str, int]:
        """Cells per graph mode vLLM dispatches them to (FULL, PIECEWISE, NONE)."""
        modes, counts = np.unique(self.columns["graph"].astype(str), return_counts=True)
        return {str(m): int(c) for m, c in zip(modes, counts, strict=True)}

    def routes(self) -> list[tuple[str, str, int, str]]:
        """The distinct (model, device, qlen, route) of the grid."""
        c = self.columns
        keys = zip(c["model"].tolist(), c["device"].tolist(), c["qlen"].tolist(),
                   c["route"].tolist(), strict=True)  # fmt: skip
        return sorted(set(keys))

    def worst_index(self, n: int = 15) -> np.ndarray:
        """Cells that lose most to padding rows or to capture: cells whose policy models the path
        vLLM routes them to first, then predicted slowdown where a cost model exists, then the
        S lost (fix over the lower of bug and frozen)."""
        c = self.columns
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.fmax(c["slowdown_bug"], c["slowdown_frozen"])
            low = np.fmin(
                np.where(c["S_bug"] > 0, c["S_bug"], np.nan),
                np.where(c["S_frozen"] > 0, c["S_frozen"], np.nan),
            )
            ratio = c["S_fix"] / low
        key_loss = np.nan_to_num(loss, nan=0.0)
        key_ratio = np.nan_to_num(ratio, nan=0.0)
        misfit = ~c["route_fits"].astype(bool)
        order = np.lexsort((np.arange(len(self)), -key_ratio, -key_loss, misfit))
        # two draws of a --kv-mix batch can be the same batch: one cell in the list, not two
        same = [v for k, v in c.items() if k != "draw"]
        seen: set[tuple[Any, ...]] = set()
        keep: list[int] = []
        for i in order:
            vals = (v[i].item() if hasattr(v[i], "item") else v[i] for v in same)
            key = tuple("nan" if x != x else x for x in vals)  # NaN equals NaN here
            if key not in seen:
                seen.add(key)
                keep.append(int(i))
                if len(keep) == n:
                    break
        return np.asarray(keep, dtype=np.int64)

    def worst_rows(self, n: int = 15) -> list[dict[str, Any]]:
        return self.records(self.worst_index(n))

    def worst(self, n: int = 15) -> Any:
        """:meth:`worst_rows` as a DataFrame."""
        return self.cells.iloc[self.worst_index(n)].reset_index(drop=True)

    def records(self, index: np.ndarray | None = None) -> list[dict[str, Any]]:
        """Cells as JSON-ready dicts (NaN -> None)."""
        cols = {}
        for k, v in self.columns.items():
            v = v if index is None else v[index]
            lst = v.tolist()
            if v.dtype.kind == "f":
                lst = [None if x != x else round(x, 6) for x in lst]
            cols[k] = lst
        keys = list(cols)
        return [dict(zip(keys, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        return {
            "spec": self.spec.to_dict(),
            "provenance": self.provenance,
            "points": len(self),
            "collapsed_cells": self.count("collapsed"),
            "frozen_collapsed_cells": self.count("frozen_collapsed"),
            "over_split_cells": self.count("over_split"),
            "cells": self.records(None if top is None else self.worst_index(top)),
        }


@dataclass
class Shapes:
    """The real requests of every cell: uniform (``lens`` None: ``batch`` requests of ``context``
    KV tokens) or drawn from a distribution (``lens``: [cells, max batch], 0 = no request)."""

    batch: np.ndarray
    context: np.ndarray  # the KV length, or the drawn batch's median
    kv_min: np.ndarray
    kv_max: np.ndarray
    kv_sum: np.ndarray
    draw: np.ndarray
    lens: np.ndarray | None = None

    @classmethod
    def uniform(cls, batches: list[int], contexts: list[int]) -> Shapes:
        bb, cc = np.meshgrid(
            np.asarray(batches, np.int64), np.asarray(contexts, np.int64), indexing="ij"
        )
        b, c = bb.ravel(), cc.ravel()
        return cls(b, c, c, c, b * c, np.zeros(len(b), np.int64))

    @classmethod
    def drawn(cls, spec: GridSpec) -> Shapes:
        """``spec.draws`` batches per batch size, lengths drawn (seeded) from ``spec.kv_mix``;
        each batch size's draws sorted by their shortest request."""
        rng = np.random.default_rng(spec.seed)
        mix = np.asarray(spec.kv_mix, np.int64)
        w = None if spec.kv_weights is None else np.asarray(spec.kv_weights, float)
        p = None if w is None else w / w.sum()
        width = max(spec.batches)
        rows = []
        for b in spec.batches:
            d = rng.choice(mix, size=(spec.draws, b), p=p)
            d = d[np.lexsort((d.max(axis=1), d.min(axis=1)))]
            rows.append(np.pad(d, ((0, 0), (0, width - b))))
        lens = np.concatenate(rows)
        b = np.repeat(np.asarray(spec.batches, np.int64), spec.draws)
        present = lens > 0
        big = np.where(present, lens, np.iinfo(np.int64).max)
        med = np.array([int(np.median(r[r > 0])) for r in lens], np.int64)
        return cls(b, med, big.min(axis=1), lens.max(axis=1), lens.sum(axis=1),
                   np.tile(np.arange(spec.draws), len(spec.batches)), lens)  # fmt: skip

    def programs(self, s: np.ndarray, per: int, cut: tuple[str, int]) -> np.ndarray:
        """Programs of the real rows over the splits that hold KV (S per cell), the KV cut as
        the policy's kernel cuts it (``cut``: :meth:`Policy.partition`)."""
        if self.lens is None:
            return self.batch * per * vector.active_splits(self.context, s, *cut)
        act = vector.active_splits(np.maximum(self.lens, 1), s[:, None], *cut)
        return per * np.where(self.lens > 0, act, 0).sum(axis=1)


def _runners(spec: GridSpec) -> str:
    """Which vLLM model runner each device's plan follows (capture_sizes.model_runner)."""
    if spec.rule != "vllm-0.32":  # the other rules follow one runner each
        return ""
    by: dict[str, list[str]] = {}
    for d in spec.devices:
        by.setdefault(model_runner(spec.rule, d), []).append(d)
    return "; " + ", ".join(f"model runner {r} on {', '.join(ds)}" for r, ds in by.items())


def _group(
    spec: GridSpec,
    shp: Shapes,
    num_spec: int,
    model: str,
    policy: str,
    device: str,
) -> dict[str, Any]:
    """Every column of the cells of one (spec, model, policy, device) group."""
    q = 1 + num_spec
    heads = MODELS[model].heads
    dev = DEVICES[device]
    pol = POLICIES[policy]
    units = dev.units
    b, kmin, kmax, ksum = shp.batch, shp.kv_min, shp.kv_max, shp.kv_sum
    n = len(b)
    mode = np.full(n, spec.graph_mode, dtype=object)
    size = np.zeros(n, np.int64)
    rows = b.copy()
    if spec.graph_mode != "NONE":
        # the version's own dispatch (capture_sizes.CapturePlan.dispatch) over the sizes it
        # keeps: FULL pads the rows to a decode graph's request count; a batch no FULL decode
        # graph takes runs PIECEWISE on its real rows, one above the largest kept size eagerly
        plan = _plan(spec, num_spec, device)
        for r in np.unique(b):
            d = plan.dispatch(int(r))
            m = b == r
            mode[m], size[m], rows[m] = d.mode, d.size or 0, d.rows
    graph = mode == "FULL"
    pad = rows - b
    min_all = np.where(pad > 0, q, kmin)  # padding rows are pinned to qlen (KV >= qlen)
    total_all = ksum + pad * q

    # vLLM hands the ASM kernel its whole kv_indices buffer, as `mlaprof run` models it
    # (mlaprof.recording.scenario_splits): get_meta_param reads that length as total_kv
    buf = spec.max_num_seqs * spec.max_model_len
    kv_fp8 = "fp8" in policy  # an fp8 policy models an fp8 KV cache
    common = dict(kv_buffer_len=buf, kv_fp8=kv_fp8, arch=dev.arch)

    def s_of(x: SplitInput) -> np.ndarray:
        return vector.splits(pol, x)

    # the metadata as built; vLLM 0.34's Triton verify sizes it from max_model_len on every step
    # of a FULL-graph engine, PIECEWISE and eager ones too (rocm_aiter_mla.py L1943-1950)
    built = kmax
    if spec.graph_mode == "FULL" and policy in BUILT_FROM_MAX_MODEL_LEN:
        built = np.full(n, spec.max_model_len)
    x_bug = SplitInput(rows, q, heads, min_all, built, total_all, units, **common)
    s_bug = s_of(x_bug)
    s_fix = s_of(SplitInput(rows, q, heads, kmin, built, total_all, units, **common))
    s_des = s_of(SplitInput(b, q, heads, kmin, kmax, ksum, units, **common))
    # S decided on the device at replay (persistent kernels) is never frozen into a graph;
    # AITER drops the persistent kernel for some shapes (Policy.host_fallback): S on the host
    on_dev = np.broadcast_to(np.asarray(pol.decided_on_device(x_bug), bool), (n,))
    frozen_here = graph & ~on_dev
    dummy = dummy_run_input(policy, rows, q, heads, units, spec.max_model_len, **common)
    s_frz = np.where(frozen_here, s_of(dummy), 0)
    # kernels that cannot run this shape at all (head limits, B == 1 asserts)
    notes = np.full(n, "", dtype=object)
    for r in np.unique(rows):
        why = applicable(policy, heads, int(r), q, dev.arch)
        if why:
            m = rows == r
            notes[m] = f"not runnable: {why}"
            s_bug[m] = s_fix[m] = s_des[m] = s_frz[m] = 0
    refused = (s_bug == 0) | (s_fix == 0) | (frozen_here & (s_frz == 0))
    notes[refused & (notes == "")] = "not runnable: the kernel refuses this shape (an assert)"
    if pol.on_device:
        notes[graph & on_dev & (notes == "")] = (
            "S decided on the device at replay: not frozen into a graph"
        )
        notes[~on_dev & (notes == "")] = host_fallback_note(policy)
    # the path vLLM routes this (model, qlen, device) to, and whether the policy models its kernel
    # an fp8 policy models an fp8 KV cache, which vLLM never sends to gluon verify
    kv_dtype = "fp8" if kv_fp8 else "auto"
    route = Scenario(
        model=model, num_speculative_tokens=num_spec, target=device, kv_cache_dtype=kv_dtype,
        vllm_version=spec.vllm_version,
    ).route()  # fmt: skip
    fits = policy_fits_route(policy, route.path)
    per = (q if pol.per_token else 1) * int(cdiv(heads, pol.head_group))
    cut = pol.partition(heads, kv_fp8)
    real_bytes = ksum * KV_BYTES_PER_TOKEN * per
    model_t = cost_model(device)

    def occ_time(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = s > 0
        programs = shp.programs(s, per, cut)
        occ = np.where(ok, np.minimum(1.0, programs / max(1, units)), np.nan)
        if model_t is None:
            return occ, np.full(n, np.nan)
        return occ, np.where(ok, model_t.seconds(programs, real_bytes) * 1e6, np.nan)

    occ_bug, t_bug = occ_time(s_bug)
    occ_fix, t_fix = occ_time(s_fix)
    occ_frz, t_frz = occ_time(s_frz)
    # over-splitting: the S the cell replays (frozen, else the fix's) against what its rows use
    s_run = np.where(frozen_here, s_frz, s_fix)
    over = (s_run > 0) & over_split(s_run, s_des)
    # the launched programs (stage-1 CTAs and stage-2 partials) it costs: S over S deserved
    with np.errstate(divide="ignore", invalid="ignore"):
        over_x = np.where(over, s_run / np.maximum(1, s_des), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        slow_bug = t_bug / t_fix
        slow_frz = t_frz / t_fix
    return {
        "spec_tokens": np.full(n, num_spec),
        "qlen": np.full(n, q),
        "model": np.full(n, model, dtype=object),
        "heads": np.full(n, heads),
        "policy": np.full(n, policy, dtype=object),
        "device": np.full(n, device, dtype=object),
        "units": np.full(n, units),
        "batch": b,
        "context": shp.context,
        "kv_min": kmin,
        "kv_max": kmax,
        "draw": shp.draw,
        "graph": mode,
        "capture_size": size,
        "rows": rows,
        "padding_rows": pad,
        "padding_share": pad / rows,
        "min_kv_bug": min_all,
        "S_bug": s_bug,
        "S_fix": s_fix,
        "S_frozen": s_frz,
        "S_deserved": s_des,
        "collapsed": (s_bug > 0) & is_collapsed(s_bug, s_fix),
        "over_split": over,
        "over_split_programs_x": over_x,
        "frozen_collapsed": frozen_here & (s_frz > 0) & is_collapsed(s_frz, s_fix),
        "occupancy_bug": occ_bug,
        "occupancy_fix": occ_fix,
        "occupancy_frozen": occ_frz,
        "t_bug_us": t_bug,
        "t_fix_us": t_fix,
        "t_frozen_us": t_frz,
        "slowdown_bug": slow_bug,
        "slowdown_frozen": slow_frz,
        "aiter_rule": np.full(n, _aiter_label(spec, pol), dtype=object),
        "route": np.full(n, route.path, dtype=object),
        "route_fits": np.full(n, fits),
        "time_model": np.full(
            n, model_t.provenance if model_t else "no cost model for this device", dtype=object
        ),
        "note": notes,
    }


def _aiter_label(spec: GridSpec, pol: Any) -> str:
    """The release label of an AITER policy's cells: the named release's (``--aiter``), else
    the policy's own modelled tag; "" for the non-AITER policies."""
    if not pol.name.startswith("aiter-"):
        return ""
    if pol.unreleased:
        return "unreleased: an open AITER PR"
    if spec.aiter is not None:
        return aiter_rule(spec.aiter).label
    return ""


def compute(spec: GridSpec) -> WhatIf:
    """Every cell of ``spec`` (validated first)."""
    spec.validate()
    shp = Shapes.drawn(spec) if spec.kv_mix else Shapes.uniform(spec.batches, spec.contexts)
    parts: list[dict[str, Any]] = []
    for num_spec in spec.specs:
        for model in spec.models:
            for policy in spec.policies:
                for device in spec.devices:
                    parts.append(_group(spec, shp, num_spec, model, policy, device))
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return WhatIf(spec, cols, provenance(spec))


def _explicit(spec: GridSpec) -> ExplicitSizes | None:
    """The explicit list as the version keeps it (capture_sizes.explicit_sizes; None: none given)."""
    if not spec.capture_sizes:
        return None
    mode = "PIECEWISE" if spec.graph_mode == "PIECEWISE" else DEFAULT_MODE
    return explicit_sizes(spec.rule, spec.capture_sizes, spec.max_num_batched_tokens, mode)


def _plan(spec: GridSpec, num_spec: int, device: str) -> CapturePlan:
    """The graphs of ``spec``'s cudagraph mode (FULL: vLLM's default FULL_AND_PIECEWISE) and
    their dispatch, for one spec-token count and device."""
    make = capture_plan if spec.graph_mode == "FULL" else piecewise_plan
    return make(spec.rule, spec.max_num_seqs, num_spec, spec.capture_sizes,
                spec.max_num_batched_tokens, device=device)  # fmt: skip


def _piecewise_sizes(spec: GridSpec) -> str:
    """Under cudagraph_mode PIECEWISE: the largest kept size of each qlen, past which a batch
    runs eagerly (capture_sizes.piecewise_plan); "" in the other modes or with no size left."""
    if spec.graph_mode != "PIECEWISE":
        return ""
    tops: dict[int, list[int]] = {}
    for k in spec.specs:
        for d in spec.devices:
            plan = _plan(spec, k, d)
            if plan.tokens:
                tops.setdefault(plan.tokens[-1], []).append(1 + k)
    if not tops:
        return ""
    each = ", ".join(
        f"{t} tokens at qlen {'/'.join(map(str, sorted(set(qs))))}"
        for t, qs in sorted(tops.items())
    )
    return (
        f"; PIECEWISE graphs up to {each}: a batch of more tokens runs eagerly (vLLM's "
        "dispatch finds no graph past the largest size)"
    )


def provenance(spec: GridSpec) -> dict[str, Any]:
    """What every number of the grid is: a model, for which presets and policy versions."""
    ex = _explicit(spec)
    return {
        "kind": "modelled",
        "what": "KV splits, occupancy and padding from mlaprof's metadata and padding model and "
        "the published split heuristics; nothing was run",
        "models": {
            m: f"{MODELS[m].heads} heads per rank ({MODELS[m].description})" for m in spec.models
        },
        "policies": {p: _policy_source(p) for p in spec.policies},
        "devices": {
            d: f"{DEVICES[d].units} {DEVICES[d].unit_name}s ({DEVICES[d].description})"
            for d in spec.devices
        },
        "capture_sizes": (
            f"vLLM {spec.vllm_version}: explicit {spec.capture_sizes}"
            + (
                ", PIECEWISE graphs at the kept sizes as given (no rounding to qlen)"
                if spec.graph_mode == "PIECEWISE"
                else ", split into prefill token sizes and decode request counts"
                if spec.rule == "vllm-0.34"
                else ", rounded up to multiples of qlen by the V1 runner only"
                if spec.rule == "vllm-0.32"
                else ", rounded up to multiples of qlen"
            )
            if spec.capture_sizes
            else (
                f"vLLM {spec.vllm_version} default ({spec.rule})"
                if spec.rule == rule_for(spec.vllm_version)
                else f"rule {spec.rule}, dispatched as {dispatch_of(spec.rule)}"
            )
            + f" for max_num_seqs {spec.max_num_seqs}"
        )
        + (
            f", none above max_num_batched_tokens {spec.max_num_batched_tokens}"
            if spec.max_num_batched_tokens
            else ", max_num_batched_tokens not limiting"
        )
        + _runners(spec)
        + _piecewise_sizes(spec)
        + (f"; {ex.note}" if ex is not None and ex.note else ""),
        # what vLLM logs about the explicit list, verbatim (capture_sizes.ExplicitSizes.log)
        **({"vllm_log": [f"{lv} {m}" for lv, m in ex.log]} if ex is not None and ex.log else {}),
        "time": {
            d: (cm.provenance if (cm := cost_model(d)) else "no cost model") for d in spec.devices
        },
        "frozen": "S a FULL graph replays: captured with the dummy run (every row's KV = qlen); "
        "vLLM's Triton MLA and its 0.34 Triton verify size it from max_model_len instead",
        "aiter": (
            aiter_rule(spec.aiter).to_dict()
            if spec.aiter
            else "each AITER policy is its own tag's rule (name a release with --aiter)"
        ),
        "dispatch": f"vLLM {spec.vllm_version}: a FULL decode graph pads the rows to its request "
        "count; a batch no FULL decode graph takes runs PIECEWISE on its real rows, nothing "
        "frozen; a batch above the largest kept capture size runs eagerly (graph NONE)",
        "route": f"the verify path vLLM {spec.vllm_version} takes for each (model, qlen, device), "
        "from mlaprof.splits.routing; route_fits: the policy models that path's kernel",
        "kv": (
            f"{spec.draws} batches per batch size drawn (seed {spec.seed}) from "
            f"{len(spec.kv_mix)} request KV lengths ({min(spec.kv_mix)}..{max(spec.kv_mix)})"
            if spec.kv_mix
            else "every request of a cell has the cell's KV length"
        ),
    }


def grid_for_scenario(sc: dict[str, Any], max_batch: int = 64) -> WhatIf:
    """The grid around a recorded run's configuration: its model, spec tokens, policy, device and
    engine limits, over batch 1..64 x the default KV lengths (those within max_model_len)."""
    base = GridSpec()
    mns = int(sc.get("max_num_seqs", base.max_num_seqs))
    mml = int(sc.get("max_model_len", base.max_model_len))
    q = 1 + int(sc.get("num_speculative_tokens", base.specs[0]))
    contexts = [c for c in base.contexts if q <= c <= mml] or [max(q, mml)]
    spec = dataclasses.replace(
        base,
        batches=list(range(1, min(max_batch, mns) + 1)),
        contexts=contexts,
        specs=[q - 1],
        models=[str(sc.get("model"))],
        policies=[str(sc.get("policy"))],
        devices=[str(sc.get("target"))],
        max_num_seqs=mns,
        max_model_len=mml,
        graph_mode=str(sc.get("graph_mode", "FULL")),
    )
    return compute(spec)
