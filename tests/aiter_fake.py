"""A recording fake of the AITER package, injected through ``sys.modules``.

It mirrors the public signatures of ``mla_gluon`` and ``mla_decode_fwd`` (AITER v0.1.19/v0.1.20 aiter/mla.py and mla_gluon.py),
repeats the wrapper checks AITER makes (as AssertionError, like AITER), records every call, and
computes the result with the torch reference's math *from the arguments it was given* (page table,
indptr, strides), so a marshalling mistake in mlaprof shows up as a wrong number. Padding rows get
what the real kernels give them: gluon attends their pinned null page, ASM leaves them untouched.
"""

from __future__ import annotations

import math
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from mlaprof.backends.torch_ref import attend
from mlaprof.integrations import aiter_env


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


@dataclass
class Recorder:
    version: str = "0.1.19"
    arch: str = "gfx950"
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    splits: list[int] = field(default_factory=list)  # S the fake's wrapper chose per call
    lse_shapes: list[tuple[int, ...]] = field(default_factory=list)
    compute: bool = True  # False: check and record the call only (large shapes, fast tests)

    def _ver(self) -> tuple[int, int, int, int]:
        v = aiter_env.parse_version(self.version)
        return v or (99, 0, 0, 0)

    # -- gluon -------------------------------------------------------------------------------
    def gluon_splits(self, b: int, qlen: int, h: int, min_kv: int, fp8: bool) -> int:
        """The wrapper's automatic S (AITER v0.1.19/v0.1.20 aiter/mla.py and mla_gluon.py), written out here independently."""
        v = self._ver()
        if h in (64, 128):
            base = 8 * math.ceil(h / 64) * qlen * (b // 8)
            s = max(1, 1 << max(0, math.ceil(math.log2(math.ceil(256 / base)))))
            _check(min_kv > s * (3 * 64 + s), "bh64 requires min_kv_seq_len > S*(3*64+S)")
            return s
        if v >= (0, 1, 20, 0):
            return max(1, 256 // (b * qlen * math.ceil(h / 16)))
        den = b * qlen * (math.ceil(h / 16) if v >= (0, 1, 19, 1) else 1)
        if fp8:
            _check(b == 1, "mla_gluon[bh16bn128] requires batch_size=1")
            return max(1, min(256 // den, min_kv))
        return max(1, min(256 // den, math.ceil(min_kv / 64)))

    def mla_gluon(
        self,
        q_nope: torch.Tensor,
        q_pe: torch.Tensor,
        kv_c: torch.Tensor,
        o: torch.Tensor,
        page_table: torch.Tensor,
        seq_info: torch.Tensor,
        sm_scale: float,
        k_pe: torch.Tensor | None = None,
        kv_pe_offset: int = 512,
        use_2d_view: bool = True,
        kv_scale: float = 1.0,
        min_kv_seq_len: int = 1,
        return_lse: bool = False,
        has_pe: bool = True,
        attn_sink: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        args = (q_nope, q_pe, kv_c, o, page_table, seq_info, sm_scale)
        kw = dict(
            k_pe=k_pe,
            kv_pe_offset=kv_pe_offset,
            use_2d_view=use_2d_view,
            kv_scale=kv_scale,
            min_kv_seq_len=min_kv_seq_len,
            return_lse=return_lse,
            has_pe=has_pe,
            attn_sink=attn_sink,
        )
        self.calls.append(("mla_gluon", args, kw))
        _check(self.arch == "gfx950", f"mla_gluon requires gfx950 (CDNA4), got {self.arch}")
        _check(q_nope.dim() in (3, 4), "q_nope must be 3-D or 4-D")
        if q_nope.dim() == 4:
            b, qlen, h, d = q_nope.shape
        else:
            (b, h, d), qlen = q_nope.shape, 1
        _check(d == 512 and q_pe.shape[-1] == 64, "mla_gluon requires head dims 512 + 64")
        _check(q_nope.dtype == torch.bfloat16 and q_pe.dtype == torch.bfloat16, "q must be bf16")
        _check(o.shape == q_nope.shape, "o must match q_nope")
        fp8 = kv_c.dtype == torch.float8_e4m3fn
        self.splits.append(self.gluon_splits(b, qlen, h, min_kv_seq_len, fp8))
        if not self.compute:
            o.zero_()
            return o, torch.zeros(b, qlen, h) if return_lse else None
        kv = kv_c.float()
        q = torch.cat([q_nope, q_pe], dim=-1).reshape(b, qlen, h, 576)
        lse = torch.empty(b, qlen, h, dtype=torch.float32) if return_lse else None
        info = seq_info.numpy()  # the "kernel" reads device memory: no host sync to report
        for row in range(b):
            if use_2d_view:
                seq = int(info[row])
                slots = page_table[row, :seq].long()
            else:
                start, end = int(info[row]), int(info[row + 1])
                seq, slots = end - start, page_table[start:end].long()
            rows = kv.index_select(0, slots)
            full = torch.cat([rows[:, :512], rows[:, kv_pe_offset : kv_pe_offset + 64]], dim=-1)
            # the kernel's causal tail uses the tensor's qlen for every row (padding included)
            out, l_ = attend(q[row], full * kv_scale, seq, qlen, sm_scale)
            o[row] = out.to(o.dtype)
            if lse is not None:
                lse[row] = l_
        if lse is not None:
            self.lse_shapes.append(tuple(lse.shape))
        return o, lse

    # -- asm ---------------------------------------------------------------------------------
    def mla_decode_fwd(
        self,
        q: torch.Tensor,
        kv_buffer: torch.Tensor,
        o: torch.Tensor,
        qo_indptr: torch.Tensor,
        kv_indptr: torch.Tensor,
        kv_indices: torch.Tensor,
        kv_last_page_lens: torch.Tensor,
        max_seqlen_q: int,
        page_size: int = 1,
        nhead_kv: int = 1,
        sm_scale: float | None = None,
        logit_cap: float = 0.0,
        num_kv_splits: int | None = None,
        num_kv_splits_indptr: torch.Tensor | None = None,
        return_lse: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        args = (q, kv_buffer, o, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens, max_seqlen_q)
        kw = dict(
            page_size=page_size,
            nhead_kv=nhead_kv,
            sm_scale=sm_scale,
            logit_cap=logit_cap,
            num_kv_splits=num_kv_splits,
            num_kv_splits_indptr=num_kv_splits_indptr,
            return_lse=return_lse,
        )
        self.calls.append(("mla_decode_fwd", args, kw))
        _check(self.arch in ("gfx942", "gfx950"), f"no ASM MLA for {self.arch}")
        _check(q.dim() == 3 and kv_buffer.dim() == 4, "q [total_s, H, 576], kv [p, ps, nkv, 576]")
        total_s, h, dq = q.shape
        _check(kv_buffer.shape[1] == page_size and kv_buffer.shape[2] == nhead_kv, "kv_buffer")
        _check(dq == kv_buffer.shape[-1] == 576, "qk head dim must be 576")
        _check(tuple(o.shape) == (total_s, h, 512), "o must be [total_s, H, 512]")
        scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(dq)
        bs = qo_indptr.shape[0] - 1
        self.splits.append(num_kv_splits if num_kv_splits is not None else -1)
        kv = kv_buffer.reshape(-1, page_size, 576).float()
        lse = torch.full((total_s, h), float("nan"), dtype=torch.float32) if return_lse else None
        qo_np, kv_np, last_np = qo_indptr.numpy(), kv_indptr.numpy(), kv_last_page_lens.numpy()
        for row in range(bs):
            q0, q1 = int(qo_np[row]), int(qo_np[row + 1])
            if q1 == q0:
                continue  # a padding request: no tokens, nothing written
            p0, p1 = int(kv_np[row]), int(kv_np[row + 1])
            pages = kv_indices[p0:p1].long()
            seq = (p1 - p0 - 1) * page_size + int(last_np[row])
            rows = kv[pages].reshape(-1, 576)[:seq]
            out, l_ = attend(q[q0:q1], rows, seq, q1 - q0, scale)
            o[q0:q1] = out.to(o.dtype)
            if lse is not None:
                lse[q0:q1] = l_
        return o, lse


def install(
    monkeypatch: Any, version: str = "0.1.19", arch: str = "gfx950", split_override: bool = False
) -> Recorder:
    """Put a fake ``aiter`` (and its submodules) into ``sys.modules``; CPU tensors are allowed.
    ``split_override``: mla_gluon also takes ``num_kv_splits`` (as later AITER versions do)."""
    rec = Recorder(version=version, arch=arch)
    mods: dict[str, types.ModuleType] = {}
    for name in (
        "aiter",
        "aiter.ops",
        "aiter.ops.triton",
        "aiter.ops.triton.gluon",
        "aiter.ops.triton.gluon.mla_gluon",
        "aiter.mla",
        "aiter.jit",
        "aiter.jit.utils",
        "aiter.jit.utils.chip_info",
    ):
        mods[name] = types.ModuleType(name)
    mods["aiter"].__version__ = version  # type: ignore[attr-defined]
    gluon: Any = rec.mla_gluon
    if split_override:

        def gluon(*args: Any, num_kv_splits: int | None = None, **kw: Any) -> Any:
            res = rec.mla_gluon(*args, **kw)
            rec.calls[-1][2]["num_kv_splits"] = num_kv_splits
            if num_kv_splits is not None:
                rec.splits[-1] = num_kv_splits
            return res

    mods["aiter.ops.triton.gluon.mla_gluon"].mla_gluon = gluon  # type: ignore[attr-defined]
    mods["aiter.mla"].mla_decode_fwd = rec.mla_decode_fwd  # type: ignore[attr-defined]
    mods["aiter.jit.utils.chip_info"].get_gfx = lambda: rec.arch  # type: ignore[attr-defined]
    for name, mod in mods.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(mods[parent], child, mod)
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(aiter_env, "DEVICE_TYPE", "cpu")
    monkeypatch.delenv(aiter_env.VERSION_ENV, raising=False)
    return rec
