"""Router bundles: one directory holding everything a router is made of.

::

    bundle/
      manifest.json       format, name, version, exits, a SHA-256 for every file, and its
                          seal (content_sha256; an HMAC signature with a signing key set)
      rules.yaml          the rules file
      policy.json         the fitted policy artifact (sealed, bound to the model)
      destinations.json   intent label -> destination
      model/              the saved classifier (its own sealed manifest; code-free formats)

Every field that changes a decision is covered by a checksum verified on load: the
manifest's own fields (``name``, ``version``, ``oos_label``, ``oos_destination``,
``fallback_destination``, the file list) by its ``content_sha256``, every other file by the
SHA-256 the manifest lists, and the policy and the model by their own seals too. A router
that redacts personal data from its texts records the kinds in the manifest's optional
``redact_pii`` field (a list: ``["email", "iban", "card", "phone"]``), sealed with the rest,
so the loaded router -- and replay against the bundle -- redacts the same way; a bundle
without the field routes texts as given. With
``HYBRIDROUTE_SIGNING_KEY`` set, the bundle is signed when written (manifest, policy and
model manifest alike) and only signed bundles load (see :mod:`hybridroute._integrity`).

The policy must be the one fitted on the bundle's model: its ``model_fingerprint`` is
compared with the model's fingerprint, and a bundle whose policy records none or another
is refused, naming both. Loading refuses a bundle with a missing, changed or unexpected
file, a symbolic link or special file, or a manifest field out of place, so what routes
is exactly what was built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _safeio
from .._atomic import replace_directory
from .._integrity import file_sha256, is_sha256_hex, seal, verify
from .._pii import PII_KINDS, PIIRedaction
from .._version import __version__
from ..exceptions import ArtifactError, InputError, UserInputError
from ._router import HybridRouter

if TYPE_CHECKING:
    from ..calibration import Policy
    from ..classifiers import IntentClassifier

__all__ = ["BUNDLE_FORMAT", "check_model_binding", "load_router", "save_router"]

BUNDLE_FORMAT = "hybridroute.router"
#: Version 2 added the manifest's seal and the policy-to-model binding; a version-1
#: bundle is refused (accepting one would let a stripped seal pass as an old bundle).
BUNDLE_FORMAT_VERSION = 2
_MANIFEST = "manifest.json"
_REQUIRED = ("rules.yaml", "policy.json", "destinations.json", "model/manifest.json")
_FIELDS = (
    "format",
    "format_version",
    "name",
    "version",
    "created_by",
    "oos_label",
    "oos_destination",
    "fallback_destination",
    "files",
)
#: Manifest fields a bundle may leave out (it then behaves as bundles did before them).
_OPTIONAL_FIELDS = ("redact_pii",)
#: Byte limits of the bundle's own JSON files (enforced while reading).
MANIFEST_MAX_BYTES = 16 * 1024 * 1024
DESTINATIONS_MAX_BYTES = 8 * 1024 * 1024


#: How to fit a policy bound to a model, in Python (the command line says it its own way).
_REFIT_IN_PYTHON = "fit_policy(..., model_fingerprint=classifier.fingerprint())"


def _short(fingerprint: str) -> str:
    return f"{fingerprint[:16]}…"


def check_model_binding(
    policy: Policy,
    classifier: IntentClassifier,
    *,
    strict: bool = False,
    policy_source: str | None = None,
    model_source: str | None = None,
    refit_hint: str = _REFIT_IN_PYTHON,
) -> None:
    """Refuse a policy paired with a classifier other than the one it was fitted on.

    The policy's ``model_fingerprint`` is compared with the classifier's model fingerprint
    (the ``fingerprint`` of the manifest it was loaded from; see
    :meth:`hybridroute.classifiers.IntentClassifier.fingerprint`).

    Parameters
    ----------
    policy : Policy
        The fitted policy.
    classifier : IntentClassifier
        The classifier it is to be applied to.
    strict : bool, default False
        ``False`` (a router built in memory): compare only when both sides carry a
        fingerprint, so a policy fitted in memory without one pairs with any classifier
        of its label set. ``True`` (``router build``, loading a bundle): the policy must
        record a fingerprint, and an in-memory classifier's is computed.
    policy_source, model_source : str, optional
        Where the policy and the model came from, for the message.
    refit_hint : str
        How to fit a policy bound to the model, in the caller's words: by default the
        Python call; the command line names its own command.

    Raises
    ------
    ArtifactError
        Naming the policy file and field ``model_fingerprint``, both fingerprints and the
        model: the policy records another model, or (strict) none.
    """
    policy_fp = getattr(policy, "model_fingerprint", None)
    manifest = getattr(classifier, "manifest_", None)
    model_fp = manifest.get("fingerprint") if isinstance(manifest, Mapping) else None
    model = model_source or "the classifier"
    if policy_fp is None:
        if strict:
            raise ArtifactError(
                "field 'model_fingerprint' is null: the policy does not record the model it "
                f"was fitted on, so it cannot be checked against {model}; fit it with "
                f"{refit_hint}",
                path=policy_source,
            )
        return
    if not is_sha256_hex(model_fp):
        if not strict:
            return
        from ..classifiers._persistence import classifier_fingerprint

        model_fp = classifier_fingerprint(classifier)
    if policy_fp != model_fp:
        raise ArtifactError(
            f"field 'model_fingerprint': the policy was fitted on model {_short(policy_fp)}, "
            f"but {model} is model {_short(str(model_fp))}; a policy's thresholds and "
            f"calibration hold only for the model it was fitted on (refit it with {refit_hint})",
            path=policy_source,
        )


def _files(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` but the manifest; refuses links and special files."""
    out: dict[str, str] = {}
    for base, dirs, names in os.walk(root, followlinks=False):
        here = Path(base)
        for name in sorted(dirs + names):
            p = here / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                raise ArtifactError(f"bundle holds a symbolic link ({rel})", path=str(root))
            if name in dirs:
                continue
            if not p.is_file():
                raise ArtifactError(
                    f"bundle holds {rel}, which is not a regular file", path=str(root)
                )
            if rel != _MANIFEST:
                out[rel] = file_sha256(p)
    return dict(sorted(out.items()))


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(
        json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n",
        encoding="utf-8",
    )


