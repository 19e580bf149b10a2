"""The CI gate: fails on the legacy-flat path, passes the native one (API, pytest plugin in a child
pytest, and ``mlaprof check`` exit codes); the split gate catches builders fed by padding rows."""

from __future__ import annotations

import pytest
import torch

from mlaprof.gate import (
    CaptureGateError,
    SplitCollapseError,
    assert_capturable,
    assert_splits_hold,
    check_splits,
    run_gated,
)
from mlaprof.gate.verify_case import builder, legacy_flat, native, setup

CASE = "mlaprof.gate.verify_case"


@pytest.fixture(scope="module")
def verify_args():
    return setup(torch.zeros(3, 4, 16))


def test_legacy_flat_fails_with_layer_op_and_line(verify_args):
    report = run_gated(legacy_flat, layers=2, **verify_args)
    assert not report.ok and {e.layer for e in report.findings} == {0, 1}
    ops = {e.op for e in report.findings if e.kind == "sync"}
    assert ops == {"aten._local_scalar_dense", "aten.repeat_interleave.Tensor"}
    assert (
        sum(e.kind == "sync" for e in report.findings) == 8
    )  # the 4 syncs a layer of vLLM PR #51171
    assert all(e.location.startswith("mlaprof/backends/legacy_flat.py:") for e in report.findings)
    assert any(e.kind == "alloc" for e in report.findings)
    with pytest.raises(
        CaptureGateError,
        match=r"layer 1: sync aten._local_scalar_dense at mlaprof/backends/legacy_flat.py:\d+",
    ):
        assert_capturable(legacy_flat, layers=2, **verify_args)


def test_native_passes(verify_args):
    report = assert_capturable(native, layers=3, **verify_args)
    assert report.ok and "simulated" in report.region


def test_split_gate_fails_on_all_rows_and_passes_on_active_rows():
    with pytest.raises(SplitCollapseError) as e:
        assert_splits_hold(builder("all-rows"), batches=range(1, 17))
    text = str(e.value)
    assert "padding rows" in text and "min_kv_seq_len=4" in text and "aiter-gluon-v0.1.19" in text
    cases = e.value.cases
    assert cases and all(c.rows > c.batch and c.s_used == 1 for c in cases)
    assert_splits_hold(builder("active-rows"), batches=range(1, 17))
    # v0.1.20 ignores min_kv_seq_len: even the buggy builder cannot collapse it
    assert check_splits(builder("all-rows"), policy="aiter-gluon-v0.1.20") == []


def test_seed_case_in_the_split_gate():
    cases = check_splits(builder("all-rows"), batches=[8], contexts=[1088], capture_sizes=[60])
    assert [(c.batch, c.rows, c.s_used, c.s_deserved) for c in cases] == [(8, 15, 1, 4)]


class _FakeCuda:
    """Just enough of torch.cuda for the gate's real-capture branch on a CPU-only build: capture
    runs the body with a flag set, and an op that refuses capture raises as the driver would."""

    capturing = False

    class Stream:
        def wait_stream(self, other):
            return None

    class CUDAGraph:
        pass

    @staticmethod
    def current_stream():
        return _FakeCuda.Stream()

    @staticmethod
    def stream(s):
        import contextlib

        return contextlib.nullcontext()

    @staticmethod
    def graph(g):
        import contextlib

        @contextlib.contextmanager
        def cm():
            _FakeCuda.capturing = True
            try:
                yield
            finally:
                _FakeCuda.capturing = False

        return cm()


def _driver_sync(x):  # invisible to the dispatch checker, refused by a real capture
    if _FakeCuda.capturing:
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
    return x


def test_real_capture_branch_reports_what_the_checker_cannot_see(monkeypatch):
    from mlaprof.gate import core

    for name in ("Stream", "CUDAGraph", "current_stream", "stream", "graph"):
        monkeypatch.setattr(torch.cuda, name, getattr(_FakeCuda, name))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(core, "_on_cuda", lambda args, kwargs: True)
    checker = core.SyncChecker  # CUDA sync-debug mode raises on a CPU build: leave it off
    monkeypatch.setattr(
        core, "SyncChecker", lambda cuda_debug=False, simulate_device=False: checker()
    )
    x = torch.ones(3)
    bad = run_gated(_driver_sync, x, layers=2)
    assert not bad.ok and "real capture" in bad.region
    (e,) = bad.findings
    assert e.kind == "capture-error" and e.op == "RuntimeError"
    assert e.location.startswith("tests/unit/test_gate.py:") and e.function == "_driver_sync"
    assert "not permitted when stream is capturing" in e.detail
    assert run_gated(lambda t: t * 2, x).ok  # captures fine
    assert run_gated(_driver_sync, x, real_capture="never").ok  # the checker alone sees nothing
    # a callable the checker already fails is never captured (a failed capture poisons the GPU)
    calls = []
    monkeypatch.setattr(core, "_capture", lambda *a: calls.append(a))
    assert not run_gated(lambda t: t.nonzero(), x).ok and calls == []


