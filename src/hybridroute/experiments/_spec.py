"""Experiment specs: a safe YAML file, validated into an :class:`ExperimentSpec`.

A spec has common fields and the fields of its kind::

    format: 1                       # spec format version
    kind: thresholds                # thresholds | oos | router (see hybridroute.experiments.kinds)
    name: thresholds-banking77      # the MLflow parent run's name
    description: ...                # optional
    seed: 0                         # every random step derives from it
    mlflow_experiment: hybridroute-experiments   # optional MLflow experiment name
    dataset:
      name: banking77               # a load_dataset reference (csv:/jsonl: paths are
                                    # relative to the spec file)
      options: {}                   # load_dataset options (e.g. {oos: label})
      splits: {train: train, pool: [test]}   # role -> split name(s); roles per kind
    classifier:
      kind: local
      params: {Cs: [10.0]}          # LocalClassifier parameters; random_state defaults to seed
    ...                             # the kind's own fields

Every mistake raises :class:`~hybridroute.exceptions.SpecError` naming the file and the
field (dotted, with list positions: ``methods[2].threshold``).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._safeio import parse_yaml, read_text
from ..exceptions import InputError, SpecError

__all__ = [
    "MAX_SPEC_BYTES",
    "SPEC_FORMAT",
    "ExperimentSpec",
    "SpecReader",
    "load_spec",
    "parse_spec",
]

#: The spec format this version reads.
SPEC_FORMAT = 1
#: Largest spec file accepted.
MAX_SPEC_BYTES = 256 * 1024
_MAX_YAML_DEPTH = 12
_MAX_YAML_NODES = 20_000
DEFAULT_MLFLOW_EXPERIMENT = "hybridroute-experiments"

#: Keys every spec may have, whatever its kind.
COMMON_KEYS = (
    "format",
    "kind",
    "name",
    "description",
    "seed",
    "mlflow_experiment",
    "dataset",
    "classifier",
)
_DATASET_KEYS = ("name", "options", "splits")
_CLASSIFIER_KEYS = ("kind", "params")
#: Classifier kinds an experiment can train, by spec name (the local classifier only: an
#: experiment must run offline and reproducibly).
CLASSIFIER_KINDS = ("local",)


class SpecReader:
    """Typed reads from a spec document that fail with a :class:`SpecError` naming the field.

    Parameters
    ----------
    path : str or None
        The spec file, named in every error.
    """

    def __init__(self, path: str | None) -> None:
        self.path = path

    def error(self, message: str, field: str | None = None) -> SpecError:
        """A :class:`SpecError` for this spec."""
        return SpecError(message, path=self.path, field=field)

    def mapping(self, value: Any, field: str, keys: Iterable[str] | None = None) -> dict[str, Any]:
        """A mapping with string keys; with ``keys``, any other key is refused."""
        if not isinstance(value, Mapping):
            raise self.error(f"must be a mapping, got {_kind(value)}", field)
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise self.error(f"keys must be strings, got {k!r}", field)
            out[k] = v
        if keys is not None:
            allowed = list(keys)
            unknown = [k for k in out if k not in allowed]
            if unknown:
                raise self.error(
                    f"unknown key; allowed here: {', '.join(allowed)}", _join(field, unknown[0])
                )
        return out

    def string(self, value: Any, field: str, *, choices: Sequence[str] | None = None) -> str:
        """A non-empty string (one of ``choices`` when given)."""
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"must be a non-empty string, got {_show(value)}", field)
        if choices is not None and value not in choices:
            raise self.error(f"must be one of {', '.join(choices)}; got {value!r}", field)
        return value

    def integer(
        self, value: Any, field: str, *, low: int | None = None, high: int | None = None
    ) -> int:
        """An integer in ``[low, high]``."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise self.error(f"must be an integer, got {_show(value)}", field)
        v = int(value)
        if (low is not None and v < low) or (high is not None and v > high):
            rng = f"[{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
            raise self.error(f"must be in {rng}, got {v}", field)
        return v

    def number(self, value: Any, field: str) -> float:
        """A finite real number."""
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(float(value))
        ):
            raise self.error(f"must be a finite number, got {_show(value)}", field)
        return float(value)

    def fraction(
        self, value: Any, field: str, *, closed_low: bool = False, closed_high: bool = False
    ) -> float:
        """A number in (0, 1), or with closed ends where asked."""
        v = self.number(value, field)
        low_ok = v >= 0 if closed_low else v > 0
        high_ok = v <= 1 if closed_high else v < 1
        if not (low_ok and high_ok):
            interval = ("[" if closed_low else "(") + "0, 1" + ("]" if closed_high else ")")
            raise self.error(f"must be in {interval}, got {v:g}", field)
        return v

    def boolean(self, value: Any, field: str) -> bool:
        """``true`` or ``false``."""
        if not isinstance(value, bool):
            raise self.error(f"must be true or false, got {_show(value)}", field)
        return value

    def sequence(self, value: Any, field: str, *, non_empty: bool = True) -> list[Any]:
        """A YAML list."""
        if not isinstance(value, list):
            raise self.error(f"must be a list, got {_kind(value)}", field)
        if non_empty and not value:
            raise self.error("must not be empty", field)
        return list(value)

    def fractions(self, value: Any, field: str) -> tuple[float, ...]:
        """A non-empty list of distinct numbers in (0, 1), kept in the order given."""
        items = self.sequence(value, field)
        out = [self.fraction(v, f"{field}[{i}]") for i, v in enumerate(items)]
        dup = sorted({v for v in out if out.count(v) > 1})
        if dup:
            raise self.error(f"repeats {dup[0]:g}", field)
        return tuple(out)

    def names(self, value: Any, field: str) -> tuple[str, ...]:
        """One name or a non-empty list of distinct names."""
        if isinstance(value, str):
            return (self.string(value, field),)
        items = self.sequence(value, field)
        out = tuple(self.string(v, f"{field}[{i}]") for i, v in enumerate(items))
        if len(set(out)) != len(out):
            raise self.error("names the same split twice", field)
        return out


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class ExperimentSpec:
    """A validated experiment spec.

    Attributes
    ----------
    name, kind, description : str
    seed : int
    mlflow_experiment : str
        The MLflow experiment the parent run goes to.
    dataset : str
        The :func:`~hybridroute.datasets.load_dataset` reference (file paths resolved
        against the spec's directory).
    dataset_options : dict
        Options for ``load_dataset``.
    splits : dict of str to tuple of str
        Role (``train``, ``pool``, ``calibration``, ``test``...) -> split names; the kind's
        defaults filled in.
    classifier_kind : str
    classifier_params : dict
        Constructor arguments (``random_state`` defaults to ``seed``).
    settings : dict
        The kind's own fields, validated, defaults filled in.
    document : dict
        The spec as written (plain JSON values), for the record.
    path : str or None
        The spec file.
    """

    name: str
    kind: str
    seed: int
    dataset: str
    classifier_kind: str
    classifier_params: dict[str, Any]
    splits: dict[str, tuple[str, ...]]
    settings: dict[str, Any]
    document: dict[str, Any]
    description: str = ""
    mlflow_experiment: str = DEFAULT_MLFLOW_EXPERIMENT
    dataset_options: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    @property
    def sha256(self) -> str:
        """SHA-256 of the effective spec (canonical JSON of name, kind, seed and settings)."""
        doc = {
            "name": self.name,
            "kind": self.kind,
            "seed": self.seed,
            "dataset": self.dataset,
            "dataset_options": self.dataset_options,
            "splits": self.splits,
            "classifier": {"kind": self.classifier_kind, "params": self.classifier_params},
            "settings": self.settings,
        }
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=_jsonable)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def flat_params(self) -> dict[str, Any]:
        """The effective spec as flat MLflow parameters (lists and mappings as JSON)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "seed": self.seed,
            "dataset": self.dataset,
            "classifier.kind": self.classifier_kind,
        }
        if self.dataset_options:
            out["dataset.options"] = _dumps(self.dataset_options)
        for role, names in self.splits.items():
            out[f"splits.{role}"] = ",".join(names)
        for k, v in self.classifier_params.items():
            out[f"classifier.{k}"] = _dumps(v)
        for k, v in self.settings.items():
            out[k] = _dumps(v)
        return out

    def with_settings(self, **changes: Any) -> ExperimentSpec:
        """A copy with some settings replaced (e.g. ``resplits`` for a quick run)."""
        from dataclasses import replace

        return replace(self, settings={**self.settings, **changes})


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    raise TypeError(f"not JSON-able: {type(v).__name__}")


def _dumps(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return json.dumps(v, sort_keys=True, default=_jsonable)


def load_spec(path: str | os.PathLike[str]) -> ExperimentSpec:
    """Load and validate an experiment spec file.

    Raises
    ------
    SpecError
        Naming the file and the field that is wrong.
    """
    where = os.fspath(path)
    try:
        text = read_text(path, limit=MAX_SPEC_BYTES, what="spec")
    except InputError as exc:
        raise SpecError(f"cannot read the spec: {_located(exc)}", path=where) from None
    return parse_spec(text, path=where)


def parse_spec(text: str, *, path: str | None = None) -> ExperimentSpec:
    """Validate spec text (YAML); ``path`` names the file in errors and anchors relative paths."""
    reader = SpecReader(path)
    doc = _safe_yaml(text, reader)
    return build_spec(doc, reader)


def build_spec(doc: Any, reader: SpecReader) -> ExperimentSpec:
    """Validate a parsed spec document (common fields here, the kind's own in its class)."""
    from .kinds import KINDS

    if doc is None:
        raise reader.error("the spec is empty")
    top = reader.mapping(doc, "")
    fmt = top.get("format", SPEC_FORMAT)
    if fmt != SPEC_FORMAT:
        raise reader.error(
            f"spec format {fmt!r} is not supported (this version reads format {SPEC_FORMAT})",
            "format",
        )
    if "kind" not in top:
        raise reader.error(f"missing; one of {', '.join(KINDS)}", "kind")
    kind = reader.string(top["kind"], "kind", choices=tuple(KINDS))
    kind_cls = KINDS[kind]
    allowed = (*COMMON_KEYS, *kind_cls.spec_fields())
    reader.mapping(top, "", keys=allowed)
    if "name" not in top:
        raise reader.error(
            "missing: every experiment needs a name (its MLflow parent run's name)", "name"
        )
    name = reader.string(top["name"], "name")
    description = (
        "" if top.get("description") is None else reader.string(top["description"], "description")
    )
    seed = reader.integer(top.get("seed", 0), "seed", low=0, high=2**31 - 1)
    mlflow_experiment = reader.string(
        top.get("mlflow_experiment", DEFAULT_MLFLOW_EXPERIMENT), "mlflow_experiment"
    )

    if "dataset" not in top:
        raise reader.error("missing: name the labelled set, e.g. {name: banking77}", "dataset")
    ds_doc = top["dataset"]
    if isinstance(ds_doc, str):
        ds_doc = {"name": ds_doc}
    ds = reader.mapping(ds_doc, "dataset", keys=_DATASET_KEYS)
    if "name" not in ds:
        raise reader.error("missing: a load_dataset reference", "dataset.name")
    dataset = _resolve_dataset(reader.string(ds["name"], "dataset.name"), reader.path)
    options = reader.mapping(ds.get("options") or {}, "dataset.options")
    roles = kind_cls.split_roles
    given = reader.mapping(ds.get("splits") or {}, "dataset.splits", keys=tuple(roles))
    splits = {
        role: reader.names(given[role], f"dataset.splits.{role}")
        if role in given
        else tuple(default)
        for role, default in roles.items()
    }

    clf_doc = top.get("classifier", {"kind": "local"})
    clf = reader.mapping(clf_doc, "classifier", keys=_CLASSIFIER_KEYS)
    clf_kind = reader.string(clf.get("kind", "local"), "classifier.kind", choices=CLASSIFIER_KINDS)
    from ..classifiers import LocalClassifier

    # the spec accepts exactly the local classifier's constructor parameters
    local_params = tuple(LocalClassifier().get_params())
    params = reader.mapping(clf.get("params") or {}, "classifier.params", keys=local_params)
    params = _classifier_params(params, reader)
    params.setdefault("random_state", seed)

    settings = kind_cls.parse_settings(
        {k: v for k, v in top.items() if k not in COMMON_KEYS}, reader
    )
    return ExperimentSpec(
        name=name,
        kind=kind,
        seed=seed,
        dataset=dataset,
        classifier_kind=clf_kind,
        classifier_params=params,
        splits=splits,
        settings=settings,
        document=json.loads(json.dumps(top, default=str)),
        description=description,
        mlflow_experiment=mlflow_experiment,
        dataset_options=options,
        path=reader.path,
    )


def _classifier_params(params: dict[str, Any], reader: SpecReader) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in params.items():
        where = f"classifier.params.{key}"
        if key == "Cs":
            cs = reader.sequence(value, where) if isinstance(value, list) else [value]
            out[key] = tuple(reader.number(c, where) for c in cs)
            if any(c <= 0 for c in out[key]):
                raise reader.error("every C must be positive", where)
        elif key.endswith("_ngram_range"):
            pair = reader.sequence(value, where)
            if len(pair) != 2:
                raise reader.error(f"must be a pair [low, high], got {_show(value)}", where)
            out[key] = tuple(reader.integer(v, where, low=1) for v in pair)
        elif key in ("sublinear_tf", "lowercase"):
            out[key] = reader.boolean(value, where)
        elif key in ("min_df", "max_iter"):
            out[key] = reader.integer(value, where, low=1)
        elif key == "random_state":
            out[key] = reader.integer(value, where, low=0)
        elif key == "validation_fraction":
            out[key] = reader.fraction(value, where)
        else:  # tol
            out[key] = reader.number(value, where)
            if out[key] <= 0:
                raise reader.error("must be positive", where)
    return out


def _resolve_dataset(ref: str, spec_path: str | None) -> str:
    """File references are read relative to the spec's directory."""
    if spec_path is None:
        return ref
    base = Path(spec_path).resolve().parent
    lower = ref.lower()
    for prefix in ("csv:", "jsonl:"):
        if lower.startswith(prefix):
            p = Path(ref[len(prefix) :]).expanduser()
            return prefix + str(p if p.is_absolute() else base / p)
    if Path(ref).suffix.lower() in (".csv", ".jsonl"):
        p = Path(ref).expanduser()
        return str(p if p.is_absolute() else base / p)
    return ref


def _safe_yaml(text: str, reader: SpecReader) -> Any:
    """Spec text through the one hardened YAML checker (:func:`hybridroute._safeio.parse_yaml`):
    aliases, Python tags, deep nesting, too many nodes, duplicate keys and non-finite
    numbers are refused as a :class:`SpecError` naming the file and line."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SPEC_BYTES:
        raise reader.error(f"spec is too large (over {MAX_SPEC_BYTES:,} bytes)")
    try:
        return parse_yaml(
            text,
            source=reader.path,
            what="spec",
            max_depth=_MAX_YAML_DEPTH,
            max_nodes=_MAX_YAML_NODES,
        )
    except InputError as exc:
        raise reader.error(_located(exc)) from None


def _located(exc: InputError) -> str:
    return (f"line {exc.line}: " if exc.line is not None else "") + exc.reason
