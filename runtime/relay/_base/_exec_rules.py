"""A session's rules for what it runs: the approval policy, the sandbox and the environment of
its commands, made once when the session opens and frozen (docs/approvals.md).

:class:`ExecRules` is what ``approval_policy``, ``sandbox_mode``, ``[sandbox_workspace_write]``
and ``[shell_environment_policy]`` say, with relative writable roots made absolute. A session
records its rules in its rollout (a ``rules`` line), and a resume keeps them unless it is
given others explicitly; :func:`loosenings` says what a change gives up, for the warning.
Everything here is a plain function over plain data.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import TypeVar

import attrs

from ._config import Config
from ._environment_config import ShellEnvironmentPolicy
from ._sandbox_config import ApprovalPolicy, SandboxMode, SandboxWorkspaceWrite, strings

_T = TypeVar("_T", bound=str)

#: How much runs unasked under each policy, least first: a later one is looser.
POLICY_ORDER: tuple[ApprovalPolicy, ...] = ("untrusted", "on-failure", "on-request", "never")
#: How much a command may touch under each mode, least first: a later one is looser.
MODE_ORDER: tuple[SandboxMode, ...] = ("read-only", "workspace-write", "danger-full-access")


@attrs.frozen
class ExecRules:
    """What a session's calls may do before and while they run."""

    approval_policy: ApprovalPolicy = "on-request"
    """When a call waits for a decision (``approval_policy``)."""
    sandbox_mode: SandboxMode = "danger-full-access"
    """What a command may touch (``sandbox_mode``)."""
    writable_roots: tuple[str, ...] = attrs.field(converter=strings, factory=tuple)
    """Absolute folders writable besides the working directory (``workspace-write``)."""
    network_access: bool = False
    """Whether commands reach the network (``workspace-write`` only)."""
    exclude_tmpdir_env_var: bool = False
    """Keep ``$TMPDIR`` read-only."""
    exclude_slash_tmp: bool = False
    """Keep ``/tmp`` read-only."""
    environment: ShellEnvironmentPolicy = attrs.field(factory=ShellEnvironmentPolicy)
    """The environment a command gets (``[shell_environment_policy]``)."""

    @classmethod
    def from_config(cls, config: Config) -> ExecRules:
        """The rules ``config`` says; relative writable roots are taken against
        ``config.cwd`` (else the process's working directory)."""
        table = config.sandbox_workspace_write
        base = Path(config.cwd or os.getcwd())
        return cls(
            config.approval_policy,
            config.sandbox_mode,
            tuple(str(base / root) for root in table.writable_roots),
            table.network_access,
            table.exclude_tmpdir_env_var,
            table.exclude_slash_tmp,
            config.shell_environment_policy,
        )

    def apply(self, config: Config) -> Config:
        """``config`` with these rules in place of its own."""
        table = SandboxWorkspaceWrite(
            self.writable_roots,
            self.network_access,
            self.exclude_tmpdir_env_var,
            self.exclude_slash_tmp,
        )
        return attrs.evolve(
            config,
            approval_policy=self.approval_policy,
            sandbox_mode=self.sandbox_mode,
            sandbox_workspace_write=table,
            shell_environment_policy=self.environment,
        )

    def changed(
        self,
        *,
        approval_policy: str | None = None,
        sandbox_mode: str | None = None,
        writable_roots: tuple[str, ...] | None = None,
        network_access: bool | None = None,
        cwd: str,
    ) -> ExecRules:
        """These rules with what a turn asked for (unset: kept); relative roots are taken
        against ``cwd``. The working directory is never listed: it is always writable."""
        rules = self
        if approval_policy is not None:
            rules = attrs.evolve(rules, approval_policy=_one_of(POLICY_ORDER, approval_policy))
        if sandbox_mode is not None:
            rules = attrs.evolve(rules, sandbox_mode=_one_of(MODE_ORDER, sandbox_mode))
        if writable_roots is not None:
            here = os.path.abspath(cwd)
            roots = (os.path.abspath(os.path.join(cwd, root)) for root in writable_roots)
            rules = attrs.evolve(rules, writable_roots=tuple(r for r in roots if r != here))
        if network_access is not None:
            rules = attrs.evolve(rules, network_access=network_access)
        return rules

    @property
    def confined(self) -> bool:
        """Whether commands run in a sandbox (any mode but ``danger-full-access``)."""
        return self.sandbox_mode != "danger-full-access"


