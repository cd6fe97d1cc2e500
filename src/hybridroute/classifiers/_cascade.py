"""The cascade: the local classifier first, the LLM classifier for the items it is unsure of.

An item whose local top-label confidence is **below** the escalation threshold goes to the
LLM classifier; the others keep the local answer. The threshold is never a literal default
here: give it (``threshold=``, e.g. a value the calibration package fitted) or give a
fitted object (``policy=``) that provides it:

* an object with ``threshold_for(label)`` (a per-class threshold, e.g. ``PerClassThreshold``);
* an object with ``threshold_`` (e.g. ``CertifiedPrecisionThreshold`` fitted on the local
  classifier's confidences);
* a policy artifact with ``apply(ranked)`` (``hybridroute.calibration.Policy``): an item
  is kept only when the policy would auto-route the local answer.

A threshold or policy is fitted on one local model's scores and holds for that model
only. What names the model is its **model fingerprint**
(:meth:`~hybridroute.classifiers.IntentClassifier.fingerprint`): a policy artifact records
its own (``Policy.model_fingerprint``, set by ``fit_policy(..., model_fingerprint=...)``);
a threshold value or a threshold fitter (which sees scores, never a model) is named by the
cascade's ``model_fingerprint=`` argument. The cascade checks a named model wherever it
meets a local model, and refuses a mismatch (:class:`ValueError`):

* :meth:`CascadeClassifier.fit` fits **clones** of ``local`` and ``llm`` (``local_``,
  ``llm_``; the objects handed in are never touched) and checks the fingerprint of the
  model it trained -- deterministic training on the same data reproduces the model the
  policy was fitted on, other data does not. Since it trains a new model, ``fit`` refuses
  a ``policy=`` that names none; a bare ``threshold=`` that names none is a value you
  chose, taken as given;
* :meth:`CascadeClassifier.from_fitted` checks the fitted local model it is handed; a
  rule that names no model is taken as fitted on it (as ``save_router`` binds an unbound
  policy to the model saved beside it);
* a saved cascade records the fingerprint of its saved local stage with its thresholds
  (``state.escalation.model_fingerprint``); loading checks it against that stage, and the
  loaded cascade carries it as ``model_fingerprint`` (so a clone refitted on other data is
  refused too). A cascade saved before this was recorded loads with no model named.

Each batch reports the share escalated, the requests made and their cost
(:class:`CascadeReport`). This module does not import the calibration package (it only
reads those attributes), nor litellm (the LLM classifier imports it when it needs to).
"""

from __future__ import annotations

import copy
import inspect
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeGuard

import numpy as np

from .._integrity import is_sha256_hex
from ..exceptions import ArtifactError
from ._base import IntentClassifier, RankedLabels
from .llm._classifier import LLMBatch, LLMClassifier
from .llm._loop import run_sync as _run_sync

__all__ = ["CascadeBatch", "CascadeClassifier", "CascadeReport"]

_AUTO_ROUTE = "auto_route"  # the Policy action that keeps an item local


# --------------------------------------------------------------------------- escalation rules
# The three kinds of fitted object a cascade takes as ``policy=``, by what they provide (this
# module does not import the calibration package: it reads these members only). Which kind
# an object is is decided in this order: apply, threshold_for, threshold_.


class _Outcome(Protocol):
    """What :class:`_AppliesPolicy` returns: the action taken on the local answer."""

    @property
    def action(self) -> str: ...


class _AppliesPolicy(Protocol):
    """A policy artifact (``hybridroute.calibration.Policy``): keep an item local only
    when it would auto-route the local answer."""

    def apply(self, ranked: RankedLabels, /) -> _Outcome: ...


class _PerClassRule(Protocol):
    """A per-class threshold (e.g. ``PerClassThreshold``): one threshold per top label."""

    def threshold_for(self, label: str, /) -> float: ...


class _SavablePerClassRule(_PerClassRule, Protocol):
    """A per-class threshold whose thresholds can be listed (and so saved)."""

    @property
    def thresholds_(self) -> Mapping[str, float]: ...


