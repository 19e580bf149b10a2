"""What pyproject.toml promises about torch, as the README words it, and this env in range."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.version import Version

from tests.conftest import ROOT


def test_torch_range_is_the_one_the_readme_names_and_holds_this_torch() -> None:
    import torch

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "torch"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    lo, hi = re.search(
        r"\(torch (\d+\.\d+) to (\d+\.\d+), the releases it has run on", readme
    ).groups()
    assert Version(f"{lo}.0") in req.specifier and Version(f"{hi}.99") in req.specifier
    assert Version(f"{float(lo) - 0.01:.2f}") not in req.specifier  # a floor, not >=anything
    major, minor = hi.split(".")
    assert Version(f"{major}.{int(minor) + 1}.0") not in req.specifier  # a ceiling
    assert Version(torch.__version__.split("+")[0]) in req.specifier


def test_the_license_is_an_spdx_expression_setuptools_takes_without_a_warning() -> None:
    """``license = { text = "MIT" }`` made setuptools warn three times per build that such
    builds stop on 2027-02-18 (PEP 639): an SPDX string, a setuptools that reads it (77+), and
    no ``License ::`` classifier beside it (setuptools refuses the two together)."""
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "MIT"
    (req,) = [Requirement(r) for r in doc["build-system"]["requires"] if r.startswith("setuptools")]
    assert Version("77") in req.specifier and Version("76.99") not in req.specifier
    assert not any(c.startswith("License ::") for c in doc["project"].get("classifiers", []))


def test_every_mark_and_option_the_suite_uses_is_declared() -> None:
    """A run without xdist or pytest-asyncio (the vLLM tier's environment) warned "Unknown
    pytest.mark.xdist_group" and "Unknown config option: asyncio_mode"."""
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    declared = {m.split(":")[0].split("(")[0] for m in ini["markers"]}
    assert {"unit", "e2e", "checks", "xdist_group"} <= declared
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    assert 'parser.addini("asyncio_mode"' in conftest and ini["asyncio_mode"] == "auto"
