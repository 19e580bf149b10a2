"""mlaprof.probes"""
