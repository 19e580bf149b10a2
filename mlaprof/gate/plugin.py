"""pytest plugin (entry point ``pytest11``): fail a test whose code would break graph capture.

* marker ``@pytest.mark.capture_gate``: the test body runs inside a captured region (simulated
  on the CPU by the sync checker); fixtures, where inputs and metadata are built, run outside it.
  Every sync / data-dependent allocation fails the test with layer, op and file:line.
* fixture ``capture_gate``: ``capture_gate.check(fn, *args, layers=N, **kwargs)`` gates one
  callable (on a GPU also captured for real), ``capture_gate.splits(builder, ...)`` asserts a
  metadata builder's S for padded batches does not collapse.

This module imports only pytest: torch and mlaprof load when a gated test runs, so installing
mlaprof does not slow other test suites.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

MARKER = "capture_gate"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(layer=0): run the test body inside a (simulated) captured CUDA/HIP graph "
        "region and fail on any sync or data-dependent allocation (mlaprof)",
    )


class Gate:
    """What the ``capture_gate`` fixture gives a test."""

    def report(
        self,
        fn: Callable[..., Any],
        *args: Any,
        layers: int = 1,
        real_capture: str = "auto",
        **kwargs: Any,
    ) -> Any:
        from mlaprof.gate.core import run_gated

        return run_gated(fn, *args, layers=layers, real_capture=real_capture, **kwargs)

    def check(
        self,
        fn: Callable[..., Any],
        *args: Any,
        layers: int = 1,
        real_capture: str = "auto",
        **kwargs: Any,
    ) -> Any:
        report = self.report(fn, *args, layers=layers, real_capture=real_capture, **kwargs)
        if not report.ok:
            pytest.fail(report.format(), pytrace=False)
        return report

    def splits(self, builder: Callable[..., Any], **kwargs: Any) -> None:
        from mlaprof.gate.splits import SplitCollapseError, assert_splits_hold

        try:
            assert_splits_hold(builder, **kwargs)
        except SplitCollapseError as e:
            pytest.fail(str(e), pytrace=False)


@pytest.fixture
def capture_gate() -> Gate:
    return Gate()


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
    marker = pyfuncitem.get_closest_marker(MARKER)
    if marker is None:
        return (yield)
    from mlaprof.gate.core import GateReport
    from mlaprof.probes.sync_checker import SyncChecker

    checker = SyncChecker()
    with checker.region(layer=marker.kwargs.get("layer", 0)):
        result = yield
    report = GateReport(
        pyfuncitem.nodeid,
        "test body in a simulated captured region (sync checker)",
        1,
        checker.events,
    )
    if not report.ok:
        pytest.fail(report.format(), pytrace=False)
    return result
