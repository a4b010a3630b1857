"""The names and settings every layer shares: what DisastIR is called, and what a run can be asked for.

Pure data and stdlib: no mteb, no numpy.
"""
