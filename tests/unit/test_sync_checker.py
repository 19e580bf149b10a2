"""The sync/capture checker: what it must find, what it must not, and that it is neutral."""

import inspect

import pytest
import torch

from mlaprof.backends import legacy_flat
from mlaprof.backends.base import make_inputs
from mlaprof.backends.registry import get_backend
from mlaprof.metadata import BatchShape, build_metadata
from mlaprof.probes.sync_checker import CaptureBreak, SyncChecker


def _setup(kv=(40, 90, 17), pad=1, qlen=4, heads=8):
    meta = build_metadata(BatchShape(list(kv), qlen, len(kv) + pad, None, "FULL"))
    return meta, make_inputs(meta, heads, seed=3), heads


def _forward(name, meta, inp, heads, checker=None, layers=1):
    out = torch.full((meta.num_reqs, meta.qlen, heads, 512), float("nan"))
    lse = torch.full((meta.num_reqs, meta.qlen, heads), float("nan"))
    be = get_backend(name)
    for layer in range(layers):
        if checker is None:
            be.forward(inp, meta, out, lse)
        else:
            with checker.region(layer=layer, step=0):
                be.forward(inp, meta, out, lse)
    return out, lse


def _line_of(marker: str) -> int:
    src = inspect.getsource(legacy_flat).splitlines()
    hits = [i for i, line in enumerate(src, start=1) if marker in line]
    assert len(hits) == 1, marker
    return hits[0]


def test_native_path_has_no_findings():
    meta, inp, h = _setup()
    c = SyncChecker()
    _forward("torch", meta, inp, h, c, layers=3)
    assert c.events == []


def test_legacy_flat_has_exactly_four_syncs_per_layer_with_lines():
    meta, inp, h = _setup()
    c = SyncChecker()
    _forward("legacy-flat", meta, inp, h, c, layers=3)
    assert c.per_layer("sync") == {0: 4, 1: 4, 2: 4}
    layer0 = [e for e in c.syncs() if e.layer == 0]
    want = [
        ("aten._local_scalar_dense", _line_of("# sync 1")),
        ("aten.repeat_interleave.Tensor", _line_of("# sync 2")),
        ("aten.repeat_interleave.Tensor", _line_of("# sync 3")),
        ("aten._local_scalar_dense", _line_of("# sync 4")),
    ]
    assert [(e.op, e.location) for e in layer0] == [
        (op, f"mlaprof/backends/legacy_flat.py:{line}") for op, line in want
    ]
    assert all(e.function == "forward" for e in layer0)
    allocs = [e for e in c.events if e.kind == "alloc" and e.layer == 0]
    assert any(e.location.endswith(f":{_line_of('# sized by sync 1')}") for e in allocs)


def test_probe_is_neutral_bitwise():
    meta, inp, h = _setup()
    for name in ("torch", "legacy-flat"):
        plain = _forward(name, meta, inp, h)
        watched = _forward(name, meta, inp, h, SyncChecker())
        assert torch.equal(plain[0], watched[0]) and torch.equal(plain[1], watched[1])


def test_each_kind_of_sync_is_named():
    x = torch.arange(10)
    mask = x > 4
    c = SyncChecker()
    with c.region(layer=5):
        x.sum().item()
        x.nonzero()
        x[mask]
        x.tolist()
        torch.repeat_interleave(x, x)
        torch.repeat_interleave(x, x, output_size=45)  # captures fine: not a sync
        torch.unique(x)
        x.index_select(0, torch.tensor([1, 2]))  # integer indexing is fine
    ops = [e.op for e in c.events if e.kind == "sync"]
    assert ops == [
        "aten._local_scalar_dense",
        "aten.nonzero",
        "aten.index.Tensor",
        "Tensor.tolist",
        "aten.repeat_interleave.Tensor",
        "aten._unique2",
    ]
    assert all(
        e.layer == 5 and e.location.startswith("tests/unit/test_sync_checker.py:") for e in c.events
    )
    assert torch.Tensor.tolist is not None and x.tolist() == list(range(10))  # restored


def test_raise_on_first_stops_before_the_op():
    c = SyncChecker(raise_on_first=True)
    with pytest.raises(CaptureBreak, match="_local_scalar_dense"), c.region(layer=2):
        torch.ones(3).sum().item()
    assert c.events[0].layer == 2


def test_python_values_to_a_device_are_flagged_before_the_copy():
    # torch.tensor(<python value>, device="cuda") broke capture on an H200 while dispatch saw
    # nothing (bench/results/checker_validation_h200.json); the wrapper flags it before it runs
    c = SyncChecker(raise_on_first=True)
    with pytest.raises(CaptureBreak, match="torch.tensor"), c.region(layer=1):
        torch.tensor(1.0, device="cuda")
    assert c.events[0].kind == "h2d" and c.events[0].location.startswith("tests/")
    c2 = SyncChecker()
    with c2.region(layer=0):
        torch.tensor([1, 2])  # host tensors are fine
        torch.as_tensor(torch.ones(2), device="cpu")
    assert c2.events == []
    assert torch.tensor is not None and torch.tensor([3]).item() == 3  # restored


def test_tolist_counts_once():
    c = SyncChecker()
    with c.region(layer=0):
        torch.arange(4).tolist()
    assert [e.op for e in c.events] == ["Tensor.tolist"]
