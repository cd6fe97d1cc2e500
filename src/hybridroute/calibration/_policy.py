"""The policy artifact: everything fitted, with its provenance, as one versioned JSON document.

A :class:`Policy` is what the router loads. It is a plain document (no code, no pickles):

* ``calibrator`` -- ``none``, ``temperature`` (with ``temperature``) or ``isotonic`` (knots);
* ``thresholds`` -- ``auto`` (auto-route at or above; ``null``: nothing is auto-routed),
  ``ask`` (ask the user at or above; ``null``: no ask zone), ``per_class`` thresholds,
  ``margin`` (top-1 minus top-2), ``oos`` (score definition and cut-off) and ``fallback``
  (what happens below every threshold);
* ``evidence`` -- per-source evidence thresholds;
* ``objective`` / ``guarantee`` / ``expected`` -- how the thresholds were fitted, whether
  the target is certified, the bound, and the coverage expected;
* ``calibration_data`` -- size, label counts and out-of-scope share of the calibration set
  (a certified threshold holds for traffic like it; see :meth:`Policy.check_label_mix`);
* ``provenance`` -- dataset fingerprint, split seed, model, command... (free-form, plain);
* ``model_fingerprint`` -- the fingerprint of the classifier the policy was fitted on
  (:meth:`hybridroute.classifiers.IntentClassifier.fingerprint`), or ``null``;
* ``format`` / ``format_version`` / ``library_version``, and the seal: ``content_sha256``
  and, when ``HYBRIDROUTE_SIGNING_KEY`` is set at write time, ``signature``.

Same inputs give byte-identical files: keys are sorted, floats are written with Python's
shortest round-trip ``repr`` (so loading gives back the same floats exactly), and nothing
time- or machine-dependent is recorded (a signature is deterministic too).

Loading (:meth:`Policy.load` / :meth:`Policy.from_dict`) refuses, with an
:class:`~hybridroute.exceptions.ArtifactError` naming the file and the field:

* a file that is not strict JSON (read through :mod:`hybridroute._safeio`: a byte limit,
  no duplicate keys, no NaN, no deep nesting) or whose format version this library does
  not read;
* a broken seal: ``content_sha256`` (the SHA-256 of the canonical JSON of the document
  without its seal) missing or not matching, or a signature refused by the rules of
  :mod:`hybridroute._integrity` (signed without the key set, a wrong key, unsigned while
  the key is set);
* a malformed field, and **fields that contradict each other**: a threshold that is not
  the one its recorded fit gives (``thresholds.auto`` vs ``objective.fit.threshold``, the
  ask, margin, per-class, out-of-scope and evidence thresholds vs their fits), a
  ``guarantee`` or ``expected`` block that is not the fit's, a certificate whose recorded
  counts (coverage and precision of ``calibration_size`` items) do not give the recorded
  Clopper-Pearson bound at ``delta / n_starts`` or whose p-value misses the level, a
  coverage guarantee the recorded count does not meet, a probability threshold outside
  [0, 1], a certificate from a fitter whose record cannot be checked.

The plain hash catches accidents, and the consistency checks catch edits that break the
arithmetic of a certificate; neither stops someone who rewrites a whole fit record
consistently and recomputes the hash. Signing does.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from .. import _safeio
from .._integrity import content_hash, is_sha256_hex, seal, verify
from .._version import __version__
from ..contracts import ReasonCode
from ..exceptions import ArtifactError, InputError, UndeclaredValueError
from ._base import (
    ASK_USER,
    AUTO_ROUTE,
    HUMAN_REVIEW,
    OUT_OF_SCOPE,
    as_proba,
    jsonable_threshold,
    threshold_from_json,
)
from ._bounds import clopper_pearson_lower, precision_p_value
from ._drift import LabelMixDeparture, label_mix_departure
from ._evidence import EvidenceItem, EvidenceResult, check_evidence
from ._isotonic import apply_isotonic, isotonic_transform
from ._temperature import apply_temperature

__all__ = ["POLICY_FORMAT", "POLICY_FORMAT_VERSION", "Policy", "PolicyOutcome"]

POLICY_FORMAT = "hybridroute.policy"
#: Bumped whenever a reader of the previous version would misread a new document. Version 2
#: added ``model_fingerprint`` and the ``signature``, which a version-1 reader would ignore.
POLICY_FORMAT_VERSION = 2
#: Largest policy file read (isotonic knots and per-class fits make a policy grow with
#: the calibration set; this is far beyond any real one).
POLICY_MAX_BYTES = 64 * 1024 * 1024

_OOS_SCORES = ("one_minus_confidence", "label_probability", "external")
_FALLBACKS = (ASK_USER, HUMAN_REVIEW)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyOutcome:
    """What the policy decided for one classified item.

    Attributes
    ----------
    action : str
        ``auto_route``, ``ask_user``, ``human_review`` or ``out_of_scope``.
    reason_code : str
        A :class:`~hybridroute.contracts.ReasonCode` value (or the classifier's abstention
        reason, e.g. ``invalid_label``).
    label : str or None
        The top label (``None`` for an abstention).
    confidence, margin, oos_score : float or None
        Calibrated top-label confidence, top-1 minus top-2, out-of-scope score.
    threshold : float or None
        The threshold value that decided (``None`` when none applied).
    threshold_name : str or None
        Which threshold decided: ``auto``, ``class:<label>``, ``ask``, ``margin``, ``oos``.
    """

    action: str
    reason_code: str
    label: str | None
    confidence: float | None
    margin: float | None
    oos_score: float | None
    threshold: float | None
    threshold_name: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason_code": self.reason_code,
            "label": self.label,
            "confidence": self.confidence,
            "margin": self.margin,
            "oos_score": self.oos_score,
            "threshold": self.threshold,
            "threshold_name": self.threshold_name,
        }


# --------------------------------------------------------------------------- JSON helpers


def _plain(obj: Any, where: str = "policy") -> Any:
    """Plain JSON types only: numpy scalars unwrapped, tuples to lists, no NaN or inf."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if not math.isfinite(v):
            raise ValueError(f"{where}: non-finite number {v!r} cannot go into a policy")
        return v
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, Mapping):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [_plain(v, f"{where}[]") for v in list(obj)]
    raise ValueError(f"{where}: value of type {type(obj).__name__} cannot go into a policy")


