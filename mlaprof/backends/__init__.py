"""mlaprof.backends"""
