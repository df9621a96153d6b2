"""``python -m relay``: the ``relay`` command line."""

from ._cli._main import console_main

console_main()
