"""The actor core: the session, the task slot, the task port, state, sampling, history, hooks,
tools, the rollout writer and the event stream. Imports only the ground floor.
"""
