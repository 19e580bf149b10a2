"""Paths as recorded data holds them: never the absolute path of the machine that recorded them.

A source location reads ``mlaprof/backends/legacy_flat.py:49`` on every machine: relative to the
working directory when it lies inside it, else to the ``sys.path`` entry (project root or
site-packages) that holds it; a path under neither keeps its last two parts.
"""

from __future__ import annotations

import os
import sys
from pathlib import PurePath

_PROJECT_ROOT = str(PurePath(os.path.abspath(__file__)).parent.parent)


def portable_path(path: str) -> str:
    """``path`` without the recording machine's absolute prefix (unchanged when relative)."""
    if not path or not os.path.isabs(path):
        return path
    # the checkout or install that holds mlaprof itself, then the working directory and sys.path
    roots = [_PROJECT_ROOT, os.getcwd(), *(p for p in sys.path if p and os.path.isabs(p))]
    best = ""
    for root in roots:
        root = root.rstrip(os.sep) + os.sep
        if path.startswith(root) and len(root) > len(best):
            best = root
    if best:
        return path[len(best) :]
    marker = os.sep + "site-packages" + os.sep
    if marker in path:
        return path.split(marker, 1)[1]
    parts = PurePath(path).parts
    return str(PurePath(*parts[-2:])) if len(parts) > 2 else PurePath(path).name
