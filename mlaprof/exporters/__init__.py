"""Exporters: a stored run as a Perfetto trace, a rocpd database or rocprofv3-style CSVs
(:mod:`mlaprof.export_targets` picks the format and the output path)."""