class _ThresholdRule(Protocol):
    """A fitted single threshold (e.g. ``CertifiedPrecisionThreshold``)."""

    @property
    def threshold_(self) -> float: ...


#: A fitted object that gives a cascade its escalation rule (see the module docstring).
EscalationPolicy: TypeAlias = _AppliesPolicy | _PerClassRule | _ThresholdRule


def _applies(policy: object) -> TypeGuard[_AppliesPolicy]:
    return callable(getattr(policy, "apply", None))


def _per_class(policy: object) -> TypeGuard[_PerClassRule]:
    return callable(getattr(policy, "threshold_for", None))


def _savable_per_class(policy: object) -> TypeGuard[_SavablePerClassRule]:
    return hasattr(policy, "thresholds_") and _per_class(policy)


def _one_threshold(policy: object) -> TypeGuard[_ThresholdRule]:
    return hasattr(policy, "threshold_")


@dataclass(frozen=True, slots=True, kw_only=True)
class CascadeReport:
    """Accounting of one cascade batch (``cost_usd`` is ``None`` when unknown)."""

    n_items: int
    n_escalated: int
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    llm_abstentions: dict[str, int]
    seconds: float

    @property
    def share_escalated(self) -> float:
        return self.n_escalated / self.n_items if self.n_items else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "n_escalated": self.n_escalated,
            "share_escalated": self.share_escalated,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "llm_abstentions": dict(sorted(self.llm_abstentions.items())),
            "seconds": self.seconds,
        }


@dataclass(frozen=True, slots=True)
class CascadeBatch:
    """Per-item results of :meth:`CascadeClassifier.classify`, in input order.

    ``proba`` rows follow ``classes_``; ``escalated[i]`` says whether item ``i`` went to
    the LLM; ``llm`` holds the LLM batch (``None`` when nothing was escalated).
    """

    proba: np.ndarray
    ranked: list[RankedLabels]
    escalated: np.ndarray
    llm: LLMBatch | None
    report: CascadeReport


class _ClassThresholds:
    """Per-label escalation thresholds restored from a saved cascade."""

    def __init__(self, thresholds: Mapping[str, float], default: float) -> None:
        self.thresholds_ = dict(thresholds)
        self.default_ = float(default)

    def threshold_for(self, label: str) -> float:
        return self.thresholds_.get(str(label), self.default_)


def _as_json_threshold(value: float) -> float | str:
    return "inf" if value == math.inf else float(value)


def _from_json_threshold(value: Any) -> float:
    return math.inf if value == "inf" else float(value)


def _clone(estimator: Any) -> Any:
    """An unfitted copy of ``estimator`` with the same constructor arguments.

    :func:`sklearn.base.clone` when the object has ``get_params``. Otherwise (a classifier
    that keeps the estimator contract without ``get_params``) its class is called again
    with deep copies of the attributes named like its constructor's parameters -- what
    ``get_params`` would read. Learned state (``classes_``, ``manifest_``...) is never
    copied, so a clone of a loaded classifier does not carry the old model's fingerprint.
    """
    if callable(getattr(estimator, "get_params", None)):
        from sklearn.base import clone

        return clone(estimator)
    cls = type(estimator)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for name, param in inspect.signature(cls).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or not hasattr(estimator, name):
            raise TypeError(
                f"cannot clone {cls.__name__}: constructor argument {name!r} is not stored "
                "under its own name (estimator contract); give the class get_params(), or "
                "fit it yourself and use CascadeClassifier.from_fitted(...)"
            )
        value = copy.deepcopy(getattr(estimator, name))
        if param.kind is param.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[name] = value
    return cls(*args, **kwargs)


def _fingerprint_of(local: IntentClassifier) -> str:
    try:
        return local.fingerprint()
    except (ValueError, AttributeError, NotImplementedError) as exc:
        raise ValueError(
            f"the escalation rule names the model it was fitted on, but the fingerprint of "
            f"the local {type(local).__name__} cannot be computed to check it ({exc})"
        ) from exc


