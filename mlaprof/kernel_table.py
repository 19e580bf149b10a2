"""MLA kernels of a trace, recognised by WHOLE name, and what each one's launch grid says.

One table (:data:`DEFAULT_PATTERNS`) lists every real kernel of every verify path (AITER v0.1.19/v0.1.20
and vLLM 0.32 sources): its path, its role in a layer (stage 1 opens a layer; stage 2 / reduce close it; the
persistent path's metadata kernel runs once per step, eagerly, in vLLM's builder) and which grid
axis holds what:

====================  =================================  ========================  ==========
path                  stage-1 grid in blocks (x, y, z)   S                         batch rows
====================  =================================  ========================  ==========
aiter-gluon (bh16)    (B, S, qlen) v0.1.19;              y                         x
                      (B, S, ceil(H/16)*qlen) v0.1.20+
aiter-gluon-bh64 [*]  (XCDs, ceil(H/64)*qlen, B/XCDs*S)  not alone (needs B)       -
aiter-asm             (ceil(qlen*gqa/subQ), B, S)        z                         y
aiter-asm-persistent  (#CU, 1, 1)                        decided on the device     -
vllm-triton           (rows, ceil(H/min(16, group)), S)  z                         x
mlaprof-triton        (head blocks, rows, S)             z                         y
====================  =================================  ========================  ==========

[*] not in the default table: vLLM never routes verify to bh64 (16 heads and more take ASM),
and its ``_mla_gluon`` grid cannot be told from bh16's; select it with ``--patterns``.

Open AITER PR #4758 (unreleased) launches the gluon stage 1 split-major, ``(S, B, ceil(H/16)*qlen)``,
when B > 1 and S % 8 == 0 (:func:`gluon_pr4758_grid`). The grid alone cannot tell the two layouts
apart ((16, 4, 4) is B 16 x S 4 batch-major or B 4 x S 16 split-major), so a trace of that build is
read with ``--patterns aiter-pr4758`` (:data:`LAYOUTS`): S from x, rows from y.

Names are matched with ``re.fullmatch`` (case-sensitive: kernel symbols are), so kernels that
merely contain "mla" (fused rope + KV-cache writes such as ``fused_qk_rope_cat_and_cache_mla``,
``concat_and_cache_mla_kernel``) never count as attention layers. Grid units differ between
tracers: Kineto/CUPTI report blocks, rocprofv3 work-items (blocks x workgroup size).

Users extend the table with ``mlaprof import --patterns FILE`` (JSON list or TOML
``[[pattern]]`` tables: ``name`` regex, ``role``, ``split_axis``, ``rows_axis``, optional
``path`` and ``qlen_axis``) or with ``--mla-pattern AXIS:REGEX``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.kernel_names import kernel_forms
from mlaprof.rank_counts import plural

STAGE1 = "stage1"  # opens a layer: one per layer
STAGE2 = "stage2"  # the split reduction of the stage-1 kernel before it (absent when S == 1)
REDUCE = "reduce"  # the persistent path's reduction (same place as stage 2)
METADATA = "metadata"  # once per step, outside the layers (persistent work split)
ROLES = (STAGE1, STAGE2, REDUCE, METADATA)
_ROLE_ALIASES = {"main": STAGE1}

DEVICE = "device"  # split_axis: S is decided on the device and is not on the grid
AXES = ("x", "y", "z")


def _cxx(name: str) -> str:
    """Whole-name regex of a C++/Triton/HIP kernel symbol: optional ``void `` and namespace,
    template and argument lists, rocprof's ``.kd`` suffix."""
    return rf"(?:void\s+)?(?:\w+::)*{name}(?:<.*>)?(?:\(.*\))?(?:\.kd)?"


def _plain(name: str) -> str:
    """Whole-name regex of a Python-named (Triton/gluon) kernel: the function name, ``.kd``."""
    return rf"{name}(?:\.kd)?"


