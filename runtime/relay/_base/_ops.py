"""The ops of the protocol: what a client asks a session to do (docs/protocol.md).

Part of the protocol (:mod:`relay._base._protocol` re-exports every name); kept apart so that
each module of the ground floor stays small.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from ._errors import InvalidOpError
from ._items import as_tuple, is_str, items_of
from ._output_schema import check_output_schema
from ._sandbox_config import APPROVAL_POLICIES, SANDBOX_MODES
from ._unicode import holds_lone_surrogate, lone_surrogate_at, why_not_text

# --------------------------------------------------------------------------- text


def _carried(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    # An op made in Python is the edge of the Python API: text that UTF-8 cannot carry (a lone
    # surrogate) is refused here, naming the field, rather than failing the session where it
    # is first written (docs/decisions.md, "Text that UTF-8 cannot carry").
    if value is not None and holds_lone_surrogate(value):
        raise InvalidOpError(f"{attribute.name}: {why_not_text(value)}")


#: The validators of a text field of an op, and of one that may be unset.
_is_text = [is_str, _carried]
_optional_text = [attrs.validators.optional(is_str), _carried]


def _optional_choice(choices: tuple[str, ...]) -> Any:
    # The validator of a field that names one of ``choices``, or is unset.
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value not in choices:
            raise InvalidOpError(f"{attribute.name}: {value!r} is not one of {', '.join(choices)}")

    return check


def _optional_strings(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, tuple) and not all(isinstance(one, str) and one for one in value):
        raise InvalidOpError(f"{attribute.name}: expected non-empty paths")


def _carried_json(_: object, attribute: attrs.Attribute[Any], value: Mapping[str, Any]) -> None:
    found = lone_surrogate_at(value, attribute.name)
    if found is not None:
        where, text = found
        raise InvalidOpError(f"{where}: {why_not_text(text)}")


# --------------------------------------------------------------------------- ops


class OnBusy(enum.StrEnum):
    """What a ``user_turn`` does while a task runs."""

    STEER = "steer"
    """Add the input to the running turn (rejected while a compaction runs)."""
    REPLACE = "replace"
    """Abort the running task and start a new turn."""
    QUEUE = "queue"
    """Start a new turn when the running task ends."""


@attrs.frozen
class Text:
    """Text input."""

    text: str = attrs.field(validator=_is_text)
    """The text."""


@attrs.frozen
class Image:
    """Image input by URL."""

    image_url: str = attrs.field(validator=_is_text)
    """A URL or a ``data:`` URL."""


@attrs.frozen
class LocalImage:
    """Image input from a file."""

    path: str = attrs.field(validator=_is_text)
    """Path of the image file."""


InputItem: TypeAlias = Text | Image | LocalImage


def _non_empty(_: object, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    if not value:
        raise ValueError(f"{attribute.name} must not be empty")


def _output_schema(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        try:
            check_output_schema(value)
        except InvalidOpError as exc:
            raise InvalidOpError(f"{attribute.name}: {exc}") from None


@attrs.frozen
class UserTurn:
    """Start a regular turn with this input, or steer/replace/queue while busy."""

    items: tuple[InputItem, ...] = attrs.field(
        converter=as_tuple, validator=[items_of(Text, Image, LocalImage), _non_empty]
    )
    """The user's input."""
    model: str | None = attrs.field(default=None, validator=_optional_text)
    """Model for this turn and later ones."""
    cwd: str | None = attrs.field(default=None, validator=_optional_text)
    """Working directory for this turn and later ones (a relative path is relative to the
    current one)."""
    effort: str | None = attrs.field(default=None, validator=_optional_text)
    """Reasoning effort for this turn and later ones."""
    on_busy: OnBusy = attrs.field(default=OnBusy.STEER, converter=OnBusy)
    """What to do when a task is running."""
    pin: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    """Keep the text of this input verbatim in the history across every compaction."""
    final_output_json_schema: Mapping[str, Any] | None = attrs.field(
        default=None, validator=_output_schema, hash=False
    )
    """A JSON Schema the turn's final answer must fit, for this turn only: every request of
    the turn asks for JSON of that schema, and an answer that is not JSON or does not fit it
    ends the turn with ``error{invalid_output}``. A value that is not a JSON Schema is refused
    (``invalid_op``)."""


@attrs.frozen
class UserInput:
    """Alias of :class:`UserTurn` without overrides."""

    items: tuple[InputItem, ...] = attrs.field(
        converter=as_tuple, validator=[items_of(Text, Image, LocalImage), _non_empty]
    )
    """The user's input."""


@attrs.frozen
class Compact:
    """Start a compaction task (replaces a running task)."""

    instructions: str | None = attrs.field(default=None, validator=_optional_text)
    """Extra text appended to the summarization prompt."""


@attrs.frozen
class Interrupt:
    """Abort the running task with reason ``interrupted``."""


