"""The LLM classifier's configuration vocabulary, importable without litellm.

The names here are what configuring and validating an :class:`~._llm.LLMClassifier`
needs; the seam (:mod:`._seam`, which imports litellm) reads the same definitions, so
each value is written once.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "MODE_CHOICES",
    "MODE_NAMES",
    "NO_KEY",
    "SECRET_PARAMS",
    "TOP_LOGPROBS",
]

#: Structured-output modes, by our names (the seam maps them to instructor modes).
MODE_NAMES: tuple[str, ...] = ("tools", "json", "md_json", "json_schema")
#: What the classifier's ``mode`` accepts: ``auto`` picks one per server (``_servers``).
MODE_CHOICES: tuple[str, ...] = ("auto", *MODE_NAMES)

#: Alternatives asked per answer token when log-probabilities are wanted (OpenAI's most).
TOP_LOGPROBS = 20

#: Default limit on one response body, in bytes, as received and as decoded (1 MiB). A
#: label answer is a few hundred bytes; a long reasoning answer stays far below it.
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20

#: Keys that would put a credential into a saved configuration.
SECRET_PARAMS = frozenset(
    {
        "api_key",
        "headers",
        "extra_headers",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "azure_ad_token",
        "client_secret",
        "password",
        "vertex_credentials",
    }
)

#: Placeholder key sent to an ``api_base`` when no ``api_key_env`` is configured: local
#: OpenAI-compatible servers (vLLM, llama.cpp, Ollama, the stand-in) ignore it.
NO_KEY = "no-key-required"
