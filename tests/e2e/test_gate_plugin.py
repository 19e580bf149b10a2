"""The gate's pytest plugin in a child pytest (fails the legacy path, passes the native one) and
its entry point, which loads without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib

from tests.conftest import ROOT

PLUGIN_TESTS = """
import pytest
import torch

from mlaprof.gate.verify_case import builder, legacy_flat, native, setup


@pytest.fixture
def batch():
    return setup(torch.zeros(3, 4, 16))  # built outside the region, like a metadata builder


@pytest.mark.capture_gate
def test_marker_legacy(batch):
    legacy_flat(**batch)


@pytest.mark.capture_gate
def test_marker_native(batch):
    native(**batch)


def test_fixture_legacy(capture_gate, batch):
    capture_gate.check(legacy_flat, layers=2, **batch)


def test_fixture_native(capture_gate, batch):
    capture_gate.check(native, layers=2, **batch)


@pytest.mark.capture_gate
def test_marker_printed(batch):
    print(batch["inp"].q_nope.sum())  # a tensor's text reads its values back: a sync under capture


def test_splits_legacy_builder(capture_gate):
    capture_gate.splits(builder("all-rows"), batches=range(1, 9))


def test_splits_native_builder(capture_gate):
    capture_gate.splits(builder("active-rows"), batches=range(1, 9))
"""


def test_plugin_in_a_child_pytest_fails_legacy_and_passes_native(tmp_path):
    (tmp_path / "test_backend_gate.py").write_text(textwrap.dedent(PLUGIN_TESTS))
    # autoload off: an installed mlaprof already registers the plugin through its entry point,
    # and pytest refuses the same module twice; loading it by name works either way
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "mlaprof.gate.plugin", "-p", "no:cacheprovider",
         "-rA", "-q", "test_backend_gate.py"],  # fmt: skip
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = p.stdout
    assert p.returncode == 1, out[-3000:]
    for name in ("marker_native", "fixture_native", "splits_native_builder"):
        assert f"PASSED test_backend_gate.py::test_{name}" in out, out[-3000:]
    for name in ("marker_legacy", "fixture_legacy", "splits_legacy_builder", "marker_printed"):
        assert f"FAILED test_backend_gate.py::test_{name}" in out, out[-3000:]
    assert "layer 0: sync aten._local_scalar_dense at " in out and "legacy_flat.py:" in out
    assert "layer 1: sync" in out  # the fixture gates each of the 2 layers
    assert "KV splits collapse on" in out
    assert "sync Tensor.__repr__ at test_backend_gate.py:" in out


def test_plugin_is_registered_and_light():
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert doc["project"]["entry-points"]["pytest11"] == {"mlaprof": "mlaprof.gate.plugin"}
    code = "import sys, mlaprof.gate.plugin; print('torch' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)  # a hang guard  # fmt: skip
    assert p.stdout.strip() == "False"  # loading the plugin does not import torch