def _content_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``doc`` without its seal fields."""
    return content_hash(doc)


def _summary_or_none(obj: Any) -> Any:
    return None if obj is None else obj.summary()


# --------------------------------------------------------------------------- the policy


class Policy:
    """A fitted routing policy: calibrator, thresholds, evidence thresholds, provenance.

    Build one from fitted estimators with :meth:`build`, write it with :meth:`save`, read
    it back with :meth:`load`, and apply it to a classifier's ranked labels with
    :meth:`apply` (one item) or to a probability matrix with :meth:`apply_proba`.
    """

    __slots__ = ("_doc",)

    def __init__(self, document: Mapping[str, Any], *, path: str | None = None) -> None:
        """Wrap a policy document after structural checks of every field.

        The seal fields (``content_sha256``, ``signature``) are dropped: an object in
        memory is trusted as given. Consistency between fields (a threshold against its
        recorded fit) is checked by :meth:`build`, :meth:`save` and :meth:`from_dict`, not
        here, so a document can be edited in memory (as experiments do) before it is
        written.
        """
        doc = _plain(document)
        doc.pop("content_sha256", None)
        doc.pop("signature", None)
        _validate(doc, path)
        self._doc = doc

    # ------------------------------------------------------------------ building

    @classmethod
    def build(
        cls,
        *,
        classes: Sequence[str],
        threshold: Any,
        calibrator: Any = None,
        per_class: Any = None,
        margin: Any = None,
        oos: Any = None,
        oos_score: str = "one_minus_confidence",
        oos_label: str | None = None,
        evidence: Any = None,
        fallback: str = HUMAN_REVIEW,
        calibration_labels: Iterable[str] | None = None,
        out_of_scope_label: str | None = None,
        objective: str | None = None,
        provenance: Mapping[str, Any] | None = None,
        model_fingerprint: str | None = None,
    ) -> Policy:
        """Assemble a policy from fitted estimators.

        Parameters
        ----------
        classes : sequence of str
            The classifier's label set, in the column order of its probabilities.
        threshold : fitted threshold fitter
            The main one: a :class:`CertifiedPrecisionThreshold`, :class:`EmpiricalThreshold`,
            :class:`CoverageThreshold`, :class:`CostThreshold` or :class:`ThreeWayThreshold`
            (the last two also give the ask-the-user threshold).
        calibrator : fitted TemperatureScaling or IsotonicCalibration, optional
        per_class : fitted PerClassThreshold, optional
            Replaces the auto threshold by the item's label's threshold.
        margin : fitted MarginThreshold, optional
        oos : fitted OutOfScopeThreshold, optional
        oos_score : {"one_minus_confidence", "label_probability", "external"}
            What the out-of-scope cut-off is compared with: one minus the calibrated
            confidence, the calibrated probability of ``oos_label`` (a model that has the
            out-of-scope label among its classes), or a score the caller passes to
            :meth:`apply`.
        oos_label : str, optional
            The class whose probability is the out-of-scope score (``label_probability``).
        evidence : fitted EvidenceThresholds, optional
        fallback : {"human_review", "ask_user"}
            Action below every threshold when there is no ask zone.
        calibration_labels : iterable of str, optional
            True labels of the calibration set (for the recorded label mix).
        out_of_scope_label : str, optional
            The label that marks out-of-scope items in ``calibration_labels``.
        objective : str, optional
            Name of the objective (``precision``, ``coverage``, ``cost``...).
        provenance : mapping, optional
            Dataset fingerprint, split seed, model, command... (plain JSON values).
        model_fingerprint : str, optional
            Fingerprint of the classifier whose scores the estimators were fitted on
            (:meth:`~hybridroute.classifiers.IntentClassifier.fingerprint`). A router bundle
            only accepts a policy that carries its model's fingerprint.

        Raises
        ------
        ValueError
            A malformed argument, or fitted records that contradict each other.
        """
        if not hasattr(threshold, "threshold_"):
            raise ValueError("threshold must be a fitted threshold fitter")
        summary = threshold.summary()
        ask = getattr(threshold, "ask_threshold_", None)
        if getattr(threshold, "two_way_", False):
            ask = None
        guarantee_src = summary.get("auto", summary)
        guarantee = {
            "certified": bool(summary.get("certified", False)),
            "target": guarantee_src.get("target"),
            "delta": guarantee_src.get("delta"),
            "bound": guarantee_src.get("bound"),
            "reason": guarantee_src.get("reason"),
            "required_calibration_size": guarantee_src.get("required_calibration_size"),
        }
        if calibrator is None:
            cal: dict[str, Any] = {"method": "none"}
        else:
            cal = calibrator.summary()
        oos_doc = None
        if oos is not None:
            if oos_score not in _OOS_SCORES:
                raise ValueError(f"oos_score must be one of {_OOS_SCORES}, got {oos_score!r}")
            if oos_score == "label_probability" and oos_label not in [str(c) for c in classes]:
                raise ValueError("oos_score='label_probability' needs oos_label among classes")
            osum = oos.summary()
            oos_doc = {
                "score": oos_score,
                "label": oos_label if oos_score == "label_probability" else None,
                "cutoff": osum["cutoff"],
                "fit": osum,
            }
        thresholds = {
            "auto": jsonable_threshold(threshold.threshold_),
            "ask": None if ask is None else jsonable_threshold(ask),
            "per_class": None,
            "per_class_default": None,
            "margin": None,
            "oos": oos_doc,
            "fallback": fallback,
        }
        per_class_fit = None
        if per_class is not None:
            thresholds["per_class"] = {
                k: jsonable_threshold(v) for k, v in per_class.thresholds_.items()
            }
            thresholds["per_class_default"] = jsonable_threshold(per_class.pool_threshold_)
            per_class_fit = per_class.summary()
        margin_fit = None
        if margin is not None:
            thresholds["margin"] = jsonable_threshold(margin.threshold_)
            margin_fit = margin.summary()
        cal_data: dict[str, Any] = {"size": summary.get("calibration_size")}
        if calibration_labels is not None:
            counts = Counter(str(x) for x in calibration_labels)
            n = sum(counts.values())
            cal_data["label_counts"] = dict(sorted(counts.items()))
            cal_data["size"] = n
            cal_data["out_of_scope_label"] = out_of_scope_label
            cal_data["out_of_scope_share"] = (
                counts.get(out_of_scope_label, 0) / n if out_of_scope_label is not None else 0.0
            )
        doc = {
            "format": POLICY_FORMAT,
            "format_version": POLICY_FORMAT_VERSION,
            "library_version": __version__,
            "classes": [str(c) for c in classes],
            "calibrator": cal,
            "objective": {"name": objective or summary.get("method"), "fit": summary},
            "thresholds": thresholds,
            "fits": {"per_class": per_class_fit, "margin": margin_fit},
            "evidence": _summary_or_none(evidence),
            "guarantee": guarantee,
            "expected": {
                "coverage": summary.get("coverage"),
                "precision": summary.get("precision"),
            },
            "calibration_data": cal_data,
            "provenance": dict(provenance or {}),
            "model_fingerprint": model_fingerprint,
        }
        policy = cls(doc)
        _check_consistency(policy._doc, None, error=ValueError)
        return policy

    def with_model_fingerprint(self, fingerprint: str) -> Policy:
        """This policy bound to the model with ``fingerprint`` (a new policy).

        Used for a policy fitted in memory whose model is known only when it is saved
        (:func:`hybridroute.router.save_router` binds an unbound policy to the classifier it
        saves beside it). A policy that is already bound to another model is never rebound.

        Raises
        ------
        ValueError
            ``fingerprint`` is not 64 lowercase hex digits, or the policy records another.
        """
        if not is_sha256_hex(fingerprint):
            raise ValueError(f"a model fingerprint is 64 lowercase hex digits, got {fingerprint!r}")
        current = self._doc.get("model_fingerprint")
        if current == fingerprint:
            return self
        if current is not None:
            raise ValueError(
                f"the policy was fitted on model {current[:12]}…; it cannot be bound to "
                f"model {fingerprint[:12]}…"
            )
        doc = copy.deepcopy(self._doc)
        doc["model_fingerprint"] = fingerprint
        return type(self)(doc)

    # ------------------------------------------------------------------ reading

    def to_dict(self) -> dict[str, Any]:
        """The document (a deep copy), sealed: its ``content_sha256`` and, when
        ``HYBRIDROUTE_SIGNING_KEY`` is set, its ``signature``."""
        return seal(self._doc)

    def to_json(self) -> str:
        """The exact text :meth:`save` writes."""
        return (
            json.dumps(
                self.to_dict(), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False
            )
            + "\n"
        )

    @property
    def content_sha256(self) -> str:
        return _content_hash(self._doc)

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(self._doc["classes"])

    @property
    def model_fingerprint(self) -> str | None:
        """Fingerprint of the model the policy was fitted on (``None``: not recorded)."""
        value = self._doc["model_fingerprint"]
        return None if value is None else str(value)

    @property
    def certified(self) -> bool:
        return bool(self._doc["guarantee"]["certified"])

    @property
    def thresholds(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc["thresholds"])

    @property
    def guarantee(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc["guarantee"])

    @property
    def provenance(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc["provenance"])

    @property
    def calibration_data(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc["calibration_data"])

    @property
    def evidence_thresholds(self) -> dict[str, float | None]:
        ev = self._doc.get("evidence")
        if not ev:
            return {}
        return {k: v["threshold"] for k, v in ev["sources"].items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and self._doc == other._doc

    def __hash__(self) -> int:
        return hash(self.content_sha256)

    def __repr__(self) -> str:
        t = self._doc["thresholds"]
        return (
            f"Policy(objective={self._doc['objective']['name']!r}, auto={t['auto']!r}, "
            f"ask={t['ask']!r}, certified={self.certified}, sha256={self.content_sha256[:12]})"
        )

    # ------------------------------------------------------------------ files

    def save(self, path: str | Path) -> Path:
        """Write the sealed (and, with a key set, signed) document as UTF-8 JSON.

        Refuses (``ValueError``) a document whose fields contradict each other, since
        :meth:`load` would refuse the file. Returns the path.
        """
        _check_consistency(self._doc, None, error=ValueError)
        p = Path(path)
        p.write_text(self.to_json(), encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        """Read a policy, refusing tampered, contradictory or incompatible files.

        Raises
        ------
        ArtifactError
            Naming the path, the field and what is wrong: unreadable, not strict JSON, not
            a policy, a format version this library cannot read, a seal (content hash or
            signature) that does not verify, a malformed field, or fields that contradict
            each other (see the module notes).
        """
        p = os.fspath(path)
        try:
            text = _safeio.read_text(path, limit=POLICY_MAX_BYTES, what="policy")
        except InputError as exc:
            raise ArtifactError(f"cannot read policy: {exc.reason}", path=p) from None
        try:
            doc = _safeio.parse_json(text, source=p, what="policy")
        except InputError as exc:
            where = f" at line {exc.line}" if exc.line is not None else ""
            raise ArtifactError(
                f"not a JSON policy document ({exc.reason}{where})", path=p
            ) from None
        return cls.from_dict(doc, path=p)

    @classmethod
    def from_dict(cls, doc: Any, *, path: str | None = None) -> Policy:
        """Check a loaded document -- format, version, seal, fields, consistency -- and
        build the policy (see :meth:`load`)."""
        if not isinstance(doc, dict):
            raise ArtifactError("a policy document must be a JSON object", path=path)
        if doc.get("format") != POLICY_FORMAT:
            raise ArtifactError(
                f"not a hybridroute policy (format is {doc.get('format')!r}, "
                f"expected {POLICY_FORMAT!r})",
                path=path,
            )
        version = doc.get("format_version")
        if version != POLICY_FORMAT_VERSION:
            raise ArtifactError(
                f"incompatible policy format version {version!r}; hybridroute {__version__} "
                f"reads version {POLICY_FORMAT_VERSION} (written by hybridroute "
                f"{doc.get('library_version', '?')}; refit the policy with this version)",
                path=path,
            )
        body = verify(doc, path=path, what="policy")
        try:
            policy = cls(body, path=path)
        except ValueError as exc:
            if isinstance(exc, ArtifactError):
                raise
            raise ArtifactError(str(exc), path=path) from None
        _check_consistency(policy._doc, path)
        return policy

    # ------------------------------------------------------------------ applying

    def calibrate(self, proba: Any) -> np.ndarray:
        """Calibrated probabilities for a matrix ``(n_items, n_classes)`` in ``classes`` order."""
        return self._calibrate(as_proba(proba))

    def _calibrate(self, p: np.ndarray) -> np.ndarray:
        if p.shape[1] != len(self._doc["classes"]):
            raise ValueError(
                f"proba has {p.shape[1]} columns; the policy's label set has {len(self.classes)}"
            )
        cal = self._doc["calibrator"]
        if cal["method"] == "temperature":
            return apply_temperature(p, cal["temperature"])
        if cal["method"] == "isotonic":
            return isotonic_transform(p, np.asarray(cal["x"]), np.asarray(cal["y"]))
        return p / p.sum(axis=1, keepdims=True)

    def apply_proba(
        self, proba: Any, oos_scores: Sequence[float] | None = None
    ) -> list[PolicyOutcome]:
        """Outcomes for a probability matrix whose columns follow ``classes``."""
        raw = as_proba(proba)
        p = self._calibrate(raw)
        classes = self._doc["classes"]
        top = raw.argmax(axis=1)  # the label never changes; only the scores are recalibrated
        if len(p) == 1:
            # one item (the router's single-ticket path): plain floats beat numpy's
            # per-call overhead on one short row, with the very same values
            only = p[0].tolist()
            conf_1 = only[int(top[0])]
            only[int(top[0])] = -math.inf
            conf, second = [conf_1], [max(only)]
        else:
            rows = np.arange(len(p))
            conf = p[rows, top]
            rest = p.copy()
            rest[rows, top] = -np.inf
            second = rest.max(axis=1)
        if oos_scores is not None and len(oos_scores) != len(p):
            raise ValueError(f"oos_scores has {len(oos_scores)} entries for {len(p)} items")
        o = self._doc["thresholds"]["oos"]
        label_col = (
            classes.index(o["label"])
            if o is not None and o["score"] == "label_probability"
            else None
        )
        out = []
        for i in range(len(p)):
            ext = None if oos_scores is None else float(oos_scores[i])
            if label_col is not None:
                ext = float(p[i, label_col])
            out.append(
                self._decide(classes[top[i]], float(conf[i]), float(conf[i] - second[i]), ext)
            )
        return out

    def apply(self, ranked: Any, *, oos_score: float | None = None) -> PolicyOutcome:
        """The outcome for one classifier answer.

        Parameters
        ----------
        ranked : RankedLabels-like
            An object with ``labels`` and ``scores`` (best first, raw classifier
            probabilities) and ``abstain_reason``. With a temperature calibrator every
            class's score is needed (``classifier.rank(texts, k=len(classes))``); otherwise
            the best two suffice.
        oos_score : float, optional
            Needed when the policy's out-of-scope score is ``external``.
        """
        reason = getattr(ranked, "abstain_reason", None)
        labels = tuple(getattr(ranked, "labels", ()) or ())
        scores = tuple(getattr(ranked, "scores", ()) or ())
        if reason is not None or not labels:
            return PolicyOutcome(
                action=HUMAN_REVIEW,
                reason_code=str(reason or ReasonCode.CLASSIFIER_ERROR.value),
                label=None,
                confidence=None,
                margin=None,
                oos_score=None,
                threshold=None,
                threshold_name=None,
            )
        if len(labels) != len(scores):
            raise ValueError("ranked labels and scores differ in length")
        index = {c: i for i, c in enumerate(self.classes)}
        for lab in labels:
            if lab not in index:
                raise UndeclaredValueError("label", lab, self.classes)
        cal = self._doc["calibrator"]
        if cal["method"] == "temperature":
            if len(labels) < len(self.classes):
                raise ValueError(
                    "this policy's temperature calibration needs every class's score; "
                    f"rank with k={len(self.classes)} (got {len(labels)} labels)"
                )
            row = np.zeros(len(self.classes))
            for lab, s in zip(labels, scores, strict=True):
                row[index[lab]] = s
            return self.apply_proba(row[None, :], None if oos_score is None else [oos_score])[0]
        top, conf_raw = labels[0], float(scores[0])
        second_raw = float(scores[1]) if len(scores) > 1 else 0.0
        if cal["method"] == "isotonic":
            conf = float(
                apply_isotonic(np.array([conf_raw]), np.asarray(cal["x"]), np.asarray(cal["y"]))[0]
            )
            total = sum(scores) if len(scores) == len(self.classes) else 1.0
            rest = total - conf_raw
            second = second_raw * (1.0 - conf) / rest if rest > 0 else 0.0
        else:
            conf, second = conf_raw, second_raw
        o = self._doc["thresholds"]["oos"]
        if o is not None and o["score"] == "label_probability":
            # the out-of-scope class's score, or 0 when it is not among the ranked labels
            raw_oos = dict(zip(labels, scores, strict=True)).get(o["label"], 0.0)
            if cal["method"] == "isotonic" and o["label"] != top:
                total = sum(scores) if len(scores) == len(self.classes) else 1.0
                rest = total - conf_raw
                raw_oos = raw_oos * (1.0 - conf) / rest if rest > 0 else 0.0
            elif o["label"] == top:
                raw_oos = conf
            oos_score = float(raw_oos)
        return self._decide(top, conf, conf - second, oos_score)

    def _decide(
        self, label: str, conf: float, margin: float, external_oos: float | None
    ) -> PolicyOutcome:
        t = self._doc["thresholds"]

        def outcome(action: str, reason: str, thr: float | None, name: str | None) -> PolicyOutcome:
            return PolicyOutcome(
                action=action,
                reason_code=reason,
                label=label,
                confidence=conf,
                margin=margin,
                oos_score=oos_value,
                threshold=thr,
                threshold_name=name,
            )

        oos_value: float | None = None
        if t["oos"] is not None:
            kind = t["oos"]["score"]
            if kind == "one_minus_confidence":
                oos_value = 1.0 - conf
            else:
                if external_oos is None:
                    raise ValueError("this policy's out-of-scope cut-off needs oos_score=")
                oos_value = float(external_oos)
            cutoff = t["oos"]["cutoff"]
            if cutoff is None or oos_value >= cutoff:
                return outcome(OUT_OF_SCOPE, ReasonCode.OUT_OF_SCOPE.value, cutoff, "oos")
        if t["per_class"] is not None:
            auto_raw = t["per_class"].get(label, t["per_class_default"])
            auto_name = f"class:{label}"
        else:
            auto_raw = t["auto"]
            auto_name = "auto"
        auto = threshold_from_json(auto_raw)
        if conf >= auto:
            if t["margin"] is not None and margin < t["margin"]:
                return outcome(ASK_USER, ReasonCode.LOW_MARGIN.value, t["margin"], "margin")
            return outcome(AUTO_ROUTE, ReasonCode.CONFIDENT_INTENT.value, auto_raw, auto_name)
        not_certified = not self.certified and auto_raw is None
        if t["ask"] is not None and conf >= t["ask"]:
            return outcome(ASK_USER, ReasonCode.LOW_CONFIDENCE.value, t["ask"], "ask")
        if t["ask"] is not None:
            return outcome(HUMAN_REVIEW, ReasonCode.NEEDS_REVIEW.value, t["ask"], "ask")
        reason = (
            ReasonCode.NOT_CERTIFIED.value if not_certified else ReasonCode.LOW_CONFIDENCE.value
        )
        return outcome(t["fallback"], reason, auto_raw, auto_name)

    # ------------------------------------------------------------------ checks

    def check_evidence(
        self, required_points: Sequence[str], items: Iterable[EvidenceItem | Mapping[str, Any]]
    ) -> EvidenceResult:
        """Evidence completeness with this policy's per-source thresholds."""
        if not self._doc.get("evidence"):
            raise ValueError("this policy holds no evidence thresholds")
        return check_evidence(required_points, items, self.evidence_thresholds)

    def check_label_mix(
        self,
        observed: Mapping[str, float] | Iterable[str],
        *,
        max_tv: float = 0.1,
        alpha: float = 0.01,
    ) -> LabelMixDeparture:
        """Compare a label mix (counts or labels) with the recorded calibration mix."""
        counts = self._doc["calibration_data"].get("label_counts")
        if not counts:
            raise ValueError("this policy did not record its calibration label mix")
        return label_mix_departure(counts, observed, max_tv=max_tv, alpha=alpha)


