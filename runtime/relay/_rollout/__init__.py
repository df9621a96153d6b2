"""Reading rollouts back: the typed lines, the parser, the filter a resume reads through, and
resuming a session (docs/rollout.md).
"""
