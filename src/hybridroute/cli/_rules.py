"""``hybridroute rules``: test, lint and diff rules files (rules as code).

* ``rules test FILE [--router BUNDLE]`` runs the cases of FILE's ``tests:`` section and of
  its sibling ``FILE.tests.yaml`` (both, inline first), prints every failure with the case
  (name or ``#N``, file and line), what was expected, what was decided and what decided it,
  and the coverage: rules never fired, rule outcomes and destinations no case reaches. A
  text case that no rule decides needs the model: with ``--router`` the bundle's classifier
  and policy run it with FILE's rules; without, it is listed as not run.
* ``rules lint FILE [--strict]`` reports what a valid file may still get wrong (conditions
  that can never be true, comparisons outside a fact's bounds or enum, rules an earlier
  rule shadows wholly or in part, enum values and facts no rule reads) as warnings; with
  ``--strict`` the exact findings are errors.
* ``rules diff OLD NEW --log URL | --dataset NAME`` replays the logged facts (or a labelled
  set's rows) through both files and reports every decision that would change: counts by
  (old destination, new destination, rule), the share of traffic, examples (as stored).

Every command takes ``--json`` (one object). Exit codes: 0 success; 1 a test case failed,
a lint error under ``--strict``, or (``diff --exit-code``) a decision would change; 2 every
refusal -- a malformed or unreadable file (each malformed test case named), no test cases,
bad options, a log or set that cannot be read -- with one line on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..exceptions import UserInputError

rules_app = typer.Typer(
    help="Test, lint and diff rules files.", no_args_is_help=True, add_completion=False
)

_LOG_HELP = (
    "Decision log whose stored facts to replay: a SQLite file, sqlite:///PATH, or "
    "postgresql://USER@HOST/DB (it must exist)."
)


def _echo(lines: list[str]) -> None:
    from .._scrub import Scrubber

    scrub = Scrubber()
    for line in lines:
        typer.echo(scrub.text(line))


def _json(value: Any) -> None:
    from .._scrub import Scrubber

    typer.echo(Scrubber().json(value, indent=2))


def _router_for(rules: Any, bundle: Path) -> Any:
    """The bundle's classifier, policy and exits, routing with ``rules``."""
    from ..router import HybridRouter, load_router

    loaded = load_router(bundle)
    return HybridRouter(
        rules=rules,
        classifier=loaded.classifier,
        policy=loaded.policy,
        destinations=loaded.destinations,
        name=loaded.name,
        version=loaded.version,
        oos_label=loaded.oos_label,
        oos_destination=loaded.oos_destination,
        fallback_destination=loaded.fallback_destination,
        redact_pii=loaded.redact_pii,
    )


