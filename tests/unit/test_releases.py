"""A named AITER release maps to the modelled rule standing for it, labelled, never silently.

The modelled tags are AITER v0.1.19, v0.1.19.post2, v0.1.20 and v0.1.20.post1
(``aiter/ops/triton/gluon/mla_gluon.py``, ``aiter/mla.py``); v0.1.19.post1 has the same two
files as v0.1.19.post2. vLLM 0.32 and 0.33 pin v0.1.21.post2, whose source was not read."""

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.splits.releases import aiter_rule


def test_modelled_tags_are_exact():
    for v, tag, policy in (
        ("0.1.19", "v0.1.19", "aiter-gluon-v0.1.19"),
        ("v0.1.19.post2", "v0.1.19.post2", "aiter-gluon-v0.1.19.post2"),
        ("0.1.20", "v0.1.20", "aiter-gluon-v0.1.20"),
        ("0.1.20.post1", "v0.1.20.post1", "aiter-gluon-v0.1.20.post1"),
    ):
        r = aiter_rule(v)
        assert (r.rule_of, r.gluon_policy, r.exact) == (tag, policy, True)
        assert r.label == f"rule of {tag}" and "not verified" not in r.label
    post1 = aiter_rule("0.1.19.post1")
    assert post1.exact and post1.gluon_policy == "aiter-gluon-v0.1.19.post2"
    assert "the same mla_gluon.py and mla.py as v0.1.19.post2" in post1.label


def test_an_unmodelled_release_gets_the_nearest_rule_and_says_so():
    r = aiter_rule("0.1.21.post2")
    assert (r.rule_of, r.gluon_policy, r.exact) == (
        "v0.1.20.post1",
        "aiter-gluon-v0.1.20.post1",
        False,
    )
    assert r.label == "rule of v0.1.20.post1; v0.1.21.post2 not verified"
    assert aiter_rule("v0.1.22").label == "rule of v0.1.20.post1; v0.1.22 not verified"
    # a dev or local build is not the tag it is near
    dev = aiter_rule("0.1.20.dev3+g1a2b")
    assert not dev.exact and dev.label == "rule of v0.1.20; 0.1.20.dev3+g1a2b not verified"
    # between tags: the one at or below
    assert aiter_rule("0.1.19.post5").rule_of == "v0.1.19.post2"


def test_bad_versions_are_errors():
    with pytest.raises(MlaprofError, match="not like"):
        aiter_rule("latest")
    with pytest.raises(MlaprofError, match="older than v0.1.19"):
        aiter_rule("0.1.18")


def test_shadow_of_an_unmodelled_release_is_labelled():
    from mlaprof.analysis.shadow import route
    from mlaprof.scenario import DEVICES

    path, policy, _ = route(8, 4, DEVICES["mi355x"], "0.1.21.post2")
    assert (path, policy) == ("gluon-verify", "aiter-gluon-v0.1.20.post1")


def test_a_scenario_names_its_aiter_release():
    import dataclasses

    from mlaprof.scenario import Scenario

    sc = dataclasses.replace(
        Scenario(), aiter_version="0.1.21.post2", policy="aiter-gluon-v0.1.20.post1"
    )
    assert (
        sc.validate().aiter_rule()["label"] == "rule of v0.1.20.post1; v0.1.21.post2 not verified"
    )
    with pytest.raises(MlaprofError, match="runs aiter-gluon-v0.1.20.post1"):
        dataclasses.replace(sc, policy="aiter-gluon-v0.1.19").validate()
    with pytest.raises(MlaprofError, match="not like"):
        dataclasses.replace(sc, aiter_version="newest").validate()
    assert Scenario().validate().aiter_rule() is None
