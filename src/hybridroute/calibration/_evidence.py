"""Evidence-completeness checks with thresholds fitted per score source.

A request declares the evidence points it needs (for example ``install_command`` and
``system_requirements``). Retrieval returns items, each with a score from a named source
(a BM25 index, an embedding index...) for one point. An item *covers* its point when its
score reaches the threshold fitted for its source. Scores from different retrievers are on
different scales (BM25 is unbounded, cosine similarity lives in [-1, 1]), so one number
cannot serve both: thresholds are fitted per source, from labelled
``(point, item, score, covered)`` rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._safeio import iter_lines, parse_json
from ..exceptions import DatasetError, InputError, UndeclaredValueError
from . import _record as rec
from ._base import _Estimator, as_flags, as_scores, jsonable_threshold, same_length
from .techniques import CertifiedPrecisionThreshold, ThresholdFitter, read_technique

__all__ = [
    "EvidenceItem",
    "EvidenceResult",
    "EvidenceThresholds",
    "check_evidence",
    "load_evidence_labels",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceItem:
    """One retrieved evidence item, scored by ``source`` for evidence point ``point``.

    Parameters
    ----------
    id : str
        The item's id; :class:`EvidenceResult` lists the ids of covering items.
    source : str
        The retriever that scored it (``bm25``, ``char_tfidf``...); it selects the fitted
        threshold the score is compared with.
    score : float
        The source's score, on that source's own scale (:meth:`coerce` refuses a
        non-finite one).
    point : str
        The evidence point the item was retrieved for.
    """

    id: str
    source: str
    score: float
    point: str

    @classmethod
    def coerce(cls, obj: EvidenceItem | Mapping[str, Any]) -> EvidenceItem:
        """Accept an item or a mapping with ``id``, ``source``, ``score``, ``point``."""
        if isinstance(obj, EvidenceItem):
            return obj
        if not isinstance(obj, Mapping):
            raise ValueError(f"an evidence item must be a mapping, got {type(obj).__name__}")
        missing = [k for k in ("id", "source", "score", "point") if k not in obj]
        if missing:
            raise ValueError(f"evidence item {obj!r:.80} lacks {', '.join(missing)}")
        score = float(obj["score"])
        if not math.isfinite(score):
            raise ValueError(f"evidence item {obj['id']!r} has a non-finite score")
        return cls(
            id=str(obj["id"]), source=str(obj["source"]), score=score, point=str(obj["point"])
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceResult:
    """The outcome of an evidence-completeness check.

    Parameters
    ----------
    required_points : tuple of str
        The points the request declared, in its order, duplicates dropped.
    covered_points, missing_points : tuple of str
        The required points some item covers, and the others (both in declared order).
    evidence_complete : bool
        True exactly when ``missing_points`` is empty.
    evidence_ids : tuple of str
        The items that cover some required point, sorted, once each.
    """

    required_points: tuple[str, ...]
    covered_points: tuple[str, ...]
    missing_points: tuple[str, ...]
    evidence_complete: bool
    evidence_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "required_points": list(self.required_points),
            "covered_points": list(self.covered_points),
            "missing_points": list(self.missing_points),
            "evidence_complete": self.evidence_complete,
            "evidence_ids": list(self.evidence_ids),
        }


def check_evidence(
    required_points: Sequence[str],
    items: Iterable[EvidenceItem | Mapping[str, Any]],
    thresholds: Mapping[str, float | None],
) -> EvidenceResult:
    """Which required points are covered by items scoring at or above their source's threshold.

    Parameters
    ----------
    required_points : sequence of str
        The points the request declares; order is kept, duplicates dropped.
    items : iterable of EvidenceItem or mappings
    thresholds : mapping of source to threshold
        ``None`` (or ``inf``) means the source could not be trusted at fit time: its items
        never count.

    Raises
    ------
    UndeclaredValueError
        An item comes from a source with no fitted threshold.
    """
    required = tuple(dict.fromkeys(str(p) for p in required_points))
    known = {str(k): (math.inf if v is None else float(v)) for k, v in thresholds.items()}
    covered: set[str] = set()
    ids: set[str] = set()
    for raw in items:
        item = EvidenceItem.coerce(raw)
        if item.source not in known:
            raise UndeclaredValueError("evidence source", item.source, tuple(sorted(known)))
        if item.point in required and item.score >= known[item.source]:
            covered.add(item.point)
            ids.add(item.id)
    covered_t = tuple(p for p in required if p in covered)
    missing = tuple(p for p in required if p not in covered)
    return EvidenceResult(
        required_points=required,
        covered_points=covered_t,
        missing_points=missing,
        evidence_complete=not missing,
        evidence_ids=tuple(sorted(ids)),
    )


class EvidenceThresholds(_Estimator):
    """Fit one coverage threshold per evidence source from labelled rows.

    Each source gets its own copy of ``base`` fitted on that source's ``(score, covered)``
    rows, so the threshold means the same thing for every source (by default: an item
    counted as covering its point really does so with certified precision) although the
    raw scores are not comparable.

    Parameters
    ----------
    base : ThresholdFitter or None, default None
        ``None`` uses ``CertifiedPrecisionThreshold(target=0.8, delta=0.1, n_starts=1)``: an
        item counted as covering its point does so at least 80% of the time, with 90%
        confidence (retrieval is noisier than intent routing, and labelled evidence scarcer).

    Attributes
    ----------
    thresholds_ : dict of str to float
        Per source; ``inf`` where the source could not be certified (its items never count).
    sources_ : dict of str to dict
        Each source's fitted summary.
    """

    method = "evidence_per_source"

    def __init__(self, base: ThresholdFitter | None = None) -> None:
        self.base = base

    def fit(self, sources: Sequence[str], scores: Any, covered: Any) -> EvidenceThresholds:
        """Fit on parallel arrays of source name, score and covered label.

        Parameters
        ----------
        sources : sequence of str
            The source that scored each row; every distinct source gets its own fitter.
        scores : array-like of float, shape (n_rows,)
            Each row's score on its source's scale; finite.
        covered : array-like of bool or 0/1, shape (n_rows,)
            Whether the row's item really covers its point (the label).

        Returns
        -------
        EvidenceThresholds
            ``self``, fitted.

        Raises
        ------
        ValueError
            If ``base`` is not a threshold fitter, the arrays differ in length or are
            empty, a score is not finite or a label is not boolean/0/1; the base fitter's
            own errors for a source pass through.
        """
        base = self.base if self.base is not None else _default_evidence_base()
        if not isinstance(base, ThresholdFitter):
            raise ValueError(f"base must be a threshold fitter, got {base!r}")
        src = np.asarray([str(s) for s in sources], dtype=object)
        s = as_scores(scores)
        c = as_flags(covered, "covered")
        same_length(sources=src, scores=s, covered=c)
        fitted: dict[str, ThresholdFitter] = {}
        for name in sorted(set(src.tolist())):
            mask = src == name
            fitted[name] = base._clone().fit(s[mask], c[mask])
        self.fitted_sources_ = fitted
        self.thresholds_ = {k: float(f.threshold_) for k, f in fitted.items()}
        self.sources_ = {k: f.to_state() for k, f in fitted.items()}
        return self

    def fit_records(self, records: Iterable[Mapping[str, Any]]) -> EvidenceThresholds:
        """Fit on rows with ``source``, ``score`` and ``covered`` keys."""
        rows = list(records)
        return self.fit(
            [r["source"] for r in rows], [r["score"] for r in rows], [r["covered"] for r in rows]
        )

    def check(
        self, required_points: Sequence[str], items: Iterable[EvidenceItem | Mapping[str, Any]]
    ) -> EvidenceResult:
        """Check a request's evidence against the fitted thresholds (see :func:`check_evidence`)."""
        self._check_fitted("thresholds_")
        return check_evidence(required_points, items, self.thresholds_)

    def to_state(self) -> dict[str, Any]:
        """Per-source thresholds and fits as plain JSON values (what a policy records)."""
        self._check_fitted("thresholds_")
        return {
            "method": self.method,
            "sources": {
                k: {"threshold": jsonable_threshold(v), "fit": self.sources_[k]}
                for k, v in self.thresholds_.items()
            },
        }

    summary = to_state

    @classmethod
    def from_state(cls, state: Any, field: str = "evidence") -> EvidenceThresholds:
        """The fitted thresholds from their record, each source's fit checked.

        Each source decides by its fit's threshold (``sources.<name>.threshold`` is a copy
        of it that a policy checks).
        """
        sources = state.get("sources") if isinstance(state, dict) else None
        rec.ensure(isinstance(sources, dict), f"{field}.sources", "must be an object")
        assert isinstance(sources, dict)
        fitted: dict[str, ThresholdFitter] = {}
        for name, entry in sources.items():
            rec.ensure(isinstance(entry, dict), f"{field}.sources.{name}", "must be an object")
            fit = read_technique(entry.get("fit"), f"{field}.sources.{name}.fit")
            rec.ensure(
                isinstance(fit, ThresholdFitter),
                f"{field}.sources.{name}.fit.method",
                "must be a single-threshold fitter",
            )
            fitted[name] = fit  # type: ignore[assignment]
        first = next(iter(fitted.values()), None)
        out = cls(None if first is None else first._clone())
        out.fitted_sources_ = fitted
        out.thresholds_ = {k: float(f.threshold_) for k, f in fitted.items()}
        out.sources_ = {k: f.to_state() for k, f in fitted.items()}
        return out


