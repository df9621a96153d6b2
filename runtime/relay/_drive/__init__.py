"""Driving a session from an op script: the script format, the runner and the outcome of a run
(shared by relay run, relay eval and relay cluster).
"""
