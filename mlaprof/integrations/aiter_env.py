"""What AITER is installed and what GPU it runs on: version, arch, and which MLA entries can work.

``import aiter`` needs ROCm (without it, it raises ``RuntimeError: ROCm version file not found``), so
everything here imports it lazily, on first use, never at module top. The facts each check encodes
(AITER v0.1.19/v0.1.20 aiter/mla.py and mla_gluon.py) sit in constants at the top, so a correction is a one-line change.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from mlaprof.errors import MlaprofError
from mlaprof.splits import releases

# -- facts (AITER v0.1.19/v0.1.20 aiter/mla.py and mla_gluon.py) -----------------------------------------------------------------------
GLUON_MIN_VERSION = (0, 1, 19, 0)  # first tag with mla_gluon's 4-D MTP entry and in-kernel causal
GLUON_ARCHS = ("gfx950",)  # "mla_gluon requires gfx950" (vllm#50682)
ASM_ARCHS = ("gfx942", "gfx950")  # MI300X/MI325X and MI355X code objects of mla_decode_fwd
# mla_gluon's bh16 regimes (bf16 and fp8 KV) take H <= 16 in v0.1.19 (mla_gluon.py L881) and
# H <= 96 from v0.1.19.post1 (L894; .post1 and .post2 ship the same file), v0.1.20 L904
BH16_WIDE_HEADS_SINCE = (0, 1, 19, 1)
BH16_MAX_HEADS = 16
BH16_MAX_HEADS_WIDE = 96
BH64_HEADS = (64, 128)
BH64_BATCH_MULTIPLE = 64
GLUON_V0120 = (0, 1, 20, 0)  # S independent of min_kv_seq_len; fp8 B == 1 assert dropped
ASM_FP8_MAX_QLEN = 4  # aiter#2760: fp8 ASM MLA only for qo_len <= 4

DEVICE_TYPE = "cuda"  # where AITER's tensors live (ROCm GPUs are "cuda" in torch); tests set "cpu"
VERSION_ENV = "MLAPROF_AITER_VERSION"  # override for source builds with odd version strings
INSTALL_HINT = (
    "the aiter backend needs a ROCm machine with AITER >= v0.1.19 built from source "
    "(ROCm/aiter; the amd-aiter wheel on PyPI is 0.1.7 and has no mla_gluon)"
)


# the one AITER version parser and tag format (mlaprof.splits.releases), re-exported for the backend
parse_version = releases.parse_version
format_version = releases.tag


@dataclass
class AiterEnv:
    """An imported AITER and the GPU it targets."""

    module: ModuleType
    version: str  # as reported ("unknown" when nothing said)
    version_tuple: tuple[int, int, int, int] | None
    arch: str | None  # "gfx950", ... (None: no ROCm GPU found)
    device_type: str = "cuda"  # tensors must live here (ROCm GPUs are "cuda" in torch)

    # -- entry points (imported on demand) ---------------------------------------------------
    def mla_gluon(self) -> Any:
        try:
            mod = importlib.import_module("aiter.ops.triton.gluon.mla_gluon")
            return mod.mla_gluon
        except (ImportError, AttributeError) as e:
            raise MlaprofError(
                f"aiter {self.version} has no aiter.ops.triton.gluon.mla_gluon.mla_gluon ({e}); "
                + INSTALL_HINT
            ) from None

    def mla_decode_fwd(self) -> Any:
        try:
            mod = importlib.import_module("aiter.mla")
            return mod.mla_decode_fwd
        except (ImportError, AttributeError) as e:
            raise MlaprofError(
                f"aiter {self.version} has no aiter.mla.mla_decode_fwd ({e}); " + INSTALL_HINT
            ) from None

    # -- capability checks (host-side; raise MlaprofError naming the limit) ------------------
    def at_least(self, v: tuple[int, int, int, int]) -> bool:
        # an unparseable version is taken as recent: the kernel's own checks still apply
        return self.version_tuple is None or self.version_tuple >= v

    def why_not_gluon(self) -> str | None:
        if not self.at_least(GLUON_MIN_VERSION):
            return (
                f"mla_gluon's 4-D MTP entry needs aiter >= {format_version(GLUON_MIN_VERSION)}, "
                f"found {self.version}"
            )
        if self.arch not in GLUON_ARCHS:
            return f"mla_gluon requires gfx950 (MI355-class), this GPU is {self.arch or 'absent'}"
        return None

    def why_not_asm(self) -> str | None:
        if self.arch not in ASM_ARCHS:
            return (
                f"aiter's ASM mla_decode_fwd has code objects for {', '.join(ASM_ARCHS)}, "
                f"this GPU is {self.arch or 'absent'}"
            )
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "aiter_version": self.version,
            "gpu_arch": self.arch,
            "gluon": self.why_not_gluon() or "ok",
            "asm": self.why_not_asm() or "ok",
        }


def import_aiter() -> ModuleType:
    """``import aiter`` with a clear message instead of ROCm's RuntimeError or an ImportError."""
    try:
        return importlib.import_module("aiter")
    except Exception as e:  # aiter raises RuntimeError (no ROCm), ImportError, OSError (.so)
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise MlaprofError(f"aiter is not importable ({first}); " + INSTALL_HINT) from None


def aiter_version(module: ModuleType) -> str:
    env = os.environ.get(VERSION_ENV)
    if env:
        return env
    v = getattr(module, "__version__", None)
    if isinstance(v, str) and v:
        return v
    from mlaprof import installed
    from mlaprof.store.runmeta import DISTRIBUTIONS

    # the version run.json records for aiter, read the same way
    return installed.first_version(DISTRIBUTIONS["aiter"]) or "unknown"


def gpu_arch(module: ModuleType | None = None) -> str | None:
    """gfx name of the current GPU: torch's ``gcnArchName`` on ROCm builds, else AITER's own probe."""
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        name = getattr(props, "gcnArchName", "") or ""
        if name:
            return name.split(":")[0]
    if module is not None:
        try:
            chip = importlib.import_module("aiter.jit.utils.chip_info")
            gfx = chip.get_gfx()
            if isinstance(gfx, str) and gfx:
                return gfx
        except Exception:  # no ROCm runtime behind it: no GPU to speak of
            return None
    return None


def detect() -> AiterEnv:
    """Import AITER and probe it (raises MlaprofError when it cannot be imported)."""
    module = import_aiter()
    version = aiter_version(module)
    arch = gpu_arch(module)
    return AiterEnv(module, version, parse_version(version), arch, DEVICE_TYPE)
