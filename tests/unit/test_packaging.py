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
