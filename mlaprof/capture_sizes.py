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
"""

from __future__ import annotations

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


SIZE_RULES = {
    "vllm-legacy": _legacy,
    "vllm-pr50488": _pr50488,
    "vllm-0.32": _v032,
}


def default_capture_sizes(
    rule: str, max_num_seqs: int, num_spec: int, max_num_batched_tokens: int | None = None
) -> list[int]:
    """The capture sizes (tokens) a FULL-decode engine of this vLLM rule captures by default;
    ``max_num_batched_tokens`` None: not limiting."""
    if rule not in SIZE_RULES:
        raise MlaprofError(
            f"unknown capture-size rule {rule!r}; choose one of {', '.join(SIZE_RULES)}"
        )
    if max_num_batched_tokens is not None and max_num_batched_tokens < 1:
        raise MlaprofError(f"max_num_batched_tokens must be >= 1, got {max_num_batched_tokens}")
    return SIZE_RULES[rule](max_num_seqs, num_spec, max_num_batched_tokens)


def sizes_for(
    rule: str,
    max_num_seqs: int,
    num_spec: int,
    explicit: list[int] | None,
    max_num_batched_tokens: int | None = None,
) -> list[int]:
    """An explicit ``cudagraph_capture_sizes`` list as vLLM adjusts it (sizes above
    ``max_num_batched_tokens`` dropped first, ``vllm/config/vllm.py`` L2455-2466), else the
    rule's default."""
    if explicit:
        if any(s < 1 for s in explicit):
            raise MlaprofError(f"capture sizes must be positive token counts, got {explicit}")
        kept = sorted({s for s in explicit if s <= (max_num_batched_tokens or s)})
        if not kept:
            raise MlaprofError(
                f"every capture size of {explicit} is above max_num_batched_tokens "
                f"{max_num_batched_tokens}"
            )
        return round_to_qlen(kept, 1 + num_spec)
    return default_capture_sizes(rule, max_num_seqs, num_spec, max_num_batched_tokens)


# the rule each modelled vLLM version captures with (mlaprof.splits.routing.VERSIONS); 0.33.0's
# _set_cudagraph_sizes (vllm.py L2398-2656), adjust_cudagraph_sizes_for_spec_decode
# (compilation.py L1537-1565) and cudagraph_dispatcher.py (L130-322) have 0.32's syntax trees
RULE_OF_VERSION = {"0.32.0": "vllm-0.32", "0.33.0": "vllm-0.32", "pre-51171": "vllm-legacy"}
DEFAULT_RULE = "vllm-0.32"


def rule_for(version: str) -> str:
    """The capture-size rule of a vLLM version (:data:`RULE_OF_VERSION`)."""
    return RULE_OF_VERSION.get(version, DEFAULT_RULE)


def capture_sizes(
    max_num_seqs: int,
    num_spec: int,
    graph_mode: str = "FULL",
    rule: str = DEFAULT_RULE,
    max_num_batched_tokens: int | None = None,
) -> list[int]:
    """The sizes an engine captures: the rule's FULL-decode sizes; for PIECEWISE graphs the
    token grid itself (no uniform-decode rounding)."""
    if graph_mode == "FULL":
        return default_capture_sizes(rule, max_num_seqs, num_spec, max_num_batched_tokens)
    top = min(max_num_seqs * (1 + num_spec) * 2, DEFAULT_MAX)
    return _assemble(top, [], max_num_batched_tokens)


def padded_size(num_tokens: int, sizes: list[int]) -> int | None:
    """The capture size a batch of ``num_tokens`` is padded to (None: too big, runs eagerly)."""
    for s in sizes:
        if s >= num_tokens:
            return s
    return None


def padded_rows(size: int, qlen: int, max_num_seqs: int | None) -> int:
    """Rows of a uniform batch padded to ``size`` tokens: ``size // qlen``, capped at
    ``max_num_seqs`` (vLLM 0.32 ``cudagraph_dispatcher.py`` L142)."""
    rows = size // qlen
    return rows if max_num_seqs is None else min(rows, max_num_seqs)
