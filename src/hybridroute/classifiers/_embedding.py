"""The embedding classifier: sentence embeddings and TF-IDF features into one linear head.

Two feature blocks, each with its own logistic regression, fused at the logits:

* **lexical** -- the local classifier's TF-IDF (word 1-2 + character 2-5 grams). The
  block *is* a :class:`~hybridroute.classifiers.LocalClassifier` (same featurizer, same
  lean scoring, saved in a sub-directory in the same code-free format);
* **semantic** -- a sentence-transformers model's token states, mean-pooled over the
  attention mask for each of a few top hidden layers (default: the last three), each
  pooled vector L2-normalised, concatenated. For the last layer alone this is exactly the
  model's sentence embedding (all-MiniLM-L6-v2 pools by mean and normalises).

The class scores are ``s * (z_tfidf + w * z_embedding)``: still one linear function of the
concatenated features (each block's weights scaled), so prediction is two matrix products.
``C`` of each block and the block weight ``w`` are chosen by accuracy on validation data
only (ties: lower validation log-loss); the scale ``s`` is fitted on the same validation
rows by log-loss, so the raw probabilities start out roughly calibrated (the calibration
package still calibrates them like any classifier's). Fitting each block once per ``C``
and fusing afterwards makes the whole ``(C_tfidf, C_embedding, w)`` grid cost only one
fit per ``C`` value.

Why these choices (measured on validation rows only; see the benchmark for test
figures): with all-MiniLM-L6-v2, Banking77 (a seeded 10% carved from train) and CLINC150
(its official validation split, in scope), pooling the last three layers instead of the
last one gave CLINC150 0.970 vs 0.960 (embeddings alone); fusing with TF-IDF gave
0.927 / 0.973 vs 0.903 / 0.925 for TF-IDF alone. Fusing separate heads matched one
logistic regression on the concatenated features (0.928 on Banking77) at a fraction of the
search cost; an MLP head, max pooling, standardised features or class-balanced weights
did not beat it.

The embedding model is never copied into a saved classifier: the manifest names it (hub
name or directory, the ``model`` parameter) and records a fingerprint of its weights and
tokenizer; a model whose fingerprint differs is refused when the classifier next embeds.
torch and sentence-transformers are imported only when a classifier embeds something, so
``import hybridroute`` and loading a saved directory never need them.

Embeddings go through an on-disk cache (:mod:`._embedding_cache`) keyed by the model
fingerprint, the pooling set-up and each text's hash, so retraining, recalibrating and
re-scoring embed nothing twice. ``backend="onnx"`` runs the same pooled graph, exported
once into the cache directory, through ONNX Runtime (measured here on 2 CPU cores: 1.7-2x
the batch throughput and a third of the single-text latency; vectors within 1e-6 of
torch's, and the same labels on all 5,500 CLINC150 test texts). Both backends share the
cache: a text keeps whichever backend's vector was stored first.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from ..exceptions import ArtifactError, DatasetError, UserInputError
from ._base import IntentClassifier
from ._embedding_cache import EmbeddingCache, default_cache_dir, space_key, text_key
from ._local import LocalClassifier, _check_labels, _check_texts, _stratified_holdout

__all__ = ["DEFAULT_MODEL", "EmbeddingClassifier", "fit_from_cli"]

#: The default sentence-transformers model (hub name).
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

_ARRAYS_FILE = "embedding_head.npz"
_TFIDF_DIR = "tfidf"
_BACKENDS = ("torch", "onnx")
_INSTALL_HINT = (
    "the embedding classifier needs the 'embeddings' extra: "
    "pip install 'hybridroute[embeddings]' (or: pip install torch sentence-transformers; "
    "for backend='onnx' also onnxruntime onnx)"
)


# --------------------------------------------------------------------------- the encoder


class _LoadedModel:
    """A sentence-transformers model loaded once per process: tokenizer, transformer,
    fingerprint."""

    def __init__(self, source: str, device: str) -> None:
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise UserInputError(f"{_INSTALL_HINT} ({exc})") from None
        try:
            st = SentenceTransformer(source, device=device)
        except Exception as exc:  # any loading failure is mapped here, cause chained
            raise ArtifactError(
                f"cannot load the sentence-transformers model ({type(exc).__name__}: {exc}); "
                "give a local model directory or a hub name available offline",
                path=source,
            ) from exc
        st.eval()
        first = st[0]
        auto = getattr(first, "auto_model", None)
        tokenizer = getattr(st, "tokenizer", None)
        if auto is None or tokenizer is None:
            raise ArtifactError(
                "the model's first module is not a transformer with a tokenizer", path=source
            )
        self.source = source
        self.device = device
        self.torch = torch
        self.auto_model = auto
        self.tokenizer = tokenizer
        self.max_seq_length = int(st.max_seq_length or tokenizer.model_max_length)
        self.n_hidden_states = int(auto.config.num_hidden_layers) + 1
        self.hidden_size = int(auto.config.hidden_size)
        probe = tokenizer(["a"], return_tensors="pt")
        self.input_names = tuple(probe.keys())
        self.fingerprint = self._fingerprint()

    def _fingerprint(self) -> str:
        """SHA-256 over every weight tensor (name, dtype, shape, bytes) and the tokenizer."""
        import hashlib
        import json

        torch = self.torch
        digest = hashlib.sha256()
        state = self.auto_model.state_dict()
        for name in sorted(state):
            tensor = state[name].detach().to("cpu").contiguous()
            digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None:
            digest.update(backend.to_str().encode("utf-8"))
        else:
            vocab = sorted(self.tokenizer.get_vocab().items())
            digest.update(json.dumps(vocab, ensure_ascii=False).encode("utf-8"))
        digest.update(type(self.tokenizer).__name__.encode())
        return digest.hexdigest()


_MODELS: dict[tuple[str, str], _LoadedModel] = {}
_ONNX_SESSIONS: dict[str, Any] = {}
_LOCK = threading.Lock()


def _resolve_source(model: str | os.PathLike[str]) -> str:
    """An existing directory as an absolute path; anything else as the hub name given."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.is_dir() else str(model)


