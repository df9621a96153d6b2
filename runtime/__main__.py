"""``python -m relay``: the ``relay`` command line."""

import sys

if __package__ != "relay":
    # Only a checkout has the folder ``runtime/``; imported under that name the package would be
    # a second copy of relay, whose classes the first one does not know.
    print(f"relay: run it as python -m relay (not -m {__package__})", file=sys.stderr)
    sys.exit(2)

from ._cli import console_main

console_main()
