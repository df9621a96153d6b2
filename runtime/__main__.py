"""``python -m relay``: the ``relay`` command line."""

from ._cli import console_main

console_main()
