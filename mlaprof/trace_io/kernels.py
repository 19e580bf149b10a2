"""MLA kernel recognition by name, KV-split inference from grid sizes, per-replay layer numbering.

A trace rarely carries the split count S of a split-KV attention kernel, but its launch grid does:
the split-KV stage-1 kernels put S on the grid's z axis (vLLM Triton decode: grid
``(rows, ceil(H / min(16, group)), S)``; mlaprof's own Triton kernel: ``(rows, ceil(H / BLOCK_H),
S)``). Patterns are regular expressions (case-insensitive, ``re.search``) and can be extended.

Grid units differ between tracers: Kineto/CUPTI report grids in blocks, rocprofv3 in work-items
(HSA dispatch semantics, blocks x workgroup size); :func:`infer_splits` takes the unit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlaprof.errors import MlaprofError

# role: "main" kernels count one layer each; "reduce" kernels belong to the preceding main kernel.
MAIN = "main"
REDUCE = "reduce"


@dataclass(frozen=True)
class KernelPattern:
    family: str  # aiter-gluon | aiter-asm | vllm-triton | mlaprof-triton | user
    regex: str
    role: str = MAIN
    split_axis: str | None = None  # grid axis holding S ("x", "y", "z"), None: no grid rule

    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.regex, re.IGNORECASE)


DEFAULT_PATTERNS: tuple[KernelPattern, ...] = (
    # mlaprof's own Triton kernel (mlaprof/kernels/mla_verify.py)
    KernelPattern("mlaprof-triton", r"\bmla_verify_stage1\b", MAIN, "z"),
    KernelPattern("mlaprof-triton", r"\bmla_verify_stage2\b", REDUCE),
    # vLLM Triton MLA decode (vllm/v1/attention/ops/triton_decode_attention.py)
    KernelPattern("vllm-triton", r"_fwd_grouped_kernel_stage1", MAIN, "z"),
    KernelPattern("vllm-triton", r"_fwd_kernel_stage1", MAIN, "z"),
    KernelPattern("vllm-triton", r"_fwd_kernel_stage2", REDUCE),
    # AITER gluon MLA (aiter.ops.triton.gluon.mla_gluon); S is a host constant, not on the grid
    KernelPattern("aiter-gluon", r"mla.*gluon|gluon.*mla", MAIN),
    # AITER ASM MLA decode kernels and their split reduction
    KernelPattern("aiter-asm", r"mla.*reduce", REDUCE),
    KernelPattern("aiter-asm", r"aiter.*mla|mla_a\d+w\d+|mla_dec", MAIN),
)


@dataclass
class KernelMatcher:
    patterns: Sequence[KernelPattern] = field(default_factory=lambda: DEFAULT_PATTERNS)

    def __post_init__(self) -> None:
        self._compiled = [(p, p.compiled()) for p in self.patterns]
        self._cache: dict[str, KernelPattern | None] = {}

    def match(self, name: str | None) -> KernelPattern | None:
        """The first pattern matching ``name`` (cached: traces repeat a few names many times)."""
        if not name:
            return None
        hit = self._cache.get(name, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        found = next((p for p, rx in self._compiled if rx.search(name)), None)
        self._cache[name] = found
        return found

    def with_extra(self, regexes: Iterable[str]) -> KernelMatcher:
        """A matcher that also treats ``regexes`` as MLA main kernels (checked first)."""
        extra = []
        for rx in regexes:
            try:
                re.compile(rx)
            except re.error as e:
                raise MlaprofError(f"bad MLA kernel pattern {rx!r}: {e}") from None
            extra.append(KernelPattern("user", rx, MAIN, "z"))
        return KernelMatcher(tuple(extra) + tuple(self.patterns))


def load_patterns(path: Path | str) -> KernelMatcher:
    """Read patterns from a JSON file: ``[{"family", "regex", "role", "split_axis"}, ...]``."""
    try:
        doc = json.loads(Path(path).read_text())
        pats = [
            KernelPattern(
                str(d["family"]), str(d["regex"]), str(d.get("role", MAIN)), d.get("split_axis")
            )
            for d in doc
        ]
        for p in pats:
            p.compiled()
            if p.role not in (MAIN, REDUCE) or p.split_axis not in (None, "x", "y", "z"):
                raise ValueError(f"bad role/split_axis in {p}")
    except (OSError, ValueError, KeyError, TypeError, re.error) as e:
        raise MlaprofError(f"cannot read kernel patterns from {path}: {e}") from None
    return KernelMatcher(pats)


def infer_splits(
    pattern: KernelPattern | None,
    grid: tuple[int | None, int | None, int | None],
    block: tuple[int | None, int | None, int | None] = (1, 1, 1),
    grid_in_workitems: bool = False,
) -> int | None:
    """S from the launch grid for split-KV stage-1 kernels; None when the grid cannot tell."""
    if pattern is None or pattern.split_axis is None:
        return None
    i = "xyz".index(pattern.split_axis)
    g = grid[i]
    if g is None or g <= 0:
        return None
    if grid_in_workitems:
        b = block[i] or 1
        if g % b:
            return None
        g //= b
    return int(g)


def assign_layers(
    names: Sequence[str | None], replays: Sequence[int | None], matcher: KernelMatcher
) -> list[int | None]:
    """Layer of each kernel, in launch order: the n-th MLA main kernel of a replay is layer n.

    Reduce kernels get the layer of the main kernel before them; other kernels get None.
    """
    out: list[int | None] = []
    count: dict[int | None, int] = {}
    last: dict[int | None, int | None] = {}
    for name, rep in zip(names, replays, strict=True):
        p = matcher.match(name)
        if p is None:
            out.append(None)
        elif p.role == MAIN:
            n = count.get(rep, 0)
            count[rep] = n + 1
            last[rep] = n
            out.append(n)
        else:
            out.append(last.get(rep))
    return out
