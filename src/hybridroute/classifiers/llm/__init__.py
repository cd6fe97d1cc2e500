"""The LLM classifier: a model constrained to the label set through one seam.

* :class:`LLMClassifier` -- instructor over litellm, with label repair, transport retries,
  abstentions, an answer cache and cost accounting.
* :class:`PromptTemplate` -- the versioned prompt.
* :func:`fit_llm` -- configure an LLM classifier from labelled rows (no request is made).

Inside: ``_classifier`` (the estimator), ``_seam`` (the one place that asks a model, over
``_clients``, ``_cap``, ``_errors``, ``_response``, ``_quiet``), ``_retry`` (the
retry-and-repair loop), ``_ask``, ``_confidence``, ``_results``, ``_loop``, ``_options``,
``_prompt`` and ``_cache`` (answers on disk). Only the seam and its parts import litellm,
instructor or the OpenAI SDK, and only when a model is asked: importing this package
imports none of them (nor does ``import hybridroute.classifiers``, which imports it only
when one of its names is used).
"""

from ._classifier import LLMClassifier, fit_llm
from ._prompt import PromptTemplate

__all__ = ["LLMClassifier", "PromptTemplate", "fit_llm"]