# --------------------------------------------------------------------------- validation


def _need(cond: bool, field: str, what: str, path: str | None) -> None:
    if not cond:
        raise ArtifactError(f"policy field {field!r}: {what}", path=path)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_thr(v: Any) -> bool:
    return v is None or _is_num(v)


def _validate(doc: dict[str, Any], path: str | None) -> None:
    """Structural checks of a policy document (raises ArtifactError naming the field)."""
    for key in (
        "format",
        "format_version",
        "classes",
        "calibrator",
        "objective",
        "thresholds",
        "fits",
        "evidence",
        "guarantee",
        "expected",
        "calibration_data",
        "provenance",
        "model_fingerprint",
    ):
        _need(key in doc, key, "missing", path)
    _need(doc["format"] == POLICY_FORMAT, "format", f"must be {POLICY_FORMAT!r}", path)
    _need(
        doc["format_version"] == POLICY_FORMAT_VERSION,
        "format_version",
        f"must be {POLICY_FORMAT_VERSION}",
        path,
    )
    classes = doc["classes"]
    _need(
        isinstance(classes, list)
        and len(classes) >= 1
        and all(isinstance(c, str) for c in classes),
        "classes",
        "must be a non-empty list of labels",
        path,
    )
    _need(len(set(classes)) == len(classes), "classes", "labels repeat", path)
    cal = doc["calibrator"]
    _need(isinstance(cal, dict) and "method" in cal, "calibrator", "must name a method", path)
    method = cal["method"]
    if method == "temperature":
        _need(
            _is_num(cal.get("temperature")) and cal["temperature"] > 0,
            "calibrator.temperature",
            "must be a positive number",
            path,
        )
    elif method == "isotonic":
        x, y = cal.get("x"), cal.get("y")
        _need(
            isinstance(x, list) and isinstance(y, list) and len(x) == len(y) >= 1,
            "calibrator.x/y",
            "must be lists of equal, non-zero length",
            path,
        )
        _need(all(_is_num(v) for v in x + y), "calibrator.x/y", "must hold numbers", path)
        _need(
            all(a <= b for a, b in itertools.pairwise(x)), "calibrator.x", "must not decrease", path
        )
    else:
        _need(method == "none", "calibrator.method", "must be none, temperature or isotonic", path)
    t = doc["thresholds"]
    _need(isinstance(t, dict), "thresholds", "must be an object", path)
    for key in ("auto", "ask", "per_class", "per_class_default", "margin", "oos", "fallback"):
        _need(key in t, f"thresholds.{key}", "missing", path)
    for key in ("auto", "ask", "margin", "per_class_default"):
        _need(_is_thr(t[key]), f"thresholds.{key}", "must be a number or null", path)
    if t["per_class"] is not None:
        _need(isinstance(t["per_class"], dict), "thresholds.per_class", "must be an object", path)
        for k, v in t["per_class"].items():
            _need(_is_thr(v), f"thresholds.per_class.{k}", "must be a number or null", path)
    if t["oos"] is not None:
        o = t["oos"]
        _need(isinstance(o, dict), "thresholds.oos", "must be an object", path)
        _need(
            o.get("score") in _OOS_SCORES,
            "thresholds.oos.score",
            f"must be one of {_OOS_SCORES}",
            path,
        )
        _need(_is_thr(o.get("cutoff")), "thresholds.oos.cutoff", "must be a number or null", path)
        if o.get("score") == "label_probability":
            _need(o.get("label") in classes, "thresholds.oos.label", "must be one of classes", path)
    _need(t["fallback"] in _FALLBACKS, "thresholds.fallback", f"must be one of {_FALLBACKS}", path)
    g = doc["guarantee"]
    _need(
        isinstance(g, dict) and isinstance(g.get("certified"), bool),
        "guarantee.certified",
        "must be true or false",
        path,
    )
    ev = doc.get("evidence")
    if ev is not None:
        _need(
            isinstance(ev, dict) and isinstance(ev.get("sources"), dict),
            "evidence.sources",
            "must be an object",
            path,
        )
        for k, v in ev["sources"].items():
            _need(
                isinstance(v, dict) and _is_thr(v.get("threshold")),
                f"evidence.sources.{k}.threshold",
                "must be a number or null",
                path,
            )
    _need(isinstance(doc["provenance"], dict), "provenance", "must be an object", path)
    _need(isinstance(doc["calibration_data"], dict), "calibration_data", "must be an object", path)
    obj = doc["objective"]
    _need(
        isinstance(obj, dict) and isinstance(obj.get("fit"), dict),
        "objective.fit",
        "must be an object (the main threshold's fit record)",
        path,
    )
    fits = doc["fits"]
    _need(
        isinstance(fits, dict)
        and set(fits) == {"per_class", "margin"}
        and all(v is None or isinstance(v, dict) for v in fits.values()),
        "fits",
        "must be an object with 'per_class' and 'margin' (each a fit record or null)",
        path,
    )
    _need(isinstance(doc["expected"], dict), "expected", "must be an object", path)
    fp = doc["model_fingerprint"]
    _need(
        fp is None or is_sha256_hex(fp),
        "model_fingerprint",
        "must be null or a model fingerprint (64 lowercase hex digits)",
        path,
    )


