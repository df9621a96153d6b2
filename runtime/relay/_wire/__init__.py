"""The HTTP wires: model clients that talk to a server through the official ``openai`` SDK.

Two wires implement :class:`~relay._base._model.ModelClient` (docs/session.md):

- :class:`ResponsesClient` streams ``POST /responses`` with exactly the body of
  :func:`~relay._models._responses.request_body` and feeds every server-sent event, as a dict,
  to the same :class:`~relay._models._responses.ResponseStreamParser` the embedded scripted
  model uses, so a failure over HTTP and a scripted one are reported alike. It also sends
  remote compaction requests (``POST /responses/compact``).
- :class:`ChatClient` speaks ``POST /chat/completions`` for OpenAI-compatible local servers:
  it maps the history to chat messages and reassembles the streamed chunks into response items.

Both are opened by :func:`open_http_client`, which owns the ``AsyncOpenAI`` client. The SDK
sends every request (base URL, headers, query, authentication) and raises its status errors;
it runs with ``max_retries=0``, because retries belong to the sampling loop, which sees the same
errors whatever the model is. For streams the SDK hands back the raw HTTP response and
:class:`SseDecoder` frames the events: the SDK's own event iterator leaves async generators
unclosed when a stream ends early, which trio reports. The SDK is imported by this package
alone (its client and errors, through :mod:`._sdk`), so the scripted path never loads it.

Failures are translated into relay's error tree in one function,
:func:`~._errors.translate`; whatever the server or the transport said, the API key never
appears in an error message.

Invariant kept by both stream contexts: the response body is entered with ``async with``
before anything is yielded, so the byte iterator and the response are closed however the
caller leaves (read to the end, broke out of its loop, failed or was cancelled), and the
connection is released.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx2

from .._base._config import ProviderConfig
from .._base._errors import ConfigError
from .._base._model import ModelClient
from ._body import read_error_answer
from ._errors import refuse_foreign_redirect
from ._sdk import DefaultAsyncHttpxClient, SdkClient
from ._sse import ServerSentEvent, SseDecoder
from .chat import ChatClient, ChatStreamParser, chat_messages, chat_request_body
from .responses import ResponsesClient

__all__ = [
    "ChatClient",
    "ChatStreamParser",
    "ResponsesClient",
    "ServerSentEvent",
    "SseDecoder",
    "chat_messages",
    "chat_request_body",
    "open_http_client",
]

#: How long the SDK may take to open a connection, at most.
_CONNECT_TIMEOUT_S = 10.0


def needs_tls(base_url: str, proxies: Mapping[str, str]) -> bool:
    """Whether a client for ``base_url`` may open a TLS connection (and so needs the CA
    bundle): not for a plain ``http://`` server reached directly or through plain proxies.

    Redirects to another origin are refused, so the scheme of ``base_url`` is the only one
    the client speaks to the server; ``proxies`` are those of the environment.
    """
    if not base_url.lower().startswith("http://"):
        return True
    return any(proxy.lower().startswith("https://") for proxy in proxies.values())


def _guarded(http_client: httpx2.AsyncClient | None, base_url: str) -> httpx2.AsyncClient:
    """``http_client`` (by default the SDK's own kind) refusing redirects to another origin
    (a request carries the conversation and the provider's ``http_headers``), and reading
    the body of an error answer with bounds (:func:`~._body.read_error_answer`)."""
    if http_client is not None:
        client = http_client
    elif needs_tls(base_url, urllib.request.getproxies()):
        client = DefaultAsyncHttpxClient()
    else:
        # Loading the CA bundle costs more than the rest of the client: skip it when no
        # connection can use it.
        client = DefaultAsyncHttpxClient(verify=False)
    hooks = client.event_hooks["response"]
    for hook in (refuse_foreign_redirect, read_error_answer):
        if hook not in hooks:
            hooks.append(hook)
    return client


@asynccontextmanager
async def open_http_client(
    provider: ProviderConfig,
    *,
    api_key: str | None,
    http_client: httpx2.AsyncClient | None = None,
) -> AsyncIterator[ModelClient]:
    """Open an HTTP model client for ``provider`` (``wire_api`` picks the wire).

    The ``AsyncOpenAI`` client lives as long as the context; closing it closes its HTTP
    connections (and ``http_client``, when one is given).

    Args:
        provider: the provider table; ``base_url`` is required.
        api_key: sent as a bearer token; None for servers that need none.
        http_client: the ``httpx2`` client to send requests with (tests pass one with an
            in-process transport); by default one of the SDK's kind. Either way, a redirect to
            another origin is refused (``error{bad_request}``), never followed.

    Raises:
        ConfigError: the provider has no ``base_url``.
    """
    if not provider.base_url:
        raise ConfigError(f"provider {provider.name!r} has no base_url")
    first_s = provider.stream_first_event_timeout_ms / 1000
    read_s = max(first_s, provider.stream_idle_timeout_ms / 1000)
    sdk = SdkClient(
        base_url=provider.base_url,
        api_key=api_key or "unused",
        max_retries=0,
        # The deadlines are cancel scopes around their spans (the first event, the whole
        # request: ``base.py``), and the idle timeout is the event reader's; the client's
        # per-read timeout is a backstop that never comes first.
        timeout=httpx2.Timeout(read_s, connect=min(first_s, _CONNECT_TIMEOUT_S)),
        default_headers=dict(provider.http_headers) or None,
        default_query=dict(provider.query_params) or None,
        http_client=_guarded(http_client, provider.base_url),
    )
    async with sdk:
        secret = api_key or None
        client: ResponsesClient | ChatClient
        if provider.wire_api == "chat":
            client = ChatClient(sdk, provider, secret=secret)
        else:
            client = ResponsesClient(sdk, provider, secret=secret)
        yield client
