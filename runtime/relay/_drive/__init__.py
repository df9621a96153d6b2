"""Driving a session from an op script: the script format and the runner (shared by relay run,
relay eval and relay cluster).
"""