# --------------------------------------------------------------------------- consistency

# An out-of-scope cut-off certified on the negated score sits one step above a score of 1.
_ONE_UP = math.nextafter(1.0, 2.0)
# Tolerances: recorded floats come from the very computations re-run here, so they agree
# to the last bit on one machine; the slack only absorbs scipy versions.
_RATIO_TOL = 1e-12
_BOUND_TOL = 1e-9
# The name fit_policy writes for each objective -> the method of the fit it records.
_OBJECTIVE_METHODS = {
    "precision": "certified_precision",
    "empirical": "empirical",
    "coverage": "coverage",
    "cost": "cost",
    "three-way": "three_way",
    "oos": "certified_precision",
}
_CERTIFYING = ("certified_precision", "certified_margin")


class _Contradiction(Exception):
    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message


def _ensure(cond: bool, field: str, message: str) -> None:
    if not cond:
        raise _Contradiction(field, message)


def _check_consistency(
    doc: Mapping[str, Any], path: str | None, *, error: type[Exception] = ArtifactError
) -> None:
    """Refuse a policy whose fields contradict each other (see the module notes).

    Raises ``error`` (an :class:`ArtifactError` naming ``path`` on load, a ``ValueError``
    when building or saving) naming the field.
    """
    try:
        _consistency(doc)
    except _Contradiction as exc:
        message = f"policy field {exc.field!r}: {exc.message}"
        if error is ArtifactError:
            raise ArtifactError(message, path=path) from None
        raise error(message) from None


