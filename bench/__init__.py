"""relay's benchmark suite: the figures relay is held to, against peers and bounds.

The figures and their targets are listed in docs/benchmarks.md.

Run it with ``python -m bench`` from the repository (``--quick`` for tiny sizes); it prints one
table, each figure with its median, its p10–p90 spread, its ratio to a reference measured in the
same run and, where docs/benchmarks.md sets one, its target. It is not part of the test run.
"""
