from mlaprof.cli import entry

entry()