def _load_model(model: str | os.PathLike[str], device: str) -> _LoadedModel:
    source = _resolve_source(model)
    with _LOCK:
        loaded = _MODELS.get((source, device))
        if loaded is None:
            loaded = _LoadedModel(source, device)
            _MODELS[(source, device)] = loaded
        return loaded


def _pooling_module(loaded: _LoadedModel, layers: tuple[int, ...]) -> Any:
    """A torch module: token states of ``layers`` -> masked means, each L2-normalised."""
    torch: Any = loaded.torch
    names = loaded.input_names

    class _Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = loaded.auto_model

        def forward(self, *inputs: Any) -> Any:
            kwargs = dict(zip(names, inputs, strict=True))
            states = self.model(**kwargs, output_hidden_states=True).hidden_states
            mask = kwargs["attention_mask"].unsqueeze(-1).to(states[0].dtype)
            count = mask.sum(dim=1).clamp(min=1.0)
            parts = [
                torch.nn.functional.normalize((states[i] * mask).sum(dim=1) / count, dim=1)
                for i in layers
            ]
            return torch.cat(parts, dim=1)

    return _Pooled().eval()


class _Encoder:
    """Pooled multi-layer embeddings of texts, by torch or ONNX Runtime, in batches."""

    def __init__(
        self,
        loaded: _LoadedModel,
        *,
        layers: tuple[int, ...],
        max_seq_length: int | None,
        batch_size: int,
        backend: str,
        onnx_dir: Path,
    ) -> None:
        n = loaded.n_hidden_states
        bad = [layer for layer in layers if not -n <= layer < n]
        if bad:
            raise ValueError(
                f"layers {bad} out of range: the model has {n} hidden states "
                f"(embeddings + {n - 1} layers); use indices in [-{n}, {n - 1}]"
            )
        self.loaded = loaded
        self.layers = tuple(sorted({layer % n for layer in layers}))
        self.max_seq_length = int(max_seq_length or loaded.max_seq_length)
        self.batch_size = int(batch_size)
        self.backend = backend
        self.dim = len(self.layers) * loaded.hidden_size
        self.space = space_key(
            {
                "model": loaded.fingerprint,
                "layers": list(self.layers),
                "pooling": "mean-l2",
                "max_seq_length": self.max_seq_length,
            }
        )
        self._module = _pooling_module(loaded, self.layers)
        self._onnx_path = Path(onnx_dir) / f"{self.space}.onnx"
        self._session: Any = None

    # -- backends -----------------------------------------------------------------------

    def _onnx_session(self) -> Any:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise UserInputError(
                f"backend='onnx' needs onnxruntime ({exc}); {_INSTALL_HINT}"
            ) from None
        key = str(self._onnx_path)
        with _LOCK:
            session = _ONNX_SESSIONS.get(key)
            if session is None:
                if not self._onnx_path.is_file():
                    self._export_onnx()
                options = ort.SessionOptions()
                # As many threads as torch uses (torch.set_num_threads / OMP_NUM_THREADS),
                # so that the two backends compare like for like.
                options.intra_op_num_threads = int(self.loaded.torch.get_num_threads())
                session = ort.InferenceSession(key, options, providers=["CPUExecutionProvider"])
                _ONNX_SESSIONS[key] = session
        return session

    def _export_onnx(self) -> None:
        """Export the pooled graph once (dynamic batch and sequence axes), atomically."""
        import tempfile

        torch = self.loaded.torch
        names = list(self.loaded.input_names)
        sample = self.loaded.tokenizer(["a b", "c"], padding=True, return_tensors="pt")
        self._onnx_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=self._onnx_path.parent)
        os.close(fd)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    self._module.to("cpu"),
                    tuple(sample[name] for name in names),
                    tmp,
                    input_names=names,
                    output_names=["embedding"],
                    dynamic_axes={
                        **{name: {0: "batch", 1: "sequence"} for name in names},
                        "embedding": {0: "batch"},
                    },
                    opset_version=17,
                    dynamo=False,
                )
            os.replace(tmp, self._onnx_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        finally:
            self._module.to(self.loaded.device)

    def _run_batch(self, batch: list[str]) -> np.ndarray:
        tokenizer = self.loaded.tokenizer
        if self.backend == "onnx":
            if self._session is None:
                self._session = self._onnx_session()
            enc = tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=self.max_seq_length,
                return_tensors="np",
            )
            feeds = {
                name: np.asarray(enc[name], dtype=np.int64) for name in self.loaded.input_names
            }
            return np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        torch = self.loaded.torch
        enc = tokenizer(
            batch,
            padding=True,
            truncation=True,
            max_length=self.max_seq_length,
            return_tensors="pt",
        )
        inputs = tuple(enc[name].to(self.loaded.device) for name in self.loaded.input_names)
        with torch.inference_mode():
            out = self._module(*inputs)
        return out.to("cpu", torch.float32).numpy()

    def encode(self, texts: Sequence[str], *, progress: bool | None) -> np.ndarray:
        """Vectors of ``texts`` (float32, one row each), in length-sorted batches."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # Batches of similar length pad less; the order is fixed by the texts alone.
        order = np.argsort(np.array([len(t) for t in texts]), kind="stable")
        bar = None
        if progress is not False and len(texts) > self.batch_size:
            from tqdm.auto import tqdm

            bar = tqdm(
                total=len(texts),
                desc="embedding",
                unit="text",
                disable=None if progress is None else False,
                leave=False,
            )
        try:
            for start in range(0, len(texts), self.batch_size):
                idx = order[start : start + self.batch_size]
                out[idx] = self._run_batch([texts[i] for i in idx])
                if bar is not None:
                    bar.update(len(idx))
        finally:
            if bar is not None:
                bar.close()
        return out


# --------------------------------------------------------------------------- helpers


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def _log_loss(z: np.ndarray, y: np.ndarray) -> float:
    z = z - z.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=1))
    return float(np.mean(log_norm - z[np.arange(len(y)), y]))


def _fit_scale(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The logit scale ``s`` minimising validation log-loss of ``softmax(s * z)``."""
    from scipy.optimize import minimize_scalar

    result = minimize_scalar(
        lambda log_s: _log_loss(math.exp(log_s) * z, y),
        bounds=(-6.0, 4.0),
        method="bounded",
        options={"xatol": 1e-4},
    )
    scale = math.exp(float(result.x))
    return scale, _log_loss(scale * z, y)


