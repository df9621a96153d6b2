"""Small pieces the public classes are built with."""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

T = TypeVar("T")


class NoPublicConstructor(type):
    """A metaclass whose classes are made only by the library: ``Cls(...)`` raises TypeError.

    The library makes instances with ``Cls._create(...)``; users get them from the function
    that owns their life (a session from ``open_session``).
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{cls.__qualname__} has no public constructor; "
            "use the function that opens one (relay.open_session)"
        )

    def _create(cls: type[T], *args: Any, **kwargs: Any) -> T:
        return super().__call__(*args, **kwargs)  # type: ignore[misc, no-any-return]


def single_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The single exception of a group (recursively), or the group itself: what a task group
    that ran one failing task raised."""
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        inner = group.exceptions[0]
        if not isinstance(inner, BaseExceptionGroup):
            return inner
        group = inner
    return group


def field_types(cls: type) -> dict[str, Any]:
    """The resolved type of each field of the attrs class ``cls``.

    Public classes report ``__module__ == "relay"``, where the names their annotations use
    are not defined; their types are resolved once, where they are defined (see
    ``relay/__init__.py``), and read from their fields from then on.
    """
    return {field.name: field.type for field in attrs.fields(attrs.resolve_types(cls))}