class CascadeClassifier(IntentClassifier):
    """Local classifier first; items below the escalation threshold go to the LLM.

    Parameters
    ----------
    local : IntentClassifier
        The cheap first stage (e.g. ``LocalClassifier``).
    llm : LLMClassifier
        The second stage.
    threshold : float or None
        Escalate items whose local top-label score is below this value.
    policy : object or None
        A fitted object giving the threshold instead (see the module docstring). Exactly
        one of ``threshold`` and ``policy`` is required.
    model_fingerprint : str or None
        Fingerprint of the local model whose scores the threshold or policy was fitted on
        (:meth:`IntentClassifier.fingerprint`). A policy artifact records its own; give
        this for a threshold value or a threshold fitter, which record none. When it is
        given (or recorded), the cascade refuses any other local model.

    Attributes
    ----------
    local_ : IntentClassifier
        The fitted first stage: a fitted clone of ``local`` (:meth:`fit`), or ``local``
        itself (:meth:`from_fitted`).
    llm_ : LLMClassifier
        The fitted second stage, likewise.
    classes_ : ndarray of str
        The LLM's label set (the local label set plus ``none_of_these`` when the LLM's
        prompt declares one).
    model_fingerprint_ : str or None
        The fingerprint of ``local_`` checked against the model the threshold or policy
        names; ``None`` when it names none.

    Notes
    -----
    An escalated item the LLM abstains on keeps its abstention (reason code) in
    :meth:`rank` and is ``None`` in :meth:`predict`; its :meth:`predict_proba` row is the
    local classifier's (which the threshold already judged unsure).
    """

    kind = "cascade"

    def __init__(
        self,
        local: IntentClassifier,
        llm: LLMClassifier,
        *,
        threshold: float | None = None,
        policy: EscalationPolicy | None = None,
        model_fingerprint: str | None = None,
    ) -> None:
        self.local = local
        self.llm = llm
        self.threshold = threshold
        self.policy = policy
        self.model_fingerprint = model_fingerprint

    # ------------------------------------------------------------------ fitting

    def _check_params(self) -> str | None:
        """Validate the arguments; the fingerprint of the model the rule names, if any."""
        if not isinstance(self.local, IntentClassifier):
            raise ValueError("local must be an IntentClassifier")
        if not isinstance(self.llm, LLMClassifier):
            raise ValueError("llm must be an LLMClassifier")
        if (self.threshold is None) == (self.policy is None):
            raise ValueError(
                "give exactly one of threshold= (a fitted value) or policy= (a fitted "
                "threshold or policy object); the cascade has no default threshold"
            )
        if self.threshold is not None:
            t = self.threshold
            if isinstance(t, bool) or not isinstance(t, int | float) or math.isnan(t):
                raise ValueError(f"threshold must be a number, got {t!r}")
        elif not (_applies(self.policy) or _per_class(self.policy) or _one_threshold(self.policy)):
            raise ValueError(
                "policy must be fitted and provide apply(ranked), threshold_for(label) "
                "or threshold_"
            )
        given = self.model_fingerprint
        if given is not None and not is_sha256_hex(given):
            raise ValueError(
                f"model_fingerprint must be a model fingerprint (64 lowercase hex digits, "
                f"IntentClassifier.fingerprint()), got {given!r}"
            )
        recorded = getattr(self.policy, "model_fingerprint", None)
        recorded = recorded if isinstance(recorded, str) else None  # a method is no record
        if recorded is not None and not is_sha256_hex(recorded):
            raise ValueError(f"the policy's model_fingerprint is not a fingerprint: {recorded!r}")
        if given is not None and recorded is not None and given != recorded:
            raise ValueError(
                f"the policy records model {recorded[:12]}…, but model_fingerprint= names "
                f"model {given[:12]}…"
            )
        return given if given is not None else recorded

    def _set_stages(self, local: IntentClassifier, llm: LLMClassifier, named: str | None) -> None:
        """Check the label sets and the model the rule names; set the learned state."""
        local_labels = [str(c) for c in local.classes_]  # type: ignore[attr-defined]
        llm_labels = [str(c) for c in llm.classes_]
        missing = sorted(set(local_labels) - set(llm_labels))
        if missing:
            raise ValueError(f"the LLM's label set lacks local labels: {', '.join(missing[:5])}")
        if named is not None:
            actual = _fingerprint_of(local)
            if actual != named:
                what = "threshold" if self.threshold is not None else "policy"
                raise ValueError(
                    f"the {what} was fitted on local model {named[:12]}…, but the local "
                    f"stage is model {actual[:12]}…: fit the {what} on this model's scores "
                    "(or use the model it was fitted on)"
                )
        self.local_ = local
        self.llm_ = llm
        self.classes_ = np.array(llm_labels)
        self.model_fingerprint_ = named

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> CascadeClassifier:
        """Fit clones of the local and the LLM classifier (the LLM makes no request).

        ``local`` and ``llm`` are left as they are; the fitted stages are ``local_`` and
        ``llm_``. A threshold or policy that names its model (see ``model_fingerprint``)
        must name the model trained here.

        Parameters
        ----------
        texts : sequence of str
            Training texts.
        labels : sequence of str
            Their labels.

        Raises
        ------
        ValueError
            A policy that names no model (it was fitted on some other model's scores:
            give ``model_fingerprint=`` or use :meth:`from_fitted`), or one that names
            another model than the one trained.
        """
        named = self._check_params()
        if self.policy is not None and named is None:
            raise ValueError(
                "fit() trains a new local model, and the policy does not name the model it "
                "was fitted on: give model_fingerprint= (the fingerprint of that model; fit "
                "checks that it trains the same one), or build the cascade over the fitted "
                "model with CascadeClassifier.from_fitted(local, llm, policy=...)"
            )
        texts, labels = list(texts), list(labels)
        local = _clone(self.local).fit(texts, labels)
        llm = _clone(self.llm).fit(texts, labels)
        self._set_stages(local, llm, named)
        return self

    @classmethod
    def from_fitted(
        cls,
        local: IntentClassifier,
        llm: LLMClassifier,
        *,
        threshold: float | None = None,
        policy: EscalationPolicy | None = None,
        model_fingerprint: str | None = None,
    ) -> CascadeClassifier:
        """A cascade over two already fitted classifiers (nothing is refitted or copied).

        A threshold or policy that names its model must name ``local``; one that names
        none is taken as fitted on ``local``'s scores.

        Parameters
        ----------
        local : IntentClassifier
            The fitted first stage, used as it is (``local_ is local``).
        llm : LLMClassifier
            The fitted second stage; its label set must hold every label of ``local``.
        threshold : float or None, default None
            Escalate items whose local top-label score is below this value.
        policy : object or None, default None
            A fitted threshold fitter or policy giving the threshold instead. Exactly one
            of ``threshold`` and ``policy`` is required.
        model_fingerprint : str or None, default None
            Fingerprint of the model the threshold or policy was fitted on (64 lowercase
            hex digits); must agree with the one a policy records, and with ``local``'s.

        Returns
        -------
        CascadeClassifier
            Fitted, ready to :meth:`classify`.

        Raises
        ------
        ValueError
            If an argument is of the wrong kind, both or neither of ``threshold`` and
            ``policy`` is given, the LLM's label set lacks a local label, or the named
            model is not ``local``.
        NotFittedError
            If ``local`` or ``llm`` is not fitted.
        """
        out = cls(
            local, llm, threshold=threshold, policy=policy, model_fingerprint=model_fingerprint
        )
        named = out._check_params()
        local._check_fitted()
        llm._check_fitted()
        out._set_stages(local, llm, named)
        return out

    # ------------------------------------------------------------------ escalation

    def _escalate(self, local_ranked: Sequence[RankedLabels]) -> np.ndarray:
        """Which items go to the LLM: an abstention, or an answer the rule finds unsure."""
        out = np.zeros(len(local_ranked), dtype=bool)
        policy = self.policy
        for i, r in enumerate(local_ranked):
            if r.abstained or r.confidence is None:
                out[i] = True
            elif self.threshold is not None:
                out[i] = r.confidence < float(self.threshold)
            elif _applies(policy):
                out[i] = policy.apply(r).action != _AUTO_ROUTE
            elif _per_class(policy):
                out[i] = r.confidence < float(policy.threshold_for(str(r.top)))
            elif _one_threshold(policy):
                out[i] = r.confidence < float(policy.threshold_)
            else:  # _check_params refuses such a policy: it lost its rule since
                raise TypeError(
                    "policy must be fitted and provide apply(ranked), threshold_for(label) "
                    "or threshold_"
                )
        return out

    # ------------------------------------------------------------------ batches

    def classify(self, texts: Sequence[str], k: int = 2) -> CascadeBatch:
        """Classify ``texts``; the unsure ones go to the LLM (never raises for an item)."""
        texts = list(texts)
        return _run_sync(lambda: self.aclassify(texts, k=k))

    async def aclassify(self, texts: Sequence[str], k: int = 2) -> CascadeBatch:
        """Async :meth:`classify`."""
        self._check_fitted()
        started = time.perf_counter()
        texts = list(texts)
        classes = [str(c) for c in self.classes_]
        index = {c: j for j, c in enumerate(classes)}
        local_classes = [str(c) for c in self.local_.classes_]  # type: ignore[attr-defined]
        # One pass of the local classifier: every class's score, best first (a policy
        # with temperature calibration needs them all; the proba rows are rebuilt).
        local_ranked = self.local_.rank(texts, k=len(local_classes))
        proba = np.zeros((len(texts), len(classes)))
        for i, r in enumerate(local_ranked):
            if r.abstained or not r.labels:
                proba[i] = 1.0 / len(classes)
                continue
            for label, score in zip(r.labels, r.scores, strict=True):
                proba[i, index[label]] = score
        escalated = self._escalate(local_ranked)

        ranked: list[RankedLabels] = []
        for r in local_ranked:
            ranked.append(
                RankedLabels(
                    labels=r.labels[:k],
                    scores=r.scores[:k],
                    abstain_reason=r.abstain_reason,
                    usage={"stage": "local", "requests": 0, "cost_usd": 0.0, **r.usage},
                )
            )
        llm_batch: LLMBatch | None = None
        picked = [int(i) for i in np.flatnonzero(escalated)]
        if len(picked):
            llm_batch = await self.llm_.aclassify([texts[i] for i in picked])
            llm_ranked = LLMClassifier.ranked_from(llm_batch.items, k=k)
            llm_rows = self.llm_._proba_rows(llm_batch.items)
            for j, i in enumerate(picked):
                item = llm_batch.items[j]
                local = local_ranked[i]
                usage = {
                    "stage": "llm",
                    **llm_ranked[j].usage,
                    "local_label": local.top,
                    "local_confidence": local.confidence,
                }
                ranked[i] = RankedLabels(
                    labels=llm_ranked[j].labels,
                    scores=llm_ranked[j].scores,
                    abstain_reason=llm_ranked[j].abstain_reason,
                    usage=usage,
                )
                if not item.abstained:
                    proba[i] = llm_rows[j]
        report = self._report(len(texts), int(escalated.sum()), llm_batch, started)
        return CascadeBatch(
            proba=proba, ranked=ranked, escalated=escalated, llm=llm_batch, report=report
        )

    @staticmethod
    def _report(
        n_items: int, n_escalated: int, llm_batch: LLMBatch | None, started: float
    ) -> CascadeReport:
        r = llm_batch.report if llm_batch is not None else None
        return CascadeReport(
            n_items=n_items,
            n_escalated=n_escalated,
            requests=r.requests if r else 0,
            prompt_tokens=r.prompt_tokens if r else 0,
            completion_tokens=r.completion_tokens if r else 0,
            cost_usd=r.cost_usd if r else 0.0,
            llm_abstentions=dict(r.abstentions) if r else {},
            seconds=time.perf_counter() - started,
        )

    # ------------------------------------------------------------------ classifier API

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Rows over ``classes_``: the local row, or the LLM's row for escalated items."""
        return self.classify(texts).proba

    def predict(self, texts: Sequence[str]) -> list[str | None]:  # type: ignore[override]
        """Best label per text; ``None`` where an escalated item's LLM abstained."""
        return [r.top for r in self.classify(texts).ranked]

    def rank(self, texts: Sequence[str], k: int = 2) -> list[RankedLabels]:
        """Top-``k`` labels per text; ``usage["stage"]`` says which stage answered."""
        return self.classify(texts, k=k).ranked

    # ------------------------------------------------------------------ persistence

    def _escalation_state(self) -> dict[str, Any]:
        if self.threshold is not None:
            return {"threshold": _as_json_threshold(float(self.threshold))}
        policy = self.policy
        if _savable_per_class(policy):
            default = getattr(policy, "pool_threshold_", getattr(policy, "default_", None))
            if default is None:
                raise ValueError("a per-class policy without a default threshold cannot be saved")
            return {
                "class_thresholds": {
                    str(k): _as_json_threshold(float(v)) for k, v in policy.thresholds_.items()
                },
                "default_threshold": _as_json_threshold(float(default)),
            }
        if _one_threshold(policy) and not _applies(policy):
            return {"threshold": _as_json_threshold(float(policy.threshold_))}
        raise ValueError(
            "a cascade driven by a policy artifact is saved without it: save the policy "
            "separately and pass it again with CascadeClassifier.from_fitted(...)"
        )

    def _save_state(self, directory: Path) -> dict[str, Any]:
        from ._persistence import classifier_fingerprint, save_classifier

        self._check_fitted()
        escalation = self._escalation_state()
        save_classifier(self.local_, directory / "local")
        save_classifier(self.llm_, directory / "llm")
        # The thresholds belong to the local stage saved beside them: say which it is.
        saved = classifier_fingerprint(directory / "local")
        if self.model_fingerprint_ is not None and saved != self.model_fingerprint_:
            raise ValueError(
                f"the local stage is no longer model {self.model_fingerprint_[:12]}… that "
                "the thresholds were checked against (was it refitted in place?)"
            )
        return {"escalation": {**escalation, "model_fingerprint": saved}}

    @classmethod
    def _load_state(cls, directory: Path, manifest: dict[str, Any]) -> CascadeClassifier:
        from ._persistence import load_classifier

        state = manifest.get("state")
        escalation = state.get("escalation") if isinstance(state, dict) else None
        if not isinstance(escalation, dict):
            raise ArtifactError("manifest has no 'state.escalation' object", path=str(directory))
        local = load_classifier(directory / "local")
        llm = load_classifier(directory / "llm")
        if not isinstance(llm, LLMClassifier):
            raise ArtifactError("the 'llm' stage is not an LLM classifier", path=str(directory))
        named = escalation.get("model_fingerprint")  # absent in cascades saved before it
        if named is not None:
            if not is_sha256_hex(named):
                raise ArtifactError(
                    "manifest 'state.escalation.model_fingerprint' is not a model fingerprint",
                    path=str(directory),
                )
            stage = local.fingerprint()  # the verified manifest's: nothing is re-saved
            if stage != named:
                raise ArtifactError(
                    f"the escalation thresholds were fitted on local model {named[:12]}…, "
                    f"but the saved local stage is model {stage[:12]}…",
                    path=str(directory),
                )
        try:
            if "threshold" in escalation:
                return cls.from_fitted(
                    local,
                    llm,
                    threshold=_from_json_threshold(escalation["threshold"]),
                    model_fingerprint=named,
                )
            policy = _ClassThresholds(
                {
                    str(k): _from_json_threshold(v)
                    for k, v in dict(escalation["class_thresholds"]).items()
                },
                _from_json_threshold(escalation["default_threshold"]),
            )
            return cls.from_fitted(local, llm, policy=policy, model_fingerprint=named)
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(
                f"manifest 'state.escalation' is malformed ({exc})", path=str(directory)
            ) from None