def _thr(v: Any) -> float:
    """A recorded threshold as a number (``None`` never passes: +inf)."""
    return math.inf if v is None else float(v)


def _probability(v: Any, field: str, upper: float = 1.0) -> None:
    _ensure(
        v is None or (_is_num(v) and 0.0 <= v <= upper),
        field,
        f"{v!r} is not a probability in [0, 1]",
    )


def _same(a: Any, b: Any, field: str, source: str) -> None:
    _ensure(a == b, field, f"{a!r} is not what {source} records ({b!r})")


def _count(v: Any, field: str) -> int:
    _ensure(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        field,
        f"{v!r} is not a count",
    )
    return int(v)


def _accepted(fit: Mapping[str, Any], field: str) -> tuple[int, int, int]:
    """(n, accepted, errors) from a fit's calibration size, coverage and precision."""
    n = _count(fit.get("calibration_size"), f"{field}.calibration_size")
    cov = fit.get("coverage")
    _ensure(_is_num(cov) and 0.0 <= cov <= 1.0, f"{field}.coverage", f"{cov!r} is not a share")
    accepted = round(cov * n)
    _ensure(
        (n > 0 and abs(accepted / n - cov) <= _RATIO_TOL) or (n == 0 and cov == 0.0),
        f"{field}.coverage",
        f"{cov!r} is not a share of {n} calibration items",
    )
    prec = fit.get("precision")
    if accepted == 0:
        _ensure(prec is None, f"{field}.precision", f"{prec!r} but no item is accepted")
        return n, 0, 0
    _ensure(_is_num(prec) and 0.0 <= prec <= 1.0, f"{field}.precision", f"{prec!r} is not a share")
    errors = round((1.0 - prec) * accepted)
    _ensure(
        abs((1.0 - errors / accepted) - prec) <= _RATIO_TOL,
        f"{field}.precision",
        f"{prec!r} is not a share of the {accepted} accepted items",
    )
    return n, accepted, errors