def save_router(
    router: HybridRouter, path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write ``router`` as a bundle directory at ``path``.

    The policy written is bound to the classifier written beside it: a policy that
    records the fingerprint of another model is refused, and one that records none (a
    policy fitted in memory) is written with the fingerprint of the classifier saved
    here -- the pairing the router was built with. Every JSON file is sealed, and signed
    when ``HYBRIDROUTE_SIGNING_KEY`` is set. Files are written to a temporary sibling and
    moved into place at the end, so a failed save leaves nothing half-written.

    Parameters
    ----------
    router : HybridRouter
        The router to write: its rules, destination map, classifier, policy and exits.
    path : str or path-like
        The bundle directory; created (with its parents) when absent. An existing empty
        directory is used as it is.
    overwrite : bool, default False
        Replace an existing non-empty directory, which must then be a router bundle (hold
        a manifest); the old bundle is removed only once the new one is in place.

    Returns
    -------
    pathlib.Path
        The bundle directory.

    Raises
    ------
    UserInputError
        ``path`` exists and is not empty (without ``overwrite``), or is not a bundle.
    ArtifactError
        The policy was fitted on another model.
    """
    from ..rules import check_rule_tests

    check_rule_tests(router.rules)  # a rules file whose own tests fail is never bundled
    from ..classifiers._persistence import read_manifest as read_model_manifest

    root = Path(path)
    if root.exists():
        if not root.is_dir():
            raise UserInputError(f"{root} exists and is not a directory")
        if any(root.iterdir()):
            if not overwrite:
                raise UserInputError(
                    f"{root} exists and is not empty; choose a new directory, or pass "
                    "overwrite=True to replace the router bundle there"
                )
            if not (root / _MANIFEST).is_file():
                raise UserInputError(
                    f"{root} holds no {_MANIFEST}; refusing to replace a directory that is "
                    "not a router bundle"
                )
    with replace_directory(root) as staging:
        (staging / "rules.yaml").write_text(router.rules.to_yaml(), encoding="utf-8")
        _write_json(staging / "destinations.json", router.destinations)
        router.classifier.save(staging / "model")
        fingerprint = read_model_manifest(staging / "model")["fingerprint"]
        policy = router.policy
        if policy.model_fingerprint is None:
            policy = policy.with_model_fingerprint(fingerprint)
        elif policy.model_fingerprint != fingerprint:
            raise ArtifactError(
                "field 'model_fingerprint': the router's policy was fitted on model "
                f"{_short(policy.model_fingerprint)}, but its classifier is model "
                f"{_short(fingerprint)}; a policy's thresholds and calibration hold only for "
                "the model it was fitted on"
            )
        policy.save(staging / "policy.json")
        manifest = {
            "format": BUNDLE_FORMAT,
            "format_version": BUNDLE_FORMAT_VERSION,
            "name": router.name,
            "version": router.version,
            "created_by": f"hybridroute {__version__}",
            "oos_label": router.oos_label,
            "oos_destination": router.oos_destination,
            "fallback_destination": router.fallback_destination,
            "files": _files(staging),
        }
        if router.redact_pii is not None:
            manifest["redact_pii"] = router.redact_pii.to_list()
        _write_json(staging / _MANIFEST, seal(manifest))
    return root


def _field(cond: bool, field: str, what: str, path: str) -> None:
    if not cond:
        raise ArtifactError(f"field {field!r} {what}", path=path)


def read_manifest(root: Path) -> dict[str, Any]:
    """The bundle's manifest, its seal verified and checked against the files.

    Returns the manifest without its seal fields. Raises :class:`ArtifactError` naming
    the file and field at fault.
    """
    root = Path(root)
    where = str(root)
    mpath = root / _MANIFEST
    if not root.is_dir():
        raise ArtifactError("not a router bundle directory", path=where)
    if not mpath.exists() and not mpath.is_symlink():
        raise ArtifactError("not a router bundle (no manifest.json)", path=where)
    if mpath.is_symlink():
        raise ArtifactError("bundle holds a symbolic link (manifest.json)", path=where)
    mwhere = str(mpath)
    try:
        text = _safeio.read_text(mpath, limit=MANIFEST_MAX_BYTES, what="bundle manifest")
        doc = _safeio.parse_json(text, source=mwhere, what="bundle manifest")
    except InputError as exc:
        line = f" at line {exc.line}" if exc.line is not None else ""
        raise ArtifactError(
            f"manifest.json is not valid JSON ({exc.reason}{line})", path=where
        ) from None
    if not isinstance(doc, Mapping) or doc.get("format") != BUNDLE_FORMAT:
        raise ArtifactError(f"manifest.json is not a {BUNDLE_FORMAT} manifest", path=where)
    version = doc.get("format_version")
    if version != BUNDLE_FORMAT_VERSION:
        raise ArtifactError(
            f"bundle format version {version!r} is not supported (this version reads "
            f"{BUNDLE_FORMAT_VERSION}); build the bundle again with this version of hybridroute",
            path=where,
        )
    manifest = verify(doc, path=mwhere, what="bundle manifest")
    unknown = sorted(set(manifest) - set(_FIELDS) - set(_OPTIONAL_FIELDS))
    _field(not unknown, unknown[0] if unknown else "", "is not a bundle manifest field", mwhere)
    for key in _FIELDS:
        _field(key in manifest, key, "is missing", mwhere)
    for key in ("name", "version", "oos_destination", "fallback_destination", "created_by"):
        value = manifest[key]
        _field(isinstance(value, str) and value != "", key, "must be a non-empty string", mwhere)
    oos = manifest["oos_label"]
    _field(
        oos is None or (isinstance(oos, str) and oos != ""),
        "oos_label",
        "must be a label or null",
        mwhere,
    )
    if "redact_pii" in manifest:
        kinds = manifest["redact_pii"]
        _field(
            isinstance(kinds, list)
            and bool(kinds)
            and all(isinstance(k, str) and k in PII_KINDS for k in kinds)
            and len(set(kinds)) == len(kinds),
            "redact_pii",
            f"must be a list of distinct kinds of personal data ({', '.join(PII_KINDS)})",
            mwhere,
        )
    listed = manifest["files"]
    _field(
        isinstance(listed, dict) and all(is_sha256_hex(v) for v in listed.values()),
        "files",
        "must map each file to its SHA-256 (64 lowercase hex digits)",
        mwhere,
    )
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
    for required in _REQUIRED:
        if required not in listed:
            raise ArtifactError(f"bundle lacks {required}", path=where)
    return dict(manifest)


def _read_destinations(path: Path) -> dict[str, str]:
    where = str(path)
    try:
        mapping = _safeio.read_json(path, limit=DESTINATIONS_MAX_BYTES, what="destinations file")
    except InputError as exc:
        line = f" at line {exc.line}" if exc.line is not None else ""
        raise ArtifactError(
            f"destinations.json is not valid JSON ({exc.reason}{line})", path=where
        ) from None
    if not isinstance(mapping, dict):
        raise ArtifactError(
            "destinations.json must hold an object of label -> destination", path=where
        )
    for label, dest in mapping.items():
        if not isinstance(dest, str) or not dest:
            raise ArtifactError(
                f"destinations.json: label {label!r} must map to a destination name, got {dest!r}",
                path=where,
            )
    return mapping


def load_router(
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    redact_pii: PIIRedaction | bool | str | Sequence[str] | None = None,
) -> HybridRouter:
    """Load a router bundle, verifying every file, every seal and the policy's model.

    Parameters
    ----------
    path : str or path-like
        The bundle directory.
    strict : bool, default False
        Passed to :class:`HybridRouter` (raise classifier failures instead of falling back).
    redact_pii : PIIRedaction, bool, str or sequence of str, optional
        Kinds of personal data to redact from texts *in addition to* those the bundle
        records (``True`` or ``"all"``: every kind); the service's ``redact_pii`` setting
        comes in here. ``None``: as the bundle says.

    Raises
    ------
    ArtifactError
        Naming the file and field: the manifest's seal or signature fails, a file is
        missing, changed, unexpected or not a regular file, a manifest field is out of
        place, the policy or model fails its own checks, or the policy records no model
        fingerprint or another model's.
    """
    from ..calibration import Policy
    from ..classifiers import load_classifier
    from ..rules import load_rules

    root = Path(path)
    manifest = read_manifest(root)
    rules = load_rules(root / "rules.yaml")
    policy = Policy.load(root / "policy.json")
    destinations = _read_destinations(root / "destinations.json")
    classifier = load_classifier(root / "model")
    check_model_binding(
        policy,
        classifier,
        strict=True,
        policy_source=str(root / "policy.json"),
        model_source=f"the bundle's model ({root / 'model'})",
    )
    return HybridRouter(
        rules=rules,
        classifier=classifier,
        policy=policy,
        destinations=destinations,
        name=manifest["name"],
        version=manifest["version"],
        oos_label=manifest["oos_label"],
        oos_destination=manifest["oos_destination"],
        fallback_destination=manifest["fallback_destination"],
        strict=strict,
        redact_pii=_redaction(manifest.get("redact_pii"), redact_pii),
    )


def _redaction(recorded: list[str] | None, extra: Any) -> PIIRedaction | None:
    """The bundle's redaction joined with the caller's (either may be ``None``)."""
    mine = PIIRedaction(kinds=tuple(recorded)) if recorded else None
    more = PIIRedaction.coerce(extra)
    if mine is None:
        return more
    return mine.union(more)
