"""Bring your own model: a model trained elsewhere as a router classifier.

* :class:`SklearnAdapter` -- any trained scikit-learn classifier of texts (anything with
  ``predict_proba`` and ``classes_``: a TF-IDF + logistic-regression ``Pipeline``, a
  ``CalibratedClassifierCV``...).
* :class:`FunctionAdapter` -- any ``texts -> probabilities`` callable over a declared label
  set (a fine-tuned transformer behind your code, a vendor API, an LLM's label
  probabilities).

Both are :class:`~hybridroute.classifiers.IntentClassifier` s: a router, ``route``,
``serve``, ``evaluate`` and replay use them like the built-in classifiers. ``fit()`` does
not train -- the model is trained already -- it checks the model and reads its label set.

**Saving and loading never unpickle.** ``save(path)`` writes a directory with a sealed
manifest like every classifier; ``load_classifier`` / ``load_router`` read it back:

* a scikit-learn estimator is written in the skops format (by default), and loading builds
  only the types skops trusts by default -- scikit-learn estimators, numpy, scipy,
  builtins -- plus the type names this process trusts;
* a callable -- or an estimator given ``reference=`` -- is written **by reference**
  (``"package.module:attribute"``): loading imports it only when this process trusts that
  exact reference.

Trust is given by the process, never by the saved files: :func:`trust` in Python, or the
comma-separated environment variable ``HYBRIDROUTE_TRUSTED_MODEL_CODE`` (for ``hybridroute
serve`` / ``route``). Loading also re-scores the recorded **probe** texts and refuses a model
whose scores changed.

**Model fingerprint.** As for every classifier, the SHA-256 of kind, classes, saved state
(storage, reference, ``model_id``, probe texts and scores) and file checksums (the skops
archive): ``adapter.fingerprint()``. A policy fitted on this model's scores binds to it
with ``fit_policy(..., model_fingerprint=adapter.fingerprint())``, or
``hybridroute.scores.calibrate_scores(table, model_fingerprint=...)`` /
``hybridroute calibrate --scores FILE --model DIR`` for scores computed outside Python;
``save_router`` and ``load_router`` then refuse to pair the policy with any other model.
"""

from __future__ import annotations

from .._persistence import register_kind, registered_kinds
from ._common import PROBA_SUM_TOLERANCE, PROBE_TOLERANCE, check_scores
from ._function import FunctionAdapter
from ._sklearn import DEFAULT_PROBE_TEXTS, SklearnAdapter
from ._trust import TRUSTED_CODE_ENV, trust, trusted

__all__ = [
    "DEFAULT_PROBE_TEXTS",
    "PROBA_SUM_TOLERANCE",
    "PROBE_TOLERANCE",
    "TRUSTED_CODE_ENV",
    "FunctionAdapter",
    "SklearnAdapter",
    "check_scores",
    "trust",
    "trusted",
]

# The kinds load_classifier maps to the adapters. Until the kind registry of
# hybridroute.classifiers lists them itself, importing this package registers them.
_KINDS = {
    "sklearn": "hybridroute.classifiers.adapter:SklearnAdapter",
    "function": "hybridroute.classifiers.adapter:FunctionAdapter",
}
for _kind, _target in _KINDS.items():
    if _kind not in registered_kinds():
        register_kind(_kind, _target)
