"""The policy artifact: a frozen chain of fitted parts in a sealed envelope.

A :class:`Policy` is what the router loads. In memory it holds its fitted parts -- the
calibrator, the out-of-scope gate, the auto-route technique (or per-class thresholds), the
margin gate, the fallback and the evidence thresholds (:class:`~._policy_doc.Chain`) --
and :meth:`Policy.apply` walks them for each item. On disk it is a plain JSON document (no
code, no pickles), written from those parts:

* ``calibrator`` -- ``none``, ``temperature`` (with ``temperature``) or ``isotonic`` (knots);
* ``objective`` -- its ``name`` and ``fit``, the auto-route technique's record;
* ``thresholds`` -- the gate values: ``auto`` (auto-route at or above; ``null``: nothing
  is auto-routed), ``ask`` (ask the user at or above; ``null``: no ask zone), ``per_class``
  and ``per_class_default``, ``margin`` (top-1 minus top-2), ``oos`` (score definition,
  cut-off and its ``fit``) and ``fallback`` (what happens below every threshold);
* ``fits`` -- the ``per_class`` and ``margin`` records;
* ``evidence`` -- per-source evidence thresholds and their records;
* ``guarantee`` / ``expected`` -- whether the target is certified, the bound, and the
  coverage expected (copies of the auto-route record);
* ``calibration_data`` -- size, label counts and out-of-scope share of the calibration set
  (a certified threshold holds for traffic like it; see :meth:`Policy.check_label_mix`);
* ``provenance`` -- dataset fingerprint, split seed, model, command... (free-form, plain);
* ``model_fingerprint`` -- the fingerprint of the classifier the policy was fitted on
  (:meth:`hybridroute.classifiers.IntentClassifier.fingerprint`), or ``null``;
* ``format`` / ``format_version`` (3; version 2 files, the same fields, are read too) /
  ``library_version``, and the seal: ``content_sha256`` and, when
  ``HYBRIDROUTE_SIGNING_KEY`` is set at write time, ``signature``.

Same inputs give byte-identical files: keys are sorted, floats are written with Python's
shortest round-trip ``repr`` (so loading gives back the same floats exactly), and nothing
time- or machine-dependent is recorded (a signature is deterministic too). A policy read
from a file writes back the very document it was read from.

Loading (:meth:`Policy.load` / :meth:`Policy.from_dict`) refuses, with an
:class:`~hybridroute.exceptions.ArtifactError` naming the file and the field:

* a file that is not strict JSON (read through :mod:`hybridroute._safeio`: a byte limit,
  no duplicate keys, no NaN, no deep nesting) or whose format version this library does
  not read;
* a broken seal: ``content_sha256`` (the SHA-256 of the canonical JSON of the document
  without its seal) missing or not matching, or a signature refused by the rules of
  :mod:`hybridroute._integrity` (signed without the key set, a wrong key, unsigned while
  the key is set);
* a malformed field, and **fields that contradict each other**: each record is read back by
  its own technique (``from_state``), which re-derives its certificate from its recorded
  counts (the Clopper-Pearson bound at its level, the p-value against the target, the
  starts and levels of a sequence) and refuses one they do not give; a gate value that is
  not the one its record gives, a ``guarantee`` or ``expected`` block that is not the
  fit's, a probability threshold outside [0, 1], a certificate from a technique this
  library cannot check.

The plain hash catches accidents, and the consistency checks catch edits that break the
arithmetic of a certificate; neither stops someone who rewrites a whole fit record
consistently and recomputes the hash. Signing does.

A policy built from fitted parts (:meth:`Policy.build`, :func:`fit_policy`) keeps them and
writes them: their records are not read back through these checks.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import _safeio
from .._atomic import write_atomic
from .._integrity import content_hash, is_sha256_hex, seal, verify
from .._ranking import complete_ranking
from .._version import __version__
from ..contracts import ReasonCode
from ..exceptions import ArtifactError, InputError, UndeclaredValueError
from ._base import ASK_USER, AUTO_ROUTE, FALLBACKS, HUMAN_REVIEW, OUT_OF_SCOPE, as_proba
from ._drift import LabelMixDeparture, label_mix_departure
from ._evidence import EvidenceItem, EvidenceResult
from ._policy_doc import (
    OOS_SCORES,
    POLICY_FORMAT,
    POLICY_FORMAT_VERSION,
    POLICY_MAX_BYTES,
    READ_VERSIONS,
    Chain,
    OutOfScopeGate,
    check_built,
    check_envelope,
    plain,
    read_parts,
    write_document,
)
from ._policy_doc import calibration_data as _calibration_data_of
from ._policy_outcome import PolicyOutcome
from .calibrators import IsotonicCalibration, TemperatureScaling
from .techniques import Technique

__all__ = ["POLICY_FORMAT", "POLICY_FORMAT_VERSION", "Policy", "PolicyOutcome"]


def _content_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``doc`` without its seal fields."""
    return content_hash(doc)