def _check_fit(fit: Any, field: str) -> None:
    """Check one fit record (a threshold fitter's ``summary()``) against its own arithmetic."""
    _ensure(isinstance(fit, dict), field, "must be a fit record (an object)")
    method = fit.get("method")
    certified = fit.get("certified")
    _ensure(isinstance(certified, bool), f"{field}.certified", "must be true or false")
    if method in _CERTIFYING:
        _check_certified(fit, field)
    elif method == "empirical":
        _ensure(not certified, f"{field}.certified", "an empirical threshold certifies nothing")
        target = fit.get("target")
        _same(fit.get("params", {}).get("target"), target, f"{field}.params.target", field)
        _, accepted, errors = _accepted(fit, field)
        _ensure(
            (fit.get("threshold") is None) == (accepted == 0),
            f"{field}.threshold",
            "must be null exactly when nothing is accepted",
        )
        if accepted:
            _ensure(
                1.0 - errors / accepted >= target,
                f"{field}.precision",
                f"{fit.get('precision')!r} is below the target {target!r} the threshold was "
                "chosen to meet",
            )
    elif method == "coverage":
        _check_coverage(fit, field)
    elif method == "cost":
        _ensure(not certified, f"{field}.certified", "a cost threshold certifies nothing")
        _accepted(fit, field)
        shares = fit.get("shares")
        _ensure(
            isinstance(shares, dict)
            and set(shares) == {"auto_route", "ask_user", "human_review"}
            and all(_is_num(v) and 0 <= v <= 1 for v in shares.values())
            and abs(sum(shares.values()) - 1.0) <= 1e-9,
            f"{field}.shares",
            "must be the three zone shares, summing to 1",
        )
        _same(fit.get("coverage"), shares["auto_route"], f"{field}.coverage", f"{field}.shares")
        params = fit.get("params") or {}
        if params.get("cost_ask_user") is None:
            _ensure(
                fit.get("ask_threshold") is None,
                f"{field}.ask_threshold",
                "must be null without an ask-the-user cost",
            )
        else:
            _ensure(
                _thr(fit.get("ask_threshold")) <= _thr(fit.get("threshold")),
                f"{field}.ask_threshold",
                "must not be above the auto-route threshold",
            )
    elif method == "three_way":
        _check_fit(fit.get("auto"), f"{field}.auto")
        _check_fit(fit.get("ask"), f"{field}.ask")
        auto, ask = fit["auto"], fit["ask"]
        _same(fit.get("threshold"), auto.get("threshold"), f"{field}.threshold", f"{field}.auto")
        low = min(_thr(ask.get("threshold")), _thr(auto.get("threshold")))
        _same(
            _thr(fit.get("ask_threshold")),
            low,
            f"{field}.ask_threshold",
            f"the lower of {field}.ask and {field}.auto",
        )
        for key in ("certified", "bound", "precision"):
            _same(fit.get(key), auto.get(key), f"{field}.{key}", f"{field}.auto")
        _ensure(
            _is_num(fit.get("coverage"))
            and abs(fit["coverage"] - auto.get("coverage", math.nan)) <= _RATIO_TOL,
            f"{field}.coverage",
            f"{fit.get('coverage')!r} is not what {field}.auto records",
        )
    elif method == "per_class":
        _check_per_class(fit, field)
    elif method == "out_of_scope":
        _check_oos_fit(fit, field)
    else:
        _ensure(
            not certified,
            f"{field}.certified",
            f"a certificate from method {method!r} cannot be checked; only the built-in "
            "fitters' certificates are accepted",
        )


