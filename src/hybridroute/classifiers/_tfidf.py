"""The TF-IDF featurizer of the local classifier: word 1-2 + character 2-5 grams.

scikit-learn's vectorizers cost more per call than the whole prediction of one text, so
the fitted featurizer is plain data -- two vocabularies and one idf vector -- and rows are
built by our own analyzer (the same word tokens and ``char_wb`` n-grams as
``TfidfVectorizer``, tested equal). Training builds its feature matrix through the very
same code, so what is fitted is exactly what is served.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["TfidfFeaturizer"]

# The word token pattern of scikit-learn's CountVectorizer: runs of two or more word
# characters.
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def _word_ngrams(tokens: list[str], lo: int, hi: int) -> list[str]:
    """Word n-grams of ``tokens`` for n in ``[lo, hi]`` (joined by one space)."""
    if lo == 1 and hi == 1:
        return tokens
    out = list(tokens) if lo == 1 else []
    n_tokens = len(tokens)
    for n in range(max(lo, 2), min(hi, n_tokens) + 1):
        out.extend([" ".join(tokens[i : i + n]) for i in range(n_tokens - n + 1)])
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
        out.extend([padded[i : i + n] for i in range(size - n + 1)])
    return out


class TfidfFeaturizer:
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
        # The character columns of words that are themselves in the word vocabulary (the
        # training data's words, not a client's), kept across calls: most words of a
        # ticket are, and their n-grams are the featurizer's main cost. Bounded by the
        # vocabulary; filled as words are met; a pure function of the fitted state.
        self._known_words: dict[str, list[int]] = {}

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
    ) -> TfidfFeaturizer:
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
        # distinct word is analysed once, and a word of the word vocabulary once for all
        # calls (nothing else persists: other words may be a client's own).
        known = self._known_words
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
                cols = known.get(word)
                if cols is None:
                    cols = word_columns.get(word)
                    if cols is None:
                        grams = _char_ngrams(word, clo, chi)
                        cols = [offset + cvocab[g] for g in grams if g in cvocab]
                        if word in wvocab:
                            known[word] = cols
                        else:
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
