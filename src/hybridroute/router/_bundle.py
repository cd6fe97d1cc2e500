"""Router bundles: one directory holding everything a router is made of.

::

    bundle/
      manifest.json       format, name, version, exits, and a SHA-256 for every file
      rules.yaml          the rules file
      policy.json         the fitted policy artifact
      destinations.json   intent label -> destination
      model/              the saved classifier (its own manifest; code-free formats)

Loading verifies every checksum and refuses a bundle with a missing, changed or
unexpected file, so what routes is exactly what was built.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._version import __version__
from ..exceptions import ArtifactError, UserInputError
from ._router import HybridRouter

__all__ = ["BUNDLE_FORMAT", "load_router", "save_router"]

BUNDLE_FORMAT = "hybridroute.router"
BUNDLE_FORMAT_VERSION = 1
_MANIFEST = "manifest.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            raise ArtifactError(
                f"bundle holds a symbolic link ({p.relative_to(root)})", path=str(root)
            )
        if p.is_file():
            rel = p.relative_to(root).as_posix()
            if rel != _MANIFEST:
                out[rel] = _sha256(p)
    return out


def save_router(
    router: HybridRouter, path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write ``router`` as a bundle directory at ``path``."""
    root = Path(path)
    if root.exists():
        if not overwrite and any(root.iterdir()):
            raise UserInputError(f"{root} exists and is not empty (pass overwrite=True / --force)")
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "rules.yaml").write_text(router.rules.to_yaml(), encoding="utf-8")
    router.policy.save(root / "policy.json")
    (root / "destinations.json").write_text(
        json.dumps(router.destinations, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    router.classifier.save(root / "model")
    manifest = {
        "format": BUNDLE_FORMAT,
        "format_version": BUNDLE_FORMAT_VERSION,
        "name": router.name,
        "version": router.version,
        "created_by": f"hybridroute {__version__}",
        "oos_label": router.oos_label,
        "oos_destination": router.oos_destination,
        "fallback_destination": router.fallback_destination,
        "files": _files(root),
    }
    (root / _MANIFEST).write_text(
        json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return root


def read_manifest(root: Path) -> dict[str, Any]:
    """The bundle's manifest, checked against the files (raises :class:`ArtifactError`)."""
    where = str(root)
    mpath = root / _MANIFEST
    if not root.is_dir():
        raise ArtifactError("not a router bundle directory", path=where)
    if not mpath.is_file():
        raise ArtifactError("not a router bundle (no manifest.json)", path=where)
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"manifest.json is not valid JSON ({exc})", path=where) from None
    if not isinstance(manifest, Mapping) or manifest.get("format") != BUNDLE_FORMAT:
        raise ArtifactError(f"manifest.json is not a {BUNDLE_FORMAT} manifest", path=where)
    version = manifest.get("format_version")
    if version != BUNDLE_FORMAT_VERSION:
        raise ArtifactError(
            f"bundle format version {version!r} is not supported (this version reads {BUNDLE_FORMAT_VERSION})",
            path=where,
        )
    listed = manifest.get("files")
    if not isinstance(listed, Mapping):
        raise ArtifactError("manifest.json has no 'files' checksums", path=where)
    actual = _files(root)
    missing = sorted(set(listed) - set(actual))
    extra = sorted(set(actual) - set(listed))
    if missing:
        raise ArtifactError(f"bundle is missing {', '.join(missing)}", path=where)
    if extra:
        raise ArtifactError(
            f"bundle holds files its manifest does not list: {', '.join(extra)}", path=where
        )
    changed = sorted(k for k in listed if listed[k] != actual[k])
    if changed:
        raise ArtifactError(
            f"checksum mismatch (file changed since the bundle was built): {', '.join(changed)}",
            path=where,
        )
    for required in ("rules.yaml", "policy.json", "destinations.json"):
        if required not in listed:
            raise ArtifactError(f"bundle lacks {required}", path=where)
    return dict(manifest)


def load_router(path: str | os.PathLike[str], *, strict: bool = False) -> HybridRouter:
    """Load a router bundle, verifying every file against its manifest."""
    from ..calibration import Policy
    from ..classifiers import load_classifier
    from ..rules import load_rules

    root = Path(path)
    manifest = read_manifest(root)
    rules = load_rules(root / "rules.yaml")
    policy = Policy.load(root / "policy.json")
    try:
        destinations = json.loads((root / "destinations.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(
            f"destinations.json is not valid JSON ({exc})", path=str(root)
        ) from None
    classifier = load_classifier(root / "model")
    return HybridRouter(
        rules=rules,
        classifier=classifier,
        policy=policy,
        destinations=destinations,
        name=manifest.get("name", "router"),
        version=manifest.get("version", "0"),
        oos_label=manifest.get("oos_label"),
        oos_destination=manifest.get("oos_destination", "human_review"),
        fallback_destination=manifest.get("fallback_destination", "human_review"),
        strict=strict,
    )