def _check_certified(fit: Mapping[str, Any], field: str) -> None:
    """A certified-precision (or margin) fit: the bound and the certificate from the counts."""
    params = fit.get("params")
    _ensure(isinstance(params, dict), f"{field}.params", "must be an object")
    target, delta = fit.get("target"), fit.get("delta")
    for key, value in (("target", target), ("delta", delta)):
        _ensure(
            _is_num(value) and 0.0 < value < 1.0, f"{field}.{key}", f"{value!r} is not in (0, 1)"
        )
        _same(params.get(key), value, f"{field}.params.{key}", field)
    n_starts = params.get("n_starts")
    _ensure(
        isinstance(n_starts, int) and not isinstance(n_starts, bool) and n_starts >= 1,
        f"{field}.params.n_starts",
        f"{n_starts!r} is not a positive integer",
    )
    level = delta / n_starts
    certified = fit["certified"]
    threshold, bound = fit.get("threshold"), fit.get("bound")
    _, accepted, errors = _accepted(fit, field)
    if not certified:
        _ensure(threshold is None, f"{field}.threshold", "must be null when not certified")
        _ensure(accepted == 0, f"{field}.coverage", "must be 0 when not certified")
        _ensure(bound is None, f"{field}.bound", "must be null when not certified")
        return
    _ensure(threshold is not None, f"{field}.threshold", "a certified threshold is a number")
    _ensure(accepted > 0, f"{field}.coverage", "a certified threshold accepts some items")
    p_value = float(precision_p_value(errors, accepted, target))
    _ensure(
        p_value <= level,
        f"{field}.certified",
        f"true, but {errors} errors among {accepted} accepted items do not certify precision "
        f"{target:g} at level {level:g} (p-value {p_value:.3g})",
    )
    expected = float(clopper_pearson_lower(accepted - errors, accepted, level))
    _ensure(
        _is_num(bound) and abs(bound - expected) <= _BOUND_TOL,
        f"{field}.bound",
        f"{bound!r} is not the Clopper-Pearson bound of {accepted - errors} correct among "
        f"{accepted} at level {level:g} ({expected!r})",
    )
    _ensure(
        bound >= target - _BOUND_TOL,
        f"{field}.bound",
        f"{bound!r} is below the target {target!r}, so the fit certifies nothing",
    )


def _check_coverage(fit: Mapping[str, Any], field: str) -> None:
    """A coverage fit: the accepted count meets the quantile (or its guarantee)."""
    _ensure(
        not fit["certified"], f"{field}.certified", "a coverage threshold certifies no precision"
    )
    params = fit.get("params") or {}
    cov, delta = fit.get("target_coverage"), fit.get("delta")
    _ensure(
        _is_num(cov) and 0.0 < cov <= 1.0,
        f"{field}.target_coverage",
        f"{cov!r} is not in (0, 1]",
    )
    _same(params.get("coverage"), cov, f"{field}.params.coverage", field)
    _same(params.get("delta"), delta, f"{field}.params.delta", field)
    n, accepted, errors = _accepted(fit, field)
    _ensure(fit.get("threshold") is not None, f"{field}.threshold", "must be a number")
    if delta is None:
        need = max(1, math.ceil(cov * n - 1e-9))
        _ensure(fit.get("bound") is None, f"{field}.bound", "must be null without delta")
    else:
        _ensure(
            _is_num(delta) and 0.0 < delta < 1.0, f"{field}.delta", f"{delta!r} is not in (0, 1)"
        )
        ks = np.arange(1, n + 1)
        ok = np.flatnonzero(stats.beta.sf(cov, ks, n - ks + 1) >= 1 - delta)
        need = int(ok[0]) + 1 if ok.size else n
        expected = float(clopper_pearson_lower(accepted - errors, accepted, delta))
        bound = fit.get("bound")
        _ensure(
            _is_num(bound) and abs(bound - expected) <= _BOUND_TOL,
            f"{field}.bound",
            f"{bound!r} is not the Clopper-Pearson bound of its counts ({expected!r})",
        )
    _ensure(
        accepted >= need,
        f"{field}.coverage",
        f"{accepted} accepted of {n} falls short of the {need} the coverage target {cov:g} needs",
    )


def _check_per_class(fit: Mapping[str, Any], field: str) -> None:
    groups = fit.get("groups")
    _ensure(isinstance(groups, dict) and groups, f"{field}.groups", "must be a non-empty object")
    for name, group in groups.items():
        _check_fit(group, f"{field}.groups.{name}")
        _same(
            group.get("method"), fit.get("base"), f"{field}.groups.{name}.method", f"{field}.base"
        )
    thresholds = fit.get("thresholds")
    pooled = fit.get("pooled_classes")
    _ensure(isinstance(thresholds, dict), f"{field}.thresholds", "must be an object")
    _ensure(
        isinstance(pooled, list) and all(isinstance(c, str) for c in pooled),
        f"{field}.pooled_classes",
        "must be a list of labels",
    )
    pool = groups.get("__pooled__")
    _same(
        fit.get("pool_threshold"),
        None if pool is None else pool.get("threshold"),
        f"{field}.pool_threshold",
        f"{field}.groups.__pooled__",
    )
    _ensure((pool is None) == (not pooled), f"{field}.pooled_classes", "do not match the groups")
    for label, value in thresholds.items():
        source = "__pooled__" if label in pooled else label
        _ensure(source in groups, f"{field}.thresholds.{label}", "has no fitted group")
        _same(
            value,
            groups[source].get("threshold"),
            f"{field}.thresholds.{label}",
            f"{field}.groups.{source}",
        )
    _same(
        fit["certified"],
        all(bool(g.get("certified")) for g in groups.values()),
        f"{field}.certified",
        "its groups",
    )


