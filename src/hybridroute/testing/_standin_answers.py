"""Answer policies of the stand-in LLM: what it answers for one text.

A policy is any callable ``policy(text, labels)`` returning a :class:`StandInAnswer`, a
label, or a ``(label, confidence)`` pair (:func:`as_answer` reads all three). The ones
here hash the text onto the label set (:class:`HashPolicy`), read a fixed map
(:class:`LabelMapPolicy`), ask a fitted local classifier (:class:`ClassifierPolicy`), or
follow prompt injections (:class:`ObeyInjections`). **Their answers are not an LLM's
answers.**
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AnswerPolicy",
    "ClassifierPolicy",
    "HashPolicy",
    "LabelMapPolicy",
    "ObeyInjections",
    "StandInAnswer",
    "as_answer",
    "unit",
]

_INJECTION_RE = re.compile(
    r"\broute\s+(?:this\s+|me\s+|it\s+)?(?:to|into)\s+[`'\"]?([A-Za-z][A-Za-z0-9_.:/-]*)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class StandInAnswer:
    """What an answer policy says for one text: a label and a confidence in [0, 1]."""

    label: str
    confidence: float = 0.9


#: ``policy(text, labels) -> StandInAnswer | str | (label, confidence)``
AnswerPolicy = Callable[[str, tuple[str, ...]], Any]


def unit(*parts: object) -> float:
    """A deterministic uniform number in [0, 1) from ``parts`` (SHA-256 based)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class HashPolicy:
    """Answer a label chosen by hashing the text: deterministic, content-free.

    Parameters
    ----------
    confidence : float
        The confidence reported with every answer.
    seed : int
        Changes which label each text hashes to.
    """

    def __init__(self, confidence: float = 0.9, seed: int = 0) -> None:
        self.confidence = float(confidence)
        self.seed = int(seed)

    def __call__(self, text: str, labels: tuple[str, ...]) -> StandInAnswer:
        index = int(unit("hash-policy", self.seed, text) * len(labels))
        return StandInAnswer(labels[index], self.confidence)


class LabelMapPolicy:
    """Answer from a fixed ``text -> label`` map.

    Parameters
    ----------
    mapping : mapping of str to str
        The label for each known text (matched after stripping surrounding whitespace).
    default : str or None
        The label for unknown texts; ``None`` hashes unknown texts onto the label set.
    confidence : float
        The confidence reported with every answer.
    """

    def __init__(
        self, mapping: Mapping[str, str], default: str | None = None, confidence: float = 0.9
    ) -> None:
        self.mapping = {str(k).strip(): str(v) for k, v in mapping.items()}
        self.default = default
        self.confidence = float(confidence)
        self._fallback = HashPolicy(confidence=confidence)

    def __call__(self, text: str, labels: tuple[str, ...]) -> StandInAnswer:
        label = self.mapping.get(text.strip(), self.default)
        if label is None:
            return self._fallback(text, labels)
        return StandInAnswer(label, self.confidence)


class ClassifierPolicy:
    """Answer with a fitted local classifier's best label and its score.

    Parameters
    ----------
    classifier : IntentClassifier
        Any fitted hybridroute classifier (for example a ``LocalClassifier``).
    """

    def __init__(self, classifier: Any) -> None:
        self.classifier = classifier
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:  # picklable for StandInProcess
        return {"classifier": self.classifier}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.classifier = state["classifier"]
        self._lock = threading.Lock()

    def __call__(self, text: str, labels: tuple[str, ...]) -> StandInAnswer:
        with self._lock:  # scikit-learn estimators are not promised to be thread-safe
            ranked = self.classifier.rank([text], k=1)[0]
        if ranked.top is None:
            return StandInAnswer(labels[0], 0.0)
        return StandInAnswer(str(ranked.top), float(ranked.confidence or 0.0))


class ObeyInjections:
    """Wrap a policy so that a text saying "route (this) to X" is answered with ``X``.

    This models a model that follows prompt injections; ``X`` is answered even when it is
    not in the label set (the classifier's label constraint must then catch it). Router
    tests use it to check that nothing a model says can outrank a rule.
    """

    def __init__(self, inner: AnswerPolicy, confidence: float = 0.99) -> None:
        self.inner = inner
        self.confidence = float(confidence)

    def __call__(self, text: str, labels: tuple[str, ...]) -> StandInAnswer:
        match = _INJECTION_RE.search(text)
        if match:
            return StandInAnswer(match.group(1).rstrip(".,;:!?"), self.confidence)
        return as_answer(self.inner(text, labels))


def as_answer(value: Any) -> StandInAnswer:
    """A policy's return value (answer, label, or ``(label, confidence)``) as an answer."""
    if isinstance(value, StandInAnswer):
        return value
    if isinstance(value, str):
        return StandInAnswer(value)
    label, confidence = value
    return StandInAnswer(str(label), float(confidence))
