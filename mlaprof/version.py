"""mlaprof's version (its own module: the store records it without importing the package)."""

__version__ = "0.1.0"
