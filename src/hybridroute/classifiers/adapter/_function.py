"""Any ``texts -> probabilities`` callable as a router classifier.

For a model hybridroute cannot hold: a fine-tuned transformer behind your own code, a
vendor API, an LLM asked for label probabilities. The callable is saved **by reference**
only (``"package.module:function"``, found from the function itself or given): no code
and no object is written, and loading imports the reference only if this process trusts
it (:func:`~hybridroute.classifiers.adapter.trust`). A lambda or a closure works in memory
but cannot be saved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from ...exceptions import ArtifactError
from ._common import ExternalClassifier, check_reference, reference_of, resolve_reference

__all__ = ["FunctionAdapter"]


class FunctionAdapter(ExternalClassifier):
    """A ``texts -> probabilities`` callable over a declared label set, as a router classifier.

    Parameters
    ----------
    function : callable
        ``function(texts: list[str])`` returns an array-like of shape
        ``(len(texts), len(classes))``: probabilities, columns in ``classes`` order, each
        row summing to 1 (within ``PROBA_SUM_TOLERANCE``). Anything else raises
        :class:`~hybridroute.exceptions.ClassifierError` (a router falls back and names it).
    classes : sequence of str
        The label set, in the callable's column order.
    reference : str, optional
        ``"package.module:function"`` naming ``function`` (checked at ``fit``); by default
        the function's own module and name when importing them gives it back.
    model_id : str, optional
        Your name for the model behind the callable (``"vendor-x 2025-06-01, prompt v3"``),
        recorded and part of the model fingerprint: change it when the model changes.
    probe_texts : sequence of str, default ()
        Texts scored at ``fit`` and again at load (the loaded callable must reproduce the
        scores). Off by default, since the callable may be a paid API; for a
        deterministic local model, give a few.

    Attributes
    ----------
    classes_ : ndarray of str
        ``classes``.
    reference_ : str or None
        What :meth:`save` records; ``None`` for a callable that cannot be imported by name
        (it works in memory; saving it is refused).
    probe_scores_ : ndarray or None
        Scores of ``probe_texts``.
    """

    kind = "function"
    _source = "the scoring function"

    def __init__(
        self,
        function: Callable[[list[str]], Any],
        classes: Sequence[str],
        *,
        reference: str | None = None,
        model_id: str | None = None,
        probe_texts: Sequence[str] = (),
    ) -> None:
        self.function = function
        self.classes = classes
        super().__init__(reference=reference, model_id=model_id, probe_texts=probe_texts)

    def _check_model(self) -> Sequence[str]:
        """Check the callable and its reference (``reference_``); the label set is
        ``classes`` (refused when ``function`` is not callable, ``reference`` does not
        import as it, or ``classes`` is one string)."""
        if not callable(self.function):
            raise ValueError(f"function must be callable, got {type(self.function).__name__}")
        if isinstance(self.classes, str):
            raise ValueError("classes must be a sequence of labels, not one string")
        if self.reference is None:
            self.reference_ = reference_of(self.function)
        else:
            self.reference_ = check_reference(self.reference, self.function, what="function")
        return self.classes

    def _scores(self, texts: list[str]) -> Any:
        return self.function(texts)

    # -- persistence --------------------------------------------------------------------------

    def _save_state(self, directory: Path) -> dict[str, Any]:
        self._check_fitted()
        if self.reference_ is None:
            raise ValueError(
                "this FunctionAdapter's function cannot be saved: a function is saved by "
                "reference, and this one cannot be imported by name (a lambda, a closure, or "
                "defined in __main__); use a module-level function of your package, or pass "
                "reference='package.module:function'"
            )
        state = self._common_state()
        state["reference"] = self.reference_
        return state

    @classmethod
    def _load_state(cls, directory: Path, manifest: dict[str, Any]) -> Self:
        where, state, model_id, probe = cls._read_common(directory, manifest)
        function = resolve_reference(state.get("reference"), path=where)
        if not callable(function):
            raise ArtifactError(
                f"the model reference {state['reference']!r} is not callable", path=where
            )
        clf = cls(
            function,
            tuple(manifest["classes"]),
            reference=state["reference"],
            model_id=model_id,
            probe_texts=probe,
        )
        clf.classes_ = np.array(manifest["classes"], dtype=str)
        clf.reference_ = state["reference"]
        clf._check_probe(state, where)
        return clf