@dataclass(frozen=True)
class KernelPattern:
    """One kernel of one path. ``regex`` must match the whole kernel name."""

    path: str  # aiter-gluon | aiter-asm | aiter-asm-persistent | vllm-triton | ... | user
    regex: str
    role: str = STAGE1
    split_axis: str | None = None  # "x" | "y" | "z" | "device" | None (stage 2, metadata)
    rows_axis: str | None = None  # grid axis holding the batch rows (padding rows included)
    qlen_axis: str | None = None  # grid axis holding qlen (gluon v0.1.20+: ceil(H/16)*qlen)
    kernel: str = ""  # the documented name (for messages)
    heads_axis: str | None = None  # grid axis holding the head count (gluon stage 2: y)
    # whole-name regex of the kernel's base name, what ``rocprofv3 -T`` writes (namespace,
    # templates and parameters cut: kernel_names.truncate_name); None: matched by full name only
    base: str | None = None

    def __post_init__(self) -> None:
        role = _ROLE_ALIASES.get(self.role, self.role)
        object.__setattr__(self, "role", role)
        if role not in ROLES:
            raise MlaprofError(
                f"kernel pattern {self.regex!r}: role {self.role!r} is not one of "
                + ", ".join(ROLES)
            )
        for what, ax, ok in (
            ("split_axis", self.split_axis, (*AXES, DEVICE)),
            ("rows_axis", self.rows_axis, AXES),
            ("qlen_axis", self.qlen_axis, AXES),
            ("heads_axis", self.heads_axis, AXES),
        ):
            if ax is not None and ax not in ok:
                raise MlaprofError(
                    f"kernel pattern {self.regex!r}: {what} {ax!r} is not one of {', '.join(ok)}"
                )
        if role != STAGE1 and self.split_axis is not None:
            raise MlaprofError(
                f"kernel pattern {self.regex!r}: only stage-1 kernels carry S (split_axis)"
            )
        for rx in (self.regex, self.base):
            try:
                re.compile(rx or "")
            except re.error as e:
                raise MlaprofError(f"bad kernel pattern {rx!r}: {e}") from None

    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.regex)

    @property
    def label(self) -> str:
        return self.kernel or self.regex

    def s_source(self) -> str:
        """Where S comes from, in words (the provenance every imported S carries)."""
        if self.split_axis == DEVICE:
            return f"decided on the device (not on the grid of {self.label})"
        if self.split_axis is None:
            return f"not on the grid of {self.label}"
        return f"from grid axis {self.split_axis} of {self.label}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


GLUON, ASM, PERSISTENT = "aiter-gluon", "aiter-asm", "aiter-asm-persistent"
# base name of an AITER ASM MLA kernel (its namespace cut by rocprofv3 -T): the .co names of
# AITER hsa/gfx942|gfx950/mla/ (mla_a16w16_qh16_m16x4_n16x1_coex0_mask1[_ps],
# mla_a8w8_qh16_qseqlen4_gqaratio16_ps, mla_dec_stage1_bf16_a16w16_subQ16_mqa16)
_AITER_ASM = r"mla_(?:a\d+w\d+|dec_stage1|pfl)_\w+"
VLLM_TRITON, MLAPROF_TRITON = "vllm-triton", "mlaprof-triton"

