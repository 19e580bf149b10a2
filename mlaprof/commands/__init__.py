"""mlaprof.commands"""
