"""The local classifier: TF-IDF (word 1-2 + character 2-5 grams) into logistic regression.

This is the embedded default and the cheap first stage of a cascade. Two things shape
the implementation:

* **Hyper-parameters are chosen on validation data only.** The inverse regularisation
  strength ``C`` is picked from a small grid by accuracy on validation rows: those the
  caller passes (``fit(..., validation=(texts, labels))``), or else a seeded, stratified
  share carved from the training rows. A carved share goes back into training for the
  final fit; a validation set the caller passed is never trained on.
* **Prediction is lean.** scikit-learn's vectorizers and pipeline cost more per call than
  the whole prediction of one text. The fitted model is therefore reduced to plain data
  -- two vocabularies, one idf vector, one weight matrix, one intercept -- and scored by
  our own analyzer and one sparse-times-dense product. Training builds its feature matrix
  through the very same code, so what was fitted is exactly what is served, and the
  saved model (vocabularies in JSON, arrays in ``.npz``) holds no code.

The featurizer lives in :mod:`._tfidf`, the logistic-regression path in :mod:`._logistic`
and the input checks and validation rows in :mod:`._training_data`; the embedding
classifier's TF-IDF block is a :class:`LocalClassifier` built from the same pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from ..exceptions import ArtifactError
from ._base import LogitClassifier
from ._logistic import fit_logistic_path, positive_grid, warn_unconverged
from ._tfidf import TfidfFeaturizer
from ._training_data import check_texts, training_rows

__all__ = ["LocalClassifier"]


_VOCABULARY_FILE = "vocabulary.json"
_ARRAYS_FILE = "arrays.npz"


class LocalClassifier(LogitClassifier):
    """TF-IDF (word 1-2 + character 2-5 grams) into multinomial logistic regression.

    Parameters
    ----------
    Cs : sequence of float, default (1, 3, 10, 30, 100)
        Grid of inverse L2-regularisation strengths. With more than one value, ``C`` is
        chosen by accuracy on validation data (ties go to the smaller ``C``). With one
        value no validation data is needed or used.
    word_ngram_range : (int, int), default (1, 2)
        Word n-gram lengths (tokens of two or more word characters).
    char_ngram_range : (int, int), default (2, 5)
        Character n-gram lengths inside word boundaries (each word padded with a space).
        The lower bound must be at least 1 and at most 3.
    sublinear_tf : bool, default True
        Use ``1 + log(tf)`` instead of the raw term count.
    min_df : int, default 1
        Drop n-grams found in fewer training texts than this.
    lowercase : bool, default True
        Lower-case texts before analysis.
    validation_fraction : float, default 0.1
        Share of each class carved from the training rows as validation data when ``fit``
        is given none and ``Cs`` has more than one value.
    max_iter : int, default 500
        Iteration limit of the L-BFGS solver.
    tol : float, default 1e-5
        Convergence tolerance of the solver. Tighter than scikit-learn's 1e-4 because the
        grid is warm-started: scikit-learn scales the objective by the number of rows, so
        after a step in ``C`` the gradient at the previous solution is often below 1e-4
        and the solver would stop at once, giving every ``C`` the same model.
    random_state : int, default 0
        Seed of the validation split. The solver itself is deterministic.

    Attributes
    ----------
    classes_ : ndarray of str
        The label set, sorted; columns of :meth:`predict_proba`.
    C_ : float
        The regularisation strength used for the final model.
    cv_results_ : dict
        ``{"C": [...], "validation_accuracy": [...], "n_iter": [...], "n_validation": int,
        "validation_source": "given" | "carved" | "none"}`` (``n_iter``: solver
        iterations per grid point).
    n_features_ : int
        Number of TF-IDF columns (word n-grams first, then character n-grams).
    word_vocabulary_, char_vocabulary_ : dict of str to int
        Column of each word n-gram; column (minus the word block's size) of each
        character n-gram.
    idf_ : ndarray of shape (n_features_,)
        Inverse document frequencies.
    weights_ : ndarray of shape (n_features_, n_classes), float32
        Logistic-regression weights, feature-major for fast scoring, kept in single
        precision (half the memory and file size; scores move by about 1e-6).
    intercept_ : ndarray of shape (n_classes,)
        Logistic-regression intercepts.
    n_train_ : int
        Number of rows the final model was fitted on.
    n_iter_ : int
        Solver iterations of the final model. A final model that stopped at ``max_iter``
        raises a ``ConvergenceWarning``.

    Notes
    -----
    With validation data carved from the training rows, the final model is refitted on
    all training rows with the chosen ``C``. With validation data given by the caller,
    the final model is the one fitted on the training rows alone: the caller's
    validation rows are never trained on.

    Examples
    --------
    >>> clf = LocalClassifier(random_state=0).fit(texts, labels)  # doctest: +SKIP
    >>> clf.rank(["where is my card"], k=2)[0].top  # doctest: +SKIP
    'card_arrival'
    """

    kind = "local"

    def __init__(
        self,
        *,
        Cs: Sequence[float] = (1.0, 3.0, 10.0, 30.0, 100.0),
        word_ngram_range: tuple[int, int] = (1, 2),
        char_ngram_range: tuple[int, int] = (2, 5),
        sublinear_tf: bool = True,
        min_df: int = 1,
        lowercase: bool = True,
        validation_fraction: float = 0.1,
        max_iter: int = 500,
        tol: float = 1e-5,
        random_state: int = 0,
    ) -> None:
        self.Cs = Cs
        self.word_ngram_range = word_ngram_range
        self.char_ngram_range = char_ngram_range
        self.sublinear_tf = sublinear_tf
        self.min_df = min_df
        self.lowercase = lowercase
        self.validation_fraction = validation_fraction
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    # -- parameters ---------------------------------------------------------------------

    def _validated_params(self) -> dict[str, Any]:
        def ngram_range(name: str, lowest: int, highest_lo: int) -> tuple[int, int]:
            value = getattr(self, name)
            try:
                lo, hi = (int(v) for v in value)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be a pair of ints, got {value!r}") from None
            if not (lowest <= lo <= hi) or lo > highest_lo:
                raise ValueError(f"{name} must satisfy {lowest} <= lo <= hi, got {value!r}")
            return lo, hi

        cs = positive_grid(self.Cs, "Cs")
        if not 0.0 < float(self.validation_fraction) < 1.0:
            raise ValueError(
                f"validation_fraction must lie in (0, 1), got {self.validation_fraction!r}"
            )
        if int(self.min_df) < 1:
            raise ValueError(f"min_df must be >= 1, got {self.min_df!r}")
        if int(self.max_iter) < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter!r}")
        return {
            "Cs": cs,
            "word_ngram_range": ngram_range("word_ngram_range", 1, 1_000),
            "char_ngram_range": ngram_range("char_ngram_range", 1, 3),
            "min_df": int(self.min_df),
        }

    # -- fitting ------------------------------------------------------------------------

    def fit(
        self,
        texts: Sequence[str],
        labels: Sequence[str],
        *,
        validation: tuple[Sequence[str], Sequence[str]] | None = None,
    ) -> Self:
        """Fit the featurizer and the logistic regression; choose ``C`` on validation data.

        Parameters
        ----------
        texts : sequence of str
            Training texts.
        labels : sequence of str
            One label per text; the label set is the sorted distinct labels (at least two).
        validation : (texts, labels), optional
            Validation rows used only to choose ``C``; never trained on. Without them (and
            with more than one ``C``), a stratified share of the training rows is held out
            (``validation_fraction``, seeded by ``random_state``) and trained on afterwards.

        Returns
        -------
        LocalClassifier
            ``self``, fitted.
        """
        params = self._validated_params()
        cs: list[float] = params["Cs"]
        rows = training_rows(
            texts,
            labels,
            validation,
            search=len(cs) > 1,
            fraction=float(self.validation_fraction),
            seed=int(self.random_state),
            single_hint="a single value in Cs",
        )
        featurizer = self._fit_featurizer(rows.search_texts, params)
        x_search = featurizer.transform(rows.search_texts)
        y_search = rows.class_indices(rows.search_labels)
        n_classes = len(rows.classes)
        models = self._fit_path(x_search, y_search, cs, n_classes)

        accuracies: list[float] = []
        if rows.val_texts:
            x_val = featurizer.transform(rows.val_texts)
            y_val = rows.class_indices(rows.val_labels)
            for weights, intercept, _ in models:
                scores = x_val @ weights + intercept
                accuracies.append(float(np.mean(np.argmax(scores, axis=1) == y_val)))
            best = int(np.argmax(accuracies))  # first maximum: the smallest such C
        else:
            best = 0  # a single C
        best_c = cs[best]
        weights, intercept, n_iter = models[best]
        n_train = len(rows.search_texts)
        if rows.source == "carved":
            # the carved rows go back into training for the final model
            featurizer = self._fit_featurizer(rows.texts, params)
            ((weights, intercept, n_iter),) = self._fit_path(
                featurizer.transform(rows.texts),
                rows.class_indices(rows.labels),
                [best_c],
                n_classes,
            )
            n_train = len(rows.texts)
        warn_unconverged(n_iter, int(self.max_iter), float(self.tol), "the logistic regression")
        return self._set_fitted(
            featurizer,
            weights,
            intercept,
            C=best_c,
            n_iter=n_iter,
            n_train=n_train,
            classes=rows.classes,
            cv_results={
                "C": list(cs) if rows.val_texts else [best_c],
                "validation_accuracy": accuracies,
                "n_iter": [m[2] for m in models],
                "n_validation": len(rows.val_texts),
                "validation_source": rows.source,
            },
        )

    def _fit_featurizer(self, texts: Sequence[str], params: dict[str, Any]) -> TfidfFeaturizer:
        return TfidfFeaturizer.fit(
            texts,
            word_ngram_range=params["word_ngram_range"],
            char_ngram_range=params["char_ngram_range"],
            lowercase=bool(self.lowercase),
            sublinear_tf=bool(self.sublinear_tf),
            min_df=params["min_df"],
        )

    def _fit_path(
        self, x: Any, y: np.ndarray, cs: Iterable[float], n_classes: int
    ) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """One model per ``C`` (ascending), warm-started, with this classifier's solver."""
        return fit_logistic_path(
            x, y, cs, n_classes, max_iter=int(self.max_iter), tol=float(self.tol)
        )

    def _set_fitted(
        self,
        featurizer: TfidfFeaturizer,
        weights: np.ndarray,
        intercept: np.ndarray,
        *,
        C: float,
        n_iter: int,
        n_train: int,
        classes: Sequence[str],
        cv_results: dict[str, Any],
    ) -> Self:
        """Set every learned attribute (from :meth:`fit`, a saved directory, or the parts
        the embedding classifier fitted); returns ``self``."""
        self.C_ = float(C)
        self.n_iter_ = int(n_iter)
        self.cv_results_ = cv_results
        self.word_vocabulary_ = featurizer.word_vocabulary
        self.char_vocabulary_ = featurizer.char_vocabulary
        self.idf_ = featurizer.idf
        self.n_features_ = featurizer.n_features
        # Single precision halves the model's memory and files and speeds the product;
        # logits move by about 1e-6.
        self.weights_ = np.ascontiguousarray(weights, dtype=np.float32)
        self.intercept_ = intercept
        self.n_train_ = int(n_train)
        self._featurizer = featurizer
        self.classes_ = np.array(classes, dtype=str)
        return self

    # -- prediction ---------------------------------------------------------------------

    def decision_function(self, texts: Sequence[str]) -> np.ndarray:
        """Raw class scores (logits) of shape ``(n_texts, n_classes)``."""
        self._check_fitted()
        texts = check_texts(texts)
        x = self._featurizer.transform(texts)
        # the weights' dtype set on the values in place: astype() would copy the index
        # arrays and check the new matrix again, a third of a one-text call (same values)
        x.data = x.data.astype(self.weights_.dtype)
        return np.asarray(x @ self.weights_, dtype=np.float64) + self.intercept_

    # -- persistence --------------------------------------------------------------------

    def _save_state(self, directory: Path) -> dict[str, Any]:
        """Write the fitted model into ``directory``; return the JSON state for the manifest."""
        from ._persistence import write_arrays, write_json

        self._check_fitted()

        def ordered(vocabulary: dict[str, int]) -> list[str]:
            terms = [""] * len(vocabulary)
            for term, i in vocabulary.items():
                terms[i] = term
            return terms

        write_json(
            directory / _VOCABULARY_FILE,
            {"word": ordered(self.word_vocabulary_), "char": ordered(self.char_vocabulary_)},
        )
        write_arrays(
            directory / _ARRAYS_FILE,
            {"idf": self.idf_, "weights": self.weights_, "intercept": self.intercept_},
        )
        params = self.get_params()
        params["Cs"] = [float(c) for c in params["Cs"]]
        params["word_ngram_range"] = [int(v) for v in params["word_ngram_range"]]
        params["char_ngram_range"] = [int(v) for v in params["char_ngram_range"]]
        return {
            "params": params,
            "C_": float(self.C_),
            "cv_results_": self.cv_results_,
            "n_train_": self.n_train_,
            "n_iter_": self.n_iter_,
        }

    @classmethod
    def _load_state(cls, directory: Path, manifest: dict[str, Any]) -> Self:
        """Rebuild a fitted classifier from ``directory`` (already checked by the loader)."""
        from ._persistence import read_arrays, read_json

        clf, state, checked = cls._from_saved_params(
            directory, manifest, sequences=("Cs", "word_ngram_range", "char_ngram_range")
        )
        vocab = read_json(directory / _VOCABULARY_FILE)
        if not isinstance(vocab, dict) or set(vocab) != {"word", "char"}:
            raise ArtifactError(
                "vocabulary must be an object with 'word' and 'char' lists",
                path=str(directory / _VOCABULARY_FILE),
            )
        vocabularies = []
        for block in ("word", "char"):
            terms = vocab[block]
            if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
                raise ArtifactError(
                    f"vocabulary {block!r} must be a list of strings",
                    path=str(directory / _VOCABULARY_FILE),
                )
            mapping = {t: i for i, t in enumerate(terms)}
            if len(mapping) != len(terms):
                raise ArtifactError(
                    f"vocabulary {block!r} has duplicate terms",
                    path=str(directory / _VOCABULARY_FILE),
                )
            vocabularies.append(mapping)
        n_features = len(vocabularies[0]) + len(vocabularies[1])
        n_classes = len(manifest["classes"])
        arrays = read_arrays(
            directory / _ARRAYS_FILE,
            {
                "idf": (n_features,),
                "weights": (n_features, n_classes),
                "intercept": (n_classes,),
            },
        )
        featurizer = TfidfFeaturizer(
            vocabularies[0],
            vocabularies[1],
            np.asarray(arrays["idf"], dtype=np.float64),
            word_ngram_range=checked["word_ngram_range"],
            char_ngram_range=checked["char_ngram_range"],
            lowercase=bool(clf.lowercase),
            sublinear_tf=bool(clf.sublinear_tf),
        )
        try:
            learned: dict[str, Any] = {
                "C": float(state["C_"]),
                "cv_results": dict(state["cv_results_"]),
                "n_train": int(state["n_train_"]),
                "n_iter": int(state["n_iter_"]),
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(
                f"manifest state is missing or has a bad {exc}", path=str(directory)
            ) from None
        return clf._set_fitted(
            featurizer,
            arrays["weights"],
            np.asarray(arrays["intercept"], dtype=np.float64),
            classes=manifest["classes"],
            **learned,
        )
