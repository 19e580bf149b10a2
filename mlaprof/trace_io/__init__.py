"""mlaprof.trace_io"""
