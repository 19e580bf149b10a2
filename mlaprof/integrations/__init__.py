"""mlaprof.integrations"""
