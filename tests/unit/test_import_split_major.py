"""A trace of an AITER build with open PR #4758: the gluon stage 1 is launched split-major,
``(S, B, ceil(H/16)*qlen)``, when B > 1 and S % 8 == 0. The trace is written the way rocprofv3
writes a kernel_trace.csv (tests/data/make_aiter_traces.py, grids in work-items); the default
table reads S from y (the released layout), ``--patterns aiter-pr4758`` from x."""

from __future__ import annotations

from pathlib import Path

from mlaprof.importers.rocprof import import_rocprof
from mlaprof.kernel_table import KernelMatcher, gluon_pr4758_grid, load_patterns
from tests.data import make_aiter_traces as mk
from tests.trace_io_helpers import kernel_dicts


def _trace(rows: int, s: int, qlen: int = 4, heads: int = 8) -> mk.Trace:
    tr = mk.Trace()
    hq = -(-heads // 16) * qlen
    for _ in range(2):
        seq = []
        for _layer in range(mk.LAYERS):
            seq.append((mk.GLUON_S1, gluon_pr4758_grid(rows, s, hq), mk.W256, 9_000))
            seq.append((mk.GLUON_S2, (rows, heads, qlen), mk.W512, 2_500))
        tr.replay(seq)
        mk.between_replays(tr)
    return tr


def test_pr4758_grid_rule():
    assert gluon_pr4758_grid(4, 16, 4) == (16, 4, 4)  # split-major: S % 8 == 0, B > 1
    assert gluon_pr4758_grid(16, 4, 4) == (16, 4, 4)  # batch-major: the same grid
    assert gluon_pr4758_grid(1, 64, 4) == (1, 64, 4)  # B == 1 stays batch-major


def test_split_major_trace_reads_with_the_named_layout(tmp_path: Path) -> None:
    # 4 rows x qlen 4 with 8 heads: v0.1.20's S = 256 // 16 = 16, a multiple of 8: split-major
    _trace(rows=4, s=16).write(tmp_path / "pr4758")
    matcher = KernelMatcher().with_user(load_patterns("aiter-pr4758"))
    run, _ = import_rocprof(tmp_path / "pr4758", tmp_path / "out", "pr4758", matcher=matcher)
    ks = [k for k in kernel_dicts(run) if k["name"] == mk.GLUON_S1]
    assert len(ks) == 2 * mk.LAYERS and {k["splits"] for k in ks} == {16}
    # the default (released) layout reads the same trace as S = 4: the layout must be named
    plain, _ = import_rocprof(tmp_path / "pr4758", tmp_path / "out", "plain")
    assert {k["splits"] for k in kernel_dicts(plain) if k["name"] == mk.GLUON_S1} == {4}
