"""A griffe extension for relay's API reference (mkdocstrings reads the package through griffe).

Two things griffe does not do by itself:

- **Cross-references written as Sphinx roles.** relay's docstrings name other objects as
  ``:class:`Session```, ``:meth:`~relay.Session.ask```, ``:func:`open_session```. Each role
  becomes a cross-reference to the object it names, resolved in the scope of the docstring's
  object as Python would (its members, its module's imports, then its parents): a link where
  the reference renders the object, its name in code where it does not (a private helper). A
  role whose name resolves to nothing is a warning, so ``mkdocs build --strict`` fails on it.
- **The constructor of an attrs class.** ``@attrs.frozen`` and ``@attrs.define`` write
  ``__init__`` at run time; griffe reads sources. The extension writes the ``__init__`` attrs
  would (its fields in declaration order, those of attrs base classes first; ``attrs.field``'s
  ``default``, ``factory``, ``init``, ``kw_only`` and ``alias``; a private field's leading
  underscore dropped), so that the reference shows each class's signature.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import griffe

#: A Sphinx role naming a Python object: ``:class:`target```, ``:meth:`title <target>```.
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj|const):`(?P<body>[^`]+)`")
_EXPLICIT = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>\s*$", re.S)

_ATTRS_CLASSES = {"attrs.frozen", "attrs.define", "attrs.mutable", "attr.s", "attr.attrs"}
_ATTRS_FIELDS = {"attrs.field", "attr.ib", "attr.attrib"}

logger = griffe.get_logger("griffe_relay")


def convert_roles(text: str, resolve: Callable[[str], str | None]) -> tuple[str, list[str]]:
    """``text`` with each Sphinx role made a cross-reference, and the targets left unresolved.

    ``resolve`` gives a target's identifier (its full path), or None when it names nothing.
    A resolved role becomes an optional cross-reference (a link where the reference renders
    the object, else its name in code); an unresolved one becomes the name in code.
    """
    unresolved: list[str] = []

    def replace(match: re.Match[str]) -> str:
        body = " ".join(match["body"].split())
        explicit = _EXPLICIT.match(body)
        title, target = (explicit["title"], explicit["target"]) if explicit else ("", body)
        target = target.strip()
        short = target.startswith("~")
        target = target.lstrip("~.")
        shown = title or (target.rsplit(".", 1)[-1] if short else target)
        identifier = resolve(target)
        if identifier is None:
            unresolved.append(target)
            return f"`{shown}`"
        return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'

    return ROLE.sub(replace, text), unresolved


def _walk(obj: griffe.Object) -> Iterator[griffe.Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)  # type: ignore[arg-type]


def _resolver(
    obj: griffe.Object, collection: griffe.ModulesCollection, paths: Mapping[str, list[str]]
) -> Callable[[str], str | None]:
    """How to resolve a role's target in the docstring of ``obj``.

    ``paths`` holds every path of the package by its last name: a name the object's scope
    does not hold (a module imported inside a function, to load it on first use) is the one
    object of the package whose path ends with it, when there is one.
    """
    root = obj.package.name

    def exists(path: str) -> bool:
        try:
            collection[path]
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return False
        return True

    def resolve(target: str) -> str | None:
        if target == root or target.startswith(f"{root}."):
            return target if exists(target) else None
        head, _, rest = target.partition(".")
        if hasattr(builtins, head):
            return target
        try:
            base = obj.resolve(head)
        except griffe.NameResolutionError:
            found = [
                path
                for path in paths.get(target.rsplit(".", 1)[-1], [])
                if path.endswith(f".{target}")
            ]
            return found[0] if len(found) == 1 else None
        path = f"{base}.{rest}" if rest else base
        if not path.startswith(f"{root}."):
            return path  # another package's object: a name, never a warning
        return path if exists(path) else None

    return resolve


def _decorated_by(cls: griffe.Class, paths: set[str]) -> bool:
    for decorator in cls.decorators:
        value = decorator.value
        if isinstance(value, griffe.Expr) and value.canonical_path in paths:
            return True
    return False


def _field_arguments(value: Any) -> dict[str, Any] | None:
    """The keyword arguments of an ``attrs.field(...)`` value, or None for a plain default."""
    if isinstance(value, griffe.ExprCall) and value.canonical_path in _ATTRS_FIELDS:
        return {
            argument.name: argument.value
            for argument in value.arguments
            if isinstance(argument, griffe.ExprKeyword)
        }
    return None


def _attrs_parameters(cls: griffe.Class) -> list[griffe.Parameter]:
    parameters = []
    for member in cls.members.values():
        if not isinstance(member, griffe.Attribute) or member.annotation is None:
            continue
        labels = member.labels
        if "property" in labels or (
            "class-attribute" in labels and "instance-attribute" not in labels
        ):
            continue  # a property, or a ClassVar
        arguments = _field_arguments(member.value)
        if arguments is None:
            default = member.value
            arguments = {}
        elif "factory" in arguments:
            default = griffe.ExprCall(function=arguments["factory"], arguments=[])
        else:
            default = arguments.get("default")
        if str(arguments.get("init")) == "False":
            continue
        # The reference shows the field as the constructor takes it, not its validators.
        member.value = default
        kind = (
            griffe.ParameterKind.keyword_only
            if str(arguments.get("kw_only")) == "True"
            else griffe.ParameterKind.positional_or_keyword
        )
        alias = arguments.get("alias")
        name = str(alias).strip("'\"") if alias is not None else member.name.lstrip("_")
        parameters.append(
            griffe.Parameter(
                name,
                annotation=member.annotation,
                kind=kind,
                default=default,
                docstring=member.docstring,
            )
        )
    return parameters


def _add_attrs_init(cls: griffe.Class) -> None:
    if "__init__" in cls.members or not _decorated_by(cls, _ATTRS_CLASSES):
        return
    try:
        bases = [base for base in reversed(cls.mro()) if _decorated_by(base, _ATTRS_CLASSES)]
    except ValueError:
        bases = []
    by_name: dict[str, griffe.Parameter] = {}
    for owner in [*bases, cls]:
        for parameter in _attrs_parameters(owner):
            by_name.pop(parameter.name, None)  # a redefined field moves to its new place
            by_name[parameter.name] = parameter
    ordered = sorted(by_name.values(), key=lambda p: p.kind is griffe.ParameterKind.keyword_only)
    cls.set_member(
        "__init__",
        griffe.Function(
            "__init__",
            lineno=0,
            endlineno=0,
            parent=cls,
            parameters=griffe.Parameters(
                griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword),
                *ordered,
            ),
            returns="None",
        ),
    )


class RelayReference(griffe.Extension):
    """Sphinx roles as cross-references, and the constructors of attrs classes."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        del kwargs
        objects = list(_walk(pkg))
        paths: dict[str, list[str]] = {}
        for obj in objects:
            paths.setdefault(obj.name, []).append(obj.path)
        for obj in objects:
            if isinstance(obj, griffe.Class):
                _add_attrs_init(obj)
            if obj.docstring is None:
                continue
            text, unresolved = convert_roles(
                obj.docstring.value, _resolver(obj, loader.modules_collection, paths)
            )
            for target in unresolved:
                logger.warning(
                    "%s: the docstring names %r, which resolves to nothing", obj.path, target
                )
            obj.docstring.value = text
