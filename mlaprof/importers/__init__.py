"""Importers: rocprofv3 (CSV, JSON, rocpd SQLite), Kineto and vLLM logs into the run store
(all-or-nothing, through :mod:`mlaprof.store.staging`)."""
