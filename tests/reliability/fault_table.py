"""Print the fault table of ``docs/reliability.md``: run every fault of
:mod:`tests.reliability._faults` over loopback and show what the session did.

Run from the repository root: ``python -m tests.reliability.fault_table``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio

from tests.reliability._faults import FAULTS, Observation, run_fault, table

CANARY = "sk-fault-table-canary-0000"


async def observe(root: Path) -> list[Observation]:
    return [
        await run_fault(fault, root / f"fault-{index}", api_key=CANARY)
        for index, fault in enumerate(FAULTS)
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        print(table(trio.run(observe, Path(root))))


if __name__ == "__main__":
    main()