def _positive_grid(values: Any, name: str) -> list[float]:
    try:
        grid = sorted({float(v) for v in values})
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers, got {values!r}") from None
    if not grid or any(not math.isfinite(v) or v <= 0 for v in grid):
        raise ValueError(f"{name} must hold one or more positive numbers, got {values!r}")
    return grid


# --------------------------------------------------------------------------- classifier


class EmbeddingClassifier(IntentClassifier):
    """Sentence embeddings + TF-IDF features into a linear head (logistic regressions).

    Parameters
    ----------
    model : str or path, default ``"sentence-transformers/all-MiniLM-L6-v2"``
        A sentence-transformers model: a local model directory, or a hub name resolved by
        sentence-transformers (from the Hugging Face cache when ``HF_HUB_OFFLINE=1``).
        Nothing is loaded until the classifier embeds.
    layers : sequence of int, default (-3, -2, -1)
        Hidden states to mean-pool (``-1`` the last layer, ``0`` the token embeddings);
        each pooled vector is L2-normalised and they are concatenated.
    tfidf_Cs : sequence of float, default (10, 30)
        Inverse regularisation strengths tried for the TF-IDF block.
    embedding_Cs : sequence of float, default (3, 10, 30)
        Inverse regularisation strengths tried for the embedding block.
    fusion_weights : sequence of float, default (0.25, 0.5, 1, 2, 4, 8)
        Weights ``w`` of the embedding logits relative to the TF-IDF logits tried.
    batch_size : int, default 64
        Texts per forward pass.
    max_seq_length : int, optional
        Truncate texts to this many tokens (default: the model's own limit).
    device : str, default "cpu"
        torch device of the model (``backend="torch"`` only).
    backend : {"torch", "onnx"}, default "torch"
        Run the model in torch, or through ONNX Runtime (exported once from the torch
        model into ``cache_dir/onnx``; needs ``onnxruntime`` and ``onnx``; CPU only).
    cache : bool, default True
        Read and write the on-disk embedding cache (in :meth:`fit` and when scoring).
    cache_dir : str or path, optional
        Cache directory; default ``$HYBRIDROUTE_CACHE_DIR/embeddings`` (else
        ``$XDG_CACHE_HOME/hybridroute/embeddings``, else ``~/.cache/hybridroute/embeddings``).
    progress : bool, optional
        Show a progress bar while embedding (default: only on a terminal).
    validation_fraction : float, default 0.1
        Share of each class carved from the training rows as validation data when ``fit``
        is given none and a grid has more than one value.
    max_iter : int, default 500
        Iteration limit of each logistic regression (L-BFGS).
    tol : float, default 1e-5
        Solver tolerance (tight because each grid is warm-started; see
        :class:`~hybridroute.classifiers.LocalClassifier`).
    random_state : int, default 0
        Seed of the validation carve-out (and of torch, which inference does not use).

    Attributes
    ----------
    classes_ : ndarray of str
        The label set, sorted; columns of :meth:`predict_proba`.
    tfidf_ : LocalClassifier
        The fitted TF-IDF block (its own weights; its ``C_`` is the chosen one).
    embedding_weights_ : ndarray of shape (embedding_dim_, n_classes), float32
        Weights of the embedding block (feature-major).
    embedding_intercept_ : ndarray of shape (n_classes,)
        Intercepts of the embedding block.
    tfidf_scale_, embedding_scale_ : float
        Multipliers of the two blocks' logits (``s`` and ``s * w``).
    C_tfidf_, C_embedding_, fusion_weight_ : float
        The chosen hyper-parameters.
    cv_results_ : dict
        ``{"grid": [{"C_tfidf", "C_embedding", "fusion_weight", "validation_accuracy"},
        ...], "best": {...}, "scale": s, "validation_log_loss": ..., "n_validation": int,
        "validation_source": "given" | "carved" | "none"}``.
    model_fingerprint_ : str
        Fingerprint of the embedding model's weights and tokenizer.
    embedding_dim_ : int
        Width of the pooled embedding (``len(layers) * hidden size``).
    embedding_stats_ : dict
        Of the last :meth:`fit`: ``{"n_texts", "n_unique", "n_embedded", "n_cached"}``.
    n_train_ : int
        Rows the final model was fitted on.

    Notes
    -----
    As with :class:`~hybridroute.classifiers.LocalClassifier`: validation rows carved
    from the training rows go back into training for the final fit (with the chosen
    hyper-parameters and scale); a validation set the caller passes is never trained on.

    :meth:`save` writes the TF-IDF block (``tfidf/``), the embedding head
    (``embedding_head.npz``) and, in the manifest, the model's name or directory with its
    fingerprint -- never the model itself.

    Examples
    --------
    >>> clf = EmbeddingClassifier(model="path/to/all-MiniLM-L6-v2").fit(texts, labels)  # doctest: +SKIP
    >>> clf.rank(["where is my card"], k=2)[0].top  # doctest: +SKIP
    'card_arrival'
    """

    kind = "embedding"
    _artifact_packages = ("torch", "transformers", "sentence-transformers", "onnxruntime")

    def __init__(
        self,
        *,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        layers: Sequence[int] = (-3, -2, -1),
        tfidf_Cs: Sequence[float] = (10.0, 30.0),
        embedding_Cs: Sequence[float] = (3.0, 10.0, 30.0),
        fusion_weights: Sequence[float] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
        batch_size: int = 64,
        max_seq_length: int | None = None,
        device: str = "cpu",
        backend: str = "torch",
        cache: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        progress: bool | None = None,
        validation_fraction: float = 0.1,
        max_iter: int = 500,
        tol: float = 1e-5,
        random_state: int = 0,
    ) -> None:
        self.model = model
        self.layers = layers
        self.tfidf_Cs = tfidf_Cs
        self.embedding_Cs = embedding_Cs
        self.fusion_weights = fusion_weights
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.device = device
        self.backend = backend
        self.cache = cache
        self.cache_dir = cache_dir
        self.progress = progress
        self.validation_fraction = validation_fraction
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    # -- parameters ---------------------------------------------------------------------

    _PARAMS = (
        "model",
        "layers",
        "tfidf_Cs",
        "embedding_Cs",
        "fusion_weights",
        "batch_size",
        "max_seq_length",
        "device",
        "backend",
        "cache",
        "cache_dir",
        "progress",
        "validation_fraction",
        "max_iter",
        "tol",
        "random_state",
    )

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        """The constructor arguments, as a dict (``deep`` is accepted and ignored)."""
        return {name: getattr(self, name) for name in self._PARAMS}

    def set_params(self, **params: Any) -> Self:
        """Set constructor arguments; returns ``self``.

        Changing ``model`` on a fitted classifier is allowed (e.g. the same model in
        another directory after loading); its fingerprint is checked when it is used.
        """
        for name, value in params.items():
            if name not in self._PARAMS:
                raise ValueError(f"unknown parameter {name!r} of {type(self).__name__}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = EmbeddingClassifier().get_params()
        changed = {k: v for k, v in self.get_params().items() if v != defaults[k]}
        inner = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        return f"{type(self).__name__}({inner})"

    def _validated_params(self) -> dict[str, Any]:
        if not isinstance(self.model, str | os.PathLike) or not str(self.model).strip():
            raise ValueError(f"model must be a hub name or a directory, got {self.model!r}")
        try:
            layers = tuple(int(v) for v in self.layers)
        except (TypeError, ValueError):
            raise ValueError(f"layers must be a sequence of ints, got {self.layers!r}") from None
        if not layers:
            raise ValueError("layers must name at least one hidden state")
        if self.backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {_BACKENDS}, got {self.backend!r}")
        if self.backend == "onnx" and str(self.device) != "cpu":
            raise ValueError("backend='onnx' runs on the CPU; use device='cpu'")
        if isinstance(self.batch_size, bool) or int(self.batch_size) < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if self.max_seq_length is not None and int(self.max_seq_length) < 2:
            raise ValueError(f"max_seq_length must be >= 2, got {self.max_seq_length!r}")
        if not 0.0 < float(self.validation_fraction) < 1.0:
            raise ValueError(
                f"validation_fraction must lie in (0, 1), got {self.validation_fraction!r}"
            )
        if int(self.max_iter) < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter!r}")
        return {
            "layers": layers,
            "tfidf_Cs": _positive_grid(self.tfidf_Cs, "tfidf_Cs"),
            "embedding_Cs": _positive_grid(self.embedding_Cs, "embedding_Cs"),
            "fusion_weights": _positive_grid(self.fusion_weights, "fusion_weights"),
        }

    # -- embedding ----------------------------------------------------------------------

    def _cache_root(self) -> Path:
        return Path(self.cache_dir).expanduser() if self.cache_dir else default_cache_dir()

    def _encoder(self, layers: tuple[int, ...]) -> _Encoder:
        key = (
            _resolve_source(self.model),
            str(self.device),
            layers,
            self.max_seq_length,
            int(self.batch_size),
            self.backend,
            str(self._cache_root()),
        )
        cached = getattr(self, "_encoder_cache", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        loaded = _load_model(self.model, str(self.device))
        encoder = _Encoder(
            loaded,
            layers=layers,
            max_seq_length=self.max_seq_length,
            batch_size=int(self.batch_size),
            backend=self.backend,
            onnx_dir=self._cache_root() / "onnx",
        )
        self._encoder_cache = (key, encoder)
        return encoder

    def _embed(self, texts: Sequence[str], encoder: _Encoder) -> tuple[np.ndarray, dict[str, int]]:
        """Vectors of ``texts`` through the cache; returns them and what was embedded."""
        unique = list(dict.fromkeys(texts))
        vectors: dict[str, np.ndarray] = {}
        if self.cache and unique:
            keys = [text_key(t) for t in unique]
            with EmbeddingCache(self._cache_root()) as store:
                found = store.get_many(encoder.space, keys)
                missing = [(t, k) for t, k in zip(unique, keys, strict=True) if k not in found]
                vectors = {t: found[k] for t, k in zip(unique, keys, strict=True) if k in found}
                if missing:
                    fresh = encoder.encode([t for t, _ in missing], progress=self.progress)
                    store.put_many(encoder.space, [k for _, k in missing], fresh)
                    vectors.update({t: row for (t, _), row in zip(missing, fresh, strict=True)})
            n_embedded = len(missing)
        else:
            fresh = encoder.encode(unique, progress=self.progress)
            vectors = dict(zip(unique, fresh, strict=True))
            n_embedded = len(unique)
        out = np.empty((len(texts), encoder.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = vectors[text]
        stats = {
            "n_texts": len(texts),
            "n_unique": len(unique),
            "n_embedded": n_embedded,
            "n_cached": len(unique) - n_embedded,
        }
        return out, stats

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The pooled embeddings this classifier uses, shape ``(n_texts, embedding_dim_)``.

        On a fitted classifier the model's fingerprint must match the one it was fitted
        with.
        """
        texts = _check_texts(texts)
        if hasattr(self, "classes_"):
            encoder = self._fitted_encoder()
        else:
            encoder = self._encoder(self._validated_params()["layers"])
        return self._embed(texts, encoder)[0]

    def _fitted_encoder(self) -> _Encoder:
        encoder = self._encoder(tuple(self.layers_))
        if encoder.loaded.fingerprint != self.model_fingerprint_:
            raise ArtifactError(
                f"the embedding model has fingerprint {encoder.loaded.fingerprint[:16]}..., "
                f"but this classifier was fitted with {self.model_fingerprint_[:16]}...; "
                "point model= at the model it was trained with",
                path=str(self.model),
            )
        if encoder.max_seq_length != self.max_seq_length_:
            raise ArtifactError(
                f"max_seq_length is {encoder.max_seq_length}, but this classifier was fitted "
                f"with {self.max_seq_length_}",
                path=str(self.model),
            )
        return encoder

    # -- fitting ------------------------------------------------------------------------

    def fit(
        self,
        texts: Sequence[str],
        labels: Sequence[str],
        *,
        validation: tuple[Sequence[str], Sequence[str]] | None = None,
    ) -> Self:
        """Embed, fit both blocks, choose ``C``s and the block weight on validation data.

        Parameters
        ----------
        texts : sequence of str
            Training texts.
        labels : sequence of str
            One label per text; the label set is the sorted distinct labels (at least two).
        validation : (texts, labels), optional
            Validation rows used only to choose hyper-parameters and the logit scale;
            never trained on. Without them (and with more than one candidate in a grid),
            a stratified share of the training rows is held out (``validation_fraction``,
            seeded by ``random_state``) and trained on afterwards.

        Returns
        -------
        EmbeddingClassifier
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
        t_cs, e_cs, weights = params["tfidf_Cs"], params["embedding_Cs"], params["fusion_weights"]
        searching = len(t_cs) * len(e_cs) * len(weights) > 1

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
        elif searching:
            mask = _stratified_holdout(
                labels, float(self.validation_fraction), int(self.random_state)
            )
            if not mask.any():
                raise DatasetError(
                    "too few rows to hold out validation data (no label has two rows); pass "
                    "validation=(texts, labels) or single values in the grids"
                )
            search_texts = [t for t, m in zip(texts, mask, strict=True) if not m]
            search_labels = [y for y, m in zip(labels, mask, strict=True) if not m]
            val_texts = [t for t, m in zip(texts, mask, strict=True) if m]
            val_labels = [y for y, m in zip(labels, mask, strict=True) if m]
            source = "carved"

        encoder = self._encoder(params["layers"])
        try:
            encoder.loaded.torch.manual_seed(int(self.random_state))
        except AttributeError:  # pragma: no cover - a torch without manual_seed
            pass
        # Every text is embedded once (through the cache), then indexed.
        pool = [*texts, *val_texts] if source == "given" else texts
        all_vectors, stats = self._embed(pool, encoder)
        row_of = {t: i for i, t in enumerate(pool)}

        def vectors(items: Sequence[str]) -> np.ndarray:
            return all_vectors[[row_of[t] for t in items]]

        class_index = {c: i for i, c in enumerate(classes)}
        n_classes = len(classes)
        helper = LocalClassifier(
            Cs=tuple(t_cs),
            max_iter=int(self.max_iter),
            tol=float(self.tol),
            random_state=int(self.random_state),
        )
        local_params = helper._validated_params()
        y_search = np.array([class_index[y] for y in search_labels])
        featurizer = helper._fit_featurizer(search_texts, local_params)
        t_models = helper._fit_path(featurizer.transform(search_texts), y_search, t_cs, n_classes)
        e_search = vectors(search_texts)
        e_models = helper._fit_path(e_search, y_search, e_cs, n_classes)

        grid: list[dict[str, float]] = []
        scale, val_loss = 1.0, None
        best = (0, 0, 0)
        if val_texts:
            y_val = np.array([class_index[y] for y in val_labels])
            x_val = featurizer.transform(val_texts)
            e_val = vectors(val_texts)
            zt = [np.asarray(x_val @ w, dtype=np.float64) + b for w, b, _ in t_models]
            ze = [e_val @ w + b for w, b, _ in e_models]
            accuracy: dict[tuple[int, int, int], float] = {}
            for i, c_t in enumerate(t_cs):
                for j, c_e in enumerate(e_cs):
                    for k, w in enumerate(weights):
                        z = zt[i] + w * ze[j]
                        acc = float(np.mean(np.argmax(z, axis=1) == y_val))
                        accuracy[(i, j, k)] = acc
                        grid.append(
                            {
                                "C_tfidf": c_t,
                                "C_embedding": c_e,
                                "fusion_weight": w,
                                "validation_accuracy": acc,
                            }
                        )
            top = max(accuracy.values())
            # Ties on accuracy (common on small validation sets): the lowest log-loss at
            # each candidate's own fitted scale.
            fitted = {
                key: _fit_scale(zt[key[0]] + weights[key[2]] * ze[key[1]], y_val)
                for key, acc in accuracy.items()
                if acc == top
            }
            best = min(fitted, key=lambda key: (fitted[key][1], key))
            scale, val_loss = fitted[best]
        i, j, k = best
        c_t, c_e, w = t_cs[i], e_cs[j], weights[k]

        if source == "carved":
            tfidf = LocalClassifier(
                Cs=(c_t,),
                max_iter=int(self.max_iter),
                tol=float(self.tol),
                random_state=int(self.random_state),
            ).fit(texts, labels)
            y_all = np.array([class_index[y] for y in labels])
            ((e_w, e_b, e_iter),) = helper._fit_path(vectors(texts), y_all, [c_e], n_classes)
            n_train = len(texts)
        else:
            t_w, t_b, t_iter = t_models[i]
            tfidf = LocalClassifier(
                Cs=(c_t,),
                max_iter=int(self.max_iter),
                tol=float(self.tol),
                random_state=int(self.random_state),
            )
            tfidf._set_fitted(featurizer, t_w, t_b, len(search_texts))
            tfidf.C_ = c_t
            tfidf.n_iter_ = t_iter
            tfidf.cv_results_ = {
                "C": [c_t],
                "validation_accuracy": [],
                "n_iter": [t_iter],
                "n_validation": 0,
                "validation_source": "none",
            }
            tfidf.classes_ = np.array(classes, dtype=str)
            e_w, e_b, e_iter = e_models[j]
            n_train = len(search_texts)
        if e_iter >= int(self.max_iter):
            from sklearn.exceptions import ConvergenceWarning

            warnings.warn(
                f"the embedding block's logistic regression stopped at max_iter="
                f"{self.max_iter} before reaching tol={self.tol}; raise max_iter",
                ConvergenceWarning,
                stacklevel=2,
            )

        self.tfidf_ = tfidf
        self.embedding_weights_ = np.ascontiguousarray(e_w, dtype=np.float32)
        self.embedding_intercept_ = np.asarray(e_b, dtype=np.float64)
        self.tfidf_scale_ = float(scale)
        self.embedding_scale_ = float(scale * w)
        self.C_tfidf_ = float(c_t)
        self.C_embedding_ = float(c_e)
        self.fusion_weight_ = float(w)
        self.cv_results_ = {
            "grid": grid,
            "best": {"C_tfidf": c_t, "C_embedding": c_e, "fusion_weight": w},
            "scale": float(scale),
            "validation_log_loss": val_loss,
            "n_validation": len(val_texts),
            "validation_source": source,
        }
        self.layers_ = list(encoder.layers)
        self.max_seq_length_ = encoder.max_seq_length
        self.model_fingerprint_ = encoder.loaded.fingerprint
        self.embedding_dim_ = encoder.dim
        self.embedding_stats_ = stats
        self.n_train_ = int(n_train)
        self.classes_ = np.array(classes, dtype=str)
        return self

    # -- prediction ---------------------------------------------------------------------

    def decision_function(self, texts: Sequence[str]) -> np.ndarray:
        """Fused class scores (logits) of shape ``(n_texts, n_classes)``."""
        self._check_fitted()
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, len(self.classes_)))
        lexical = self.tfidf_.decision_function(texts)
        vectors, _ = self._embed(texts, self._fitted_encoder())
        semantic = np.asarray(vectors @ self.embedding_weights_, dtype=np.float64)
        semantic += self.embedding_intercept_
        return self.tfidf_scale_ * lexical + self.embedding_scale_ * semantic

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
        return _softmax(self.decision_function(texts))

    # -- persistence --------------------------------------------------------------------

    def _save_state(self, directory: Path) -> dict[str, Any]:
        from ._persistence import save_classifier, write_arrays

        self._check_fitted()
        save_classifier(self.tfidf_, directory / _TFIDF_DIR)
        write_arrays(
            directory / _ARRAYS_FILE,
            {"weights": self.embedding_weights_, "intercept": self.embedding_intercept_},
        )
        params = self.get_params()
        params["model"] = str(params["model"])
        params["cache_dir"] = None if params["cache_dir"] is None else str(params["cache_dir"])
        for key in ("layers",):
            params[key] = [int(v) for v in params[key]]
        for key in ("tfidf_Cs", "embedding_Cs", "fusion_weights"):
            params[key] = [float(v) for v in params[key]]
        return {
            "params": params,
            "embedding_model": {
                "source": str(self.model),
                "fingerprint": self.model_fingerprint_,
                "layers": list(self.layers_),
                "pooling": "mean-l2",
                "max_seq_length": int(self.max_seq_length_),
                "dim": int(self.embedding_dim_),
            },
            "tfidf_scale_": self.tfidf_scale_,
            "embedding_scale_": self.embedding_scale_,
            "C_tfidf_": self.C_tfidf_,
            "C_embedding_": self.C_embedding_,
            "fusion_weight_": self.fusion_weight_,
            "cv_results_": self.cv_results_,
            "n_train_": self.n_train_,
        }

    @classmethod
    def _load_state(cls, directory: Path, manifest: dict[str, Any]) -> Self:
        """Rebuild a fitted classifier from ``directory`` (already checked by the loader)."""
        from ._persistence import load_classifier, read_arrays

        where = str(directory)
        state = manifest.get("state")
        if not isinstance(state, dict) or not isinstance(state.get("params"), dict):
            raise ArtifactError("manifest has no 'state.params' object", path=where)
        params = dict(state["params"])
        unknown = sorted(set(params) - set(cls._PARAMS))
        if unknown:
            raise ArtifactError(f"manifest state has unknown parameters {unknown!r}", path=where)
        for key in ("layers", "tfidf_Cs", "embedding_Cs", "fusion_weights"):
            if isinstance(params.get(key), list):
                params[key] = tuple(params[key])
        clf = cls(**params)
        try:
            clf._validated_params()
        except ValueError as exc:
            raise ArtifactError(f"manifest parameters are invalid: {exc}", path=where) from None
        tfidf = load_classifier(directory / _TFIDF_DIR)
        if not isinstance(tfidf, LocalClassifier):
            raise ArtifactError("the 'tfidf' block is not a local classifier", path=where)
        if [str(c) for c in tfidf.classes_] != manifest["classes"]:
            raise ArtifactError("the 'tfidf' block has another label set", path=where)
        try:
            info = dict(state["embedding_model"])
            dim = int(info["dim"])
            clf.model_fingerprint_ = str(info["fingerprint"])
            clf.layers_ = [int(v) for v in info["layers"]]
            clf.max_seq_length_ = int(info["max_seq_length"])
            clf.tfidf_scale_ = float(state["tfidf_scale_"])
            clf.embedding_scale_ = float(state["embedding_scale_"])
            clf.C_tfidf_ = float(state["C_tfidf_"])
            clf.C_embedding_ = float(state["C_embedding_"])
            clf.fusion_weight_ = float(state["fusion_weight_"])
            clf.cv_results_ = dict(state["cv_results_"])
            clf.n_train_ = int(state["n_train_"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(
                f"manifest state is missing or has a bad {exc}", path=where
            ) from None
        n_classes = len(manifest["classes"])
        arrays = read_arrays(
            directory / _ARRAYS_FILE, {"weights": (dim, n_classes), "intercept": (n_classes,)}
        )
        clf.tfidf_ = tfidf
        clf.embedding_weights_ = np.ascontiguousarray(arrays["weights"], dtype=np.float32)
        clf.embedding_intercept_ = np.asarray(arrays["intercept"], dtype=np.float64)
        clf.embedding_dim_ = dim
        clf.embedding_stats_ = {}
        clf.classes_ = np.array(manifest["classes"], dtype=str)
        return clf


# --------------------------------------------------------------------------- CLI seam


def fit_from_cli(
    texts: Sequence[str],
    labels: Sequence[str],
    *,
    validation: tuple[Sequence[str], Sequence[str]] | None = None,
    seed: int = 0,
    model: str | os.PathLike[str] | None = None,
    backend: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
) -> EmbeddingClassifier:
    """Fit an :class:`EmbeddingClassifier` the way ``hybridroute train`` fits a classifier.

    Validation rows whose label the training rows lack are dropped (they cannot inform
    the choice); without validation rows a share of ``texts`` is carved (seeded by
    ``seed``). ``None`` options keep the classifier's defaults.
    """
    options: dict[str, Any] = {"random_state": int(seed), "progress": progress}
    for key, value in (
        ("model", model),
        ("backend", backend),
        ("cache_dir", cache_dir),
        ("batch_size", batch_size),
    ):
        if value is not None:
            options[key] = value
    clf = EmbeddingClassifier(**options)
    if validation is not None:
        known = set(labels)
        pairs = [(t, y) for t, y in zip(*validation, strict=True) if y in known]
        validation = ([t for t, _ in pairs], [y for _, y in pairs]) if pairs else None
    try:
        return clf.fit(texts, labels, validation=validation)
    except ValueError as exc:
        if isinstance(exc, UserInputError):
            raise
        raise UserInputError(f"--classifier embedding: {exc}") from None
