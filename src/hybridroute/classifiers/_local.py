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
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from ..exceptions import ArtifactError, DatasetError
from ._base import IntentClassifier

__all__ = ["LocalClassifier"]

# The word token pattern of scikit-learn's CountVectorizer: runs of two or more word
# characters.
_TOKEN = re.compile(r"(?u)\b\w\w+\b")

_VOCABULARY_FILE = "vocabulary.json"
_ARRAYS_FILE = "arrays.npz"


def _word_ngrams(tokens: list[str], lo: int, hi: int) -> list[str]:
    """Word n-grams of ``tokens`` for n in ``[lo, hi]`` (joined by one space)."""
    if lo == 1 and hi == 1:
        return tokens
    out = list(tokens) if lo == 1 else []
    n_tokens = len(tokens)
    for n in range(max(lo, 2), min(hi, n_tokens) + 1):
        out.extend(" ".join(tokens[i : i + n]) for i in range(n_tokens - n + 1))
    return out


def _char_ngrams(word: str, lo: int, hi: int) -> list[str]:
    """Character n-grams of one whitespace-free ``word``, padded with a space each side.

    This is the ``char_wb`` analyzer of scikit-learn for ``lo <= 3``: n-grams never cross
    a word boundary, and the padding marks where a word starts and ends.
    """
    padded = f" {word} "
    size = len(padded)
    out: list[str] = []
    for n in range(lo, min(hi, size) + 1):
        out.extend(padded[i : i + n] for i in range(size - n + 1))
    return out


def _check_texts(texts: Any, what: str = "texts") -> list[str]:
    if isinstance(texts, str | bytes):
        raise DatasetError(
            f"{what} must be a sequence of strings, not a single {type(texts).__name__}; "
            "wrap one text in a list"
        )
    try:
        items = list(texts)
    except TypeError:
        raise DatasetError(
            f"{what} must be a sequence of strings, got {type(texts).__name__}"
        ) from None
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise DatasetError(f"{what}[{i}] is a {type(text).__name__}, not a string")
    return items


def _check_labels(labels: Any, n: int, what: str = "labels") -> list[str]:
    items = _check_texts(labels, what)
    if len(items) != n:
        raise DatasetError(f"{what} has {len(items)} items but there are {n} texts")
    for i, label in enumerate(items):
        if not label.strip():
            raise DatasetError(f"{what}[{i}] is empty")
    return items


