"""The ``relay`` command line (README.md and docs/cli.md)."""