@attrs.frozen
class OverrideTurnContext:
    """Change the defaults of later turns; never starts a turn."""

    model: str | None = attrs.field(default=None, validator=_optional_text)
    """New default model."""
    cwd: str | None = attrs.field(default=None, validator=_optional_text)
    """New default working directory (a relative path is relative to the current one)."""
    effort: str | None = attrs.field(default=None, validator=_optional_text)
    """New default reasoning effort."""
    approval_policy: str | None = attrs.field(
        default=None, validator=_optional_choice(APPROVAL_POLICIES)
    )
    """New approval policy, for the running turn's later calls and every later turn."""
    sandbox_mode: str | None = attrs.field(default=None, validator=_optional_choice(SANDBOX_MODES))
    """New sandbox mode, as :attr:`approval_policy` applies."""
    writable_roots: tuple[str, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(as_tuple), validator=_optional_strings
    )
    """New folders writable besides the working directory (``workspace-write``; a relative
    path is relative to the working directory)."""
    network_access: bool | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bool))
    )
    """Whether commands reach the network (``workspace-write``)."""

    @property
    def changes_rules(self) -> bool:
        """Whether it changes the rules of what the session's calls may do."""
        return any(
            value is not None
            for value in (
                self.approval_policy,
                self.sandbox_mode,
                self.writable_roots,
                self.network_access,
            )
        )


@attrs.frozen
class Unpin:
    """Release a pinned message (``text``), or every one; never starts a turn."""

    text: str | None = attrs.field(default=None, validator=_optional_text)
    """The text of the pinned message, as it was pinned; unset: every pinned message."""


class ReviewDecision(enum.StrEnum):
    """The answer to an ``exec_approval_request`` (docs/approvals.md)."""

    APPROVED = "approved"
    """Run this call."""
    APPROVED_FOR_SESSION = "approved_for_session"
    """Run this call, and every later call of the same argv, or of the same tool, unasked."""
    DENIED = "denied"
    """Do not run it; the model reads that it was denied and the turn goes on."""
    ABORT = "abort"
    """Do not run it, and end the turn (``turn_aborted``)."""


@attrs.frozen
class ExecApproval:
    """Decide a pending ``exec_approval_request``; never starts a turn."""

    id: str = attrs.field(validator=_is_text)
    """The ``call_id`` of the request."""
    decision: ReviewDecision = attrs.field(converter=ReviewDecision)
    """The decision."""
    agent_id: str | None = None
    """The sub-agent whose call it is (its events carry it as ``agent.id``); None: the
    session's own call, else the first descendant's that waits on this ``id``."""


@attrs.frozen
class PatchApproval:
    """Decide a pending ``apply_patch_approval_request``; never starts a turn."""

    id: str = attrs.field(validator=_is_text)
    """The ``call_id`` of the request."""
    decision: ReviewDecision = attrs.field(converter=ReviewDecision)
    """The decision (``approved_for_session``: later patches under the same folder)."""
    agent_id: str | None = None
    """The sub-agent whose patch it is (see :class:`ExecApproval`)."""


@attrs.frozen
class Shutdown:
    """Abort the running task, flush the rollout, report ``shutdown_complete`` and stop."""


#: The op types relay serves itself; a custom op cannot take one of these names.
BUILTIN_OP_TYPES = frozenset(
    {
        "user_turn",
        "user_input",
        "compact",
        "interrupt",
        "override_turn_context",
        "unpin",
        "exec_approval",
        "patch_approval",
        "shutdown",
    }
)


def _custom_type(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value or value in BUILTIN_OP_TYPES:
        raise ValueError(f"{attribute.name} must name an op type of one's own, not {value!r}")


@attrs.frozen
class CustomOp:
    """An op of a type registered with the session (``open_session(tasks=...)``, a
    configuration file's ``[tasks]``, ``relay run --task``, or the ``relay.tasks`` entry
    point group); its task gets the fields.

    In JSON, the type is the op's ``type`` and the fields sit beside it:
    ``{"type": "review", "path": "src/app.py"}`` is ``CustomOp("review", {"path":
    "src/app.py"})``. ``on_busy`` is the one field relay reads itself.
    """

    type: str = attrs.field(validator=[*_is_text, _custom_type])
    """The op type: the name it was registered under."""
    fields: Mapping[str, Any] = attrs.field(
        factory=dict, converter=dict, validator=_carried_json, hash=False
    )
    """Its fields, JSON values (the task reads them as ``op.fields``)."""
    on_busy: OnBusy = attrs.field(default=OnBusy.REPLACE, converter=OnBusy)
    """What to do when a task is running (``steer`` is refused: the op has no input)."""


Op: TypeAlias = (
    UserTurn
    | UserInput
    | Compact
    | Interrupt
    | OverrideTurnContext
    | Unpin
    | ExecApproval
    | PatchApproval
    | Shutdown
    | CustomOp
)


@attrs.frozen
class Submission:
    """An op with its id."""

    id: str
    """The submission id; a turn started by it uses it as turn id."""
    op: Op
    """The request."""