DEFAULT_PATTERNS: tuple[KernelPattern, ...] = (
    # mlaprof's own Triton kernel (mlaprof/kernels/mla_verify.py): (head blocks, rows, S)
    KernelPattern(MLAPROF_TRITON, _plain("mla_verify_stage1"), STAGE1, "z", "y", None,
                  "mla_verify_stage1", base="mla_verify_stage1"),
    # its sm_90 Gluon stage 1 (mlaprof/kernels/mla_verify_gluon.py): the same grid axes
    KernelPattern(MLAPROF_TRITON, _plain("mla_verify_stage1_hopper"), STAGE1, "z", "y", None,
                  "mla_verify_stage1_hopper", base="mla_verify_stage1_hopper"),
    # ... and its TMA variant for pages of whole tiles (vLLM's 64-token blocks): the same grid
    KernelPattern(MLAPROF_TRITON, _plain("mla_verify_stage1_hopper_tma"), STAGE1, "z", "y", None,
                  "mla_verify_stage1_hopper_tma", base="mla_verify_stage1_hopper_tma"),
    # ... its warpgroup-roles kernel (the sm_90 default) and warp-specialized option: the same grid
    KernelPattern(MLAPROF_TRITON, _plain("mla_verify_stage1_hopper_roles"), STAGE1, "z", "y", None,
                  "mla_verify_stage1_hopper_roles", base="mla_verify_stage1_hopper_roles"),
    KernelPattern(MLAPROF_TRITON, _plain("mla_verify_stage1_hopper_ws"), STAGE1, "z", "y", None,
                  "mla_verify_stage1_hopper_ws", base="mla_verify_stage1_hopper_ws"),
    KernelPattern(MLAPROF_TRITON, _plain("mla_verify_stage2"), STAGE2, kernel="mla_verify_stage2",
                  base="mla_verify_stage2"),
    # vLLM Triton MLA decode (vllm/v1/attention/ops/triton_decode_attention.py)
    KernelPattern(VLLM_TRITON, _plain("_fwd_grouped_kernel_stage1"), STAGE1, "z", "x", None,
                  "_fwd_grouped_kernel_stage1", base="_fwd_grouped_kernel_stage1"),
    KernelPattern(VLLM_TRITON, _plain("_fwd_kernel_stage1"), STAGE1, "z", "x", None,
                  "_fwd_kernel_stage1", base="_fwd_kernel_stage1"),
    # its stage 2 (_decode_softmax_reducev_fwd): grid (batch, heads)
    KernelPattern(VLLM_TRITON, _plain("_fwd_kernel_stage2"), STAGE2, kernel="_fwd_kernel_stage2",
                  heads_axis="y", base="_fwd_kernel_stage2"),
    # AITER gluon MLA (bh16 layout: the one vLLM's verify route takes, < 16 heads)
    KernelPattern(GLUON, _plain("_mla_gluon"), STAGE1, "y", "x", "z", "_mla_gluon",
                  base="_mla_gluon"),
    KernelPattern(GLUON, _plain("_mla_softmax_reducev_kernel"), STAGE2, None, "x", "z",
                  "_mla_softmax_reducev_kernel", heads_axis="y",
                  base="_mla_softmax_reducev_kernel"),
    # AITER ASM: persistent ("_ps") variants first; S is computed on the device
    # demangled (rocprofv3's default) code-object symbols; a mangled one (-M,
    # _ZN5aiter<len>mla_...E) is matched by its demangled name, a -T one by its base name
    # (AITER's hsa/<arch>/mla/*.co kernels: mla_a<bits>w<bits>_..., older mla_dec_stage1_...)
    KernelPattern(PERSISTENT, r"aiter::mla_\w+_ps", STAGE1, DEVICE, None, None,
                  "aiter::mla_..._ps", base=_AITER_ASM + r"_ps"),
    KernelPattern(PERSISTENT, _cxx("kn_get_mla_metadata_v1(?:_\\d+)?"), METADATA,
                  kernel="kn_get_mla_metadata_v1_2", base=r"kn_get_mla_metadata_v1(?:_\d+)?"),
    # reduce grid (H, W, tiles) x 128
    KernelPattern(PERSISTENT, _cxx("kn_mla_reduce_v1"), REDUCE, kernel="kn_mla_reduce_v1",
                  heads_axis="x", base="kn_mla_reduce_v1"),
    KernelPattern(ASM, r"aiter::mla_\w+", STAGE1, "z", "y", None, "aiter::mla_...",
                  base=_AITER_ASM),
    # ASM stage 2 grid (B, H) x 64
    KernelPattern(ASM, _plain("_fwd_kernel_stage2_asm"), STAGE2, kernel="_fwd_kernel_stage2_asm",
                  heads_axis="y", base="_fwd_kernel_stage2_asm"),
)  # fmt: skip


