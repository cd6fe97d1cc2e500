"""Pooled multi-layer sentence embeddings of texts, by torch or ONNX Runtime, in batches.

A text's vector is the model's token states, mean-pooled over the attention mask for
each of a few hidden layers, each pooled vector L2-normalised, concatenated. For the last
layer alone this is exactly the model's sentence embedding (all-MiniLM-L6-v2 pools by
mean and normalises). The *embedding space* (:attr:`Encoder.space`) is everything that
decides a vector -- model fingerprint, layers, pooling, maximum sequence length -- and
keys the on-disk cache (:mod:`._cache`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._cache import space_key
from ._model import LoadedModel, ModelSource
from ._onnx import onnx_session

__all__ = ["BACKENDS", "POOLING", "Encoder"]

#: The backends that run the pooled graph.
BACKENDS = ("torch", "onnx")
#: The pooling, as recorded in the cache key and in a saved classifier's manifest.
POOLING = "mean-l2"


def _pooling_module(loaded: LoadedModel, layers: tuple[int, ...]) -> Any:
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


class Encoder:
    """Vectors of texts in one embedding space (model, layers, pooling, length limit).

    Parameters
    ----------
    loaded : LoadedModel
        The model (its fingerprint is part of the space).
    source : ModelSource
        Where the classifier resolved the model from (recorded when it is fitted).
    layers : tuple of int
        Hidden states to pool (negative indices count from the last).
    max_seq_length : int or None
        Token limit (default: the model's).
    batch_size : int
        Texts per forward pass.
    backend : {"torch", "onnx"}
        How the pooled graph runs.
    onnx_dir : Path
        Where the exported graph is kept (``backend="onnx"``).
    """

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        source: ModelSource,
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
        self.source = source
        self.layers = tuple(sorted({layer % n for layer in layers}))
        self.max_seq_length = int(max_seq_length or loaded.max_seq_length)
        self.batch_size = int(batch_size)
        self.backend = backend
        self.dim = len(self.layers) * loaded.hidden_size
        self.space = space_key(
            {
                "model": loaded.fingerprint,
                "layers": list(self.layers),
                "pooling": POOLING,
                "max_seq_length": self.max_seq_length,
            }
        )
        self._module = _pooling_module(loaded, self.layers)
        self._onnx_path = Path(onnx_dir) / f"{self.space}.onnx"
        self._session: Any = None

    def _tokens(self, batch: list[str], kind: str) -> Any:
        return self.loaded.tokenizer(
            batch,
            padding=True,
            truncation=True,
            max_length=self.max_seq_length,
            return_tensors=kind,
        )

    def _run_batch(self, batch: list[str]) -> np.ndarray:
        names = self.loaded.input_names
        if self.backend == "onnx":
            if self._session is None:
                self._session = onnx_session(self.loaded, self._module, self._onnx_path)
            enc = self._tokens(batch, "np")
            feeds = {name: np.asarray(enc[name], dtype=np.int64) for name in names}
            return np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        torch = self.loaded.torch
        enc = self._tokens(batch, "pt")
        inputs = tuple(enc[name].to(self.loaded.device) for name in names)
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
