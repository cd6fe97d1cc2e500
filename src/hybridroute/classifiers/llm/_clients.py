"""The HTTP clients the seam owns: which route a model's requests take, and the capped
clients for it.

How a request reaches the provider depends on the provider litellm resolves the model to
(:func:`resolve_route`):

* **OpenAI SDK providers** (``openai/...``, a bare OpenAI model name, ``custom_openai/...``,
  any OpenAI-compatible ``api_base``): an ``openai.AsyncOpenAI`` on the seam's httpx
  client is passed as litellm's ``client=``; base URL and key are resolved as litellm
  would (``api_base`` > ``litellm.api_base`` > ``OPENAI_BASE_URL`` > ``OPENAI_API_BASE`` >
  the OpenAI default; ``api_key`` > ``litellm.api_key`` / ``openai_key`` >
  ``OPENAI_API_KEY``).
* **litellm's own httpx handler** (``anthropic/...``, ``ollama/...``, ``ollama_chat/...``,
  ``hosted_vllm/...``, and the OpenAI route when litellm's
  ``EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER`` switch is on): a litellm
  ``AsyncHTTPHandler`` carrying the hook of :mod:`._cap` is passed as ``client=``.
* **Every other provider** (Bedrock, Vertex / Gemini, Azure, Groq, Mistral, ...) is sent
  as litellm sends it, **without the cap**: litellm reaches them through clients of its
  own that do not take ours. Their bodies are bounded only by the request timeout.
  :attr:`~._seam.LiteLLMLabelAsker.capped` says which case a model string is.

The HTTP stack is otherwise litellm's own (its aiohttp transport, proxy settings from
the environment, TLS settings); no litellm setting is changed for it (the one litellm
global the seam touches, the debug-banner flag, is set only while its calls run: see
:mod:`._quiet`). Clients are kept in a
:class:`ClientCache` per event loop: the classifier's long-lived background loop keeps
one for the life of the process (closed at exit), so batches reuse connections as they
did with litellm's own client cache; an asker on any other loop builds its own and
closes them in :meth:`~._seam.LiteLLMLabelAsker.aclose`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

import litellm
import openai

from ._cap import ask_for_decodable, capping_hook

__all__ = ["ClientCache", "build_client", "resolve_route"]

#: litellm providers sent through the OpenAI SDK, honouring a caller's ``AsyncOpenAI``.
_SDK_PROVIDERS = frozenset({"openai", "custom_openai"})
#: litellm providers sent through litellm's own httpx handler, honouring a caller's
#: ``AsyncHTTPHandler`` (read in litellm 1.110: ``_complete_anthropic``, ``_complete_ollama``,
#: ``_complete_ollama_chat``, ``_complete_hosted_vllm`` pass ``client`` on).
_HANDLER_PROVIDERS = frozenset({"anthropic", "ollama", "ollama_chat", "hosted_vllm"})


class ClientCache:
    """HTTP clients the seam built -- litellm ``AsyncHTTPHandler`` objects carrying the
    capping hook, and ``AsyncOpenAI`` clients over them -- keyed by what configures them.

    All clients belong to one event loop; use a cache from that loop only. Keys hold a
    SHA-256 digest of an API key, never the key.
    """

    def __init__(self) -> None:
        self._clients: dict[tuple[Any, ...], Any] = {}

    def __len__(self) -> int:
        return len(self._clients)

    def get(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """The client for ``key``, built by ``build()`` the first time."""
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = build()
        return client

    async def aclose(self) -> None:
        """Close every client (the SDK clients share their handler's connection pool)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            if not isinstance(client, openai.AsyncOpenAI):
                await client.close()


def resolve_route(
    model: str, *, custom_llm_provider: str | None = None, api_base: str | None = None
) -> tuple[str, str | None]:
    """``(route, provider)``: how requests for ``model`` reach the provider -- ``"sdk"``
    (the OpenAI SDK on the seam's capped client), ``"handler"`` (litellm's httpx handler
    with the seam's hook) or ``"litellm"`` (litellm's own clients: no byte limit) -- and
    the litellm provider name (``None`` for a model string litellm does not know)."""
    try:
        provider = litellm.get_llm_provider(
            model, custom_llm_provider=custom_llm_provider, api_base=api_base
        )[1]
    except Exception:  # an unknown model string: litellm refuses it at request time
        provider = None
    sent_as = provider
    if provider in _SDK_PROVIDERS and _openai_through_handler():
        sent_as = "hosted_vllm"  # litellm then sends OpenAI through its handler
    route = (
        "sdk"
        if sent_as in _SDK_PROVIDERS
        else "handler"
        if sent_as in _HANDLER_PROVIDERS
        else "litellm"
    )
    return route, provider


def build_client(
    cache: ClientCache,
    *,
    route: str,
    limit: int,
    timeout: float,
    ssl_verify: Any = None,
    api_base: str | None = None,
    api_key: str | None = None,
    organization: str | None = None,
) -> Any:
    """The capped ``client=`` for litellm on a ``"handler"`` or ``"sdk"`` route, taken from
    ``cache`` (built there the first time).

    Parameters
    ----------
    cache : ClientCache
        Where the clients are kept (one event loop's).
    route : {"handler", "sdk"}
        From :func:`resolve_route`.
    limit : int
        The response byte limit (``max_response_bytes``).
    timeout : float
        Seconds one request may take.
    ssl_verify, api_base, api_key, organization
        As given to litellm; the SDK route resolves base URL and key as litellm would
        (reading, never setting, litellm's globals and the environment).
    """

    def build_handler() -> Any:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        return AsyncHTTPHandler(
            timeout=timeout,
            event_hooks={"request": [ask_for_decodable], "response": [capping_hook(limit)]},
            ssl_verify=ssl_verify,
        )

    handler_key = ("handler", limit, timeout, ssl_verify)
    handler = cache.get(handler_key, build_handler)
    if route == "handler":
        return handler
    # Resolved as litellm resolves them for the OpenAI route (litellm uses the client's
    # base URL and key once it is given one); reading, never setting.
    base_url = (
        api_base
        or litellm.api_base
        or os.environ.get("OPENAI_BASE_URL")
        or os.environ.get("OPENAI_API_BASE")
        or "https://api.openai.com/v1"
    )
    key = api_key or litellm.api_key or litellm.openai_key or os.environ.get("OPENAI_API_KEY")
    sdk_key = (*handler_key, base_url, _digest(key), organization)
    return cache.get(
        sdk_key,
        lambda: openai.AsyncOpenAI(  # without a key: refuses (a ``rejected`` failure)
            api_key=key,
            base_url=base_url,
            http_client=handler.client,
            max_retries=0,
            timeout=timeout,
        ),
    )


def _openai_through_handler() -> bool:
    """litellm's opt-in switch that sends the OpenAI route through its own httpx handler
    (which ignores an ``AsyncOpenAI`` client, so the handler is what must carry the hook)."""
    from litellm.secret_managers.main import get_secret_bool

    return bool(get_secret_bool("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"))


def _digest(secret: str | None) -> str | None:
    return None if secret is None else hashlib.sha256(secret.encode("utf-8")).hexdigest()