_ROW_KEYS = ("request_id", "point", "item_id", "source", "score", "covered")
#: Most bytes of an evidence-labels file (the bundled one is 175 KB).
MAX_EVIDENCE_BYTES = 256 * 1024 * 1024
#: Longest line of an evidence-labels file (a row is about 150 bytes).
MAX_EVIDENCE_LINE_BYTES = 1_000_000


def load_evidence_labels(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Read labelled evidence rows from a JSONL file (``None``: the bundled support set).

    Each line is an object with ``request_id``, ``point``, ``item_id``, ``source``,
    ``score`` (number) and ``covered`` (boolean); other keys (``rank``, ``split``) are kept.
    The bundled rows hold real scores of two retrievers (``bm25`` and ``char_tfidf``) over
    the support help-centre articles; see ``calibration/data/README.md``.

    The file is read through :mod:`hybridroute._safeio`: a regular file of at most
    :data:`MAX_EVIDENCE_BYTES`, strict UTF-8, each line parsed strictly (a duplicate key,
    deep nesting, a huge integer or ``NaN`` is refused, naming the line).

    Raises
    ------
    DatasetError
        Naming the file, the 1-based line and the field at fault.
    """
    p = bundled_evidence_path() if path is None else Path(path)
    rows = []
    try:
        for lineno, line in iter_lines(
            p,
            limit=MAX_EVIDENCE_BYTES,
            line_limit=MAX_EVIDENCE_LINE_BYTES,
            what="file of evidence labels",
        ):
            if not line.strip():
                continue
            rows.append(_evidence_row(parse_json(line, source=str(p), line=lineno), p, lineno))
    except InputError as exc:
        raise DatasetError(exc.reason, path=str(p), row=exc.line) from None
    if not rows:
        raise DatasetError("no labelled rows", path=str(p))
    return rows


def _evidence_row(row: Any, p: Path, lineno: int) -> dict[str, Any]:
    """One checked evidence row (``DatasetError`` naming file, line and field)."""
    if not isinstance(row, dict):
        raise DatasetError("each line must be a JSON object", path=str(p), row=lineno)
    for key in _ROW_KEYS:
        if key not in row:
            raise DatasetError("missing field", path=str(p), row=lineno, column=key)
        value = row[key]
        if isinstance(value, str) and "\x00" in value:
            # "bm25\x00" would be a source of its own, with its own threshold
            raise DatasetError("holds a NUL character", path=str(p), row=lineno, column=key)
    score = row["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise DatasetError("score must be a finite number", path=str(p), row=lineno, column="score")
    if not isinstance(row["covered"], bool):
        raise DatasetError(
            "covered must be true or false", path=str(p), row=lineno, column="covered"
        )
    return row


def _default_evidence_base() -> CertifiedPrecisionThreshold:
    return CertifiedPrecisionThreshold(target=0.8, delta=0.1, n_starts=1)


def bundled_evidence_path() -> Path:
    """Path of the labelled evidence rows shipped for the support-tickets example."""
    return Path(__file__).resolve().parent / "data" / "support_evidence_labels.jsonl"
