"""Scores from your own model: read a scores file, fit and certify a policy on it, evaluate.

For a model hybridroute did not train -- a fine-tuned transformer, a vendor API, an LLM's
label probabilities -- write its scores on labelled calibration rows to a file, then:

* :func:`read_scores` -- read and check the file into a :class:`ScoresTable`;
* :func:`calibrate_scores` -- fit and certify a policy on it with
  :func:`hybridroute.calibration.fit_policy` (the objectives and options of
  ``hybridroute calibrate``), bind it to the model, and evaluate it on held-out rows or a
  test file; ``hybridroute calibrate --scores FILE`` runs it;
* :func:`evaluate_scores` -- the evaluation alone (``hybridroute evaluate``'s metrics).

To route with the policy, wrap the same model in an adapter
(:mod:`hybridroute.classifiers.adapter`) and bind the policy to it: pass
``model_fingerprint=adapter.fingerprint()`` (or ``--model DIR`` of the saved adapter).

The scores file
---------------

One row per labelled item. CSV (a header row), JSON Lines (one object per line) or
Parquet (needs pyarrow, which hybridroute's MLflow dependency installs). Columns:

==================  ==========  =========================================================
column              required    meaning
==================  ==========  =========================================================
``label``           yes         the gold label (a string)
``id``              no          a unique row id (string; JSONL also an integer)
``text``            no          the item's text (kept for your reference)
``score:<label>``   one layout  the model's probability of ``<label>``: one column per
                                class; the columns' order is the class order
``scores``          one layout  (JSONL) the same as an object ``{"<label>": p, ...}``,
                                or an array in the header's ``classes`` order
``predicted``,      one layout  the model's top label and its probability, when the
``confidence``                  model gives no other class's score
==================  ==========  =========================================================

Example (CSV, per-class)::

    id,label,score:billing,score:shipping,score:other
    t1,billing,0.91,0.06,0.03
    t2,other,0.20,0.15,0.65

A JSONL file may begin with a header line, and a Parquet file may hold the same object
as JSON in its schema metadata under the key ``"hybridroute.scores"``::

    {"format": "hybridroute.scores", "version": 1, "classes": ["billing", "shipping", "other"],
     "model_fingerprint": "<64 hex digits: the model's fingerprint>"}

``classes`` fixes the label set and its order (needed for ``scores`` arrays, and for a
top-label file whose rows do not name every class); ``model_fingerprint`` declares which
model the scores come from, and a policy fitted on the file binds to it.

What is checked (each refusal names the file, row and column; CLI exit 2): the file is
a regular file under the byte limit (1 GiB; ``HYBRIDROUTE_MAX_SCORES_BYTES``), UTF-8, with
no duplicate JSON keys, NaN or Infinity; every column is one of the above and every row
has the same fields; each score is a number in [0, 1] and a row's scores sum to 1 (within
``PROBA_SUM_TOLERANCE``, 0.001); a top label's confidence is above 1 / (number of
classes) (or it could not be the top label); gold labels and predicted labels are among
the classes (a gold label may also be the out-of-scope label); ids are unique.

The label set is, in this order of precedence: the model's classes when given
(``read_scores(classes=...)``, ``--model``), whose order the per-class scores are put in;
the header's ``classes``; the ``score:`` columns (or the first row's ``scores`` keys); for
a top-label file, the sorted labels the file names.

Binding: a policy fitted on the file records the fingerprint of the model given
(``model_fingerprint=``), else of the model the header declares, else of the file itself
(the SHA-256 of its bytes, ``sha256sum FILE``). Its provenance always records
``scores_fingerprint``.
"""

from __future__ import annotations

from ._calibrate import calibrate_scores, evaluate_scores
from ._read import (
    MAX_SCORES_BYTES,
    MAX_SCORES_BYTES_ENV,
    SCORES_FORMAT,
    SCORES_FORMAT_VERSION,
    read_scores,
)
from ._table import PER_CLASS, TOP_LABEL, ScoresTable

__all__ = [
    "MAX_SCORES_BYTES",
    "MAX_SCORES_BYTES_ENV",
    "PER_CLASS",
    "SCORES_FORMAT",
    "SCORES_FORMAT_VERSION",
    "TOP_LABEL",
    "ScoresTable",
    "calibrate_scores",
    "evaluate_scores",
    "read_scores",
]
