"""The ``aiter`` verify backend: the contract marshalled to AITER's MLA kernels (ROCm only).

Two entries (AITER v0.1.19/v0.1.20 aiter/mla.py and mla_gluon.py):

- ``gluon``: ``aiter.ops.triton.gluon.mla_gluon.mla_gluon`` with the native 4-D MTP layout, the
  flat KV pool (``kv_pe_offset=512``), ``use_2d_view=False`` (1-D page table = ``kv_indices``,
  ``seq_info = kv_indptr [B+1]``) and ``min_kv_seq_len`` taken from the metadata builder in the
  mode the scenario chose (``meta.min_kv_seq_len``): the value that can collapse the split count.
- ``asm``: ``aiter.mla.mla_decode_fwd`` with the verify tokens flattened to rows
  (``q [B*qlen, H, 576]``, ``kv_buffer [pages, page_size, 1, 576]``, ``qo_indptr`` ...).

AITER picks the KV-split count S itself on the host; :attr:`AiterBackend.last_call` says which S
mlaprof predicts it picked (the matching policy of :mod:`mlaprof.splits.policies`). Every check runs
on host values before the call, raising :class:`MlaprofError`, so a bad shape never reaches an
``assert`` inside AITER (stripped under ``python -O``). Nothing here reads a device value back.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from mlaprof.backends.base import VerifyInputs, check_shapes
from mlaprof.errors import MlaprofError
from mlaprof.integrations import aiter_env
from mlaprof.scenario import KV_DIM, LATENT
from mlaprof.splits import releases
from mlaprof.splits.policies import POLICIES, SplitInput, gluon_regime
from mlaprof.splits.releases import aiter_rule

if TYPE_CHECKING:
    from mlaprof.integrations.aiter_env import AiterEnv
    from mlaprof.metadata import VerifyMetadata

ENTRIES = ("auto", "gluon", "asm")
SPLIT_MODES = ("aiter", "forward")  # let AITER choose S, or pass the caller's num_splits
GLUON_MAX_SPLITS = 256
CU_COUNTS = {"gfx950": 256, "gfx942": 304}  # MI355X; MI300X and MI325X
FP8_KV = torch.float8_e4m3fn  # gfx950 fp8 (e4m3fn, not e4m3fnuz)


@dataclass
class AiterCall:
    """What the last :meth:`AiterBackend.forward` sent to AITER (host values only)."""

    entry: str  # gluon | asm
    function: str  # the AITER function called
    regime: str | None  # gluon regime: bh16bn64 | bh16bn128 | bh64 (None for asm)
    policy: str  # mlaprof.splits policy that predicts AITER's S
    splits: int  # S AITER launches with (predicted, or forced in "forward" mode)
    min_kv_seq_len: int | None  # passed to mla_gluon (None for asm, which takes none)
    min_kv_source: str  # the metadata builder's mode: all-rows | active-rows
    num_kv_splits_arg: int | None  # what was passed as num_kv_splits (None: AITER's choice)
    aiter_version: str
    arch: str | None
    aiter_rule: str = ""  # the modelled rule standing for aiter_version (mlaprof.splits.releases)


class AiterBackend:
    name = "aiter"
    capturable = True  # host-only marshalling; AITER's own allocations are size-static
    input_dtype = torch.bfloat16  # mla_gluon takes a bf16 query only; runners should honour it

    def __init__(
        self, entry: str = "auto", splits: str = "aiter", env: AiterEnv | None = None
    ) -> None:
        if entry not in ENTRIES:
            raise MlaprofError(f"aiter entry must be one of {', '.join(ENTRIES)}, got {entry!r}")
        if splits not in SPLIT_MODES:
            raise MlaprofError(f"aiter split mode must be one of {', '.join(SPLIT_MODES)}")
        self.entry = entry
        self.split_mode = splits
        self._env = env
        self.last_call: AiterCall | None = None

    def prepare(self) -> None:
        """Import and probe AITER now (raises MlaprofError): call before creating a run."""
        _ = self.env

    @property
    def env(self) -> AiterEnv:
        if self._env is None:
            self._env = aiter_env.detect()  # lazy: importing aiter needs ROCm
        return self._env

    # -- the contract ----------------------------------------------------------------------------
    def forward(
        self,
        inp: VerifyInputs,
        meta: VerifyMetadata,
        out: torch.Tensor,
        lse: torch.Tensor | None = None,
        num_splits: int = 1,
    ) -> None:
        check_shapes(inp, meta, out, lse)
        env = self.env
        self._check_devices(env, inp, meta, out, lse)
        entry = self.choose_entry(inp, meta)
        if entry == "gluon":
            self._gluon(env, inp, meta, out, lse, num_splits)
        else:
            self._asm(env, inp, meta, out, lse, num_splits)
        _clear_inactive(meta, out, lse)

    # -- selection and checks ----------------------------------------------------------------
    def choose_entry(self, inp: VerifyInputs, meta: VerifyMetadata) -> str:
        """The entry this call uses; raises naming every reason when none can run it."""
        env = self.env
        if self.entry in ("auto", "gluon"):
            why = env.why_not_gluon() or self._why_not_gluon_shape(inp, meta)
            if why is None:
                return "gluon"
            if self.entry == "gluon":
                raise MlaprofError(f"aiter gluon cannot run this call: {why}")
            why_asm = env.why_not_asm() or _why_not_asm_shape(inp, meta)
            if why_asm is None:
                return "asm"
            raise MlaprofError(f"aiter cannot run this call: gluon: {why}; asm: {why_asm}")
        why_asm = env.why_not_asm() or _why_not_asm_shape(inp, meta)
        if why_asm is not None:
            raise MlaprofError(f"aiter asm cannot run this call: {why_asm}")
        return "asm"

    def _why_not_gluon_shape(self, inp: VerifyInputs, meta: VerifyMetadata) -> str | None:
        env = self.env
        qn, qp, kv = inp.q_nope, inp.q_pe, inp.kv_c
        if qn.dtype != torch.bfloat16 or qp.dtype != torch.bfloat16:
            return f"mla_gluon requires a bf16 query, got {qn.dtype}/{qp.dtype}"
        if meta.page_size != 1:
            return f"mla_gluon reads a flat KV pool of page size 1, got page size {meta.page_size}"
        b, heads = meta.num_reqs, qn.shape[2]
        if heads in aiter_env.BH64_HEADS:
            if kv.dtype != torch.bfloat16:
                return f"bh64 (H={heads}) requires bf16 KV, got {kv.dtype}"
            if b % aiter_env.BH64_BATCH_MULTIPLE:
                return f"bh64 (H={heads}) requires B % 64 == 0, got B = {b}"
            return None
        wide = env.at_least(aiter_env.BH16_WIDE_HEADS_SINCE)
        limit = aiter_env.BH16_MAX_HEADS_WIDE if wide else aiter_env.BH16_MAX_HEADS
        if not 1 <= heads <= limit:
            return (
                f"aiter {env.version} mla_gluon handles H <= {limit} (bh16) or H in (64, 128) "
                f"(bh64), got H = {heads}"
            )
        if kv.dtype == FP8_KV:  # bh16bn128: the head range above (mla_gluon.py v0.1.20 L904-916)
            if not env.at_least(aiter_env.GLUON_V0120) and b != 1:
                return f"aiter {env.version} fp8 KV (bh16bn128) requires B == 1, got B = {b}"
            return None
        if kv.dtype != torch.bfloat16:
            return f"mla_gluon requires bf16 or float8_e4m3fn KV, got {kv.dtype}"
        return None

    def _check_devices(
        self,
        env: AiterEnv,
        inp: VerifyInputs,
        meta: VerifyMetadata,
        out: torch.Tensor,
        lse: torch.Tensor | None,
    ) -> None:
        tensors = {"q_nope": inp.q_nope, "q_pe": inp.q_pe, "kv_c": inp.kv_c, "out": out}
        tensors["kv_indices"] = meta.kv_indices
        if lse is not None:
            tensors["lse"] = lse
        for what, t in tensors.items():
            if t.device.type != env.device_type:
                raise MlaprofError(
                    f"aiter kernels need every tensor on the ROCm GPU; {what} is on {t.device}"
                )
        if len({t.device for t in tensors.values()}) > 1:
            raise MlaprofError("aiter kernels need every tensor on one device")
        if lse is not None and lse.dtype != torch.float32:
            raise MlaprofError(f"lse must be float32, got {lse.dtype}")

    # -- split prediction --------------------------------------------------------------------
    def _units(self, env: AiterEnv) -> int:
        if env.device_type == "cuda" and torch.cuda.is_available():
            return torch.cuda.get_device_properties(
                torch.cuda.current_device()
            ).multi_processor_count
        return CU_COUNTS.get(env.arch or "", 256)

    def _split_input(self, inp: VerifyInputs, meta: VerifyMetadata, env: AiterEnv) -> SplitInput:
        return SplitInput(
            num_reqs=meta.num_reqs,
            qlen=meta.qlen,
            heads=inp.q_nope.shape[2],
            min_kv_seq_len=meta.min_kv_seq_len,
            max_seq_len=meta.max_seq_len,
            total_kv=meta.host_kv_indptr[-1],  # AITER's total_kv = kv_indices.shape[0]
            units=self._units(env),
            kv_fp8=inp.kv_c.dtype == FP8_KV,
        )

    def _forced_splits(self, num_splits: int, limit: int | None) -> int | None:
        if self.split_mode != "forward":
            return None
        if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 1:
            raise MlaprofError(f"num_splits must be a positive integer, got {num_splits!r}")
        if limit is not None and num_splits > limit:
            raise MlaprofError(f"aiter takes at most {limit} KV splits, got {num_splits}")
        return num_splits

    # -- gluon -------------------------------------------------------------------------------
    def _gluon(
        self,
        env: AiterEnv,
        inp: VerifyInputs,
        meta: VerifyMetadata,
        out: torch.Tensor,
        lse: torch.Tensor | None,
        num_splits: int,
    ) -> None:
        fn = env.mla_gluon()
        heads = inp.q_nope.shape[2]
        kv_fp8 = inp.kv_c.dtype == FP8_KV
        regime = gluon_regime(heads, kv_fp8)
        policy = gluon_policy(env, regime)
        x = self._split_input(inp, meta, env)
        forced = self._forced_splits(num_splits, GLUON_MAX_SPLITS)
        kwargs: dict[str, Any] = {
            "kv_pe_offset": LATENT,
            "use_2d_view": False,
            "min_kv_seq_len": meta.min_kv_seq_len,
            "return_lse": lse is not None,
        }
        if forced is not None:
            if "num_kv_splits" not in _parameters(fn):
                raise MlaprofError(
                    f"aiter {env.version} mla_gluon takes no num_kv_splits: use split mode 'aiter'"
                )
            kwargs["num_kv_splits"] = forced
        # the kernel's own asserts, raised here first (bh64's min_kv bound, fp8's B == 1)
        splits = forced if forced is not None else POLICIES[policy].splits(x)
        if regime == "bh64" and forced is not None:
            bound = forced * (3 * 64 + forced)
            if meta.min_kv_seq_len <= bound:
                raise MlaprofError(
                    f"aiter gluon bh64 asserts min_kv_seq_len > S*(3*64+S) = {bound}, "
                    f"got {meta.min_kv_seq_len}"
                )
        o = _bf16_view(out)
        res = fn(
            inp.q_nope,
            inp.q_pe,
            inp.kv_c,
            o,
            meta.kv_indices,
            meta.kv_indptr,
            inp.sm_scale,
            **kwargs,
        )
        _write_back(out, o, lse, res, f"aiter {env.version} mla_gluon")
        self.last_call = AiterCall(
            entry="gluon",
            function="aiter.ops.triton.gluon.mla_gluon.mla_gluon",
            regime=regime,
            policy=policy,
            splits=int(splits),
            min_kv_seq_len=meta.min_kv_seq_len,
            min_kv_source=meta.min_kv_mode,
            num_kv_splits_arg=forced,
            aiter_version=env.version,
            aiter_rule=release_label(env),
            arch=env.arch,
        )

    # -- asm ---------------------------------------------------------------------------------
    def _asm(
        self,
        env: AiterEnv,
        inp: VerifyInputs,
        meta: VerifyMetadata,
        out: torch.Tensor,
        lse: torch.Tensor | None,
        num_splits: int,
    ) -> None:
        fn = env.mla_decode_fwd()
        b, qlen, heads, _ = inp.q_nope.shape
        rows = b * qlen
        forced = self._forced_splits(num_splits, None)
        params = _parameters(fn)
        if lse is not None and "return_lse" not in params:
            raise MlaprofError(f"aiter {env.version} mla_decode_fwd cannot return the LSE")
        # flattened verify: real rows come first, qo_indptr gives padding rows no tokens
        q = torch.cat([inp.q_nope, inp.q_pe], dim=-1).reshape(rows, heads, KV_DIM)
        kv_buffer = inp.kv_c.view(-1, meta.page_size, 1, KV_DIM)
        o = _bf16_view(out) if inp.q_nope.dtype == torch.bfloat16 else out
        o_rows = o.view(rows, heads, LATENT)
        kwargs: dict[str, Any] = {
            "page_size": meta.page_size,
            "nhead_kv": 1,
            "sm_scale": inp.sm_scale,
            "num_kv_splits": forced,
        }
        if lse is not None:
            kwargs["return_lse"] = True
        res = fn(
            q,
            kv_buffer,
            o_rows,
            meta.qo_indptr,
            meta.kv_indptr,
            meta.kv_indices,
            meta.last_page_len,
            meta.qlen,
            **kwargs,
        )
        _write_back(out, o, lse, res, f"aiter {env.version} mla_decode_fwd")
        x = self._split_input(inp, meta, env)
        self.last_call = AiterCall(
            entry="asm",
            function="aiter.mla.mla_decode_fwd",
            regime=None,
            policy="aiter-asm",
            splits=int(forced if forced is not None else POLICIES["aiter-asm"].splits(x)),
            min_kv_seq_len=None,
            min_kv_source=meta.min_kv_mode,
            num_kv_splits_arg=forced,
            aiter_version=env.version,
            aiter_rule=release_label(env),
            arch=env.arch,
        )


# -- helpers -----------------------------------------------------------------------------------
def release_label(env: AiterEnv) -> str:
    """How the installed AITER maps to a modelled rule ("rule of v0.1.20.post1; v0.1.21.post2
    not verified" for a release mlaprof has not read)."""
    if env.version_tuple is None:
        return f"AITER {env.version}: version unknown, taken as the newest modelled rule"
    return aiter_rule(env.version).label


def gluon_policy(env: AiterEnv, regime: str) -> str:
    """The mlaprof.splits policy that reproduces this AITER version's S for ``regime``: the
    release's own rule, or the nearest modelled one (mlaprof.splits.releases)."""
    if regime == "bh64":
        return "aiter-gluon-bh64"
    if regime == "bh16bn128" and not env.at_least(aiter_env.GLUON_V0120):
        return "aiter-gluon-fp8-v0.1.19"
    if env.version_tuple is None:  # unparseable: taken as recent, as at_least does
        return "aiter-gluon-v0.1.20.post1"
    return releases.policy_for(env.version)


def _why_not_asm_shape(inp: VerifyInputs, meta: VerifyMetadata) -> str | None:
    qd, kd = inp.q_nope.dtype, inp.kv_c.dtype
    if qd == torch.bfloat16 and kd == torch.bfloat16:
        pass
    elif qd == FP8_KV and kd == FP8_KV:
        if meta.qlen > aiter_env.ASM_FP8_MAX_QLEN:
            return (
                f"fp8 ASM MLA handles qo_len <= {aiter_env.ASM_FP8_MAX_QLEN} (aiter#2760), "
                f"got qlen {meta.qlen}"
            )
    else:
        return f"mla_decode_fwd takes a bf16 query with bf16 KV or fp8 with fp8, got {qd}/{kd}"
    if inp.kv_c.shape[0] % meta.page_size:
        return f"the KV pool ({inp.kv_c.shape[0]} slots) is not whole pages of {meta.page_size}"
    return None


def _bf16_view(out: torch.Tensor) -> torch.Tensor:
    """``out`` itself when AITER can write it directly, else a bf16 contiguous stand-in."""
    if out.dtype == torch.bfloat16 and out.is_contiguous():
        return out
    return torch.empty(out.shape, dtype=torch.bfloat16, device=out.device)


def _clear_inactive(meta: VerifyMetadata, out: torch.Tensor, lse: torch.Tensor | None) -> None:
    """The contract's zeros (and -inf LSE) for positions past a row's query length.

    AITER computes padding rows over their pinned null page; mlaprof's contract wants them
    zeroed. Host-known indices only: padding rows are usually one trailing slice."""
    qo = meta.host_qo_lens
    real = meta.num_real_reqs
    trailing = all(n == meta.qlen for n in qo[:real]) and all(n == 0 for n in qo[real:])
    if trailing:
        if real < len(qo):
            out[real:] = 0
            if lse is not None:
                lse[real:] = float("-inf")
        return
    for b, n in enumerate(qo):
        if n < meta.qlen:
            out[b, n:] = 0
            if lse is not None:
                lse[b, n:] = float("-inf")


def _parameters(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a C extension without a signature
        return set()


def _write_back(
    out: torch.Tensor, o: torch.Tensor, lse: torch.Tensor | None, res: Any, what: str
) -> None:
    """Copy a kernel's output (and its LSE, the second item it returns) into the caller's."""
    if o is not out:
        out.copy_(o)
    if lse is not None:
        got = res[1] if isinstance(res, tuple) and len(res) > 1 else None
        if got is None:
            raise MlaprofError(f"{what} returned no LSE")
        lse.copy_(got.reshape(lse.shape))
