"""How the LLM classifier turns answers into a raw confidence: one class per method.

* ``verbalized`` (:class:`VerbalizedConfidence`) -- the response model has a
  ``confidence`` field in [0, 1]; one request per text.
* ``self_consistency`` (:class:`SelfConsistency`) -- ``n_samples`` sampled answers at
  ``temperature``; a label's score is its vote share (votes / samples asked, so failed
  samples lower the confidence rather than vanish).
* ``logprobs`` (:class:`TokenLogprobs`) -- the exponentiated sum of the token
  log-probabilities of the label's value in the answer (JSON modes; OpenAI-style
  providers return them). When a provider returns none, the verbalised confidence of the
  same answer is used and the item says so (``confidence_source``).

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
    wants_verbalized: ClassVar[bool] = False
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
    """exp(sum of the label tokens' log-probabilities), verbalised as a fallback."""

    name = "logprobs"
    wants_verbalized = True
    wants_logprobs = True

    def __init__(self, *, n_samples: int = 1, temperature: float | None = None) -> None:
        super().__init__(n_samples=1, temperature=temperature)

    def scores(self, answers: Sequence[Answered]) -> tuple[dict[str, float], str]:
        answer = answers[0]
        if answer.label_logprob is not None:
            return {answer.label: _clip(math.exp(answer.label_logprob))}, "logprobs"
        value = answer.verbalized if answer.verbalized is not None else 1.0
        return {answer.label: _clip(value)}, "verbalized_fallback"


def _clip(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


#: Method name -> class.
CONFIDENCE_METHODS: dict[str, type[ConfidenceMethod]] = {
    cls.name: cls for cls in (VerbalizedConfidence, SelfConsistency, TokenLogprobs)
}


def make_confidence_method(
    name: str, *, n_samples: int, temperature: float | None, sample_temperature: float
) -> ConfidenceMethod:
    """Build the method ``name`` from the classifier's settings."""
    try:
        cls = CONFIDENCE_METHODS[name]
    except KeyError:
        raise ValueError(
            f"unknown confidence method {name!r}; known: {', '.join(CONFIDENCE_METHODS)}"
        ) from None
    if cls is SelfConsistency:
        return cls(n_samples=n_samples, temperature=sample_temperature)
    return cls(temperature=temperature)
