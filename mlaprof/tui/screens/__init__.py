"""Dashboard screens: main dashboard, layer drill-down, compare, run picker, help."""