@rules_app.command("test")
def test_cmd(
    file: Path = typer.Argument(..., help="Rules file (YAML) with a tests: section or a sibling."),
    router: Path | None = typer.Option(
        None,
        "--router",
        help="Router bundle whose classifier and policy run the text cases no rule decides "
        "(with this file's rules).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Run a rules file's test cases: exit 0 all pass, 1 a case fails, 2 a malformed file."""
    from ..rules._testcases import load_rule_tests, sibling_tests_path
    from ..rules._testing import run_rule_tests

    suite = load_rule_tests(file)
    if not suite.cases:
        raise UserInputError(
            f"{file}: no test cases: add a 'tests:' section, or write them in "
            f"{sibling_tests_path(file).name}"
        )
    composed = None if router is None else _router_for(suite.rules, router)
    report = run_rule_tests(suite, router=composed)
    if as_json:
        _json(report.to_dict())
    else:
        _echo(report.lines())
    raise typer.Exit(0 if report.ok else 1)


@rules_app.command("lint")
def lint_cmd(
    file: Path = typer.Argument(..., help="Rules file (YAML)."),
    strict: bool = typer.Option(
        False, "--strict", help="Exact findings are errors (exit 1); heuristic ones stay warnings."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Lint a rules file beyond validity: exit 0, or 1 with --strict and an exact finding."""
    from ..rules import load_rules
    from ..rules._lint import lint_rules

    report = lint_rules(load_rules(file))
    if as_json:
        _json(report.to_dict(strict))
    else:
        _echo(report.lines(strict))
    raise typer.Exit(1 if report.errors(strict) else 0)


@rules_app.command("diff")
def diff_cmd(
    old: Path = typer.Argument(..., help="The rules file now (YAML)."),
    new: Path = typer.Argument(..., help="The rules file proposed (YAML)."),
    log: str | None = typer.Option(None, "--log", help=_LOG_HELP),
    router_version: str | None = typer.Option(
        None, "--router-version", help="With --log: only decisions of this router version."
    ),
    dataset: str | None = typer.Option(
        None,
        "--dataset",
        help="Instead of --log: a labelled set with facts (support-tickets, csv:PATH, "
        "jsonl:PATH, ...).",
    ),
    split: str | None = typer.Option(None, "--split", help="With --dataset: one split only."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Directory of public sets."),
    drop_removed_facts: bool = typer.Option(
        False,
        "--drop-removed-facts",
        help="Drop the facts NEW no longer declares before it reads an input (callers that "
        "stop sending them) instead of counting the input as refused.",
    ),
    examples: int = typer.Option(10, "--examples", help="Examples to list (one per change)."),
    exit_code: bool = typer.Option(
        False, "--exit-code", help="Exit 1 when any decision would change."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Replay logged facts (or a labelled set) through OLD and NEW; report what changes."""
    from ..rules import load_rules
    from ..rules._diff import diff_rules, inputs_from_dataset, inputs_from_records

    if (log is None) == (dataset is None):
        raise UserInputError("rules diff: give --log URL or --dataset NAME (one of them)")
    if log is None and router_version is not None:
        raise UserInputError("rules diff: --router-version goes with --log")
    if dataset is None and (split is not None or data_dir is not None):
        raise UserInputError("rules diff: --split and --data-dir go with --dataset")
    if examples < 0:
        raise UserInputError(f"rules diff: --examples must be at least 0, got {examples}")
    a, b = load_rules(old), load_rules(new)
    if dataset is not None:
        rows = _dataset_rows(dataset, split, data_dir)
        report = diff_rules(
            a,
            b,
            inputs_from_dataset(rows),
            max_examples=examples,
            drop_removed_facts=drop_removed_facts,
            source=f"dataset {rows.name}" + (f"/{split}" if split else ""),
        )
    else:
        from ..records import open_log

        with open_log(log, create=False) as dl:  # type: ignore[arg-type]
            where = dl.where
            shown = f"log {where}" + (f" (version {router_version})" if router_version else "")
            if not dl.count(router_version=router_version, role="live"):
                raise UserInputError(f"{shown}: holds no live decision to replay")
            report = diff_rules(
                a,
                b,
                inputs_from_records(dl.rows(router_version=router_version, role="live")),
                max_examples=examples,
                drop_removed_facts=drop_removed_facts,
                source=shown,
            )
    if as_json:
        _json(report)
    else:
        _echo(report.summary_lines())
    raise typer.Exit(1 if exit_code and report["changed"] else 0)


def _dataset_rows(ref: str, split: str | None, data_dir: Path | None) -> Any:
    from ._datasets import load_set

    options: dict[str, Any] = {}
    if data_dir is not None:
        options["data_dir"] = data_dir
    ds = load_set(ref, options)
    if split is not None:
        if split not in ds.splits:
            raise UserInputError(
                f"{ds.name} has no split {split!r} (splits: {', '.join(ds.splits) or 'none'})"
            )
        ds = ds.split(split)
    return ds


def register(app: typer.Typer) -> None:
    """Register the ``rules`` group on ``app``."""
    app.add_typer(rules_app, name="rules")
