"""mlaprof.installed reads a distribution's version as ``importlib.metadata`` does, from the
metadata folders installers write on ``sys.path``: compared on every distribution of this
environment, and on the layouts a test writes (a wheel's dist-info, an egg-info folder and
file, the first on the path winning)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from mlaprof import installed


def test_every_installed_distribution_reads_as_importlib_metadata_reads_it() -> None:
    names = {d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]}
    assert len(names) > 20  # torch, pandas, pyarrow, ... : the comparison covers something
    got = {n: installed.version(n) for n in names}
    assert got == {n: metadata.version(n) for n in names}
    assert installed.version("no-such-distribution-here") is None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_installers_layouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    _write(first / "Amd_Aiter-0.1.20.dist-info" / "METADATA",
           "Metadata-Version: 2.1\nName: amd-aiter\nVersion: 0.1.20.post1\n\nVersion: 9\n")  # fmt: skip
    _write(second / "amd_aiter-0.0.1.dist-info" / "METADATA", "Name: amd-aiter\nVersion: 0.0.1\n")
    _write(second / "vllm.egg-info" / "PKG-INFO", "Name: vllm\nVersion: 0.34.0+rocm\n")
    _write(second / "triton-3.6.0-py3.11.egg-info", "Name: triton\nVersion: 3.6.0\n")
    (second / "torch-2.11.0.dist-info").mkdir()  # no METADATA: the folder's name says it
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    assert installed.version("amd-aiter") == "0.1.20.post1"  # the first on the path, its header
    assert installed.version("AMD.aiter") == "0.1.20.post1"  # names compare normalized
    assert installed.version("vllm") == "0.34.0+rocm"
    assert installed.version("triton") == "3.6.0"
    assert installed.version("torch") == "2.11.0"
    assert installed.version("aiter") is None


def test_aiter_s_version_is_read_as_run_json_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module without ``__version__`` (AITER from source): the installed distribution's
    version, ``amd-aiter`` before ``aiter`` (run.json's rule, mlaprof.store.runmeta); "unknown"
    where neither is installed, never a version it did not read."""
    import types

    from mlaprof.integrations import aiter_env

    monkeypatch.delenv(aiter_env.VERSION_ENV, raising=False)
    module = types.ModuleType("aiter")
    _write(tmp_path / "aiter-0.1.19.dist-info" / "METADATA", "Name: aiter\nVersion: 0.1.19\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert aiter_env.aiter_version(module) == "0.1.19"
    _write(
        tmp_path / "amd_aiter-0.1.20.dist-info" / "METADATA", "Name: amd-aiter\nVersion: 0.1.20\n"
    )
    installed._index.cache_clear()
    assert aiter_env.aiter_version(module) == "0.1.20"
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    assert aiter_env.aiter_version(module) == "unknown"