def _stratified_holdout(labels: Sequence[str], fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of a seeded, stratified validation share of ``labels``.

    Each class with at least two rows gives ``round(fraction * n)`` rows (at least one,
    never all of them); classes are visited in sorted order so the mask depends only on
    the labels and the seed.
    """
    rng = np.random.default_rng(seed)
    y = np.asarray(labels, dtype=object)
    mask = np.zeros(len(y), dtype=bool)
    for label in sorted(set(labels)):
        idx = np.flatnonzero(y == label)
        if len(idx) < 2:
            continue
        take = min(len(idx) - 1, max(1, round(fraction * len(idx))))
        mask[rng.permutation(idx)[:take]] = True
    return mask


class _Featurizer:
    """Fitted TF-IDF state: two vocabularies (word, char) and one idf vector.

    Feature columns are the word n-grams first, then the character n-grams; each block is
    L2-normalised on its own, as two stacked ``TfidfVectorizer`` outputs would be.
    """

    def __init__(
        self,
        word_vocabulary: dict[str, int],
        char_vocabulary: dict[str, int],
        idf: np.ndarray,
        *,
        word_ngram_range: tuple[int, int],
        char_ngram_range: tuple[int, int],
        lowercase: bool,
        sublinear_tf: bool,
    ) -> None:
        self.word_vocabulary = word_vocabulary
        self.char_vocabulary = char_vocabulary
        self.idf = idf
        self.word_ngram_range = word_ngram_range
        self.char_ngram_range = char_ngram_range
        self.lowercase = lowercase
        self.sublinear_tf = sublinear_tf

    @property
    def n_features(self) -> int:
        return len(self.word_vocabulary) + len(self.char_vocabulary)

    @classmethod
    def fit(
        cls,
        texts: Sequence[str],
        *,
        word_ngram_range: tuple[int, int],
        char_ngram_range: tuple[int, int],
        lowercase: bool,
        sublinear_tf: bool,
        min_df: int,
    ) -> _Featurizer:
        wlo, whi = word_ngram_range
        clo, chi = char_ngram_range
        word_df: Counter[str] = Counter()
        char_df: Counter[str] = Counter()
        for text in texts:
            if lowercase:
                text = text.lower()
            word_df.update(set(_word_ngrams(_TOKEN.findall(text), wlo, whi)))
            grams: set[str] = set()
            for word in set(text.split()):
                grams.update(_char_ngrams(word, clo, chi))
            char_df.update(grams)
        n_docs = len(texts)
        vocabularies = []
        idfs = []
        for df in (word_df, char_df):
            # Sorted terms: the column order depends on the data only, never on hash seeds.
            terms = sorted(term for term, count in df.items() if count >= min_df)
            vocabularies.append({term: i for i, term in enumerate(terms)})
            counts = np.array([df[term] for term in terms], dtype=np.float64)
            # Smoothed idf, as scikit-learn's TfidfTransformer(smooth_idf=True).
            idfs.append(np.log((1.0 + n_docs) / (1.0 + counts)) + 1.0)
        return cls(
            vocabularies[0],
            vocabularies[1],
            np.concatenate(idfs),
            word_ngram_range=word_ngram_range,
            char_ngram_range=char_ngram_range,
            lowercase=lowercase,
            sublinear_tf=sublinear_tf,
        )

    def transform(self, texts: Sequence[str]) -> Any:
        """TF-IDF rows of ``texts`` as a CSR matrix of shape ``(n, n_features)``."""
        import scipy.sparse as sp

        wvocab = self.word_vocabulary
        cvocab = self.char_vocabulary
        offset = len(wvocab)
        wlo, whi = self.word_ngram_range
        clo, chi = self.char_ngram_range
        lowercase = self.lowercase
        # The character n-grams of a word depend on the word alone; within one call each
        # distinct word is analysed once. Nothing persists between calls.
        word_columns: dict[str, list[int]] = {}
        columns: list[int] = []
        indptr = [0]
        for text in texts:
            if lowercase:
                text = text.lower()
            columns.extend(
                [wvocab[g] for g in _word_ngrams(_TOKEN.findall(text), wlo, whi) if g in wvocab]
            )
            for word in text.split():
                cols = word_columns.get(word)
                if cols is None:
                    cols = [offset + cvocab[g] for g in _char_ngrams(word, clo, chi) if g in cvocab]
                    word_columns[word] = cols
                columns.extend(cols)
            indptr.append(len(columns))
        n = len(indptr) - 1
        indices = np.array(columns, dtype=np.int32)
        matrix = sp.csr_matrix(
            (np.ones(len(indices), dtype=np.float64), indices, np.array(indptr, dtype=np.int64)),
            shape=(n, self.n_features),
        )
        matrix.sum_duplicates()  # repeated columns -> term counts; sorts the indices too
        data = matrix.data
        if self.sublinear_tf:
            np.log(data, out=data)
            data += 1.0
        data *= self.idf[matrix.indices]
        # L2 norm of each row, separately for the word block and the character block.
        rows = np.repeat(np.arange(n), np.diff(matrix.indptr))
        block = (matrix.indices >= offset).astype(np.int64)
        slot = rows * 2 + block
        norms = np.sqrt(np.bincount(slot, weights=data * data, minlength=2 * n))
        norms[norms == 0.0] = 1.0
        data /= norms[slot]
        return matrix


class LocalClassifier(IntentClassifier):
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

    _PARAMS = (
        "Cs",
        "word_ngram_range",
        "char_ngram_range",
        "sublinear_tf",
        "min_df",
        "lowercase",
        "validation_fraction",
        "max_iter",
        "tol",
        "random_state",
    )

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        """The constructor arguments, as a dict (``deep`` is accepted and ignored)."""
        return {name: getattr(self, name) for name in self._PARAMS}

    def set_params(self, **params: Any) -> Self:
        """Set constructor arguments; returns ``self``."""
        for name, value in params.items():
            if name not in self._PARAMS:
                raise ValueError(f"unknown parameter {name!r} of {type(self).__name__}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = LocalClassifier().get_params()
        changed = {k: v for k, v in self.get_params().items() if v != defaults[k]}
        inner = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        return f"{type(self).__name__}({inner})"

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

        try:
            cs = sorted(float(c) for c in self.Cs)
        except (TypeError, ValueError):
            raise ValueError(f"Cs must be a sequence of numbers, got {self.Cs!r}") from None
        if not cs or any(not math.isfinite(c) or c <= 0 for c in cs):
            raise ValueError(f"Cs must hold one or more positive numbers, got {self.Cs!r}")
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
        texts = _check_texts(texts)
        labels = _check_labels(labels, len(texts))
        classes = sorted(set(labels))
        if len(classes) < 2:
            raise DatasetError(
                f"need at least two labels to train a classifier, got {len(classes)}: {classes!r}"
            )
        cs: list[float] = params["Cs"]

        search_texts, search_labels = texts, labels
        val_texts: list[str] = []
        val_labels: list[str] = []
        source = "none"
        if validation is not None:
            try:
                vt, vl = validation
            except (TypeError, ValueError):
                raise DatasetError("validation must be a pair (texts, labels)") from None
            val_texts = _check_texts(vt, "validation texts")
            val_labels = _check_labels(vl, len(val_texts), "validation labels")
            unknown = sorted(set(val_labels) - set(classes))
            if unknown:
                raise DatasetError(
                    f"validation labels not among the training labels: {unknown[:10]!r}"
                )
            if not val_texts:
                raise DatasetError("validation data is empty")
            source = "given"
        elif len(cs) > 1:
            mask = _stratified_holdout(
                labels, float(self.validation_fraction), int(self.random_state)
            )
            if not mask.any():
                raise DatasetError(
                    "too few rows to hold out validation data for choosing C (no label has "
                    "two rows); pass validation=(texts, labels) or a single value in Cs"
                )
            search_texts = [t for t, m in zip(texts, mask, strict=True) if not m]
            search_labels = [y for y, m in zip(labels, mask, strict=True) if not m]
            val_texts = [t for t, m in zip(texts, mask, strict=True) if m]
            val_labels = [y for y, m in zip(labels, mask, strict=True) if m]
            source = "carved"

        class_index = {c: i for i, c in enumerate(classes)}
        featurizer = self._fit_featurizer(search_texts, params)
        x_search = featurizer.transform(search_texts)
        y_search = np.array([class_index[y] for y in search_labels])

        accuracies: list[float] = []
        if val_texts:
            x_val = featurizer.transform(val_texts)
            y_val = np.array([class_index[y] for y in val_labels])
            models = self._fit_path(x_search, y_search, cs, len(classes))
            for weights, intercept, _ in models:
                scores = x_val @ weights + intercept
                accuracies.append(float(np.mean(np.argmax(scores, axis=1) == y_val)))
            best = int(np.argmax(accuracies))  # first maximum: the smallest such C
            best_c = cs[best]
            if source == "given":
                weights, intercept, n_iter = models[best]
            else:
                featurizer = self._fit_featurizer(texts, params)
                y_all = np.array([class_index[y] for y in labels])
                ((weights, intercept, n_iter),) = self._fit_path(
                    featurizer.transform(texts), y_all, [best_c], len(classes)
                )
            n_train = len(search_texts) if source == "given" else len(texts)
        else:
            best_c = cs[0]
            models = self._fit_path(x_search, y_search, cs, len(classes))
            ((weights, intercept, n_iter),) = models
            n_train = len(texts)

        if n_iter >= int(self.max_iter):
            import warnings

            from sklearn.exceptions import ConvergenceWarning

            warnings.warn(
                f"the logistic regression stopped at max_iter={self.max_iter} before reaching "
                f"tol={self.tol}; raise max_iter for a fully converged model",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.C_ = best_c
        self.n_iter_ = n_iter
        self.cv_results_ = {
            "C": list(cs) if val_texts else [best_c],
            "validation_accuracy": accuracies,
            "n_iter": [m[2] for m in models],
            "n_validation": len(val_texts),
            "validation_source": source,
        }
        self._set_fitted(featurizer, weights, intercept, n_train)
        self.classes_ = np.array(classes, dtype=str)
        return self

    def _fit_featurizer(self, texts: Sequence[str], params: dict[str, Any]) -> _Featurizer:
        return _Featurizer.fit(
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
        """Fit one model per ``C`` (ascending), each warm-started from the previous one.

        Returns feature-major weights ``(n_features, n_classes)``, intercepts and the
        solver's iteration count, per ``C``.
        """
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression
        from threadpoolctl import threadpool_limits

        model = LogisticRegression(
            C=1.0, max_iter=int(self.max_iter), tol=float(self.tol), warm_start=True
        )
        out = []
        for c in cs:
            model.set_params(C=float(c))
            # One BLAS thread: the solver's heavy steps (sparse products, L-BFGS updates)
            # are single-threaded anyway; extra BLAS threads only doubled the CPU time
            # here, and thread counts change the last bits of the weights, which would
            # make saved models differ between machines.
            with warnings.catch_warnings(), threadpool_limits(limits=1):
                # Recorded as n_iter instead; fit() warns once if the final model is short.
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(x, y)
            coef = np.asarray(model.coef_, dtype=np.float64)
            intercept = np.asarray(model.intercept_, dtype=np.float64)
            if n_classes == 2:
                # Binary logistic regression has one weight vector for the second class;
                # scoring [0, w] through a softmax gives the same sigmoid.
                coef = np.vstack([np.zeros_like(coef[0]), coef[0]])
                intercept = np.array([0.0, intercept[0]])
            n_iter = int(np.max(model.n_iter_))
            out.append((np.ascontiguousarray(coef.T), intercept.copy(), n_iter))
        return out

    def _set_fitted(
        self, featurizer: _Featurizer, weights: np.ndarray, intercept: np.ndarray, n_train: int
    ) -> None:
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

    # -- prediction ---------------------------------------------------------------------

    def decision_function(self, texts: Sequence[str]) -> np.ndarray:
        """Raw class scores (logits) of shape ``(n_texts, n_classes)``."""
        self._check_fitted()
        texts = _check_texts(texts)
        x = self._featurizer.transform(texts).astype(self.weights_.dtype)
        return np.asarray(x @ self.weights_, dtype=np.float64) + self.intercept_

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities of shape ``(n_texts, n_classes)``; rows sum to 1.

        Parameters
        ----------
        texts : sequence of str
            Texts to score (a list; a bare string is refused).

        Returns
        -------
        ndarray
            Columns follow ``classes_``.
        """
        scores = self.decision_function(texts)
        scores -= scores.max(axis=1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=1, keepdims=True)
        return scores

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

        state = manifest.get("state")
        if not isinstance(state, dict) or not isinstance(state.get("params"), dict):
            raise ArtifactError("manifest has no 'state.params' object", path=str(directory))
        params = dict(state["params"])
        unknown = sorted(set(params) - set(cls._PARAMS))
        if unknown:
            raise ArtifactError(
                f"manifest state has unknown parameters {unknown!r}", path=str(directory)
            )
        for key in ("Cs", "word_ngram_range", "char_ngram_range"):
            if key in params:
                params[key] = tuple(params[key])
        clf = cls(**params)
        try:
            checked = clf._validated_params()
        except ValueError as exc:
            raise ArtifactError(
                f"manifest parameters are invalid: {exc}", path=str(directory)
            ) from None

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
        featurizer = _Featurizer(
            vocabularies[0],
            vocabularies[1],
            np.asarray(arrays["idf"], dtype=np.float64),
            word_ngram_range=checked["word_ngram_range"],
            char_ngram_range=checked["char_ngram_range"],
            lowercase=bool(clf.lowercase),
            sublinear_tf=bool(clf.sublinear_tf),
        )
        try:
            clf.C_ = float(state["C_"])
            clf.cv_results_ = dict(state["cv_results_"])
            n_train = int(state["n_train_"])
            clf.n_iter_ = int(state["n_iter_"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(
                f"manifest state is missing or has a bad {exc}", path=str(directory)
            ) from None
        clf._set_fitted(
            featurizer,
            arrays["weights"],
            np.asarray(arrays["intercept"], dtype=np.float64),
            n_train,
        )
        clf.classes_ = np.array(manifest["classes"], dtype=str)
        return clf
