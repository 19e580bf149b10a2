"""mlaprof: profile the graph-captured MLA verify path of speculative decoding."""

from mlaprof.version import __version__


def load(path):  # noqa: ANN001, ANN201 - re-exported, documented in mlaprof.store.reader
    """Open a recorded run; its tables are pandas DataFrames (``run.steps``, ``run.syncs``, ...)."""
    from mlaprof.store.reader import load as _load

    return _load(path)


def build_summary(run, shadow=None):  # noqa: ANN001, ANN201 - re-exported (analysis.run_summary)
    """The run's typed summary, built once: every view and figure renders it (a notebook builds
    one per run and draws each figure from it)."""
    from mlaprof.analysis.run_summary import build_summary as _build

    return _build(run, shadow)


__all__ = ["__version__", "build_summary", "load"]
