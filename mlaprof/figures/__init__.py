"""mlaprof.figures"""
