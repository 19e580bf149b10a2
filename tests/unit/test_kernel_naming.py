"""Kernel names under every rocprofv3 naming option read by one rule.

rocprofv3 formats a kernel symbol's name once (rocprofiler-sdk
``source/lib/rocprofiler-sdk-tool/config.cpp`` ``format_name``): by default ``.kd`` cut and
demangled; ``-M`` keeps the raw symbol (``.kd`` included); ``-T`` demangles then keeps the base
name (``source/lib/common/demangle.cpp`` ``truncate_name``); ``--kernel-rename`` writes the
innermost roctx range's message instead of the kernel's name in the CSV kernel trace
(``generateCSV.cpp``: ``tool_get_kernel_name_fn(kernel_id, correlation_id.external)``;
``tool.cpp`` ``get_kernel_name`` returns the range's string when the external id is set). The
names below are literal, per option: AITER's ASM symbols as ``hsa/gfx950/mla/mla_asm.csv``
lists them (``knl_name``: ``_ZN5aiter39mla_a16w16_qh16_m16x4_n16x1_coex0_mask1E``), the
persistent path's C++ kernels as the compiler mangles them. The launch grid is the same under
every option: the S the grid holds must survive the name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.kernel_names import demangle_qualified, truncate_name
from mlaprof.kernel_table import KernelMatcher
from tests.conformance import render
from tests.conformance.model import Builder, Expected, GraphLaunch, Trace

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# per option: stage 1 (ASM, qlen 4, 16 heads), its Triton stage 2, the persistent stage 1, the
# persistent metadata and reduce kernels
NAMES: dict[str, dict[str, str]] = {
    "default": {
        "s1": "aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1",
        "s2": "_fwd_kernel_stage2_asm",
        "ps": "aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_ps",
        "meta": "void aiter::kn_get_mla_metadata_v1_2<MlaMetadataV12Traits<16, 1, true> >"
        "(int const*, int const*, int*, int*, int*, int*, int, int, int)",
        "reduce": "void kn_mla_reduce_v1<MlaReduceKernelV1Traits<512, 16, 2>, float, "
        "__hip_bfloat16>(float const*, float const*, int const*, int const*, "
        "__hip_bfloat16*, int, int)",
    },
    "-T": {
        "s1": "mla_a16w16_qh16_m16x4_n16x1_coex0_mask1",
        "s2": "_fwd_kernel_stage2_asm",
        "ps": "mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_ps",
        "meta": "kn_get_mla_metadata_v1_2",
        "reduce": "kn_mla_reduce_v1",
    },
    "-M": {
        "s1": "_ZN5aiter39mla_a16w16_qh16_m16x4_n16x1_coex0_mask1E.kd",
        "s2": "_fwd_kernel_stage2_asm.kd",
        "ps": "_ZN5aiter42mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_psE.kd",
        "meta": "_ZN5aiter24kn_get_mla_metadata_v1_2I20MlaMetadataV12TraitsILi16ELi1ELb1EEEvPKiS4_"
        "PiS5_S5_S5_iii.kd",
        "reduce": "_Z16kn_mla_reduce_v1I23MlaReduceKernelV1TraitsILi512ELi16ELi2EEf14__hip_"
        "bfloat16EvPKfS5_PKiS7_PT1_ii.kd",
    },
}
FORMATS = ("csv-7", "csv-6.3", "json", "rocpd-3.0.1")


def asm_replays(names: dict[str, str], steps: int = 6, layers: int = 4, S: int = 12,
                rows: int = 8, heads: int = 16) -> Trace:  # fmt: skip
    """FULL-graph replays of AITER's non-persistent ASM verify (bf16, 16 heads, qlen 4): stage 1
    grid (ceil(qlen*gqa/subQ), B, S) blocks x 256 (AITER v0.1.20 ``aiter/mla.py``), in
    work-items (256, B, S); stage 2 ``_fwd_kernel_stage2_asm`` (B, H) x 64."""
    tr = Trace("asm")
    b = Builder(tr)
    ex = b.graph_exec()
    for _ in range(steps):
        launch = b.api("hipGraphLaunch", 4_000)
        b.advance(1_000)
        for i in range(layers):
            b.kernel(names["s1"], (256, rows, S), (256, 1, 1), launch.corr, 9_000, (ex, 2 * i))
            b.kernel(names["s2"], (rows * 64, heads, 1), (64, 1, 1), launch.corr, 2_000,
                     (ex, 2 * i + 1))  # fmt: skip
        tr.launches.append(GraphLaunch(ex, launch.corr, launch.start, b.t, layers * 2))
        b.advance(50_000)
    tr.expected = Expected(
        steps=steps, graph_steps=steps, eager_steps=0, layers=layers, S=S, api_calls=steps,
        graph_launches=steps, kernels=steps * layers * 2,
    )  # fmt: skip
    return b.finish()


def persistent_replays(names: dict[str, str], steps: int = 4, layers: int = 4) -> Trace:
    """The persistent path: the metadata kernel launched eagerly once per step (vLLM's
    ``_build_decode``), then a replay of ``..._ps`` (#CU, 1, 1) x 256 and ``kn_mla_reduce_v1``
    (H, W, tiles) x 128 per layer."""
    tr = Trace("persistent")
    b = Builder(tr)
    ex = b.graph_exec()
    for _ in range(steps):
        meta = b.api("hipLaunchKernel", 2_000)
        b.kernel(names["meta"], (64, 1, 1), (64, 1, 1), meta.corr, 4_000)
        launch = b.api("hipGraphLaunch", 4_000)
        for i in range(layers):
            b.kernel(names["ps"], (256 * 256, 1, 1), (256, 1, 1), launch.corr, 9_000, (ex, 2 * i))
            b.kernel(names["reduce"], (16 * 128, 2, 1), (128, 1, 1), launch.corr, 2_000,
                     (ex, 2 * i + 1))  # fmt: skip
        b.advance(50_000)
    return b.finish()


def _report(path: Path, tmp: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["import", "rocprof", str(path), "--traces", str(tmp / "t"), "--name", "x"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp / "t" / "x"), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("option", sorted(NAMES))
def test_asm_s_survives_every_naming_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, fmt: str
) -> None:
    path, _ = render(asm_replays(NAMES[option]), fmt, tmp_path / "in")
    rep = _report(path, tmp_path, capsys)
    steps = rep["trace"]["steps"]
    assert len(steps) == 6 and {s["S"] for s in steps} == {12}, (option, fmt)
    assert [s["layers"] for s in steps] == [4] * 6
    assert {p["path"] for p in rep["trace"]["paths"]} == {"aiter-asm"}
    assert not [f for f in rep["findings"] if f["kind"] == "no-mla"]


@pytest.mark.parametrize("option", sorted(NAMES))
def test_persistent_kernels_under_every_naming_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    path, _ = render(persistent_replays(NAMES[option]), "csv-7", tmp_path / "in")
    rep = _report(path, tmp_path, capsys)
    (p,) = rep["trace"]["paths"]
    assert p["path"] == "aiter-asm-persistent" and p["S"] == "decided on the device"
    assert [s["layers"] for s in rep["trace"]["steps"]] == [4] * 4


@pytest.mark.parametrize("role", ["s1", "s2", "ps", "meta", "reduce"])
def test_one_rule_gives_one_kernel_per_option(role: str) -> None:
    m = KernelMatcher()
    got = {opt: m.match(names[role]) for opt, names in NAMES.items()}
    assert None not in got.values(), got
    assert len({(p.path, p.role, p.split_axis) for p in got.values() if p}) == 1, got


def test_truncation_is_rocprofv3s() -> None:
    # demangle.cpp's own example, and the shapes of AITER's kernels
    assert truncate_name("Foo<int, float>::foo(a[], int (int))") == "foo"
    for role in ("s1", "ps", "meta", "reduce"):
        assert truncate_name(NAMES["default"][role]) == NAMES["-T"][role]
    assert demangle_qualified(NAMES["-M"]["ps"][:-3]) == NAMES["default"]["ps"]


@pytest.mark.parametrize(
    "name",
    [
        # only a name that IS a base name is matched by base name: a full name whose last
        # component happens to be a known kernel's is another kernel
        "my_fork::_mla_gluon",
        "mla_decode_kvcache",  # vLLM's CPU op, not an AITER ASM kernel
        "fused_qk_rope_cat_and_cache_mla",  # -T of a rope + cache write: not attention
        "concat_and_cache_mla_kernel",
    ],
)
def test_base_names_only_for_base_names(name: str) -> None:
    assert KernelMatcher().match(name) is None


# -- --kernel-rename: every dispatch inside a range is named after it --------------------------
def renamed(steps: int = 4, layers: int = 4) -> Trace:
    """vLLM pushes a range around each forward; rocprofv3 --kernel-rename names each dispatch
    inside it after the range (the CSV's Kernel_Name), the kernel's own name is gone."""
    tr = Trace("renamed")
    b = Builder(tr)
    for _ in range(steps):
        rng = b.push("execute_model")
        launch = b.api("hipGraphLaunch", 4_000)
        for _ in range(layers):
            b.kernel("execute_model", (256, 8, 12), (256, 1, 1), launch.corr, 9_000)
            b.kernel("execute_model", (512, 16, 1), (64, 1, 1), launch.corr, 2_000)
        b.pop(rng)
        b.advance(50_000)
    return b.finish()


def test_renamed_dispatches_are_said_to_be_renamed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = render(renamed(), "csv-7", tmp_path / "in")
    rep = _report(path, tmp_path, capsys)
    (f,) = [f for f in rep["findings"] if f["kind"] == "no-mla"]
    assert "renamed" in f["title"] and "execute_model" in f["evidence"]
    assert "--kernel-rename" in f["fix"] and "--truncate-kernels" in f["fix"]
    assert f["data"]["renamed"] == ["execute_model"]


def test_unrenamed_unknown_kernels_say_nothing_of_renaming(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = {**NAMES["default"], "s1": "my_attention_kernel", "s2": "my_reduce"}
    path, _ = render(asm_replays(names), "csv-7", tmp_path / "in")
    rep = _report(path, tmp_path, capsys)
    (f,) = [f for f in rep["findings"] if f["kind"] == "no-mla"]
    assert "renamed" not in f["title"] and not f["data"].get("renamed")


# -- a kernel trace without an API trace: graph launches unknown, never 0 -----------------------
def test_graph_launches_unknown_without_an_api_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tr = asm_replays(NAMES["default"])
    tr.apis = []
    path, _ = render(tr, "csv-7", tmp_path / "in")
    rep = _report(path, tmp_path, capsys)
    cap = rep["capture"]
    assert "graph_launches" in cap and cap["graph_launches"] is None
    assert "no HIP/CUDA runtime API trace" in cap["graph_launches_why"]
    # with the API trace the count is there
    path, _ = render(asm_replays(NAMES["default"]), "csv-7", tmp_path / "in2")
    rep = _report(path, tmp_path / "b", capsys)
    assert rep["capture"]["graph_launches"] == 6 and "graph_launches_why" not in rep["capture"]
