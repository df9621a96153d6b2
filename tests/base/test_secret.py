"""The API key: checked when read, taken out of the environment, redacted in every form."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import relay
from relay import ConfigError, ProviderConfig, testing
from relay._base._config import resolve_api_key, take_api_key
from relay._base._secret import (
    FRAGMENT,
    REDACTED,
    _forms,
    _grams,
    check_key,
    hide_keys,
    read_key,
    redact,
    redact_json,
)

KEY = 'sk-live"4c\\e1/f0+c9a%7b3d8e2f'


@pytest.mark.parametrize("raw", [f"{KEY}\n", f"{KEY}\r\n", f"\t{KEY} ", KEY])
def test_surrounding_whitespace_is_stripped(raw: str) -> None:
    assert check_key("LAB_KEY", raw) == KEY


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("sk-abc\ndef", "a control character at position 7"),
        ("sk-abc\x00def", "a control character"),
        ("sk-abc def", "a space"),
        ("sk-abcé-def", "a non-ASCII character"),
    ],
)
def test_an_invalid_key_names_the_variable_never_the_value(raw: str, kind: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_key("LAB_KEY", raw)
    message = str(info.value)
    assert "LAB_KEY" in message and kind in message
    assert "abc" not in message and "def" not in message


def test_resolving_the_key_strips_it_and_leaves_the_environment_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAB_KEY", f"{KEY}\n")
    provider = ProviderConfig(name="lab", env_key="LAB_KEY")
    assert resolve_api_key(provider) == KEY
    assert os.environ["LAB_KEY"] == f"{KEY}\n"
    # A key given by value is used, checked, and the environment is not read.
    assert resolve_api_key(provider, f" {KEY[::-1]}\t") == KEY[::-1]


def test_taking_the_key_strips_it_and_takes_it_out_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAB_KEY", f"{KEY}\n")
    provider = ProviderConfig(name="lab", env_key="LAB_KEY")
    take_api_key(provider)
    assert "LAB_KEY" not in os.environ
    # A session opened later in the same process still finds it.
    assert resolve_api_key(provider) == KEY


def test_resolving_an_invalid_key_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAB_KEY", "sk-käse")
    with pytest.raises(ConfigError, match="LAB_KEY has a non-ASCII character") as info:
        resolve_api_key(ProviderConfig(name="lab", env_key="LAB_KEY"))
    assert "käse" not in str(info.value)


def forms(key: str) -> dict[str, str]:
    return {
        "raw": key,
        "json": json.dumps(key)[1:-1],
        "repr": repr(key)[1:-1],
        "bytes": repr(key.encode())[2:-1],
        "header": repr(f"Bearer {key}\n".encode()),
        "percent": urllib.parse.quote(key, safe=""),
        "plus": urllib.parse.quote_plus(key),
        "prefix": key[:12],
        "suffix": key[-12:],
        "middle": key[5:20],
    }


@pytest.mark.parametrize("form", list(forms(KEY)))
def test_every_form_of_the_key_is_redacted(form: str) -> None:
    text = f"server said: <{forms(KEY)[form]}> twice <{forms(KEY)[form]}>"
    redacted = redact(text, KEY)
    assert redacted.startswith("server said: <")
    assert "[redacted]" in redacted
    for fragment in (KEY[i : i + 12] for i in range(len(KEY) - 11)):
        assert fragment not in redacted


def test_text_without_the_key_is_unchanged() -> None:
    text = "sk-live is a prefix; 4c and e1 are hex"
    assert redact(text, KEY) == text
    assert redact(text, None) == text


def slid(text: str, secret: str) -> str:
    """:func:`redact` as a window slid over every character: what it must find."""
    for form in _forms(secret):
        text = text.replace(form, REDACTED)
    grams = _grams(secret)
    hits = [i for i in range(len(text) - FRAGMENT + 1) if text[i : i + FRAGMENT] in grams]
    out, last, i = [], 0, 0
    while i < len(hits):
        start, end = hits[i], hits[i] + FRAGMENT
        while i + 1 < len(hits) and hits[i + 1] <= end:
            i += 1
            end = hits[i] + FRAGMENT
        out += [text[last:start], REDACTED]
        last, i = end, i + 1
    return "".join([*out, text[last:]])


@given(
    st.text("ab/%", min_size=FRAGMENT, max_size=20),
    st.lists(st.sampled_from(["a", "b", "ab", "%2F", "/", "x", "ba" * 5]), max_size=40),
)
def test_redaction_finds_every_run_a_window_slid_over_the_text_finds(
    secret: str, pieces: list[str]
) -> None:
    text = "".join(piece if len(piece) < 4 else secret[: len(piece) + 4] for piece in pieces)
    text += secret[3:] + "x" + secret[:-2]
    assert redact(text, secret) == slid(text, secret)


def test_redact_json_reaches_every_string() -> None:
    answer = {"output": [{"type": "message", "role": KEY, KEY: [f"x{KEY}x", 1, None]}]}
    assert KEY[:10] not in json.dumps(redact_json(answer, KEY), ensure_ascii=False)


def test_the_key_is_wiped_from_the_environment_the_kernel_shows(tmp_path: Path) -> None:
    code = (
        "import os; from relay._base._config import resolve_api_key, take_api_key;"
        "from relay import ProviderConfig; lab = ProviderConfig(name='lab', env_key='LAB_KEY');"
        "take_api_key(lab); print(resolve_api_key(lab));"
        "open(os.environ['OUT'], 'wb').write(open('/proc/self/environ', 'rb').read())"
    )
    out = tmp_path / "environ"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "LAB_KEY": f"{KEY}\n", "OUT": str(out)},
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == KEY
    assert KEY[:10].encode() not in out.read_bytes()


def test_a_key_set_again_in_the_process_is_wiped_where_the_kernel_shows_it(
    tmp_path: Path,
) -> None:
    """Setting the variable again points the C environment to a copy; the value the process
    started with is still what ``/proc/PID/environ`` shows, and is wiped there too."""
    code = (
        "import os; from relay._base._config import resolve_api_key, take_api_key;"
        "from relay import ProviderConfig; lab = ProviderConfig(name='lab', env_key='LAB_KEY');"
        "os.environ['LAB_KEY'] = 'sk-set-again-in-the-process';"
        "take_api_key(lab); print(resolve_api_key(lab));"
        "open(os.environ['OUT'], 'wb').write(open('/proc/self/environ', 'rb').read())"
    )
    out = tmp_path / "environ"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "LAB_KEY": KEY, "OUT": str(out)},
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == "sk-set-again-in-the-process"
    shown = out.read_bytes()
    assert KEY[:10].encode() not in shown and b"sk-set-again" not in shown


def test_hidden_keys_leave_the_environment_and_are_checked_when_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAB_KEY", f"{KEY}\n")
    monkeypatch.setenv("LAB_BAD_KEY", "sk-with a-space")
    monkeypatch.delenv("LAB_UNSET_KEY", raising=False)
    hide_keys(["LAB_KEY", "LAB_BAD_KEY", "LAB_UNSET_KEY", None])
    assert {"LAB_KEY", "LAB_BAD_KEY"}.isdisjoint(os.environ)
    assert read_key("LAB_KEY") == KEY
    assert read_key("LAB_UNSET_KEY") is None
    with pytest.raises(ConfigError, match="LAB_BAD_KEY has a space"):
        read_key("LAB_BAD_KEY")


# ----------------------------------------------------------------------------- embedding


def mock_config(base_url: str | None, tmp_path: Path) -> relay.Config:
    return relay.Config(
        model="gpt-test",
        model_provider="lab",
        model_providers={
            "lab": relay.ProviderConfig(name="lab", base_url=base_url, env_key="LAB_KEY")
        },
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(enabled=False),
    )


async def test_a_program_that_opens_a_session_keeps_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_session reads the key and leaves the environment alone: the program's own client
    and the processes it starts still find it."""
    monkeypatch.setenv("LAB_KEY", KEY)
    async with (
        testing.open_mock_server({"responses": [{"text": "hi"}]}) as server,
        relay.open_session(mock_config(server.base_url, tmp_path)) as session,
    ):
        assert (await session.ask("hello")).message == "hi"
    assert os.environ.get("LAB_KEY") == KEY
    seen = await trio.run_process(
        [sys.executable, "-c", "import os; print(os.environ.get('LAB_KEY'))"],
        capture_stdout=True,
    )
    assert seen.stdout.decode().strip() == KEY


async def test_a_key_given_by_value_is_used_and_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAB_KEY", raising=False)
    script = {
        "responses": [
            {"http_error": {"status": 401, "message": f"Incorrect API key provided: {KEY}"}},
            {"text": "hi"},
        ]
    }
    async with testing.open_mock_server(script) as server:
        config = mock_config(server.base_url, tmp_path)
        async with (
            relay.open_session(config, api_key=f"{KEY}\n") as session,
            testing.recording(session) as recorder,
        ):
            await session.submit(relay.UserTurn(items=[relay.Text("one")]))
            await recorder.wait_for(relay.TurnComplete)
            assert (await session.ask("two")).message == "hi"
    errors = [e.message for e in recorder.of_type(relay.ErrorEvent)]
    assert len(errors) == 1 and "[redacted]" in errors[0]
    assert KEY[:12] not in json.dumps(recorder.json())
    assert "LAB_KEY" not in os.environ


async def test_an_invalid_key_given_by_value_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has a space") as info:
        async with relay.open_session(
            mock_config("http://127.0.0.1:9/v1", tmp_path), api_key="sk-a b"
        ):
            pass
    assert "sk-a" not in str(info.value)