# -- the gate on a CPU-only machine sees every device-to-host sync ---------------------------------
def _item(q):
    return q.sum().item()


def _tolist(q):
    return q.tolist()


def _cpu(q):
    return q.cpu()


def _to_cpu(q):
    return q.to("cpu")


def _to_cpu_device_kw(q):
    return q.to(device="cpu", dtype=torch.float16)


def _numpy(q):
    return q.numpy()


def _bool(q):
    return bool(q.sum() > 0)


def _print(q):
    print(q.max())


def _str(q):
    return str(q.sum())


def _repr(q):
    return repr(q)


def _format(q):
    return format(q.sum(), ".3f")


def _fstring(q):
    return f"max {q.max()}"


def _fstring_of_a_vector(q):
    return f"row {q[0]}"


def _fstring_repr(q):
    return f"{q.max()!r}"


def _percent(q):
    return "%.2f" % q.max()  # noqa: UP031 (the old-style log line is the case)


def _index(q):
    return list(range(8))[q.argmax(dim=1)[0]]


def _int(q):
    return int(q.argmax())


def _float(q):
    return float(q.max())


def _range(q):
    return range(q.argmax())


def _synchronize(q):
    torch.cuda.synchronize()
    return q


def _data_dependent(q):
    return torch.nonzero(q)


SYNCS = {
    _item: "aten._local_scalar_dense",
    _tolist: "Tensor.tolist",
    _cpu: "Tensor.cpu",
    _to_cpu: "Tensor.to(cpu)",
    _to_cpu_device_kw: "Tensor.to(cpu)",
    _numpy: "Tensor.numpy",
    _bool: "aten._local_scalar_dense",
    # a tensor's text: torch's formatter turns dispatch modes off, so these passed the gate
    # ("no sync") until the checker wrapped Tensor.__repr__ and __format__
    _print: "Tensor.__repr__",
    _str: "Tensor.__repr__",
    _repr: "Tensor.__repr__",
    _format: "Tensor.__format__",
    _fstring: "Tensor.__format__",
    _fstring_of_a_vector: "Tensor.__format__",
    _fstring_repr: "Tensor.__repr__",
    _percent: "aten._local_scalar_dense",
    _index: "aten._local_scalar_dense",
    _int: "aten._local_scalar_dense",
    _float: "aten._local_scalar_dense",
    _range: "aten._local_scalar_dense",
    _synchronize: "torch.cuda.synchronize",
    _data_dependent: "aten.nonzero",
}


@pytest.mark.parametrize("fn", list(SYNCS), ids=lambda f: f.__name__)
def test_every_host_sync_fails_the_cpu_gate_with_op_and_line(fn) -> None:
    import inspect

    q = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    report = run_gated(fn, q, real_capture="never")
    assert not report.ok
    (e,) = report.findings
    line = inspect.getsourcelines(fn)[1] + 1  # the body's first line
    assert (e.kind, e.op) == ("sync", SYNCS[fn])
    assert e.location == f"tests/unit/test_gate.py:{line}" and e.function == fn.__name__
    # the patches are gone after the region: nothing changed for the rest of the process
    assert torch.cuda.synchronize.__name__ == "synchronize"
    assert not hasattr(torch.Tensor.cpu, "__wrapped__")


def test_iterating_is_views_and_each_element_turned_into_a_number_is_a_sync() -> None:
    """``for x in q`` is ``unbind`` (views: no sync on a GPU either, so the gate passes it);
    each element turned into a Python number or text is one sync, at the caller's line."""
    q = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))

    def rows(q):
        return [x * 2 for x in q]

    def numbers(q):
        return [int(x) for x in q.argmax(dim=1)]

    def texts(q):
        return [f"{x:.1f}" for x in q[:, 0]]

    assert run_gated(rows, q, real_capture="never").ok
    for fn in (numbers, texts):
        report = run_gated(fn, q, real_capture="never")
        assert len(report.findings) == 4, report.format()  # one per element read


def test_a_tensors_text_in_a_container_or_a_log_line_is_one_sync_each() -> None:
    """print of a list of tensors reads each one; a repr's inner per-element reads are that
    one sync, not one per element (torch's formatter calls tolist and item inside)."""
    q = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))

    def log(q):
        return "%s %s" % (q.max(), [q.min(), q.sum()])  # noqa: UP031 (a logging call's form)

    report = run_gated(log, q, real_capture="never")
    assert [e.op for e in report.findings] == ["Tensor.__repr__"] * 3, report.format()


def test_casts_and_device_copies_that_stay_on_the_device_pass_the_cpu_gate() -> None:
    def fine(q):
        return q.to(torch.float16).float() * 2 + q.to(q.device, torch.float32)

    assert run_gated(fine, torch.ones(4, 8), real_capture="never").ok
