"""What a splits row and a replayed graph's S may claim, said once by the analysis and rendered
by every view. The c1-long demo (mlaprof's Triton kernel, S decided on the device, h200 target)
read "S the captured graph replayed (measured) ... max: 128" where 128 is the launch grid's
split axis, the cap, not an S any row ran with; its mlaprof-triton row, and every run's, read
"on vLLM's route: yes" for a kernel vLLM runs on no route; AITER's ASM rows held an S and
occupancy on sm_90, where no ASM kernel exists; and an off-route policy whose S the device
decides ("256 dev ... never") carried no what-if mark on its row. Each test failed with its
rule broken. No test reads or writes the working tree's traces/."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from mlaprof.analysis.sections import DEVICE_S_UNRECORDED
from mlaprof.analysis.splits import off_route, replayed_splits
from mlaprof.splits.routing import PATH_POLICIES, own_kernel, policy_fits_route
from tests import shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"
C1 = "demo-fix-splits-decided-on-device-c1-long"  # mlaprof-triton on the device, h200 target
C16 = "demo-bug-padding-collapses-splits-c16"  # aiter-gluon on mi355x: mlaprof-triton a row
OWN = "mlaprof's kernel, not vLLM's"
ASM = ("aiter-asm", "aiter-asm-fp8", "aiter-asm-persistent")
ASM_WHY = "AITER's MLA ASM kernels ship only for gfx942 and gfx950"


def _replays(backend: str, s: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    steps = pd.DataFrame(
        {"rank": [0, 0], "step": [0, 1], "graph_mode": ["FULL"] * 2,
         "timing": ["graph-replay"] * 2, "backend": [backend] * 2}
    )  # fmt: skip
    layers = pd.DataFrame({"rank": [0] * 4, "step": [0, 0, 1, 1], "splits_used": [s] * 4})
    return steps, layers


def _views(name: str) -> dict[str, str]:
    return every_view(shipped_runs.run_dir(name), shipped_runs.summary(name), with_json=True)


def _row(s, policy: str):
    return next(r for r in s.splits if r.policy == policy)


# -- 1. a device-decided S: the grid's split axis is its cap, not an S replayed ---------------
def test_a_device_decided_replay_holds_the_grid_cap_not_an_s() -> None:
    dev = replayed_splits(*_replays("triton", 128), policy="mlaprof-triton")
    assert dev is not None and (dev.min, dev.max, dev.grid_cap) == (None, None, 128), dev
    assert not dev.holds_s and "cap" in dev.provenance and "measured: the S" not in dev.provenance
    # a host S the grid carries (the same backend under another policy) is the S replayed
    host = replayed_splits(*_replays("triton", 16), policy="vllm-triton")
    assert host is not None and (host.min, host.max, host.grid_cap) == (16, 16, None), host


def test_the_c1_long_graph_says_its_cap_in_every_view() -> None:
    s = shipped_runs.summary(C1)
    g = s.replayed_splits
    assert g is not None and g.grid_cap == 128 and g.min is None and g.max is None, g
    # no S of a captured graph stands (measured or modelled): the section is absent
    assert s.full_graph_splits.source is None and s.full_graph_splits.used is None
    for view, text in _views(C1).items():
        if view == "json":
            assert '"grid_cap": 128' in text and '"max": null' in text, view
            continue
        assert DEVICE_S_UNRECORDED in text and re.search(r"grid cap\W+128\b", text), view
        assert "measured max: 128" not in text and "measured: the S of" not in text, view


# -- 2. mlaprof's own kernel is on no route of vLLM's ------------------------------------------
@pytest.mark.parametrize("path", sorted(PATH_POLICIES))
def test_mlaprof_triton_fits_no_vllm_route(path: str) -> None:
    assert policy_fits_route("mlaprof-triton", path) is False
    assert own_kernel("mlaprof-triton") == OWN and own_kernel("vllm-triton") is None


@pytest.mark.parametrize("name", [C1, C16])
def test_mlaprof_triton_row_says_whose_kernel_it_is(name: str) -> None:
    s = shipped_runs.summary(name)
    r = _row(s, "mlaprof-triton")
    assert r.on_route is None and r.what_if is None and r.frozen_what_if is None, r
    assert r.none_reads("on_route") == OWN
    # never a what-if of vLLM's either: no route finding, no what-if mark or line names it
    assert s.route is not None and not off_route("mlaprof-triton", s.route)
    assert not any("mlaprof-triton" in f.title for f in s.findings if f.kind == "route")
    assert not any("mlaprof-triton" in h.label and "what-if" in h.label for h in s.headline)
    doc = s.to_json()
    (row,) = [x for x in doc["splits"] if x["policy"] == "mlaprof-triton"]
    assert "on_route" not in row, row  # never "yes" (true)
    for view, text in _views(name).items():
        if view != "json":
            assert OWN in text, view
            assert "what-if (mlaprof-triton" not in text and ", mlaprof-triton)" not in text


def test_the_c1_long_headline_keeps_the_device_s_unconditioned() -> None:
    s = shipped_runs.summary(C1)
    (h,) = [h for h in s.headline if h.label.startswith("KV splits (")]
    assert h.label == "KV splits (mlaprof-triton)" and "if vLLM ran" not in h.value, h


# -- 3. AITER's ASM kernels exist only for gfx942 and gfx950 ----------------------------------
def test_asm_is_not_runnable_off_its_archs() -> None:
    from mlaprof.splits.policies import applicable, arch_refusal

    for pol in (*ASM, "aiter-asm-persistent-pr4899", "aiter-asm-fp8-pr4713"):
        why = applicable(pol, 16, 4, 1, "sm_90")
        assert why is not None and why.startswith(ASM_WHY) and why.endswith("target is sm_90")
        for arch in ("gfx942", "gfx950"):
            assert arch_refusal(pol, arch) is None, (pol, arch)
    # the kernels of vLLM and mlaprof run on an NVIDIA target
    assert arch_refusal("vllm-triton", "sm_90") is None
    assert arch_refusal("mlaprof-triton", "sm_90") is None


def test_a_run_recorded_on_an_nvidia_target_says_its_asm_rows_cannot_run() -> None:
    from mlaprof.devices import DEVICES
    from mlaprof.metadata import BatchShape, build_metadata
    from mlaprof.step_splits import step_splits

    meta = build_metadata(BatchShape([131072], 4, 4, 8, "FULL"), min_kv_mode="active-rows")
    rows = {r.policy: r for r in step_splits(meta, 8, DEVICES["h200"], "FULL", 131072)}
    for pol in ASM:
        assert rows[pol].used is None and ASM_WHY in str(rows[pol].note), rows[pol]
    assert rows["vllm-triton"].used is not None


def test_c1_long_asm_rows_are_not_runnable_in_every_view() -> None:
    s = shipped_runs.summary(C1)
    for pol in ASM:
        r = _row(s, pol)
        assert r.not_runnable is not None and r.not_runnable.startswith(ASM_WHY), r
        assert r.used is None and r.occupancy is None and r.frozen is None and not r.on_device
    # the figures' points hold the same rule
    pts = [p for rk in s.series.ranks for p in rk.splits if p.policy in ASM]
    assert pts and all(p.used is None and p.not_runnable for p in pts)
    for view, text in _views(C1).items():
        if view != "json":
            # the three policies on the one line of their shared reason
            assert f"{', '.join(ASM)}: not runnable: {ASM_WHY}" in text, view
            assert "what-if (aiter-asm" not in text, view


# -- 4. an off-route device S carries the what-if mark on its row ----------------------------
def test_an_off_route_device_s_is_marked_on_its_row_in_every_view() -> None:
    from mlaprof.reporters.rows import split_cells

    s = shipped_runs.summary(C16)
    dev = _row(s, "aiter-asm-persistent")
    assert dev.on_device and dev.what_if and dev.used is not None, dev
    assert split_cells(dev).frozen == "never what-if"
    own = _row(s, "mlaprof-triton")  # a device S no route makes a what-if: unmarked
    assert own.on_device and split_cells(own).frozen == "never"
    for view, text in _views(C16).items():
        if view != "json":
            assert "never what-if" in text, view