def _check_oos_fit(fit: Mapping[str, Any], field: str) -> None:
    cutoff = fit.get("cutoff")
    _ensure(_is_thr(cutoff), f"{field}.cutoff", "must be a number or null")
    _same(
        fit["certified"],
        cutoff is not None,
        f"{field}.certified",
        f"{field}.cutoff (null: not certified)",
    )
    delta = fit.get("delta")
    _ensure(_is_num(delta) and 0.0 < delta < 1.0, f"{field}.delta", f"{delta!r} is not in (0, 1)")
    recall, precision = fit.get("recall_target"), fit.get("precision_target")
    _ensure(
        recall is not None or precision is not None,
        f"{field}.recall_target",
        "a cut-off fits a recall target, a precision target or both",
    )
    level = delta / ((recall is not None) + (precision is not None))
    m = _count(fit.get("out_of_scope_items"), f"{field}.out_of_scope_items")
    if recall is not None and fit["certified"]:
        _ensure(_is_num(recall) and 0.0 < recall < 1.0, f"{field}.recall_target", "not in (0, 1)")
        # the most lenient order statistic (the lowest score) certifies recall r with m
        # items only if r ** m <= level
        _ensure(
            m >= 1 and recall**m <= level,
            f"{field}.certified",
            f"true, but {m} out-of-scope items cannot certify recall {recall:g} at level {level:g}",
        )


def _consistency(doc: Mapping[str, Any]) -> None:
    t = doc["thresholds"]
    fit = doc["objective"]["fit"]
    # probability thresholds: calibrated confidences lie in [0, 1]; a margin (top-1 minus
    # top-2 of calibrated probabilities) in [-1, 1] (isotonic rescaling can put the raw top
    # label below another)
    for key in ("auto", "ask", "per_class_default"):
        _probability(t[key], f"thresholds.{key}")
    _ensure(
        t["margin"] is None or -1.0 <= t["margin"] <= 1.0,
        "thresholds.margin",
        f"{t['margin']!r} is not a margin of probabilities in [-1, 1]",
    )
    for label, value in (t["per_class"] or {}).items():
        _probability(value, f"thresholds.per_class.{label}")
    cal = doc["calibrator"]
    if cal["method"] == "isotonic":
        for axis in ("x", "y"):
            for v in cal[axis]:
                _probability(v, f"calibrator.{axis}")
        _ensure(
            all(a <= b for a, b in itertools.pairwise(cal["y"])),
            "calibrator.y",
            "must not decrease (an isotonic map)",
        )
    # the main fit and what is derived from it
    _check_fit(fit, "objective.fit")
    name = doc["objective"].get("name")
    if name in _OBJECTIVE_METHODS:
        _same(
            fit.get("method"),
            _OBJECTIVE_METHODS[name],
            "objective.fit.method",
            f"objective {name!r}",
        )
    if name == "oos":
        _ensure(
            t["oos"] is not None, "thresholds.oos", "the oos objective fits an out-of-scope cut-off"
        )
    _same(t["auto"], fit.get("threshold"), "thresholds.auto", "objective.fit.threshold")
    _same(t["ask"], fit.get("ask_threshold"), "thresholds.ask", "objective.fit.ask_threshold")
    src = fit.get("auto", fit)
    guarantee = {
        "certified": bool(fit.get("certified", False)),
        "target": src.get("target"),
        "delta": src.get("delta"),
        "bound": src.get("bound"),
        "reason": src.get("reason"),
        "required_calibration_size": src.get("required_calibration_size"),
    }
    g = doc["guarantee"]
    _ensure(set(g) == set(guarantee), "guarantee", f"must hold exactly {sorted(guarantee)}")
    for key, value in guarantee.items():
        _same(g[key], value, f"guarantee.{key}", "objective.fit")
    expected = {"coverage": fit.get("coverage"), "precision": fit.get("precision")}
    _same(doc["expected"], expected, "expected", "objective.fit (coverage, precision)")
    # the further gates
    per_class = doc["fits"]["per_class"]
    if per_class is None:
        _ensure(t["per_class"] is None, "thresholds.per_class", "has no fit in fits.per_class")
        _ensure(t["per_class_default"] is None, "thresholds.per_class_default", "has no fit")
    else:
        _check_fit(per_class, "fits.per_class")
        _same(t["per_class"], per_class.get("thresholds"), "thresholds.per_class", "fits.per_class")
        _same(
            t["per_class_default"],
            per_class.get("pool_threshold"),
            "thresholds.per_class_default",
            "fits.per_class.pool_threshold",
        )
    margin = doc["fits"]["margin"]
    if margin is None:
        _ensure(t["margin"] is None, "thresholds.margin", "has no fit in fits.margin")
    else:
        _check_fit(margin, "fits.margin")
        _same(t["margin"], margin.get("threshold"), "thresholds.margin", "fits.margin.threshold")
    oos = t["oos"]
    if oos is not None:
        _check_fit(oos.get("fit"), "thresholds.oos.fit")
        _same(
            oos.get("cutoff"),
            oos["fit"].get("cutoff"),
            "thresholds.oos.cutoff",
            "thresholds.oos.fit",
        )
        if oos["score"] != "external":
            _probability(oos["cutoff"], "thresholds.oos.cutoff", upper=_ONE_UP)
    ev = doc["evidence"]
    if ev is not None:
        for source, entry in ev["sources"].items():
            _check_fit(entry.get("fit"), f"evidence.sources.{source}.fit")
            _same(
                entry["threshold"],
                entry["fit"].get("threshold"),
                f"evidence.sources.{source}.threshold",
                f"evidence.sources.{source}.fit",
            )
    # the recorded label mix
    data = doc["calibration_data"]
    counts = data.get("label_counts")
    if counts is not None:
        _ensure(
            isinstance(counts, dict)
            and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()
            ),
            "calibration_data.label_counts",
            "must map labels to counts",
        )
        n = sum(counts.values())
        _same(data.get("size"), n, "calibration_data.size", "calibration_data.label_counts")
        label = data.get("out_of_scope_label")
        share = counts.get(label, 0) / n if label is not None and n else 0.0
        _ensure(
            _is_num(data.get("out_of_scope_share"))
            and abs(data["out_of_scope_share"] - share) <= _RATIO_TOL,
            "calibration_data.out_of_scope_share",
            f"{data.get('out_of_scope_share')!r} is not the share of {label!r} in label_counts",
        )
