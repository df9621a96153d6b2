"""relay imports the part of the openai SDK it uses and leaves the SDK's type catalogue for
whoever needs it; a program that uses the SDK beside relay sees the whole SDK, unchanged.

Each check runs in a fresh interpreter: the test process has imported the SDK long ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipes import LineReader

TIMEOUT = 120

#: A module that only the SDK's type catalogue (``openai.types.__init__``) imports.
CATALOGUE = "openai.types.eval_create_params"
#: A module that only the catalogue of shared types (``openai.types.shared.__init__``) imports;
#: the SDK's exceptions import one module of that package.
SHARED_CATALOGUE = "openai.types.shared.compound_filter"


def python(code: str, *, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def public_face(prelude: str) -> dict[str, object]:
    """What a program sees of the SDK after ``prelude``: its names, and a few deep ones."""
    code = (
        f"{prelude}\n"
        "import json, openai, openai.types.responses, openai.lib.azure\n"
        "namespace = {}\n"
        "exec('from openai import *', namespace)\n"
        "print(json.dumps({\n"
        "    'all': sorted(openai.__all__),\n"
        "    'dir': sorted(dir(openai)),\n"
        "    'star': sorted(k for k in namespace if k != '__builtins__'),\n"
        "    'types': sorted(dir(openai.types)),\n"
        "    'client': openai.OpenAI.__module__,\n"
        "    'error': openai.APIStatusError.__module__,\n"
        "    'response': openai.types.responses.Response.__name__,\n"
        "    'metadata': str(openai.types.shared.Metadata),\n"
        "    'azure': openai.lib.azure.AzureOpenAI.__name__,\n"
        "    'resources': type(openai.resources).__name__,\n"
        "}))"
    )
    face: dict[str, object] = json.loads(python(code))
    return face


def test_importing_the_wire_leaves_the_type_catalogue_unloaded() -> None:
    out = python(
        "import sys\n"
        "from relay._wire import _sdk\n"
        f"names = ('openai', 'openai._client', {CATALOGUE!r}, {SHARED_CATALOGUE!r})\n"
        "print(sorted(n for n in names if n in sys.modules))\n"
        "print([_sdk.is_deferred(name) for name in _sdk.DEFERRED])"
    )
    assert out.splitlines() == ["['openai', 'openai._client']", "[True, True, True, True]"]


@pytest.mark.slow  # processes of its own
def test_a_program_that_imports_the_sdk_after_relay_sees_all_of_it() -> None:
    alone = public_face("")
    after_relay = public_face("import relay._wire")
    assert after_relay == alone
    assert alone["client"] == alone["error"] == "openai"


def test_the_classes_relay_holds_are_the_sdks_own() -> None:
    out = python(
        "from relay._wire import _sdk\n"
        "import openai\n"
        "print(all(getattr(openai, n) is getattr(_sdk, n) for n in (\n"
        "    'AsyncOpenAI', 'DefaultAsyncHttpxClient', 'OpenAIError', 'APIError',\n"
        "    'APIStatusError', 'APITimeoutError', 'APIConnectionError')))\n"
        "print(_sdk.is_deferred('openai'))"
    )
    assert out.split() == ["True", "False"]


def test_asking_a_deferred_package_for_its_names_completes_it() -> None:
    out = python(
        "from relay._wire import _sdk\n"
        "import openai\n"
        "names = dir(openai)\n"
        "print('OpenAI' in names, _sdk.is_deferred('openai'))"
    )
    assert out.split() == ["True", "False"]


@pytest.mark.slow  # processes of its own
def test_an_sdk_the_program_loaded_first_is_used_as_it_is() -> None:
    out = python(
        "import sys, openai\n"
        "from relay._wire import _sdk\n"
        f"print(_sdk.is_deferred('openai'), {CATALOGUE!r} in sys.modules)"
    )
    assert out.split() == ["False", "True"]


@pytest.mark.slow  # processes of its own
def test_an_sdk_laid_out_otherwise_is_imported_as_usual() -> None:
    # ``openai.lib`` stops being a package that can be found: the deferral cannot be set up,
    # every module of the attempt is dropped, and the plain import follows.
    out = python(
        "import importlib.util, sys\n"
        "find_spec = importlib.util.find_spec\n"
        "def without_lib(name, *args):\n"
        "    return None if name == 'openai.lib' else find_spec(name, *args)\n"
        "importlib.util.find_spec = without_lib\n"
        "from relay._wire import _sdk\n"
        "importlib.util.find_spec = find_spec\n"
        "import openai\n"
        f"print(_sdk.is_deferred('openai'), {CATALOGUE!r} in sys.modules,\n"
        "      openai.AsyncOpenAI is _sdk.AsyncOpenAI)"
    )
    assert out.split() == ["False", "True", "True"]


@pytest.fixture
def mock_server(tmp_path: Path) -> Iterator[str]:
    """A ``relay mock-server`` process answering one turn; its base URL."""
    script = tmp_path / "server.model.json"
    script.write_text(json.dumps({"responses": ["hello over HTTP"]}))
    server = subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield LineReader(server.stdout, timeout=30).readline().strip()
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_turn_over_http_never_loads_the_type_catalogue(tmp_path: Path, mock_server: str) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text(
        json.dumps({"op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}})
    )
    result = subprocess.run(
        [
            *(sys.executable, "-X", "importtime", "-m", "relay", "run", str(script)),
            *("-c", 'model_provider="mock"', "-c", 'model_providers.mock.name="mock"'),
            *("-c", f'model_providers.mock.base_url="{mock_server}"', "-c", 'model="m"'),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "RELAY_HOME": str(tmp_path / "home")},
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "hello over HTTP" in result.stdout
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()}
    assert {"openai._base_client", "openai._exceptions", "relay._wire"} <= imported
    assert CATALOGUE not in imported
    assert SHARED_CATALOGUE not in imported
