"""mlaprof.analysis"""
