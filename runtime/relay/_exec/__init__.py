"""The effects of tool calls: the rules that say which calls ask first, the commands' process
guard, their sandbox and their environment (docs/approvals.md). Plain mechanisms below the core:
the core's one gate (``relay._core._exec_gate``) decides with them and runs through them."""
