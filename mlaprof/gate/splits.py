"""Split-collapse gate: does a metadata builder's ``min_kv_seq_len`` keep S for padded batches?

For every (batch, KV length) whose FULL-graph padding adds rows (vLLM's uniform-batch padding,
:func:`mlaprof.metadata.batch_shape`), the builder is called with the real KV lengths, and the S
its ``min_kv_seq_len`` gives under a split policy is compared with the S of the real rows'
minimum. At most half (the rule every mlaprof view uses) is a collapse.

A builder is any callable ``builder(kv_lens, qlen, num_reqs)`` returning an object with a
``min_kv_seq_len`` attribute (an int or a 0-d tensor), or that value itself. ``kv_lens`` are the
real requests' KV lengths; ``num_reqs`` counts the padding rows the builder must add.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mlaprof.capture_sizes import DEFAULT_RULE, capture_plan
from mlaprof.errors import MlaprofError
from mlaprof.gate.core import CaptureGateError
from mlaprof.metadata import batch_shape
from mlaprof.rank_counts import counted
from mlaprof.scenario import DEVICES
from mlaprof.splits.policies import POLICIES, SplitInput, is_collapsed

Builder = Callable[[list[int], int, int], Any]


@dataclass
class SplitCase:
    batch: int
    rows: int
    context: int
    min_kv_passed: int
    s_used: int
    s_deserved: int

    def line(self, policy: str, device: str) -> str:
        return (
            f"  {self.batch} real + {self.rows - self.batch} padding rows, KV {self.context}: "
            f"builder passed min_kv_seq_len={self.min_kv_passed} (real rows' minimum "
            f"{self.context}) -> S = {self.s_used}, the real rows deserve {self.s_deserved} "
            f"({policy} on {device})"
        )


class SplitCollapseError(CaptureGateError):
    def __init__(self, cases: list[SplitCase], policy: str, device: str) -> None:
        AssertionError.__init__(
            self,
            f"KV splits collapse on {counted(len(cases), 'padded batch(es)')}: padding rows feed "
            "min_kv_seq_len (take it over rows with qo_len > 0)\n"
            + "\n".join(c.line(policy, device) for c in cases[:12]),
        )
        self.cases = cases


def _value(meta: Any) -> int:
    v = getattr(meta, "min_kv_seq_len", meta)
    try:
        return int(v)
    except (TypeError, ValueError):
        raise MlaprofError(
            f"the builder returned {type(meta).__name__}: give an object with min_kv_seq_len "
            "or the int itself"
        ) from None


def check_splits(
    builder: Builder,
    policy: str = "aiter-gluon-v0.1.19",
    heads: int = 16,
    num_spec: int = 3,
    device: str = "mi355x",
    batches: Sequence[int] = tuple(range(1, 33)),
    contexts: Sequence[int] = (1088, 4096, 32768),
    max_num_seqs: int = 256,
    capture_sizes: list[int] | None = None,
) -> list[SplitCase]:
    """Every padded (batch, context) case where the builder's S collapses (empty: it holds)."""
    if policy not in POLICIES:
        raise MlaprofError(f"unknown split policy {policy!r}; choose from {', '.join(POLICIES)}")
    if device not in DEVICES:
        raise MlaprofError(f"unknown device {device!r}; choose from {', '.join(DEVICES)}")
    p, units, q = POLICIES[policy], DEVICES[device].units, 1 + num_spec
    sizes = capture_plan(DEFAULT_RULE, max_num_seqs, num_spec, capture_sizes)
    bad: list[SplitCase] = []
    for b in batches:
        for ctx in contexts:
            shape = batch_shape([ctx] * b, q, "FULL", sizes)
            if shape.num_padding == 0:
                continue
            passed = _value(builder([ctx] * b, q, shape.num_reqs))
            total = b * ctx + shape.num_padding * q
            used, deserved = (
                p.splits(SplitInput(shape.num_reqs, q, heads, mn, ctx, total, units))
                for mn in (passed, ctx)
            )
            if is_collapsed(used, deserved):
                bad.append(SplitCase(b, shape.num_reqs, ctx, passed, used, deserved))
    return bad


def assert_splits_hold(builder: Builder, **kwargs: Any) -> None:
    """:func:`check_splits`, raising :class:`SplitCollapseError` (a test failure) on a collapse."""
    bad = check_splits(builder, **kwargs)
    if bad:
        raise SplitCollapseError(
            bad, kwargs.get("policy", "aiter-gluon-v0.1.19"), kwargs.get("device", "mi355x")
        )