GLUON_XCDS = 8  # PR #4758 goes split-major when S is a multiple of the XCD count (MI355X: 8)


def heads_axis_of(p: KernelPattern | None) -> int | None:
    """The grid axis (0-2) on which a stage-2 / reduce kernel's launch carries the head count;
    None for any other kernel (the one rule the engines' head votes count by)."""
    if p is None or p.role not in (STAGE2, REDUCE) or p.heads_axis is None:
        return None
    return AXES.index(p.heads_axis)


def gluon_pr4758_grid(b: int, s: int, hq: int) -> tuple[int, int, int]:
    """The stage-1 grid (blocks) open AITER PR #4758 launches: split-major ``(S, B, hq)`` when
    B > 1 and S % 8 == 0, else the released ``(B, S, hq)`` (hq = ceil(H/16) * qlen)."""
    return (s, b, hq) if b > 1 and s % GLUON_XCDS == 0 else (b, s, hq)


# named kernel tables for ``--patterns NAME``: builds whose grids the default table misreads
LAYOUTS: dict[str, tuple[KernelPattern, ...]] = {
    "aiter-pr4758": (
        KernelPattern(GLUON, _plain("_mla_gluon"), STAGE1, "x", "y", "z",
                      "_mla_gluon (AITER PR #4758 split-major: S on x, rows on y)"),
    ),
}  # fmt: skip


