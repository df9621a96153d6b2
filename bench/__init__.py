"""relay's benchmark suite: the performance targets of relay, measured against peers and bounds.

Run it with ``python -m bench`` from the repository (``--quick`` for tiny sizes); it prints one
table, each figure with its median, its p10–p90 spread, its ratio to a reference measured in the
same run and, where relay sets one, its target. It is not part of the test run.
"""
