"""Which modelled AITER rule stands for a release a user names, and how that is labelled.

mlaprof models the split rules of AITER v0.1.19, v0.1.19.post2, v0.1.20 and v0.1.20.post1 (read
at those tags: ``aiter/ops/triton/gluon/mla_gluon.py`` and ``aiter/mla.py``). v0.1.19.post1 has
the same two files as v0.1.19.post2 (no diff between the tags), so it is modelled exactly. Any
other release (vLLM 0.32 and 0.33 pin v0.1.21.post2, whose source was not read) gets the nearest
modelled rule at or below it, always labelled ``"rule of v0.1.20.post1; v0.1.21.post2 not
verified"``, never silently. One function, :func:`aiter_rule`, serves every view (``whatif
--aiter``, ``report --shadow-aiter``, a scenario's ``aiter_version``), and one,
:func:`policy_for`, picks the split policy a release runs: ``whatif``, ``mlaprof run``, a
scenario's check, the installed-AITER backend, the engine model and the import's collapse rule all
call it (looked up on this module at call time, so one replacement changes every caller).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from mlaprof.errors import MlaprofError

Version = tuple[int, int, int, int]

# release -> (the tag whose rule it is, the gluon policy of that rule)
MODELLED: dict[Version, tuple[str, str]] = {
    (0, 1, 19, 0): ("v0.1.19", "aiter-gluon-v0.1.19"),
    (0, 1, 19, 1): ("v0.1.19.post2", "aiter-gluon-v0.1.19.post2"),  # same files as .post2
    (0, 1, 19, 2): ("v0.1.19.post2", "aiter-gluon-v0.1.19.post2"),
    (0, 1, 20, 0): ("v0.1.20", "aiter-gluon-v0.1.20"),
    (0, 1, 20, 1): ("v0.1.20.post1", "aiter-gluon-v0.1.20.post1"),
}
OLDEST = min(MODELLED)


@dataclass(frozen=True)
class AiterRule:
    """The modelled rule that stands for a named AITER release."""

    requested: str  # as the user or the trace named it
    rule_of: str  # the modelled tag whose rule is used
    gluon_policy: str  # mlaprof.splits.policies name of that tag's gluon rule
    exact: bool  # the named release is a modelled tag (its own source was read)
    label: str  # what every view prints next to the rule

    def to_dict(self) -> dict:
        return asdict(self)


def parse_release(text: str) -> tuple[Version, bool] | None:
    """The one AITER version parser: 'v0.1.21.post2' -> ((0, 1, 21, 2), True);
    '0.1.20.dev3+g1a2b' -> ((0, 1, 20, 0), False): a dev or local build is not the tag it is
    near; junk -> None."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?(.*)", text.strip())
    if not m:
        return None
    major, minor, patch, post, rest = m.groups()
    return (int(major), int(minor), int(patch), int(post or 0)), not rest


def parse_version(text: str) -> Version | None:
    """The release tuple of ``text`` (:func:`parse_release` without the clean-tag flag)."""
    parsed = parse_release(text)
    return parsed[0] if parsed else None


def tag(v: Version) -> str:
    """(0, 1, 19, 2) -> 'v0.1.19.post2'."""
    return f"v{v[0]}.{v[1]}.{v[2]}" + (f".post{v[3]}" if v[3] else "")


def aiter_rule(version: str) -> AiterRule:
    """The modelled rule for AITER ``version`` (raises MlaprofError for text that is no version
    or a release older than v0.1.19, which has no 4-D gluon MTP entry)."""
    parsed = parse_release(version)
    if parsed is None:
        raise MlaprofError(f"AITER version {version!r} is not like 0.1.20 or 0.1.21.post2")
    v, clean = parsed
    if v < OLDEST:
        raise MlaprofError(
            f"AITER {version} has no 4-D gluon MTP entry: it is older than {tag(OLDEST)}, the "
            "oldest modelled release (vLLM 0.32 needs >= 0.1.19)"
        )
    near = max(k for k in MODELLED if k <= v)
    of, policy = MODELLED[near]
    shown = version.strip() if not clean else tag(v)
    if clean and v in MODELLED:
        same = "" if of == shown else f" (the same mla_gluon.py and mla.py as {of})"
        return AiterRule(version, of, policy, True, f"rule of {shown}{same}")
    return AiterRule(version, of, policy, False, f"rule of {of}; {shown} not verified")


def policy_for(version: str) -> str:
    """The gluon split policy (a :data:`mlaprof.splits.policies.POLICIES` name) AITER
    ``version`` runs: its modelled rule's (:func:`aiter_rule`; raises as it does)."""
    return aiter_rule(version).gluon_policy
