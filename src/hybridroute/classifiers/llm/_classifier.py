"""The LLM intent classifier: a model constrained to the label set, through one seam.

:class:`LLMClassifier` asks an LLM (any litellm model string, or an OpenAI-compatible
``api_base``) for one label of a closed label set, with:

* a response model built from the label set, so an out-of-set answer is a validation
  error -- repaired once with feedback, then an abstention (``invalid_label``);
* transport retries with backoff on their own budget (``provider_error`` / ``timeout``
  when spent), never pasted into the prompt (:mod:`._retry`);
* a raw confidence by a selectable method (:mod:`._confidence`);
* async batches with a bounded number of requests in flight (an asyncio semaphore);
* an on-disk answer cache (:mod:`._cache`), so a rerun makes no request;
* tokens and cost per item and per batch (litellm's offline cost map).

No item is ever given a made-up label: an item that could not be answered is an
abstention with a reason code, in :meth:`LLMClassifier.rank` and :meth:`classify`, and
``None`` in :meth:`LLMClassifier.predict`. One item's failure never stops a batch.

The parts it is built from: the result types (:mod:`._results`), the per-item ask
(:mod:`._ask`), the shared background loop of the synchronous methods
(:mod:`._loop`) and the configuration vocabulary (:mod:`._options`). None of them
imports litellm or instructor; only the seam (:mod:`._seam`) does, and only when a
batch actually needs a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..._retry_settings import RetrySettings
from ...exceptions import UserInputError
from .._base import IntentClassifier, RankedLabels
from ._ask import item_asker
from ._cache import AnswerCache, answer_fields, cache_key
from ._confidence import CONFIDENCE_METHODS, ConfidenceMethod, make_confidence_method
from ._loop import BackgroundLoop, run_sync
from ._options import DEFAULT_MAX_RESPONSE_BYTES, MODE_CHOICES, NO_KEY, SECRET_PARAMS
from ._prompt import PromptTemplate
from ._results import LLMBatch, LLMBatchReport, LLMItemResult, batch_report, cached_item
from ._servers import DEFAULT_SERVER, ServerProfile, answer_token_bound, server_profile
from ._similar import SimilarExamples

__all__ = [
    "LLMBatch",
    "LLMBatchReport",
    "LLMClassifier",
    "LLMItemResult",
    "fit_llm",
]

_CHUNK = 4096  # items scheduled at once (bounds memory for huge batches)


# --------------------------------------------------------------------------- the classifier


class LLMClassifier(IntentClassifier):
    """An LLM constrained to a closed label set (instructor over litellm).

    Parameters
    ----------
    model : str
        A litellm model string (``openai/gpt-4o-mini``, ``anthropic/claude-...``,
        ``ollama/llama3``...). With ``api_base``, ``openai/<name>`` talks to any
        OpenAI-compatible server.
    api_base : str or None
        URL of an OpenAI-compatible endpoint (``http://host:port/v1``).
    api_key_env : str or None
        Name of the environment variable holding the API key, read at request time. The
        key itself is never stored or saved. Without it, litellm finds provider keys
        itself (``OPENAI_API_KEY``...), and an ``api_base`` gets a placeholder key.
    prompt : PromptTemplate or None
        Versioned instructions, label descriptions, examples, optional ``none_of_these``.
    retry : RetrySettings or None
        Transport and label-repair budgets, backoff, per-request timeout.
    mode : {"auto", "tools", "json", "md_json", "json_schema"}
        How structured output is asked for (instructor modes). ``auto`` picks by the
        server's capabilities: ``tools`` where it constrains tool calls, unless the
        confidence method needs log-probabilities the server does not give for tool
        calls -- then ``json_schema`` in the server's request shape (see
        :mod:`hybridroute.classifiers.llm._servers`). :attr:`mode_` says which.
    server : {"openai", "llama_cpp"}
        The kind of server, for the request shapes it takes: ``openai`` (OpenAI, every
        hosted provider through litellm, vLLM, llama.cpp's ``llama-server``) or
        ``llama_cpp`` (llama-cpp-python's server, as ``hybridroute llm-server`` starts
        it: schemas as ``json_object`` + ``schema``, log-probabilities for tool calls,
        and a ``max_tokens`` sized for the label set sent unless ``extra_params`` sets
        one, since it does not stop a runaway answer itself).
    confidence : {"verbalized", "self_consistency", "logprobs"}
        The raw-confidence method (see :mod:`hybridroute.classifiers.llm._confidence`).
    n_samples : int
        Samples per text for ``self_consistency``.
    sample_temperature : float
        Sampling temperature for ``self_consistency``.
    temperature : float or None
        Temperature of the other methods (``None``: the provider's default).
    max_concurrency : int
        Requests in flight at once, across the batch.
    cache_dir : str or None
        Directory of the on-disk answer cache (keyed by endpoint, model, prompt...: see
        :mod:`hybridroute.classifiers.llm._cache`); ``None`` disables caching.
    n_examples_per_label : int
        Few-shot examples per label drawn from the training data in :meth:`fit` (seeded).
    n_similar_examples : int
        Show each text's ``k`` most similar training texts, with their labels, in its
        prompt (retrieved with the local classifier's TF-IDF features:
        :mod:`hybridroute.classifiers.llm._similar`); 0 (default) shows none.
    seed : int
        Seeds the few-shot draw (jitter is seeded by ``retry.seed``).
    extra_params : mapping or None
        More litellm parameters (e.g. ``{"max_tokens": 50}``); credentials are refused.
    max_response_bytes : int or None
        Most bytes one response body may have (default 1 MiB), counted while the body is
        received -- the rest is never read -- and on the decoded bytes of a compressed
        body. A larger body is not retried: the item abstains with ``provider_error``
        after one request. It holds for OpenAI-SDK providers (``openai/...``, any
        OpenAI-compatible ``api_base``) and for ``anthropic/``, ``ollama/``,
        ``ollama_chat/`` and ``hosted_vllm/``; other providers (Bedrock, Vertex, Azure,
        Groq...) are reached through litellm's own clients and are bounded only by the
        timeout (see :mod:`hybridroute.classifiers.llm._clients`). ``None`` switches it off.

    Attributes
    ----------
    classes_ : ndarray of str
        The label set (sorted; includes ``prompt.none_of_these`` when set).
    prompt_ : PromptTemplate
        The template actually used (with the few-shot examples drawn in ``fit``).
    mode_ : str
        The structured-output mode in use (``mode``, or what ``auto`` picked).
    similar_ : SimilarExamples or None
        The pool the similar examples are drawn from (``n_similar_examples > 0``).
    n_train_ : int
        Number of training texts seen by ``fit``.

    Notes
    -----
    ``predict_proba`` spreads scores over ``classes_`` as follows: the labels the model
    gave keep their raw scores (the verbalised / log-prob confidence of the one answered
    label, or the vote shares); the remaining mass ``1 - sum`` is shared equally by the
    other labels. An abstained item gets a uniform row (it carries no evidence), while
    :meth:`predict` gives ``None`` and :meth:`rank` an abstention with its reason code.
    :meth:`rank` lists only the labels the model gave.

    The synchronous methods run their batch on one background event loop shared by the
    process (so litellm's connection pools are reused rather than leaked per call);
    :meth:`aclassify` runs on the caller's loop. Labels and scores from the stand-in
    server (:mod:`hybridroute.testing`) are never an LLM's accuracy.
    """

    kind = "llm"
    #: Versions recorded in a saved manifest besides numpy / scipy / scikit-learn.
    _artifact_packages = ("litellm", "instructor", "openai")

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        prompt: PromptTemplate | None = None,
        retry: RetrySettings | None = None,
        mode: str = "auto",
        server: str = DEFAULT_SERVER,
        confidence: str = "verbalized",
        n_samples: int = 5,
        sample_temperature: float = 1.0,
        temperature: float | None = None,
        max_concurrency: int = 16,
        cache_dir: str | os.PathLike[str] | None = None,
        n_examples_per_label: int = 0,
        n_similar_examples: int = 0,
        seed: int = 0,
        extra_params: Mapping[str, Any] | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.prompt = prompt
        self.retry = retry
        self.mode = mode
        self.server = server
        self.confidence = confidence
        self.n_samples = n_samples
        self.sample_temperature = sample_temperature
        self.temperature = temperature
        self.max_concurrency = max_concurrency
        self.cache_dir = cache_dir
        self.n_examples_per_label = n_examples_per_label
        self.n_similar_examples = n_similar_examples
        self.seed = seed
        self.extra_params = extra_params
        self.max_response_bytes = max_response_bytes

    # ------------------------------------------------------------------ configuration

    def _template(self) -> PromptTemplate:
        return self.prompt if self.prompt is not None else PromptTemplate()

    def _settings(self) -> RetrySettings:
        return self.retry if self.retry is not None else RetrySettings()

    def _profile(self) -> ServerProfile:
        return server_profile(self.server)

    def _method(self) -> ConfidenceMethod:
        return make_confidence_method(
            self.confidence,
            n_samples=self.n_samples,
            temperature=self.temperature,
            sample_temperature=self.sample_temperature,
            verbalized_fallback=not self._profile().returns_logprobs,
        )

    def _resolved_mode(self) -> str:
        """``mode``, or what ``auto`` picks for this server and confidence method."""
        if self.mode != "auto":
            return self.mode
        wants_logprobs = self.confidence in CONFIDENCE_METHODS and (
            CONFIDENCE_METHODS[self.confidence].wants_logprobs
        )
        return self._profile().pick_mode(wants_logprobs=wants_logprobs)

    def _validate_params(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("model must be a non-empty litellm model string")
        if self.mode not in MODE_CHOICES:
            raise ValueError(f"unknown mode {self.mode!r}; known: {', '.join(MODE_CHOICES)}")
        profile = self._profile()  # validates server
        if self.confidence not in CONFIDENCE_METHODS:
            raise ValueError(
                f"unknown confidence method {self.confidence!r}; "
                f"known: {', '.join(CONFIDENCE_METHODS)}"
            )
        if self.confidence == "logprobs":
            refusal = profile.logprobs_refusal(self._resolved_mode())
            if refusal is not None:
                raise ValueError(refusal)
        self._method()  # validates n_samples / temperatures
        if isinstance(self.max_concurrency, bool) or not isinstance(self.max_concurrency, int):
            raise ValueError("max_concurrency must be an integer")
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        for name in ("n_examples_per_label", "n_similar_examples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if self.prompt is not None and not isinstance(self.prompt, PromptTemplate):
            raise ValueError("prompt must be a PromptTemplate")
        if self.retry is not None and not isinstance(self.retry, RetrySettings):
            raise ValueError("retry must be a RetrySettings")
        limit = self.max_response_bytes
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(
                f"max_response_bytes must be a positive integer or None, got {limit!r}"
            )
        secret = sorted(set(self.extra_params or {}) & SECRET_PARAMS)
        if secret:
            raise ValueError(
                f"extra_params must not carry credentials ({', '.join(secret)}); "
                "name the key's environment variable in api_key_env instead"
            )

    def _api_key(self) -> str | None:
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise UserInputError(
                    f"environment variable {self.api_key_env!r} (api_key_env) is not set"
                )
            return value
        return NO_KEY if self.api_base else None

    # ------------------------------------------------------------------ fit

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> LLMClassifier:
        """Record the label set (and draw few-shot examples); makes no request.

        Parameters
        ----------
        texts : sequence of str
            Training texts (used only for few-shot examples).
        labels : sequence of str
            Their labels; the sorted distinct labels become ``classes_``.
        """
        self._validate_params()
        texts = list(texts)
        labels = list(labels)
        if len(texts) != len(labels):
            raise ValueError(f"texts and labels differ in length ({len(texts)} != {len(labels)})")
        if not labels:
            raise ValueError("fit needs at least one labelled text")
        for i, (text, label) in enumerate(zip(texts, labels, strict=True)):
            if not isinstance(text, str):
                raise ValueError(f"text {i} is not a string: {text!r}")
            if not isinstance(label, str) or not label:
                raise ValueError(f"label {i} is not a non-empty string: {label!r}")
        template = self._template()
        label_set = set(labels)
        if template.none_of_these is not None:
            label_set.add(template.none_of_these)
        unknown = sorted(set(template.label_descriptions) - label_set)
        if unknown:
            raise ValueError(
                f"prompt describes labels not in the label set: {', '.join(unknown[:5])}"
            )
        classes = sorted(label_set)
        if self.n_examples_per_label:
            rng = np.random.default_rng(self.seed)
            by_label: dict[str, list[int]] = {}
            for i, label in enumerate(labels):
                by_label.setdefault(label, []).append(i)
            picked: list[int] = []
            for label in sorted(by_label):
                idx = by_label[label]
                n = min(self.n_examples_per_label, len(idx))
                picked.extend(int(i) for i in rng.choice(idx, size=n, replace=False))
            order = rng.permutation(len(picked))  # examples not grouped by label
            template = template.with_examples(
                [(texts[picked[j]], labels[picked[j]]) for j in order]
            )
        self.classes_ = np.array(classes)
        self.prompt_ = template
        self.mode_ = self._resolved_mode()
        self.similar_ = (
            SimilarExamples(texts, labels, k=self.n_similar_examples)
            if self.n_similar_examples
            else None
        )
        self.n_train_ = len(texts)
        return self

    # ------------------------------------------------------------------ batches

    def _cache_fields(self, method: ConfidenceMethod) -> dict[str, Any]:
        """What decides an answer besides the text: endpoint, model, prompt... (the key).

        Settings at their defaults add no key, so caches of earlier versions stay valid."""
        fields = answer_fields(
            model=self.model,
            api_base=self.api_base,
            extra_params=self.extra_params,
            template=self.prompt_,
            labels=[str(c) for c in self.classes_],
            mode=self.mode_,
            confidence=method.settings(),
        )
        if self.server != DEFAULT_SERVER:
            fields["server"] = self.server
            fields["max_tokens"] = self._max_tokens()
        if self.similar_ is not None:
            fields["similar_examples"] = self.similar_.fingerprint()
        return fields

    def _max_tokens(self) -> int | None:
        """The answer bound sent to a server that has none of its own (and none given)."""
        params = self.extra_params or {}
        if self._profile().bounds_answers or {"max_tokens", "max_completion_tokens"} & set(params):
            return None
        return answer_token_bound([str(c) for c in self.classes_])

    def classify(self, texts: Sequence[str]) -> LLMBatch:
        """Classify ``texts``; never raises for a failed item (it abstains)."""
        texts = list(texts)
        return run_sync(lambda: self.aclassify(texts))

    async def aclassify(self, texts: Sequence[str]) -> LLMBatch:
        """Async :meth:`classify`: at most ``max_concurrency`` requests in flight."""
        self._check_fitted()
        started = time.perf_counter()
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(f"text {i} is not a string: {text!r}")
        method = self._method()
        fields = self._cache_fields(method)
        keys = [cache_key(fields, text) for text in texts]
        unique: dict[str, str] = dict(zip(keys, texts, strict=True))
        results: dict[str, LLMItemResult] = {}
        outcomes: Counter[str] = Counter()

        cache_cm: contextlib.AbstractContextManager[AnswerCache | None] = (
            AnswerCache(self.cache_dir) if self.cache_dir is not None else contextlib.nullcontext()
        )
        with cache_cm as cache:
            if cache is not None:
                classes = {str(c) for c in self.classes_}
                refused = 0
                for key, value in cache.get_many(unique).items():
                    item = cached_item(value, classes)
                    if item is None:
                        refused += 1
                    else:
                        results[key] = item
                if refused or cache.damaged:
                    warnings.warn(
                        f"LLM answer cache {cache.path}: {refused + cache.damaged} stored "
                        "answer(s) are malformed or outside the label set; treated as "
                        "misses and asked again (the new answers replace them)",
                        RuntimeWarning,
                        stacklevel=2,
                    )
            cache_hits = len(results)
            todo = [key for key in unique if key not in results]
            if todo:
                closers: list[Callable[[], Awaitable[None]]] = []
                shown: dict[str, tuple[tuple[str, str], ...]] = {}
                if self.similar_ is not None:  # one vectorised retrieval for the batch
                    asked = [unique[key] for key in todo]
                    shown = dict(zip(asked, self.similar_.nearest(asked), strict=True))
                try:
                    ask = self._make_ask(method, outcomes, closers, shown.get if shown else None)
                    for start in range(0, len(todo), _CHUNK):
                        chunk = todo[start : start + _CHUNK]
                        done = await asyncio.gather(*(ask(key, unique[key]) for key in chunk))
                        for key, result in zip(chunk, done, strict=True):
                            results[key] = result
                            if cache is not None and not result.abstained:
                                cache.put(key, result.to_cache())
                finally:
                    for close in closers:  # clients of this batch alone: no socket leaks
                        await close()

        items: list[LLMItemResult] = []
        seen: set[str] = set()
        for key in keys:
            result = results[key]
            if key in seen and not result.cached:
                result = result.reused()  # a repeated text: the first answer, no request
            seen.add(key)
            items.append(result)
        report = batch_report(items, outcomes, len(unique), cache_hits, started)
        return LLMBatch(items=items, report=report)

    def _make_ask(
        self,
        method: ConfidenceMethod,
        outcomes: Counter[str],
        closers: list[Callable[[], Awaitable[None]]],
        examples_for: Callable[[str], Any] | None = None,
    ) -> Callable[[str, str], Awaitable[LLMItemResult]]:
        """The per-item coroutine; what it opens is closed by awaiting ``closers``."""
        from ._seam import LiteLLMLabelAsker  # the only place litellm gets imported

        settings = self._settings()
        labels = [str(c) for c in self.classes_]
        asker = LiteLLMLabelAsker(
            model=self.model,
            labels=labels,
            mode=self.mode_,
            server=self.server,
            max_tokens=self._max_tokens(),
            with_confidence=method.wants_verbalized,
            logprobs=method.wants_logprobs,
            api_base=self.api_base,
            api_key=self._api_key(),
            timeout=settings.timeout,
            extra_params=self.extra_params,
            max_response_bytes=self.max_response_bytes,
            clients=BackgroundLoop.clients_for(asyncio.get_running_loop()),
        )
        closers.append(asker.aclose)  # closes only clients not kept in the shared cache
        return item_asker(
            asker,
            template=self.prompt_,
            labels=labels,
            method=method,
            settings=settings,
            max_concurrency=self.max_concurrency,
            outcomes=outcomes,
            examples_for=examples_for,
        )

    # ------------------------------------------------------------------ classifier API

    def _proba_rows(self, items: Sequence[LLMItemResult]) -> np.ndarray:
        classes = [str(c) for c in self.classes_]
        index = {label: i for i, label in enumerate(classes)}
        n = len(classes)
        proba = np.full((len(items), n), 1.0 / n)
        for row, item in enumerate(items):
            if item.abstained:
                continue
            given = {index[label]: score for label, score in item.scores if label in index}
            mass = min(1.0, sum(given.values()))
            rest = [j for j in range(n) if j not in given]
            values = np.zeros(n)
            for j, score in given.items():
                values[j] = score
            if rest:
                values[rest] = (1.0 - mass) / len(rest)
            elif mass > 0:
                values /= values.sum()
            proba[row] = values
        return proba

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Scores over ``classes_`` (rows sum to 1); see the class Notes for the spread."""
        return self._proba_rows(self.classify(texts).items)

    def predict(self, texts: Sequence[str]) -> list[str | None]:  # type: ignore[override]
        """The model's label for each text, ``None`` where it abstained."""
        return [item.label for item in self.classify(texts).items]

    def rank(self, texts: Sequence[str], k: int = 2) -> list[RankedLabels]:
        """The labels the model gave (best first, at most ``k``) or an abstention."""
        return self.ranked_from(self.classify(texts).items, k=k)

    @staticmethod
    def ranked_from(items: Sequence[LLMItemResult], k: int = 2) -> list[RankedLabels]:
        """:class:`RankedLabels` for already classified items."""
        k = max(1, int(k))
        out = []
        for item in items:
            top = item.scores[:k]
            out.append(
                RankedLabels(
                    labels=tuple(label for label, _ in top),
                    scores=tuple(float(score) for _, score in top),
                    abstain_reason=item.abstain_reason,
                    usage=item.usage_dict(),
                )
            )
        return out

    # ------------------------------------------------------------------ configuration I/O

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain JSON (never an API key)."""
        self._validate_params()
        return {
            "model": self.model,
            "api_base": self.api_base,
            "api_key_env": self.api_key_env,
            "prompt": self._template().to_dict(),
            "retry": self._settings().to_dict(),
            "mode": self.mode,
            "server": self.server,
            "confidence": self.confidence,
            "n_samples": self.n_samples,
            "sample_temperature": self.sample_temperature,
            "temperature": self.temperature,
            "max_concurrency": self.max_concurrency,
            "cache_dir": None if self.cache_dir is None else str(self.cache_dir),
            "n_examples_per_label": self.n_examples_per_label,
            "n_similar_examples": self.n_similar_examples,
            "seed": self.seed,
            "extra_params": dict(self.extra_params or {}),
            "max_response_bytes": self.max_response_bytes,
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LLMClassifier:
        """Rebuild an unfitted classifier from :meth:`get_config` output."""
        data = dict(config)
        unknown = sorted(set(data) - set(cls._param_names()))
        if unknown:
            raise ValueError(f"unknown LLMClassifier config key(s): {', '.join(unknown)}")
        if data.get("prompt") is not None:
            data["prompt"] = PromptTemplate.from_dict(data["prompt"])
        if data.get("retry") is not None:
            data["retry"] = RetrySettings.from_dict(data["retry"])
        model = data.pop("model")
        out = cls(model, **data)
        out._validate_params()
        return out

    def _save_state(self, directory: Path) -> dict[str, Any]:
        return {"config": self.get_config(), "fitted": self.get_state()}

    @classmethod
    def _load_state(cls, directory: Path, manifest: Mapping[str, Any]) -> LLMClassifier:
        from ...exceptions import ArtifactError

        state = manifest.get("state")
        try:
            if not isinstance(state, Mapping):
                raise ValueError("no 'state' object")
            clf = cls.from_config(state["config"])
            clf.set_state(state["fitted"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(
                f"manifest state of an LLM classifier is malformed ({exc})", path=str(directory)
            ) from None
        return clf

    def get_state(self) -> dict[str, Any]:
        """The fitted state as plain JSON."""
        self._check_fitted()
        out = {
            "classes": [str(c) for c in self.classes_],
            "prompt": self.prompt_.to_dict(),
            "n_train": int(self.n_train_),
        }
        if self.similar_ is not None:
            out["similar_examples"] = self.similar_.to_state()
        return out

    def set_state(self, state: Mapping[str, Any]) -> LLMClassifier:
        """Restore :meth:`get_state` output (the inverse of fitting)."""
        self.classes_ = np.array([str(c) for c in state["classes"]])
        self.prompt_ = PromptTemplate.from_dict(state["prompt"])
        self.n_train_ = int(state["n_train"])
        self.mode_ = self._resolved_mode()
        similar = state.get("similar_examples")
        self.similar_ = SimilarExamples.from_state(similar) if similar is not None else None
        if (self.similar_ is None) != (not self.n_similar_examples):
            raise ValueError("the fitted similar examples do not match n_similar_examples")
        return self


# --------------------------------------------------------------------------- configure and fit


def fit_llm(
    texts: Sequence[str],
    labels: Sequence[str],
    *,
    model: str,
    api_base: str | None = None,
    api_key_env: str | None = None,
    prompt_path: str | os.PathLike[str] | None = None,
    mode: str = "auto",
    server: str = DEFAULT_SERVER,
    confidence: str = "verbalized",
    n_samples: int = 5,
    max_concurrency: int = 16,
    timeout: float | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    n_examples_per_label: int = 0,
    n_similar_examples: int = 0,
    seed: int = 0,
    max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    temperature: float | None = None,
) -> LLMClassifier:
    """Configure an :class:`LLMClassifier` and fit it on ``texts`` / ``labels``.

    Fitting records the label set of the training texts (and draws few-shot examples);
    it makes no request. ``hybridroute train --classifier llm`` calls it.

    Parameters
    ----------
    texts, labels : sequence of str
        The training texts and their labels (the label set, few-shot examples).
    model, api_base, api_key_env, mode, server, confidence, n_samples
        As for :class:`LLMClassifier`.
    max_concurrency, n_examples_per_label, n_similar_examples, seed, max_response_bytes
        As for :class:`LLMClassifier`.
    temperature : float or None
        As for :class:`LLMClassifier` (``0`` for repeatable answers from a local model).
    prompt_path : str or path-like or None
        A JSON or YAML prompt template (see :meth:`PromptTemplate.from_file`).
    timeout : float or None
        Seconds one request may take (``RetrySettings.timeout``); ``None``: the default.
    cache_dir : str or path-like or None
        Directory of the on-disk answer cache; ``None`` disables caching.

    Raises
    ------
    SpecError
        A malformed prompt file (naming file and field), or a parameter value that is
        refused (the message names the parameter).
    """
    from ...exceptions import SpecError

    prompt = PromptTemplate.from_file(prompt_path) if prompt_path is not None else None
    try:
        retry = RetrySettings(timeout=timeout) if timeout is not None else None
        clf = LLMClassifier(
            model,
            api_base=api_base,
            api_key_env=api_key_env,
            prompt=prompt,
            retry=retry,
            mode=mode,
            server=server,
            confidence=confidence,
            n_samples=n_samples,
            max_concurrency=max_concurrency,
            cache_dir=None if cache_dir is None else str(Path(cache_dir)),
            n_examples_per_label=n_examples_per_label,
            n_similar_examples=n_similar_examples,
            seed=seed,
            max_response_bytes=max_response_bytes,
            temperature=temperature,
        )
        return clf.fit(texts, labels)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
