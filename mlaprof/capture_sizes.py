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
  own code (``max_num_batched_tokens`` is taken as not limiting).
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


def _legacy(max_num_seqs: int, num_spec: int) -> list[int]:
    q = 1 + num_spec
    return round_to_qlen(_grid(min(max_num_seqs * q * 2, DEFAULT_MAX)), q)


SIZE_RULES = {
    "vllm-legacy": _legacy,
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


# the rule each modelled vLLM version captures with (mlaprof.splits.routing.VERSIONS); 0.33.0 is
# taken as 0.32's (UNVERIFIED: its sizes code was not read)
RULE_OF_VERSION = {"0.32.0": "vllm-0.32", "0.33.0": "vllm-0.32", "pre-51171": "vllm-legacy"}
DEFAULT_RULE = "vllm-0.32"


def rule_for(version: str) -> str:
    """The capture-size rule of a vLLM version (:data:`RULE_OF_VERSION`)."""
    return RULE_OF_VERSION.get(version, DEFAULT_RULE)


def capture_sizes(
    max_num_seqs: int, num_spec: int, graph_mode: str = "FULL", rule: str = DEFAULT_RULE
) -> list[int]:
    """The sizes an engine captures: the rule's FULL-decode sizes; for PIECEWISE graphs the
    token grid itself (no uniform-decode rounding)."""
    if graph_mode == "FULL":
        return default_capture_sizes(rule, max_num_seqs, num_spec)
    return _grid(min(max_num_seqs * (1 + num_spec) * 2, DEFAULT_MAX))


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
