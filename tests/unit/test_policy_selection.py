"""One AITER version -> split policy selection (:func:`mlaprof.splits.releases.policy_for`):
``whatif --aiter``, ``mlaprof run --aiter``, a scenario's and a what-if grid's check, the
installed-AITER backend, the engine model and the import's collapse rule all go through it.
Replacing it once changes every caller; a caller with its own mapping would keep the real one."""

from __future__ import annotations

import dataclasses

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.splits import releases

REAL = "aiter-gluon-v0.1.20"  # what 0.1.20 runs (MODELLED)
FAKE = "aiter-gluon-v0.1.19.post2"  # a real policy name no 0.1.20 caller would pick itself


@pytest.fixture
def fake_selection(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []

    def policy_for(version: str) -> str:
        asked.append(version)
        return FAKE

    monkeypatch.setattr(releases, "policy_for", policy_for)
    return asked


def _whatif_policies() -> list[str]:
    from mlaprof.cli import build_parser
    from mlaprof.commands.whatif import spec_from_args

    return spec_from_args(build_parser().parse_args(["whatif", "--aiter", "0.1.20"])).policies


def _run_policy() -> str:
    from mlaprof.cli import build_parser
    from mlaprof.commands.run import scenario_from_args

    return scenario_from_args(build_parser().parse_args(["run", "--aiter", "0.1.20"])).policy


def _shadow_policy() -> str:
    from mlaprof.analysis.shadow import route
    from mlaprof.scenario import DEVICES

    path, policy, _ = route(4, 4, DEVICES["mi355x"], "0.1.20")  # gluon verify: 4 heads
    assert path == "gluon-verify"
    return policy


def _backend_policy() -> str:
    from mlaprof.backends.aiter_backend import gluon_policy
    from mlaprof.integrations.aiter_env import AiterEnv

    env = AiterEnv(module=None, version="0.1.20", version_tuple=(0, 1, 20, 0), arch="gfx950")  # type: ignore[arg-type]
    return gluon_policy(env, "bh16bn64")


def _import_policy() -> str:
    from mlaprof.analysis.collapse import collapse_policies

    return collapse_policies("aiter-gluon")[1]  # the reference rule a grid's S is judged by


def _scenario_accepts(policy: str) -> bool:
    from mlaprof.scenario import Scenario

    try:
        dataclasses.replace(Scenario(), aiter_version="0.1.20", policy=policy).validate()
    except MlaprofError:
        return False
    return True


def _grid_accepts(policy: str) -> bool:
    from mlaprof.whatif.grid import GridSpec

    g = GridSpec()
    g.aiter, g.policies = "0.1.20", [policy]
    try:
        g.validate()
    except MlaprofError:
        return False
    return True


CALLERS = {
    "whatif --aiter": lambda: _whatif_policies() == [FAKE],
    "run --aiter": lambda: _run_policy() == FAKE,
    "engine model": lambda: _shadow_policy() == FAKE,
    "installed AITER": lambda: _backend_policy() == FAKE,
    "import collapse rule": lambda: _import_policy() == FAKE,
    "scenario check": lambda: _scenario_accepts(FAKE) and not _scenario_accepts(REAL),
    "what-if grid check": lambda: _grid_accepts(FAKE) and not _grid_accepts(REAL),
}


@pytest.mark.parametrize("caller", list(CALLERS))
def test_every_caller_goes_through_the_one_selection(caller: str, fake_selection: list) -> None:
    assert CALLERS[caller](), caller
    assert "0.1.20" in fake_selection


@pytest.mark.parametrize("caller", list(CALLERS))
def test_without_the_replacement_each_caller_picks_the_real_policy(caller: str) -> None:
    assert not CALLERS[caller](), caller
    assert releases.policy_for("0.1.20") == REAL == releases.aiter_rule("0.1.20").gluon_policy


@pytest.mark.parametrize("given", ["", " , ", "1040,x"])
def test_kv_lens_given_but_empty_or_bad_is_refused_not_the_default(given: str) -> None:
    """``--kv-lens ""`` recorded the default KV lengths (1040, 2600, 6000) and exited 0."""
    from mlaprof.cli import build_parser
    from mlaprof.commands.run import scenario_from_args
    from mlaprof.errors import MlaprofError

    with pytest.raises(MlaprofError, match="kv_lens is empty|comma-separated integers"):
        scenario_from_args(build_parser().parse_args(["run", "--kv-lens", given]))
    got = scenario_from_args(build_parser().parse_args(["run", "--kv-lens", "7, 9"]))
    assert got.kv_lens == [7, 9]
