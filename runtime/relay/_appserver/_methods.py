"""Which methods of the app-server protocol ``relay app-server`` serves, and which it refuses
because relay has no counterpart for them (docs/codex-compat.md).

The two sets together are the client requests of Codex 0.169's protocol
(``codex app-server generate-json-schema``); ``tests/appserver`` checks them against the
schema vendored there. A method in neither is unknown.
"""

from __future__ import annotations

#: The methods served.
SUPPORTED = frozenset(
    {
        "initialize",
        "thread/start",
        "thread/resume",
        "thread/compact/start",
        "turn/start",
        "turn/interrupt",
        "turn/steer",
        "thread/list",
        "thread/read",
        "thread/loaded/list",
        "thread/name/set",
        "thread/archive",
        "thread/unarchive",
        "thread/fork",
        "model/list",
        "config/read",
    }
)

#: The protocol's other methods, each answered with an error that says relay does not support
#: it: accounts and login (a provider's key comes from the environment or the configuration),
#: the thread store's deletion, sections, goals and attachments, files, commands and searches
#: outside a turn, plugins, skills, apps and marketplaces, writing configuration, feedback.
UNSUPPORTED = frozenset(
    {
        "account/gatewayOAuth/cancel",
        "account/gatewayOAuth/login",
        "account/gatewayOAuth/read",
        "account/login/cancel",
        "account/login/start",
        "account/logout",
        "account/rateLimitResetCredit/consume",
        "account/rateLimits/read",
        "account/read",
        "account/securitySetup/read",
        "account/sendAddCreditsNudgeEmail",
        "account/usage/read",
        "account/workspaceMessages/read",
        "app/installed",
        "app/list",
        "app/read",
        "command/exec",
        "command/exec/resize",
        "command/exec/terminate",
        "command/exec/write",
        "config/batchWrite",
        "config/mcpServer/reload",
        "config/value/write",
        "configRequirements/read",
        "experimentalFeature/enablement/set",
        "experimentalFeature/list",
        "externalAgentConfig/detect",
        "externalAgentConfig/import",
        "externalAgentConfig/import/readHistories",
        "externalAgentConfig/import/recordHistory",
        "feedback/save",
        "feedback/upload",
        "fs/copy",
        "fs/createDirectory",
        "fs/getMetadata",
        "fs/readDirectory",
        "fs/readFile",
        "fs/remove",
        "fs/unwatch",
        "fs/watch",
        "fs/writeFile",
        "fuzzyFileSearch",
        "hooks/list",
        "marketplace/add",
        "marketplace/remove",
        "marketplace/upgrade",
        "mcpServer/oauth/login",
        "mcpServer/resource/read",
        "mcpServer/tool/call",
        "mcpServerStatus/list",
        "modelProvider/capabilities/read",
        "modelProvider/config/write",
        "modelProvider/list",
        "permissionProfile/list",
        "plugin/install",
        "plugin/installed",
        "plugin/list",
        "plugin/read",
        "plugin/reconcile",
        "plugin/share/checkout",
        "plugin/share/delete",
        "plugin/share/list",
        "plugin/share/save",
        "plugin/share/updateTargets",
        "plugin/skill/read",
        "plugin/uninstall",
        "review/start",
        "skills/config/write",
        "skills/extraRoots/set",
        "skills/list",
        "thread/approveGuardianDeniedAction",
        "thread/attachment/add",
        "thread/attachment/list",
        "thread/attachment/remove",
        "thread/attachmentOwner/list",
        "thread/delete",
        "thread/goal/clear",
        "thread/goal/get",
        "thread/goal/set",
        "thread/inject_items",
        "thread/items/list",
        "thread/metadata/update",
        "thread/revert",
        "thread/section/move",
        "thread/shellCommand",
        "thread/turns/list",
        "thread/unsubscribe",
        "threadSection/create",
        "threadSection/delete",
        "threadSection/list",
        "threadSection/update",
        "windowsSandbox/readiness",
        "windowsSandbox/setupStart",
    }
)


def unsupported_message(method: str) -> str:
    """The error message of a method relay has no counterpart for."""
    return f"unsupported method: {method} (relay app-server has no counterpart for it)"


__all__ = ["SUPPORTED", "UNSUPPORTED", "unsupported_message"]
