"""mlaprof: profile the graph-captured MLA verify path of speculative decoding."""

from mlaprof.version import __version__


def load(path):  # noqa: ANN001, ANN201 - re-exported, documented in mlaprof.store.reader
    """Open a recorded run; its tables are pandas DataFrames (``run.steps``, ``run.syncs``, ...)."""
    from mlaprof.store.reader import load as _load

    return _load(path)


__all__ = ["__version__", "load"]
