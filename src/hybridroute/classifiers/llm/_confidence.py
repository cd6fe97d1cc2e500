"""How the LLM classifier turns answers into a raw confidence: one class per method.

* ``verbalized`` (:class:`VerbalizedConfidence`) -- the response model has a
  ``confidence`` field in [0, 1]; one request per text.
* ``self_consistency`` (:class:`SelfConsistency`) -- ``n_samples`` sampled answers at
  ``temperature``; a label's score is its vote share (votes / samples asked, so failed
  samples lower the confidence rather than vanish).
* ``logprobs`` (:class:`TokenLogprobs`) -- the label distribution read from the token
  log-probabilities of the answer: where the provider lists each token's alternatives
  (``top_logprobs``), the probability of every label they reach, for labels of any number
  of tokens (:func:`~._response.label_distribution`); where it lists none, the
  exponentiated sum of the label's own token log-probabilities. The answer's label is
  then the distribution's most probable one, which may differ from the label the model
  happened to write. Servers return them in JSON modes (OpenAI-style providers) and, on
  llama-cpp-python's server, for tool calls too (:mod:`._servers`). With
  ``verbalized_fallback`` (servers that may return none) the answer also carries a
  verbalised confidence, used -- and said (``confidence_source``) -- when no
  log-probabilities come back; without it such an item abstains (``provider_error``).

All are **raw** scores: nothing here is calibrated (the calibration package does that).
Methods are resolved by name through :data:`CONFIDENCE_METHODS`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

from ._retry import Answered

__all__ = [
    "CONFIDENCE_METHODS",
    "ConfidenceMethod",
    "SelfConsistency",
    "TokenLogprobs",
    "VerbalizedConfidence",
    "make_confidence_method",
]


class ConfidenceMethod:
    """Base: how many samples to ask, at which temperature, and how to score them."""

    name: ClassVar[str] = "base"
    #: Ask for a verbalised ``confidence`` field in the response model.
    wants_verbalized: bool = False
    #: Ask the provider for token log-probabilities.
    wants_logprobs: ClassVar[bool] = False

    def __init__(self, *, n_samples: int = 1, temperature: float | None = None) -> None:
        self.n_samples = int(n_samples)
        self.temperature = temperature

    def settings(self) -> dict[str, object]:
        """What changes an answer (part of the cache key)."""
        return {"method": self.name, "n_samples": self.n_samples, "temperature": self.temperature}

    def scores(self, answers: Sequence[Answered]) -> tuple[dict[str, float], str]:
        """Raw scores per label from the valid answers, and the confidence source."""
        raise NotImplementedError


class VerbalizedConfidence(ConfidenceMethod):
    """The model states its confidence in a ``confidence`` field."""

    name = "verbalized"
    wants_verbalized = True

    def __init__(self, *, n_samples: int = 1, temperature: float | None = None) -> None:
        super().__init__(n_samples=1, temperature=temperature)

    def scores(self, answers: Sequence[Answered]) -> tuple[dict[str, float], str]:
        answer = answers[0]
        value = answer.verbalized if answer.verbalized is not None else 1.0
        return {answer.label: _clip(value)}, "verbalized"


class SelfConsistency(ConfidenceMethod):
    """``n_samples`` sampled answers; score = vote share over the samples asked."""

    name = "self_consistency"

    def __init__(self, *, n_samples: int = 5, temperature: float | None = 1.0) -> None:
        if n_samples < 2:
            raise ValueError("self_consistency needs n_samples >= 2")
        if temperature is None or temperature <= 0:
            raise ValueError("self_consistency needs a sampling temperature > 0")
        super().__init__(n_samples=n_samples, temperature=temperature)

    def scores(self, answers: Sequence[Answered]) -> tuple[dict[str, float], str]:
        votes = Counter(a.label for a in answers)
        return {label: count / self.n_samples for label, count in votes.items()}, "votes"


class TokenLogprobs(ConfidenceMethod):
    """The label distribution from token log-probabilities (see the module notes).

    Parameters
    ----------
    verbalized_fallback : bool
        Also ask for a verbalised ``confidence`` and use it when a provider returns no
        log-probabilities; without it such an item has no score (it abstains).
    """

    name = "logprobs"
    wants_logprobs = True

    def __init__(
        self,
        *,
        n_samples: int = 1,
        temperature: float | None = None,
        verbalized_fallback: bool = True,
    ) -> None:
        super().__init__(n_samples=1, temperature=temperature)
        self.verbalized_fallback = bool(verbalized_fallback)
        self.wants_verbalized = self.verbalized_fallback

    def settings(self) -> dict[str, object]:
        out = super().settings()
        if not self.verbalized_fallback:  # the default keeps the keys it always had
            out["verbalized_fallback"] = False
        return out

    def scores(self, answers: Sequence[Answered]) -> tuple[dict[str, float], str]:
        answer = answers[0]
        if answer.label_scores:
            return {label: _clip(p) for label, p in answer.label_scores}, "logprobs"
        if answer.label_logprob is not None:
            return {answer.label: _clip(math.exp(answer.label_logprob))}, "logprobs"
        if self.verbalized_fallback and answer.verbalized is not None:
            return {answer.label: _clip(answer.verbalized)}, "verbalized_fallback"
        return {}, "no_logprobs"


def _clip(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


#: Method name -> class.
CONFIDENCE_METHODS: dict[str, type[ConfidenceMethod]] = {
    cls.name: cls for cls in (VerbalizedConfidence, SelfConsistency, TokenLogprobs)
}


def make_confidence_method(
    name: str,
    *,
    n_samples: int,
    temperature: float | None,
    sample_temperature: float,
    verbalized_fallback: bool = True,
) -> ConfidenceMethod:
    """Build the method ``name`` from the classifier's settings (``verbalized_fallback``:
    see :class:`TokenLogprobs`)."""
    try:
        cls = CONFIDENCE_METHODS[name]
    except KeyError:
        raise ValueError(
            f"unknown confidence method {name!r}; known: {', '.join(CONFIDENCE_METHODS)}"
        ) from None
    if cls is SelfConsistency:
        return cls(n_samples=n_samples, temperature=sample_temperature)
    if cls is TokenLogprobs:
        return TokenLogprobs(temperature=temperature, verbalized_fallback=verbalized_fallback)
    return cls(temperature=temperature)
