"""mlaprof's live Textual dashboard: ``mlaprof tui`` follows a run as it is written."""
