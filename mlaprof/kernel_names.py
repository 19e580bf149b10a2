"""Kernel names as rocprofv3 writes them under each naming option, brought to one form the kernel
table (:mod:`mlaprof.kernel_table`) matches.

rocprofv3 formats a kernel symbol's name once, when its code object loads (ROCm/rocprofiler-sdk
at 8ab1ed7: ``source/lib/rocprofiler-sdk-tool/config.cpp`` ``format_name`` L551-562; options in
``source/bin/rocprofv3.py`` L278-293; ``truncate_name`` in ``source/lib/common/demangle.cpp``
L119):

- default: the trailing ``.kd`` is cut and the symbol demangled
  (``aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_ps``,
  ``void aiter::kn_get_mla_metadata_v1_2<...>(...)``);
- ``-M`` / ``--mangled-kernels``: the raw symbol (``_ZN5aiter..._psE.kd``);
- ``-T`` / ``--truncate-kernels`` (formerly ``--basenames``): demangled, then cut to its base name
  by ``truncate_name`` (``source/lib/common/demangle.cpp``): trailing ``(...)``, ``<...>`` and
  ``[...]`` groups and spaces dropped from the right, then everything up to the last ``:`` or
  space, so namespaces go too (``mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_ps``,
  ``kn_get_mla_metadata_v1_2``). The launch grid is unchanged;
- ``--kernel-rename``: a dispatch made inside a roctx range is named after the innermost range
  (``tool.cpp`` ``set_kernel_rename_correlation_id`` L310-326, ``kernel_rename_callback``
  L372-404, ``get_kernel_name`` L628-639; the CSV writer calls
  ``tool_get_kernel_name_fn(kernel_id, external)``, ``generateCSV.cpp`` L521): the kernel's own
  name is not in a CSV kernel trace (the JSON writer keeps the symbols and maps the rename ids,
  ``generateJSON.cpp`` L124-133). The ``no-mla`` warning (:mod:`mlaprof.analysis.coverage`)
  tells such names apart: a name equal to a roctx message of the same trace, or one of
  :data:`RANGE_LIKE`; nothing recovers the kernel from them.

The one rule (:func:`kernel_forms`): a name is matched as written; a mangled one by its
demangled qualified name; a name that is already a base name (what ``-T`` writes) by the base
names of the known kernels.
"""

from __future__ import annotations

import re

_KD = re.compile(r"\.kd$")
_PAIRS = {")": "(", ">": "<", "]": "["}


def truncate_name(name: str) -> str:
    """The base name rocprofv3 ``-T`` writes for a demangled ``name`` (the same walk as
    rocprofiler-sdk ``demangle.cpp`` ``truncate_name``): ``Foo<int>::foo(a[], int (int))`` ->
    ``foo``; ``aiter::mla_x`` -> ``mla_x``; a plain name stays as it is."""
    i = len(name) - 1
    while i >= 0:
        c = name[i]
        if c == " ":
            i -= 1
            continue
        if c not in _PAIRS:
            break
        close, depth = _PAIRS[c], 1
        i -= 1
        while i >= 0 and depth:
            if name[i] == c:
                depth += 1
            elif name[i] == close:
                depth -= 1
            i -= 1
    end = i + 1
    while i >= 0 and name[i] not in " :":
        i -= 1
    return name[i + 1 : end]


def demangle_qualified(name: str) -> str | None:
    """The qualified name (``aiter::mla_x``, ``kn_mla_reduce_v1``) of an Itanium-mangled
    function symbol ``_Z[N]<len><id>...``; template and parameter lists are not decoded (the
    kernel table needs only the name). None when ``name`` is not such a symbol."""
    if not name.startswith("_Z"):
        return None
    i = 2
    if name.startswith("N", i):
        i += 1
    while i < len(name) and name[i] in "LKV":  # internal linkage, cv-qualifiers
        i += 1
    if name.startswith("St", i):
        parts, i = ["std"], i + 2
    else:
        parts = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        n = int(name[i:j])
        if n <= 0 or j + n > len(name):
            return None
        parts.append(name[j : j + n])
        i = j + n
    return "::".join(parts) if parts else None


def is_base_name(name: str) -> bool:
    """``name`` is what ``-T`` writes: no namespace, template or parameter list left."""
    return bool(name) and truncate_name(name) == name and not name.startswith("_Z")


def kernel_forms(name: str) -> tuple[str, str | None]:
    """(the full name to match, the base name to match where the full name matches nothing).
    ``.kd`` is cut (rocprofv3 cuts it unless ``-M``); a mangled symbol gives its demangled
    qualified name; the base name is given only for a name that is already one (``-T``), so
    a full name never matches a known kernel by its last component alone."""
    raw = _KD.sub("", name.strip())
    full = demangle_qualified(raw) or raw
    return full, (full if is_base_name(full) else None)


# range names vLLM and mlaprof push around whole forwards (a ``--kernel-rename`` trace names
# every dispatch inside one after it): vLLM's step annotation (vllm/v1/worker/gpu_worker.py),
# execute_model / sample_tokens, mlaprof's own ranges (mlaprof/probes/ranges.py)
RANGE_LIKE = re.compile(
    r"execute_model|sample_tokens|_dummy_run|capture_model|profile_run|"
    r"execute(?:_\d+)?_context_\d+.*_generation_\d+.*|"
    r"mlaprof[ :].*|layer \d+|step \d+",
    re.IGNORECASE,
)


__all__ = [
    "RANGE_LIKE",
    "demangle_qualified",
    "is_base_name",
    "kernel_forms",
    "truncate_name",
]
