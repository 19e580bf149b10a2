"""An export that is a folder appears whole or not at all: written into a temporary sibling
and renamed into place, removed on any failure (a full disk, a read-only folder: one line)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mlaprof.errors import MlaprofError

_T = TypeVar("_T")


def write_folder(out: Path, fill: Callable[[Path], _T]) -> _T:
    """``fill(tmp)`` writes the folder's files under ``tmp``; then ``tmp`` becomes ``out``."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        got = fill(tmp)
        os.rename(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise MlaprofError(f"cannot write {out}: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return got
