"""``python -m runtime``: the ``relay`` command line."""

from ._cli import console_main

console_main()
