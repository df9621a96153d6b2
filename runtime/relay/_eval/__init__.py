"""``relay eval``: replay a corpus of cases under compaction configurations and score them
(docs/eval.md).
"""
