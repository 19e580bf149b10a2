"""Reporters: render a run's analysis (terminal tables, JSON; HTML lives in mlaprof.figures)."""
