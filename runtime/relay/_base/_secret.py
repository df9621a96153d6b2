"""The API key: checked when it is read, kept out of every message relay reports, and taken
out of the process environment by the ``relay`` command.

A key read from a file or a ``.env`` line often ends with a newline, a CR or a tab: surrounding
whitespace is stripped. Anything else a request header cannot carry (a control character, a
space, a non-ASCII character) is a :class:`ConfigError` that names the variable, never the
value, because the HTTP layer would otherwise fail with a message quoting the header.

Reading the key (:func:`read_key`) leaves the environment alone: a program that embeds relay
keeps its own ``OPENAI_API_KEY`` for its own client and its own processes. The ``relay``
command, which owns its process, takes the key (:func:`take_key`): the variable is removed from
the environment, including the copy the kernel shows in ``/proc/PID/environ``, so that no
process relay starts can read it from relay; the key is kept in this module's memory for the
sessions that open later in the same process. ``relay app-server``, whose threads may each
choose a provider, also takes the key of every provider a thread could choose
(:func:`hide_keys`): a key never waits in the environment for a thread of another provider to
run ``env``. The processes a session starts (the shell tool, hook commands) never get its
provider's variable in any case (:meth:`Secrets.child_environment`).

Where the kernel shows the environment: the strings the process was started with, between the
``env_start`` and ``env_end`` addresses of ``/proc/self/stat``. The C library's ``environ``
points into them until a variable is set again, and unsetting a variable takes only the
pointer away; so the bytes there are overwritten (:func:`_forget`) before the variable is unset.

A process *above* relay (``timeout``, ``uv run``, ``sh -c``) keeps the environment it was given,
key included, and a command can read it there (``/proc/PID/environ`` of relay's parent). So
whatever a tool or a hook outputs is redacted (:meth:`Secrets.redact`) before it is recorded,
reported or sent.

:func:`redact` replaces every form of the key a server or a library can echo: as it is, escaped
for JSON, for ``repr`` of a string or of bytes, percent-encoded, and any run of at least
:data:`FRAGMENT` characters of one of these forms (a key cut by a server or by a length limit).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import urllib.parse
from collections.abc import Iterable

import attrs

from ._errors import ConfigError

#: What replaces the key in a message.
REDACTED = "[redacted]"

#: The shortest run of the key's characters that is redacted on its own.
FRAGMENT = 12
#: The runs a search for such a run starts from (see :func:`redact`).
ANCHOR = FRAGMENT // 2

#: What :func:`take_key` and :func:`hide_keys` took out of the environment, by variable, as it
#: was there (checked when it is read).
_keys: dict[str, str] = {}


def check_key(variable: str, value: str) -> str:
    """The key in ``value`` with surrounding whitespace stripped.

    Raises:
        ConfigError: the key is empty or has a character a request header cannot carry; the
            message names ``variable`` and the kind of character, never the key.
    """
    key = value.strip()
    if not key:
        raise ConfigError(f"the API key in {variable} is empty")
    for index, char in enumerate(key):
        if " " < char <= "~":
            continue
        if char > "~":
            kind = "a non-ASCII character"
        elif char == " ":
            kind = "a space"
        else:
            kind = "a control character"
        raise ConfigError(
            f"the API key in {variable} has {kind} at position {index + 1}; "
            "an API key is printable ASCII without spaces"
        )
    return key


def read_key(variable: str) -> str | None:
    """The checked key in the environment variable ``variable``; the key :func:`take_key` or
    :func:`hide_keys` took earlier in this process when the variable is no longer set; None
    when there is neither, or the value is blank. The environment is left as it is.

    Raises:
        ConfigError: see :func:`check_key`.
    """
    raw = os.environ.get(variable)
    if raw is None:
        raw = _keys.get(variable)
    if raw is None or not raw.strip():
        return None
    return check_key(variable, raw)


def take_key(variable: str) -> str | None:
    """:func:`read_key`, then the variable taken out of the environment and its bytes wiped
    where the kernel shows the environment the process started with; the key is kept for
    later :func:`read_key` calls. For a program that owns its process (the ``relay`` command),
    never for a library call.

    Raises:
        ConfigError: see :func:`check_key`.
    """
    key = read_key(variable)
    if key is not None:
        hide_keys([variable])
    return key


def hide_keys(variables: Iterable[str | None]) -> None:
    """Take each of ``variables`` that is set out of the environment, as :func:`take_key`
    does, without checking it: a key is checked when a session reads it (:func:`read_key`),
    so a bad key of a provider nobody uses stops nothing. For a program that owns its process
    (``relay app-server``, for every provider its threads may choose)."""
    for variable in variables:
        if variable and (raw := os.environ.get(variable)) is not None:
            _keys[variable] = raw
            _forget(variable)


def _forget(variable: str) -> None:
    """Remove ``variable`` from the environment and wipe its value where the kernel shows the
    environment the process started with (``/proc/PID/environ``)."""
    prefix = variable.encode() + b"="
    # Wiped first: unsetting the variable takes its entry out of the C environment, where
    # it is found, but leaves the bytes the kernel shows.
    try:
        libc = ctypes.CDLL(None)
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
    except (OSError, ValueError, AttributeError):
        pass
    else:
        index = 0
        while (address := environ[index]) is not None:
            _wipe_value(address, ctypes.string_at(address), prefix)
            index += 1
    # The strings the kernel shows, wherever ``environ`` points now: a variable set again in
    # this process points to a copy, and the first value stays there.
    region = _shown_environment()
    if region is not None:
        start, end = region
        at = start
        for entry in ctypes.string_at(start, end - start).split(b"\0"):
            _wipe_value(at, entry, prefix)
            at += len(entry) + 1
    os.environ.pop(variable, None)


def _wipe_value(address: int, entry: bytes, prefix: bytes) -> None:
    """Overwrite the value of the environment string ``entry`` at ``address`` when it is the
    variable of ``prefix`` (``NAME=``)."""
    if entry.startswith(prefix) and len(entry) > len(prefix):
        ctypes.memset(address + len(prefix), ord("x"), len(entry) - len(prefix))


def _shown_environment() -> tuple[int, int] | None:
    """The addresses between which the kernel reads ``/proc/PID/environ``: fields 50 and 51
    of ``/proc/self/stat``; None where there is no such file or it does not give them."""
    try:
        with open("/proc/self/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # The fields after the command's name (which may hold spaces) start at field 3.
    fields = stat.rpartition(b")")[2].split()
    try:
        start, end = int(fields[50 - 3]), int(fields[51 - 3])
    except (IndexError, ValueError):
        return None
    return (start, end) if 0 < start < end else None


@functools.lru_cache(maxsize=16)
def _forms(secret: str) -> tuple[str, ...]:
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        repr(secret.encode("utf-8", "backslashreplace"))[2:-1],
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),
        urllib.parse.quote_plus(secret),
    }
    return tuple(sorted((form for form in forms if form), key=len, reverse=True))


@functools.lru_cache(maxsize=16)
def _grams(secret: str) -> frozenset[str]:
    """Every run of :data:`FRAGMENT` characters of every form of ``secret`` (made once per
    key: a session redacts many texts with the same one)."""
    return frozenset(
        form[i : i + FRAGMENT] for form in _forms(secret) for i in range(len(form) - FRAGMENT + 1)
    )


@functools.lru_cache(maxsize=16)
def _anchors(secret: str) -> tuple[str, ...]:
    """The runs of :data:`ANCHOR` characters of every form of ``secret`` that start at a
    multiple of :data:`ANCHOR`: each run of :data:`FRAGMENT` characters of a form holds one
    whole (``FRAGMENT >= 2 * ANCHOR``)."""
    found = {
        form[at : at + ANCHOR]: None
        for form in _forms(secret)
        for at in range(0, len(form) - ANCHOR + 1, ANCHOR)
    }
    return tuple(found)


def redact(text: str, secret: str | None) -> str:
    """``text`` with every form of ``secret`` replaced by :data:`REDACTED`.

    Every form is replaced first; then every run of :data:`FRAGMENT` characters of a form
    that is left. Those are found from the places where one of the form's :func:`_anchors`
    is in the text (searched by ``str.find``, at the speed of the C library), so the cost of a
    long text is a few scans of it, not a step of Python per character.
    """
    if not secret or not text:
        return text
    for form in _forms(secret):
        if form in text:
            text = text.replace(form, REDACTED)
    grams = _grams(secret)
    if not grams:
        return text
    starts: set[int] = set()
    for anchor in _anchors(secret):
        at = text.find(anchor)
        while at >= 0:
            # A run that holds this anchor whole starts at most ANCHOR - 1 characters before.
            for start in range(max(0, at - ANCHOR + 1), at + 1):
                if text[start : start + FRAGMENT] in grams:
                    starts.add(start)
            at = text.find(anchor, at + 1)
    if not starts:
        return text
    covered: list[tuple[int, int]] = []
    for start in sorted(starts):
        if covered and covered[-1][1] >= start:
            covered[-1] = (covered[-1][0], start + FRAGMENT)
        else:
            covered.append((start, start + FRAGMENT))
    parts: list[str] = []
    last = 0
    for start, end in covered:
        parts.append(text[last:start])
        parts.append(REDACTED)
        last = end
    parts.append(text[last:])
    return "".join(parts)


def redact_json(value: object, secret: str | None) -> object:
    """``value`` (parsed JSON) with :func:`redact` applied to every string in it.

    A key shorter than :data:`FRAGMENT` characters (a placeholder such as ``"local"`` for a
    server that checks none) is left alone here: replacing it in every string would corrupt
    the content of an answer, and such a key protects nothing.
    """
    if not secret or len(secret) < FRAGMENT:
        return value
    if isinstance(value, str):
        return redact(value, secret)
    if isinstance(value, list):
        return [redact_json(item, secret) for item in value]
    if isinstance(value, dict):
        return {redact(str(k), secret): redact_json(v, secret) for k, v in value.items()}
    return value


@attrs.frozen
class Secrets:
    """What a session keeps from the processes it starts and out of what it records."""

    values: tuple[str, ...] = ()
    """The keys: redacted from every tool and hook output."""
    variables: frozenset[str] = frozenset()
    """The environment variables the processes a session starts never see (the provider's
    ``env_key``)."""

    @classmethod
    def of(cls, values: Iterable[str | None], variables: Iterable[str | None]) -> Secrets:
        """The secrets among ``values`` and ``variables``, Nones and blanks left out."""
        return cls(
            tuple(dict.fromkeys(v for v in values if v)),
            frozenset(v for v in variables if v),
        )

    def redact(self, text: str) -> str:
        """``text`` with every form of every key replaced by :data:`REDACTED`.

        A key shorter than :data:`FRAGMENT` characters is left alone, as :func:`redact_json`
        leaves it: such a key (a placeholder like ``"local"``) protects nothing, and replacing
        it would corrupt ordinary text.
        """
        for secret in self.values:
            if len(secret) >= FRAGMENT:
                text = redact(text, secret)
        return text

    def child_environment(self) -> dict[str, str]:
        """The environment a process the session starts gets: this process's, without
        :attr:`variables`."""
        return {k: v for k, v in os.environ.items() if k not in self.variables}


#: No secrets: nothing hidden, nothing redacted.
NO_SECRETS = Secrets()