@dataclass
class KernelMatcher:
    """First whole-name match in table order; results cached per distinct name."""

    patterns: Sequence[KernelPattern] = field(default_factory=lambda: DEFAULT_PATTERNS)

    def __post_init__(self) -> None:
        self._compiled = [(p, p.compiled()) for p in self.patterns]
        self._bases = [(p, re.compile(p.base)) for p in self.patterns if p.base]
        self._cache: dict[str, KernelPattern | None] = {}

    def match(self, name: str | None) -> KernelPattern | None:
        """The one rule for every rocprofv3 naming option (:func:`kernel_names.kernel_forms`):
        the name as written (``.kd`` cut; a mangled symbol by its demangled qualified name),
        else, for a name that is a base name (``-T``), the first kernel with that base name."""
        if not name:
            return None
        hit = self._cache.get(name, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        stripped = name.strip()
        full, base = kernel_forms(stripped)
        found = next(
            (p for p, rx in self._compiled if rx.fullmatch(stripped) or rx.fullmatch(full)), None
        )
        if found is None and base is not None:
            found = next((p for p, rx in self._bases if rx.fullmatch(base)), None)
        self._cache[name] = found
        return found

    def with_user(self, patterns: Iterable[KernelPattern]) -> KernelMatcher:
        """User patterns (``--patterns``: explicit axes) are checked before this table."""
        return KernelMatcher(tuple(patterns) + tuple(self.patterns))

    def with_extra(self, specs: Iterable[str]) -> KernelMatcher:
        """``--mla-pattern [AXIS:]REGEX`` stage-1 kernels, checked AFTER the known kernels (a
        loose regex can never re-read a known kernel's grid on the wrong axis). Without an
        axis S is read from grid z (the old behaviour)."""
        extra = [parse_mla_pattern(s) for s in specs]
        return KernelMatcher(tuple(self.patterns) + tuple(extra))


def matcher_record(matcher: KernelMatcher) -> dict[str, Any] | None:
    """What a run keeps of the import's kernel table where it is not the default one: the rows
    checked before the default table (``--patterns``) and after it (``--mla-pattern``), or
    every row where the table was replaced; None for the default table (nothing to keep)."""
    rows = tuple(matcher.patterns)
    if rows == DEFAULT_PATTERNS:
        return None
    n = len(DEFAULT_PATTERNS)
    at = next((i for i in range(len(rows) - n + 1) if rows[i : i + n] == DEFAULT_PATTERNS), None)
    if at is None:
        return {"rows": [p.to_dict() for p in rows]}
    return {
        "before": [p.to_dict() for p in rows[:at]],
        "after": [p.to_dict() for p in rows[at + n :]],
    }


def table_meta(matcher: KernelMatcher) -> dict[str, Any]:
    """run.json's ``kernel_table`` key of an import that matched with ``matcher`` (none for the
    default table): kept, so the analysis judges names as the import did."""
    record = matcher_record(matcher)
    return {} if record is None else {"kernel_table": record}


def matcher_of(record: Any) -> KernelMatcher:
    """The kernel table an import matched names with (:func:`matcher_record`'s record; None or
    a record of no rows: the default table)."""
    if not isinstance(record, dict):
        return KernelMatcher()
    try:
        if "rows" in record:
            return KernelMatcher(tuple(KernelPattern(**d) for d in record["rows"]))
        before = tuple(KernelPattern(**d) for d in record.get("before", []))
        after = tuple(KernelPattern(**d) for d in record.get("after", []))
    except (TypeError, AttributeError) as e:
        raise MlaprofError(f"run.json: kernel_table is not a kernel table record ({e})") from None
    return KernelMatcher(before + DEFAULT_PATTERNS + after)


def parse_mla_pattern(spec: str) -> KernelPattern:
    """``z:my_kernel.*`` -> a stage-1 pattern with S on z; plain ``REGEX`` means ``z:REGEX``."""
    axis, sep, rx = spec.partition(":")
    if not sep or axis not in (*AXES, DEVICE, "none"):
        axis, rx = "z", spec
    if not rx:
        raise MlaprofError(f"--mla-pattern {spec!r}: empty regex")
    return KernelPattern("user", rx, STAGE1, None if axis == "none" else axis, kernel=rx)


_KEYS = {"name", "regex", "path", "family", "role", "split_axis", "rows_axis", "qlen_axis"}


def _pattern(d: Any, where: str) -> KernelPattern:
    if not isinstance(d, dict):
        raise MlaprofError(f"{where}: a pattern must be a table/object, got {type(d).__name__}")
    unknown = set(d) - _KEYS
    if unknown:
        raise MlaprofError(
            f"{where}: unknown {plural('key(s)', len(unknown))} {', '.join(sorted(unknown))}"
        )
    rx = d.get("name", d.get("regex"))
    if not isinstance(rx, str) or not rx:
        raise MlaprofError(f"{where}: 'name' (a whole-name regex) is required")
    role = str(d.get("role", STAGE1))
    if _ROLE_ALIASES.get(role, role) == STAGE1 and "split_axis" not in d:
        raise MlaprofError(
            f"{where}: a stage-1 pattern needs 'split_axis' (x, y, z, device or none): "
            "S is on a different axis per path"
        )
    sa = d.get("split_axis")
    return KernelPattern(
        str(d.get("path", d.get("family", "user"))),
        rx,
        role,
        None if sa in (None, "none") else str(sa),
        None if d.get("rows_axis") in (None, "none") else str(d["rows_axis"]),
        None if d.get("qlen_axis") in (None, "none") else str(d["qlen_axis"]),
        rx,
    )


def load_patterns(path: Path | str) -> list[KernelPattern]:
    """User patterns from a JSON list or a TOML file of ``[[pattern]]`` tables, or a named
    table of :data:`LAYOUTS` (``aiter-pr4758``)."""
    if str(path) in LAYOUTS:
        return list(LAYOUTS[str(path)])
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise MlaprofError(f"cannot read kernel patterns from {path}: {e.strerror or e}") from None
    try:
        if path.suffix.lower() == ".toml":
            import tomllib  # only for a TOML table: every import loads this module

            doc: Any = tomllib.loads(text).get("pattern", [])
        else:
            doc = json.loads(text)
    except ValueError as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise MlaprofError(f"{path}: not valid JSON/TOML ({e})") from None
    if not isinstance(doc, list) or not doc:
        raise MlaprofError(
            f"{path}: expected a non-empty JSON list of patterns or TOML [[pattern]] tables"
        )
    return [_pattern(d, f"{path} pattern {i + 1}") for i, d in enumerate(doc)]
