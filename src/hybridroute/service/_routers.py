"""The routers a service holds: one live, any number of shadows, swapped atomically.

A :class:`RouterSet` holds an immutable :class:`Routers` value (live + shadows) and
replaces it whole on a reload or a promotion. A request reads the value once when it
starts and routes, logs and shadows with that value to the end, so a promotion never
changes the router under an in-flight request: it finishes on the router it started
with, and the next request sees the new one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._integrity import file_sha256

if TYPE_CHECKING:
    from ..calibration import Policy
    from ..router import HybridRouter

__all__ = ["LoadedRouter", "RouterSet", "Routers", "load_bundle", "policy_summary"]

LIVE = "live"
SHADOW = "shadow"


def policy_summary(policy: Policy) -> dict[str, Any]:
    """The provenance summary of a fitted policy (what ``GET /v1/routers`` shows).

    Plain JSON values only: whether the target is certified, the target and its
    confidence (``delta``), the auto-route threshold, the calibrator, the calibration
    sample size, the model the policy was fitted on, the policy's own hash and the
    free-form provenance it recorded (data fingerprint, seed, command...).
    """
    doc = policy.to_dict()
    guarantee = doc.get("guarantee") or {}
    thresholds = doc.get("thresholds") or {}
    calibration = doc.get("calibration_data") or {}
    objective = doc.get("objective") or {}
    return {
        "certified": bool(guarantee.get("certified", False)),
        "target": guarantee.get("target"),
        "delta": guarantee.get("delta"),
        "bound": guarantee.get("bound"),
        "threshold": thresholds.get("auto"),
        "ask_threshold": thresholds.get("ask"),
        "objective": objective.get("name"),
        "calibrator": (doc.get("calibrator") or {}).get("method"),
        "calibration_size": calibration.get("size"),
        "model_fingerprint": doc.get("model_fingerprint"),
        "policy_sha256": policy.content_sha256,
        "library_version": doc.get("library_version"),
        "provenance": doc.get("provenance") or {},
    }


@dataclass(frozen=True, slots=True)
class LoadedRouter:
    """One router bundle as the service holds it.

    Attributes
    ----------
    router : HybridRouter
        The router, loaded (and verified) by :func:`hybridroute.router.load_router`.
    path : str
        The bundle directory it was loaded from.
    role : str
        ``"live"`` or ``"shadow"``.
    manifest_sha256 : str
        The SHA-256 of the bundle's ``manifest.json`` (which lists every file's hash).
    policy : dict
        :func:`policy_summary` of its policy.
    """

    router: HybridRouter
    path: str
    role: str
    manifest_sha256: str
    policy: Mapping[str, Any]

    @property
    def inline(self) -> bool:
        """Whether one item may be routed on the event loop: rules only, or the local
        classifier (TF-IDF + logistic regression: a fraction of a millisecond, no I/O).
        An LLM, a cascade or an embedding model is always routed on a worker thread."""
        from ..classifiers import LocalClassifier

        clf = getattr(self.router, "classifier", None)
        return clf is None or type(clf) is LocalClassifier

    @property
    def name(self) -> str:
        """The router's name."""
        return str(self.router.name)

    @property
    def version(self) -> str:
        """The router's version."""
        return str(self.router.version)

    def describe(self) -> dict[str, Any]:
        """The ``GET /v1/routers`` entry: name, version, role, manifest hash, policy."""
        return {
            "name": self.name,
            "version": self.version,
            "role": self.role,
            "manifest_sha256": self.manifest_sha256,
            "redact_pii": list(self.router.redact_pii.kinds) if self.router.redact_pii else [],
            "policy": dict(self.policy),
        }


def load_bundle(path: str | os.PathLike[str], role: str, redact_pii: Any = ()) -> LoadedRouter:
    """Load and verify the bundle at ``path`` (checksums, seals, signature, model binding).

    ``redact_pii``: kinds of personal data redacted from texts before routing, on top of
    what the bundle records (the service's ``redact_pii``).

    Raises
    ------
    ArtifactError, UserInputError
        As :func:`hybridroute.router.load_router` raises, naming the file and field.
    """
    from ..router import load_router

    root = Path(path)
    # hash the manifest before loading: load_router verifies every file against it, so
    # the hash names exactly what was verified (a change in between fails the load)
    manifest = root / "manifest.json"
    digest = file_sha256(manifest) if manifest.is_file() and not manifest.is_symlink() else ""
    router = load_router(root, redact_pii=redact_pii)
    return LoadedRouter(
        router=router,
        path=os.fspath(path),
        role=role,
        manifest_sha256=digest,
        policy=policy_summary(router.policy),
    )


@dataclass(frozen=True, slots=True)
class Routers:
    """An immutable view: the live router and the shadows (in the order they were added)."""

    live: LoadedRouter
    shadows: tuple[LoadedRouter, ...] = ()

    def all(self) -> tuple[LoadedRouter, ...]:
        """Live first, then the shadows."""
        return (self.live, *self.shadows)

    def find(self, version: str) -> LoadedRouter | None:
        """The router of that version (the live one first), or ``None``."""
        for loaded in self.all():
            if loaded.version == version:
                return loaded
        return None


class RouterSet:
    """The service's routers, replaced whole (never changed in place) under a lock.

    Parameters
    ----------
    live : LoadedRouter
        The live router.
    shadows : sequence of LoadedRouter
        The shadows.
    """

    def __init__(self, live: LoadedRouter, shadows: tuple[LoadedRouter, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._current = Routers(live=live, shadows=tuple(shadows))

    @property
    def current(self) -> Routers:
        """The routers now (one attribute read: atomic)."""
        return self._current

    def add_shadow(self, loaded: LoadedRouter) -> Routers:
        """Add ``loaded`` as a shadow, replacing a shadow of the same version.

        Raises
        ------
        ValueError
            ``loaded`` has the live router's version (promote instead of reloading it).
        """
        with self._lock:
            cur = self._current
            if loaded.version == cur.live.version:
                raise ValueError(
                    f"version {loaded.version!r} is the live router's version; give the new "
                    "bundle another version"
                )
            shadow = replace(loaded, role=SHADOW)
            kept = tuple(s for s in cur.shadows if s.version != loaded.version)
            self._current = Routers(live=cur.live, shadows=(*kept, shadow))
            return self._current

    def promote(self, version: str) -> tuple[Routers, LoadedRouter]:
        """Make the shadow of ``version`` live; the old live router becomes a shadow.

        Returns the new routers and the router that was live.

        Raises
        ------
        KeyError
            No shadow has that version.
        """
        with self._lock:
            cur = self._current
            chosen = next((s for s in cur.shadows if s.version == version), None)
            if chosen is None:
                raise KeyError(version)
            old = cur.live
            others = tuple(s for s in cur.shadows if s.version != version)
            self._current = Routers(
                live=replace(chosen, role=LIVE),
                shadows=(*others, replace(old, role=SHADOW)),
            )
            return self._current, old