def _one_of(choices: tuple[_T, ...], value: str) -> _T:
    found = next((one for one in choices if one == value), None)
    if found is None:
        raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
    return found


#: The keys of the rules a user sets to confine what the model's commands do.
RULE_KEYS = ("sandbox_mode", "approval_policy")


#: The built-in tools the rules govern: what a call of them may touch, and when it asks.
GOVERNED_TOOLS = ("shell", "apply_patch")


def idle_rules_warning(config: Config, chosen: Collection[str] = ()) -> str | None:
    """The warning for rules that govern nothing: a sandbox mode or approval policy chosen
    (one of ``chosen``, the keys the command line or a file named) or other than relay's
    default, while no tool they govern is on. None otherwise."""
    if any(config.tools.get(name, False) for name in GOVERNED_TOOLS):
        return None
    default = Config()
    set_keys = [
        key for key in RULE_KEYS if key in chosen or getattr(config, key) != getattr(default, key)
    ]
    if not set_keys:
        return None
    said = " and ".join(f"{key} {getattr(config, key)!r}" for key in set_keys)
    return (
        f"{said} {'are' if len(set_keys) > 1 else 'is'} set, but no tool it governs is on (the "
        "model can run no command and write no file): turn the shell on with "
        "-c tools.shell=true, or in Codex's SDK with "
        "new Codex({config: {tools: {shell: true}}})"
    )


def narrowed(rules: ExecRules, approval_policy: str | None, sandbox_mode: str | None) -> ExecRules:
    """``rules`` with the approval policy and the sandbox mode made stricter where the given
    ones are; a looser one changes nothing (what a sub-agent's role may do to its parent's
    rules, docs/agents.md)."""
    if approval_policy is not None:
        given = _one_of(POLICY_ORDER, approval_policy)
        if POLICY_ORDER.index(given) < POLICY_ORDER.index(rules.approval_policy):
            rules = attrs.evolve(rules, approval_policy=given)
    if sandbox_mode is not None:
        mode = _one_of(MODE_ORDER, sandbox_mode)
        if MODE_ORDER.index(mode) < MODE_ORDER.index(rules.sandbox_mode):
            rules = attrs.evolve(rules, sandbox_mode=mode)
    return rules


def loosenings(recorded: ExecRules, given: ExecRules) -> list[str]:
    """What ``given`` allows that ``recorded`` did not, one phrase each (empty: nothing)."""
    found: list[str] = []
    if POLICY_ORDER.index(given.approval_policy) > POLICY_ORDER.index(recorded.approval_policy):
        found.append(
            f"approval_policy {recorded.approval_policy!r} became {given.approval_policy!r}"
        )
    if MODE_ORDER.index(given.sandbox_mode) > MODE_ORDER.index(recorded.sandbox_mode):
        found.append(f"sandbox_mode {recorded.sandbox_mode!r} became {given.sandbox_mode!r}")
    if given.sandbox_mode == "workspace-write":
        added = [root for root in given.writable_roots if root not in recorded.writable_roots]
        if added:
            found.append(f"writable roots were added: {', '.join(added)}")
        if given.network_access and not recorded.network_access:
            found.append("commands now reach the network")
        if recorded.exclude_slash_tmp and not given.exclude_slash_tmp:
            found.append("/tmp became writable")
        if recorded.exclude_tmpdir_env_var and not given.exclude_tmpdir_env_var:
            found.append("$TMPDIR became writable")
    if given.environment != recorded.environment:
        found.append("the shell_environment_policy changed")
    return found


__all__ = [
    "MODE_ORDER",
    "POLICY_ORDER",
    "GOVERNED_TOOLS",
    "RULE_KEYS",
    "ExecRules",
    "idle_rules_warning",
    "loosenings",
    "narrowed",
]