def _fitted_threshold(threshold: Any) -> Technique:
    if not (isinstance(threshold, Technique) and hasattr(threshold, "threshold_")):
        raise ValueError("threshold must be a fitted threshold fitter")
    return threshold


class Policy:
    """A fitted routing policy: calibrator, thresholds, evidence thresholds, provenance.

    Build one from fitted estimators with :meth:`build` (or :func:`fit_policy`), write it
    with :meth:`save`, read it back with :meth:`load`, and apply it to a classifier's
    ranked labels with :meth:`apply` (one item) or to a probability matrix with
    :meth:`apply_proba`.
    """

    __slots__ = ("_chain", "_checked", "_doc", "_index")

    def __init__(self, document: Mapping[str, Any], *, path: str | None = None) -> None:
        """Read a policy document held in memory.

        The seal fields (``content_sha256``, ``signature``) are dropped: an object in
        memory is trusted as given. Every field's shape and every fit record are checked;
        the gate values (``thresholds``, evidence thresholds) may have been edited in memory
        (as experiments do) and are applied as written, while :meth:`save` (like
        :meth:`from_dict`) refuses a document whose gate values their records do not give.
        """
        doc = plain(document)
        doc.pop("content_sha256", None)
        doc.pop("signature", None)
        self._set(read_parts(doc, path, strict=False), doc, checked=False)

    def _set(self, chain: Chain, doc: dict[str, Any], *, checked: bool) -> None:
        self._chain = chain
        self._doc = doc
        # a policy built from fitted parts, or read with every check, is saved as it is
        self._checked = checked
        self._index = {c: i for i, c in enumerate(doc["classes"])}

    @classmethod
    def _of(cls, chain: Chain, doc: dict[str, Any], *, checked: bool) -> Policy:
        policy = object.__new__(cls)
        policy._set(chain, doc, checked=checked)
        return policy

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
        """Assemble a policy from fitted estimators (kept as its parts).

        Parameters
        ----------
        classes : sequence of str
            The classifier's label set, in the column order of its probabilities.
        threshold : fitted threshold technique
            The auto-route one: a :class:`CertifiedPrecisionThreshold`,
            :class:`EmpiricalThreshold`, :class:`CoverageThreshold`, :class:`CostThreshold`
            or :class:`ThreeWayThreshold` (the last two also give the ask-the-user zone).
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
            A malformed or unfitted argument, a threshold outside what its gate compares
            (a confidence outside [0, 1]...), an objective its technique does not fit, or a
            certificate from a technique no reader could check.
        """
        threshold = _fitted_threshold(threshold)
        labels = [str(c) for c in classes]
        if not labels or len(set(labels)) != len(labels):
            raise ValueError(f"classes must be a non-empty list of distinct labels, got {labels!r}")
        if model_fingerprint is not None and not is_sha256_hex(model_fingerprint):
            raise ValueError(
                f"a model fingerprint is 64 lowercase hex digits, got {model_fingerprint!r}"
            )
        if calibrator is not None and not isinstance(
            calibrator, TemperatureScaling | IsotonicCalibration
        ):
            raise ValueError(f"calibrator must be a fitted calibrator or None, got {calibrator!r}")
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {FALLBACKS}, got {fallback!r}")
        gate = None
        if oos is not None:
            if oos_score not in OOS_SCORES:
                raise ValueError(f"oos_score must be one of {OOS_SCORES}, got {oos_score!r}")
            if oos_score == "label_probability" and oos_label not in labels:
                raise ValueError("oos_score='label_probability' needs oos_label among classes")
            gate = OutOfScopeGate(
                oos, oos_score, oos_label if oos_score == "label_probability" else None
            )
        chain = Chain(calibrator, gate, threshold, per_class, margin, fallback, evidence)
        size = getattr(threshold, "n_calibration_", None)
        doc = write_document(
            chain,
            classes=labels,
            objective=objective,
            calibration_data=_calibration_data_of(size, calibration_labels, out_of_scope_label),
            provenance=dict(provenance or {}),
            model_fingerprint=model_fingerprint,
        )
        check_built(doc)
        return cls._of(chain, doc, checked=True)

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
        return self._of(self._chain, doc, checked=self._checked)

    def with_refit_threshold(
        self,
        threshold: Any,
        *,
        calibration_labels: Iterable[str] | None = None,
        calibration_data: Mapping[str, Any] | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> Policy:
        """This policy with its main threshold refitted on its own calibrated confidence.

        Calibrator, margin / out-of-scope / evidence gates, label set and model binding are
        kept: the new policy auto-routes only where the old gates pass and the new
        threshold is met (used by :func:`hybridroute.monitoring.recalibrate_from_log`).

        Parameters
        ----------
        threshold : fitted threshold fitter
            Fitted on this policy's calibrated confidence; a method its objective accepts.
        calibration_labels, calibration_data, provenance : optional
            The rows' true labels; further ``calibration_data`` fields; the new provenance.

        Raises
        ------
        ValueError
            An ask zone or per-class thresholds, an unfitted fitter, a contradictory result.
        """
        threshold = _fitted_threshold(threshold)
        t = self._doc["thresholds"]
        if t["ask"] is not None or t["per_class"] is not None:
            raise ValueError(
                "only a policy with one auto-route threshold (no ask-the-user zone, no "
                "per-class thresholds) can have its threshold refitted"
            )
        old = self._doc
        data = _calibration_data_of(
            getattr(threshold, "n_calibration_", None),
            calibration_labels,
            old["calibration_data"].get("out_of_scope_label"),
        )
        data.update(calibration_data or {})
        chain = dataclasses.replace(self._chain, route=threshold)
        doc = write_document(
            chain,
            classes=old["classes"],
            objective=old["objective"]["name"],
            calibration_data=data,
            provenance=dict(provenance or {}),
            model_fingerprint=old["model_fingerprint"],
        )
        check_built(doc)
        check_envelope(doc)
        return self._of(chain, doc, checked=self._checked)

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
        """Write the sealed (and, with a key set, signed) document as UTF-8 JSON, atomically.

        A policy built from a document edited in memory is checked as :meth:`load` checks a
        file first, and refused (``ValueError``) where loading would refuse it. Returns the
        path.
        """
        if not self._checked:
            try:
                read_parts(self._doc, None, strict=True)
            except ArtifactError as exc:
                raise ValueError(str(exc)) from None
        return write_atomic(path, self.to_json())

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
        if version not in READ_VERSIONS:
            raise ArtifactError(
                f"incompatible policy format version {version!r}; hybridroute {__version__} "
                f"reads versions {', '.join(map(str, READ_VERSIONS))} (written by hybridroute "
                f"{doc.get('library_version', '?')}; refit the policy with this version)",
                path=path,
            )
        body = verify(doc, path=path, what="policy")
        try:
            body = plain(body)
        except ValueError as exc:
            raise ArtifactError(str(exc), path=path) from None
        return cls._of(read_parts(body, path, strict=True), body, checked=True)

    # ------------------------------------------------------------------ applying

    def calibrate(self, proba: Any) -> np.ndarray:
        """Calibrated probabilities for a matrix ``(n_items, n_classes)`` in ``classes`` order."""
        return self._calibrate(as_proba(proba))

    def _calibrate(self, p: np.ndarray, top: np.ndarray | None = None) -> np.ndarray:
        if p.shape[1] != len(self._index):
            raise ValueError(
                f"proba has {p.shape[1]} columns; the policy's label set has {len(self._index)}"
            )
        calibrator = self._chain.calibrator
        if calibrator is None:
            return p / p.sum(axis=1, keepdims=True)
        return calibrator.calibrate_rows(p, top)

    def apply_proba(
        self,
        proba: Any,
        oos_scores: Sequence[float] | None = None,
        *,
        top: Sequence[int] | None = None,
    ) -> list[PolicyOutcome]:
        """Outcomes for a probability matrix whose columns follow ``classes``.

        Each row's label is its best column, or the column ``top`` names. :meth:`apply` goes
        through the same scoring (one row built from the ranking), so both give the same
        outcome for the same scores.

        Parameters
        ----------
        proba : array-like of shape (n_items, n_classes)
            Raw classifier probabilities (rows are normalised before calibration).
        oos_scores : sequence of float, optional
            One per row; needed when the policy's out-of-scope score is ``external``.
        top : sequence of int, optional
            The column of each row's label, when the classifier named it (the first label
            of its ranking): a row completed from a partial ranking can give an unranked
            label more mass than the named one, and the policy must judge the named label,
            never one the classifier did not give. Default: each row's best column.
        """
        raw = as_proba(proba)
        if top is None:
            cols = raw.argmax(axis=1)
        else:
            cols = np.asarray(top, dtype=int)
            if cols.shape != (len(raw),) or (
                len(cols) and (cols.min() < 0 or cols.max() >= raw.shape[1])
            ):
                raise ValueError(f"top must give one column in [0, {raw.shape[1]}) per row")
        return self._outcomes(raw, cols, oos_scores)

    def _outcomes(
        self, raw: np.ndarray, top: np.ndarray, oos_scores: Sequence[float] | None
    ) -> list[PolicyOutcome]:
        """The one scoring path: calibrate the rows, then read each row's confidence (its
        ``top`` column), runner-up and out-of-scope score, and walk the chain."""
        p = self._calibrate(raw, top)
        classes = self._doc["classes"]
        # the label never changes; only the scores are recalibrated
        if len(p) == 1:
            # one item (the router's single-ticket path): plain floats beat numpy's
            # per-call overhead on one short row, with the very same values
            only = p[0].tolist()
            t0 = int(top[0])
            conf_1 = only[t0]
            only[t0] = -math.inf
            conf, second = [conf_1], [max(only)]
        else:
            rows = np.arange(len(p))
            conf = p[rows, top]
            rest = p.copy()
            rest[rows, top] = -np.inf
            second = rest.max(axis=1)
        if oos_scores is not None and len(oos_scores) != len(p):
            raise ValueError(f"oos_scores has {len(oos_scores)} entries for {len(p)} items")
        gate = self._chain.out_of_scope
        label_col = (
            self._index[gate.label]
            if gate is not None and gate.score == "label_probability" and gate.label is not None
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

        The ranking becomes one probability row and goes through the scoring of
        :meth:`apply_proba`: a full ranking gives exactly the outcome :meth:`apply_proba`
        gives for its row. A partial ranking (``rank(texts, k=...)`` with ``k`` below the
        number of classes, or an LLM that names fewer labels) is completed as the router
        and the LLM classifier's ``predict_proba`` complete it
        (:func:`hybridroute._ranking.complete_ranking`): the labels not ranked share
        equally the mass ``1 - sum(scores)`` the ranking left. What that means:

        * without a calibrator, or with an isotonic one, the confidence depends on the best
          label's score alone and the runner-up on the best two, so the top ``k >= 2`` of
          a probability row give the outcome of the whole row (up to rounding: a share is
          at most the ``k``-th score, so it never outranks the runner-up); with ``k == 1``
          the runner-up is the shared mass (at most the true runner-up, so the margin is
          an upper bound);
        * an out-of-scope score that is the probability of a label not ranked is that
          label's share;
        * a temperature calibrator rescales every class's score, so it needs them all: a
          partial ranking is refused (``ValueError`` naming the ``k`` to rank with).

        The label is always the ranking's first, even where its score ties another's.

        Parameters
        ----------
        ranked : RankedLabels-like
            An object with ``labels`` and ``scores`` (best first, raw classifier
            probabilities) and ``abstain_reason``.
        oos_score : float, optional
            Needed when the policy's out-of-scope score is ``external``.

        Raises
        ------
        UndeclaredValueError
            A ranked label outside the policy's label set.
        ValueError
            Labels and scores of different lengths, a label ranked twice, a score that is
            negative or not finite, scores that are all zero, or a partial ranking under a
            temperature calibrator.
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
        row = self._ranked_row(labels, scores)
        top = np.array([self._index[labels[0]]])
        return self._outcomes(row, top, None if oos_score is None else [oos_score])[0]

    def _ranked_row(self, labels: tuple[str, ...], scores: tuple[float, ...]) -> np.ndarray:
        """The probability row ``(1, n_classes)`` of a ranking (see :meth:`apply`)."""
        index = self._index
        n = len(index)
        try:
            cols = [index[lab] for lab in labels]
        except KeyError as exc:
            raise UndeclaredValueError("label", exc.args[0], self.classes) from None
        if len(set(cols)) != len(cols):
            twice = next(lab for i, lab in enumerate(labels) if lab in labels[:i])
            raise ValueError(f"label {twice!r} is ranked twice")
        if len(cols) < n and getattr(self._chain.calibrator, "needs_every_score", False):
            raise ValueError(
                "this policy's temperature calibration needs every class's score; "
                f"rank with k={n} (got {len(cols)} labels)"
            )
        row = complete_ranking(cols, scores, n)[None, :]
        as_proba(row, "ranked scores")
        if not row.sum() > 0:
            raise ValueError("ranked scores are all zero")
        return row

    def _decide(
        self, label: str, conf: float, margin: float, external_oos: float | None
    ) -> PolicyOutcome:
        """Walk the chain for one item: out of scope, auto-route (per class), margin, then
        the ask-the-user zone or the fallback below the threshold."""
        chain = self._chain
        oos_value: float | None = None

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

        gate = chain.out_of_scope
        if gate is not None:
            if gate.score == "one_minus_confidence":
                oos_value = 1.0 - conf
            elif external_oos is None:
                raise ValueError("this policy's out-of-scope cut-off needs oos_score=")
            else:
                oos_value = float(external_oos)
            flag = gate.fit.decide(oos_value)
            if not flag.passed:
                return outcome(OUT_OF_SCOPE, ReasonCode.OUT_OF_SCOPE.value, flag.threshold, "oos")
        route = (chain.per_class or chain.route).decide(conf, label)
        name = route.name or "auto"
        if route.passed:
            if chain.margin is not None:
                held = chain.margin.decide(margin)
                if not held.passed:
                    return outcome(ASK_USER, ReasonCode.LOW_MARGIN.value, held.threshold, "margin")
            return outcome(AUTO_ROUTE, ReasonCode.CONFIDENT_INTENT.value, route.threshold, name)
        ask = chain.route.ask_zone(conf)
        if ask is not None:
            if ask.passed:
                return outcome(ASK_USER, ReasonCode.LOW_CONFIDENCE.value, ask.threshold, "ask")
            return outcome(HUMAN_REVIEW, ReasonCode.NEEDS_REVIEW.value, ask.threshold, "ask")
        not_certified = not self.certified and route.threshold is None
        reason = ReasonCode.NOT_CERTIFIED if not_certified else ReasonCode.LOW_CONFIDENCE
        return outcome(chain.fallback, reason.value, route.threshold, name)

    # ------------------------------------------------------------------ checks

    def check_evidence(
        self, required_points: Sequence[str], items: Iterable[EvidenceItem | Mapping[str, Any]]
    ) -> EvidenceResult:
        """Evidence completeness with this policy's per-source thresholds."""
        if self._chain.evidence is None:
            raise ValueError("this policy holds no evidence thresholds")
        return self._chain.evidence.check(required_points, items)

    def check_label_mix(
        self,
        observed: Mapping[str, float] | Iterable[str],
        *,
        max_tv: float = 0.1,
        alpha: float = 0.01,
    ) -> LabelMixDeparture:
        """Compare a label mix (counts or labels) with the recorded calibration mix.

        Parameters
        ----------
        observed : mapping of label to count, or iterable of labels
            The mix to check (a set's gold labels, or live traffic's); counts must be
            finite and non-negative, not all zero.
        max_tv, alpha : float, default 0.1, 0.01
            The mix departs when its total variation is at least ``max_tv`` (in [0, 1])
            and a chi-square test rejects "same mix" at level ``alpha`` (in (0, 1)); see
            :func:`label_mix_departure`.

        Raises
        ------
        ValueError
            If the policy recorded no calibration label mix, or an argument is invalid.
        """
        counts = self._doc["calibration_data"].get("label_counts")
        if not counts:
            raise ValueError("this policy did not record its calibration label mix")
        return label_mix_departure(counts, observed, max_tv=max_tv, alpha=alpha)
