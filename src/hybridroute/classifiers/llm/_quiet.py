"""Keeping litellm quiet without changing the host's global settings for good.

The seam needs two things from litellm that would otherwise be process-wide settings:

* **No "Give Feedback / Get Help" banner.** litellm prints it (to stdout) for every error
  it maps, and a "Provider List" banner for an unknown model, unless the module global
  ``litellm.suppress_debug_info`` is true; the seam maps and reports those errors itself.
  :func:`quiet_litellm` sets the flag while at least one of the seam's calls runs and
  puts the host's value back when the last one ends. It is reference-counted (under a
  lock) rather than saved and restored per call, because calls overlap: on one event
  loop across ``await`` points, and on several loops in several threads. While a seam
  call runs, the flag is true for the whole process (litellm reads one global), so a
  host's own litellm errors in that window print no banner either. A host that sets the
  flag itself while a seam call runs keeps its value.
* **No pydantic ``ReadOnly`` warning.** litellm declares TypedDicts with ``ReadOnly``
  items; pydantic warns ("Items ... on TypedDict class '...' are using the `ReadOnly`
  qualifier", a harmless ``UserWarning``) when it first builds a schema for one, which
  litellm does lazily, in modules it imports on first use, inside its own coroutines and
  worker threads. A warning filter cannot be scoped around those calls:
  ``warnings.catch_warnings`` swaps one process-wide list and is not per task, so
  wrapping an ``await`` in it would change the filters of every other task for as long
  as the request runs. The seam instead builds those types itself, once, synchronously:
  :func:`warm_up` (when the seam is imported: the types every request builds) and
  :func:`warm_up_provider` (when an asker is made: the route and configuration of its
  provider), each inside :func:`readonly_warnings_ignored`, a ``catch_warnings`` block
  around synchronous code only, that ignores that one pydantic message. Afterwards the
  host's filter list is as it was, and no request builds those types again. A provider
  path that builds other such types later (e.g. Gemini's context caching) may still show
  pydantic's warning once per type; filter it in the host with
  ``warnings.filterwarnings("ignore", message=READONLY_WARNING, category=UserWarning)``.

Both tolerate a litellm that lacks a module or a name used here (a newer release): the
warm-up is then skipped, never an error.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator

import litellm

__all__ = [
    "READONLY_WARNING",
    "quiet_litellm",
    "readonly_warnings_ignored",
    "warm_up",
    "warm_up_provider",
]

#: The one pydantic message the warm-up ignores (a regular expression, as for
#: ``warnings.filterwarnings``).
READONLY_WARNING = r"Items? .* on TypedDict class '\w+' (is|are) using the `ReadOnly` qualifier"

_lock = threading.Lock()
_depth = 0
_saved = False
_warmed: set[str] = set()


@contextlib.contextmanager
def quiet_litellm() -> Iterator[None]:
    """``litellm.suppress_debug_info`` is true inside; the host's value is back once the
    last overlapping block ends. Safe around ``await`` and across threads."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = litellm.suppress_debug_info
            litellm.suppress_debug_info = True
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if litellm.suppress_debug_info is True:  # else the host changed it: keep that
                    litellm.suppress_debug_info = _saved


@contextlib.contextmanager
def readonly_warnings_ignored() -> Iterator[None]:
    """Ignore pydantic's ``ReadOnly`` warning inside; for synchronous code only (no
    ``await`` inside: the filter list is process-wide while the block runs)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=READONLY_WARNING, category=UserWarning)
        yield


def warm_up() -> None:
    """Build, once, the litellm types every request builds on first use (quietly)."""
    _once("*", _warm_up_common)


def warm_up_provider(model: str, provider: str | None) -> None:
    """Build, once per provider, the types of its configuration (quietly)."""
    if provider:
        _once(provider, lambda: _warm_up_provider(model, provider))


def _once(key: str, build: Callable[[], object]) -> None:
    with _lock:
        if key in _warmed:
            return
        _warmed.add(key)
    with readonly_warnings_ignored(), quiet_litellm(), contextlib.suppress(Exception):
        build()


def _warm_up_common() -> None:
    # litellm's async wrapper imports its GitHub Copilot session helper on every request
    # (module-level TypeAdapters), validates the request's parameters with a model whose
    # schema is built on first use, and builds an empty response (with its choice and
    # message types) before it reads the provider's answer.
    import litellm.llms.github_copilot.per_user_auth
    from litellm.types.router import GenericLiteLLMParams

    GenericLiteLLMParams.model_rebuild()
    litellm.ModelResponse()


def _warm_up_provider(model: str, provider: str) -> None:
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager

    ProviderConfigManager.get_provider_chat_config(model=model, provider=LlmProviders(provider))
