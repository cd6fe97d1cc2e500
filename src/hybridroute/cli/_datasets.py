"""``hybridroute datasets``: list, show, validate and export labelled sets.

pandas comes in with :mod:`hybridroute.datasets`, so that import stays inside the
command functions.
"""

from __future__ import annotations

import statistics
import textwrap
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import typer

from ..exceptions import UserInputError
from ._outputs import check_output, output_errors

if TYPE_CHECKING:  # pragma: no cover
    from ..contracts import FactSchema
    from ..datasets import LabelledSet

datasets_app = typer.Typer(
    name="datasets",
    help="List, inspect, validate and export labelled sets.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

_REF_HELP = (
    "banking77, clinc150, support-tickets, csv:PATH, jsonl:PATH, or a path ending in .csv / .jsonl."
)


def _options(
    *,
    data_dir: Path | None = None,
    no_download: bool = False,
    oos: StrEnum | str | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    split_column: str | None = None,
    id_column: str | None = None,
    label_set: str | None = None,
    on_error: str | None = None,
    oos_label: str | None = None,
) -> dict[str, Any]:
    """The options the user set explicitly, as load_dataset keywords (``oos_label`` 'none'
    is no out-of-scope label)."""
    out: dict[str, Any] = {}
    if oos_label is not None:
        out["oos_label"] = None if oos_label.strip().lower() == "none" else oos_label
    if data_dir is not None:
        out["data_dir"] = data_dir
    if no_download:
        out["download"] = False
    if oos is not None:
        out["oos"] = str(oos.value if isinstance(oos, StrEnum) else oos)
    for key, value in (
        ("text_column", text_column),
        ("label_column", label_column),
        ("split_column", split_column),
        ("id_column", id_column),
        ("on_error", on_error),
    ):
        if value is not None:
            out[key] = value
    if label_set is not None:
        labels = [x.strip() for x in label_set.split(",") if x.strip()]
        if not labels:
            raise click.UsageError("--label-set needs at least one label (comma-separated)")
        out["label_set"] = labels
    return out


def load_set(ref: str, options: dict[str, Any], schema: FactSchema | None = None) -> LabelledSet:
    """``ref`` loaded with ``options`` (with ``schema``: every fact checked against it, by
    :func:`hybridroute.datasets._registry.load_checked`); an option that does not apply to
    the reference is a usage error."""
    from ..datasets._registry import load_checked, load_dataset

    try:
        return (
            load_dataset(ref, **options) if schema is None else load_checked(ref, schema, **options)
        )
    except TypeError as exc:
        raise click.UsageError(str(exc)) from None


def load_schema(rules: Path | None, router: Path | None) -> tuple[FactSchema, str] | None:
    """The facts schema of ``--rules FILE`` or of ``--router BUNDLE``'s rules, and its name.

    A bundle's seal and checksums are verified (as loading the router would) before its
    rules are read; its classifier is not loaded.
    """
    if rules is None and router is None:
        return None
    if rules is not None and router is not None:
        raise click.UsageError("give --rules FILE or --router BUNDLE, not both")
    from ..rules import load_rules

    if router is not None:
        from ..router._bundle import read_manifest

        read_manifest(router)
        ruleset = load_rules(router / "rules.yaml")
        where = f"router bundle {router}"
    else:
        assert rules is not None
        ruleset = load_rules(rules)
        where = str(rules)
    return ruleset.schema, f"{ruleset.name} {ruleset.version} ({where})"


def print_notes(file: Path | str, notes: tuple[str, ...] | list[str], *, hint: bool) -> None:
    """Print a set's notes as warnings on stderr (scrubbed: a note quotes a cell)."""
    if not notes:
        return
    from .._scrub import Scrubber

    scrub = Scrubber()
    for note in notes:
        typer.echo(scrub.text(f"warning: {note}"), err=True)
    if hint:
        typer.echo(
            f"hint: check the facts against their declared types: hybridroute datasets "
            f"validate {file} --rules RULES (or --router BUNDLE)",
            err=True,
        )


def _summary(ds: LabelledSet) -> dict[str, Any]:
    frame = ds.frame
    splits = ds.splits
    out: dict[str, Any] = {
        "name": ds.name,
        "source": ds.source,
        "n_rows": len(ds),
        "n_labels": len(ds.labels),
        "labels": list(ds.labels),
        "splits": splits,
        "oos_label": ds.oos_label,
    }
    if ds.oos_label is not None:
        is_oos = frame["label"] == ds.oos_label
        if splits:
            out["in_scope"] = {s: int(((frame["split"] == s) & ~is_oos).sum()) for s in splits}
            out["out_of_scope"] = {s: int(((frame["split"] == s) & is_oos).sum()) for s in splits}
        else:
            out["in_scope"] = {"all": int((~is_oos).sum())}
            out["out_of_scope"] = {"all": int(is_oos.sum())}
    out["class_balance"] = ds.label_counts()
    if splits:
        out["class_balance_by_split"] = {s: ds.label_counts(s) for s in splits}
    out["fact_columns"] = list(ds.fact_columns)
    out["fact_types"] = ds.fact_types
    out["fingerprint"] = ds.fingerprint
    out["notes"] = list(ds.notes)
    out["skipped"] = [{"row": s.row, "column": s.column, "reason": s.reason} for s in ds.skipped]
    return out


def _n(x: int) -> str:
    return f"{x:,}"


def _print_summary(info: dict[str, Any]) -> None:
    echo = typer.echo
    echo(f"{info['name']}  ({info['source']})")
    echo(
        f"rows: {_n(info['n_rows'])}   labels: {info['n_labels']}   "
        f"fingerprint: {info['fingerprint']}"
    )
    splits: dict[str, int] = info["splits"]
    if splits:
        echo("splits:")
        width = max(len(s) for s in splits) + 2
        if info.get("oos_label") is not None:
            echo(
                f"  {'split':<{width}}{'rows':>9}{'in scope':>11}  out of scope ({info['oos_label']})"
            )
            for s, n in splits.items():
                echo(
                    f"  {s:<{width}}{_n(n):>9}{_n(info['in_scope'][s]):>11}"
                    f"  {_n(info['out_of_scope'][s]):>9}"
                )
        else:
            for s, n in splits.items():
                echo(f"  {s:<{width}}{_n(n):>9}")
        names = " / ".join(splits)
        echo(f"  {names}: " + " / ".join(_n(n) for n in splits.values()))
        if info.get("oos_label") is not None:
            echo(
                "  in scope "
                + " / ".join(_n(info["in_scope"][s]) for s in splits)
                + " plus "
                + " / ".join(_n(info["out_of_scope"][s]) for s in splits)
                + " out of scope"
            )
    else:
        echo("splits: none")
    echo("labels: " + textwrap.fill(", ".join(info["labels"]), width=96, subsequent_indent="  "))
    balance: dict[str, int] = info["class_balance"]
    counts = sorted(balance.items(), key=lambda kv: (kv[1], kv[0]))
    lo, hi = counts[0], counts[-1]
    echo(
        f"class balance (rows per label): min {_n(lo[1])} ({lo[0]}), "
        f"median {statistics.median(balance.values()):g}, max {_n(hi[1])} ({hi[0]})"
    )
    if len(balance) <= 20:
        by_split: dict[str, dict[str, int]] = info.get("class_balance_by_split", {})
        cols = list(by_split)
        width = max(len(k) for k in balance) + 2
        echo(f"  {'label':<{width}}{'rows':>7}" + "".join(f"{c:>12}" for c in cols))
        for lab, n in balance.items():
            echo(
                f"  {lab:<{width}}{_n(n):>7}"
                + "".join(f"{_n(by_split[c].get(lab, 0)):>12}" for c in cols)
            )
    else:
        echo("  fewest: " + ", ".join(f"{k} {_n(v)}" for k, v in counts[:5]))
        echo("  most:   " + ", ".join(f"{k} {_n(v)}" for k, v in reversed(counts[-5:])))
    if info["fact_columns"]:
        echo(
            "facts: "
            + ", ".join(f"{c} ({info['fact_types'].get(c, '?')})" for c in info["fact_columns"])
        )
    if info["notes"]:
        echo("notes (what the loader did by default, and problems found and kept):")
        for note in info["notes"]:
            echo(f"  {note}")
    if info["skipped"]:
        echo(f"skipped rows: {len(info['skipped'])}")
        for s in info["skipped"]:
            col = f", column {s['column']!r}" if s["column"] else ""
            echo(f"  row {s['row']}{col}: {s['reason']}")


def list_command(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
) -> None:
    """List the named datasets and where each would load from."""
    from ..datasets import _bundled, _public, list_datasets
    from ..datasets._registry import dataset_entry

    rows = []
    for name in list_datasets():
        entry = dataset_entry(name)
        if name == "banking77":
            where = _public.where_from(_public.BANKING77_FILES, _public.resolve_data_dir())
        elif name == "clinc150":
            where = _public.where_from(_public.CLINC150_FILES, _public.resolve_data_dir())
        else:
            where = "bundled" if _bundled.bundled_path().is_file() else "bundled file missing"
        rows.append(
            {
                "name": name,
                "description": entry.description,
                "licence": entry.licence,
                "where": where,
            }
        )
    if as_json:
        from .._scrub import Scrubber

        typer.echo(Scrubber().json(rows, indent=2))
        return
    width = max(len(r["name"]) for r in rows) + 2
    for r in rows:
        typer.echo(f"{r['name']:<{width}}{r['description']}")
        typer.echo(f"{'':<{width}}licence: {r['licence']}; {r['where']}")
    typer.echo("Files: csv:PATH or jsonl:PATH (columns text, label, optional split, facts).")


_DATA_DIR = typer.Option(
    None,
    "--data-dir",
    help="Directory with banking77/ and clinc150/ (default: HYBRIDROUTE_DATA_DIR).",
)
_NO_DOWNLOAD = typer.Option(
    False, "--no-download", help="Never fetch public sets from the network."
)


class _Oos(StrEnum):
    label = "label"
    drop = "drop"


_OOS = typer.Option(
    None, "--oos", help="clinc150: keep out-of-scope rows as label 'oos' (default) or drop them."
)
_TEXT = typer.Option(None, "--text-column", help="Files: the text column (default 'text').")
_LABEL = typer.Option(None, "--label-column", help="Files: the label column (default 'label').")
_SPLIT = typer.Option(None, "--split-column", help="Files: the split column (default 'split').")
_ID = typer.Option(None, "--id-column", help="Files: the id column (default 'id').")
_OOS_LABEL = typer.Option(
    None,
    "--oos-label",
    help="Files: the label of out-of-scope rows (default: 'out_of_scope' or 'oos' when the "
    "file uses one); 'none' for no out-of-scope rows. Give what `train` was given.",
)
_LABEL_SET = typer.Option(
    None, "--label-set", help="Files: the declared labels, comma-separated; others are errors."
)


def show_command(
    ref: str = typer.Argument(..., help=_REF_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    data_dir: Path | None = _DATA_DIR,
    no_download: bool = _NO_DOWNLOAD,
    oos: _Oos | None = _OOS,
    text_column: str | None = _TEXT,
    label_column: str | None = _LABEL,
    split_column: str | None = _SPLIT,
    id_column: str | None = _ID,
    label_set: str | None = _LABEL_SET,
    skip_bad_rows: bool = typer.Option(
        False,
        "--skip-bad-rows",
        help="Files: leave out bad rows and list them, instead of failing.",
    ),
) -> None:
    """Show a labelled set: size, labels, split sizes, class balance, fingerprint."""
    options = _options(
        data_dir=data_dir,
        no_download=no_download,
        oos=oos,
        text_column=text_column,
        label_column=label_column,
        split_column=split_column,
        id_column=id_column,
        label_set=label_set,
        on_error="skip" if skip_bad_rows else None,
    )
    info = _summary(load_set(ref, options))
    if as_json:
        from .._scrub import Scrubber

        typer.echo(Scrubber().json(info, indent=2))
    else:
        _print_summary(info)


def _file_kind(file: Path) -> tuple[str, Path]:
    """A file's kind and path; ``csv:PATH`` / ``jsonl:PATH`` (how ``--dataset`` names a
    file) is taken too, and its prefix sets the kind."""
    head, sep, rest = str(file).partition(":")
    if sep and head in ("csv", "jsonl") and rest and not file.exists():
        return head, Path(rest)
    from ..datasets._io import sniff_kind

    return sniff_kind(file), file


def validate_command(
    file: Path = typer.Argument(..., help="A .csv or .jsonl labelled file."),
    text_column: str | None = _TEXT,
    label_column: str | None = _LABEL,
    split_column: str | None = _SPLIT,
    id_column: str | None = _ID,
    label_set: str | None = _LABEL_SET,
    all_rows: bool = typer.Option(
        False, "--all", help="Report every bad row (on stderr), not only the first."
    ),
    rules: Path | None = typer.Option(
        None,
        "--rules",
        help="Check every fact column against this rules file's declared facts (types, "
        "enum, min / max, required facts, undeclared columns).",
    ),
    router: Path | None = typer.Option(
        None, "--router", help="Check the facts against this router bundle's rules instead."
    ),
) -> None:
    """Check a labelled file; exit 0 with a summary, or 2 naming the bad row and column.

    Without --rules / --router, a fact column's type is the one most of its rows have; a
    CSV text column whose cells also spell booleans or numbers is a warning (stderr).
    """
    from ..exceptions import DatasetError

    declared = load_schema(rules, router)
    kind, file = _file_kind(file)
    options = _options(
        text_column=text_column,
        label_column=label_column,
        split_column=split_column,
        id_column=id_column,
        label_set=label_set,
        on_error="skip" if all_rows else None,
    )
    ref = f"{kind}:{file}"
    ds = load_set(ref, options, None if declared is None else declared[0])
    if ds.skipped:
        from .._scrub import Scrubber

        scrub = Scrubber()  # a bad cell quoted in a reason may be a pasted key
        for s in ds.skipped:
            col = f", column {s.column!r}" if s.column else ""
            typer.echo(scrub.text(f"{file}, row {s.row}{col}: {s.reason}"), err=True)
        first = ds.skipped[0]
        raise DatasetError(
            f"{len(ds.skipped)} bad row(s); the first: {first.reason}",
            path=str(file),
            row=first.row,
            column=first.column,
        )
    print_notes(file, ds.notes, hint=declared is None)
    splits = ", ".join(f"{k} {_n(v)}" for k, v in ds.splits.items()) or "no splits"
    facts = f"; facts: {', '.join(ds.fact_columns)}" if ds.fact_columns else ""
    if declared is not None:
        schema, name = declared
        present = [n for n in schema.names if n in ds.fact_columns]
        ignored = [c for c in ds.fact_columns if c not in schema]
        facts += (
            f"; checked against the facts of {name}: {len(present)} of {len(schema.names)} "
            "declared facts are columns"
            + (" (the others take their defaults)" if len(present) < len(schema.names) else "")
            + (f"; not declared, so no rule reads them: {', '.join(ignored)}" if ignored else "")
        )
    typer.echo(
        f"ok: {file}: {_n(len(ds))} rows, {len(ds.labels)} labels ({splits}){facts}; "
        f"fingerprint {ds.fingerprint}"
    )


def export_command(
    ref: str = typer.Argument(..., help=_REF_HELP),
    out: Path = typer.Option(..., "--out", "-o", help="Output file, .csv or .jsonl."),
    data_dir: Path | None = _DATA_DIR,
    no_download: bool = _NO_DOWNLOAD,
    oos: _Oos | None = _OOS,
    text_column: str | None = _TEXT,
    label_column: str | None = _LABEL,
    split_column: str | None = _SPLIT,
    id_column: str | None = _ID,
    scrub: bool = typer.Option(
        False,
        "--scrub",
        help="Replace credentials in texts, facts and annotations by [REDACTED], as the "
        "decision log does (the written set then has its own fingerprint).",
    ),
) -> None:
    """Write a labelled set to CSV or JSONL: text, label, split, then the facts.

    CSV text cells that a spreadsheet would run as a formula (starting with =, +, -, @,
    a tab) are written with a leading apostrophe; loading the file removes it again.
    """
    options = _options(
        data_dir=data_dir,
        no_download=no_download,
        oos=oos,
        text_column=text_column,
        label_column=label_column,
        split_column=split_column,
        id_column=id_column,
    )
    # before the set is loaded (a public set may be downloaded first)
    if out.suffix.lower() not in (".csv", ".jsonl"):
        raise UserInputError(f"--out {out}: export writes .csv or .jsonl files")
    check_output(out, "--out")
    ds = load_set(ref, options)
    note = ""
    if scrub:
        original = ds.fingerprint
        ds = ds.scrubbed()
        cells = ds.provenance["steps"][-1]["cells"]
        note = (
            f"; scrubbed {_n(cells)} cell(s), fingerprint was {original}"
            if cells
            else "; scrubbing found nothing to remove"
        )
    with output_errors(out, "--out"):
        path = ds.export(out)
    typer.echo(
        f"wrote {_n(len(ds))} rows of {ds.name} to {path} (fingerprint {ds.fingerprint}{note})"
    )


datasets_app.command("list")(list_command)
datasets_app.command("show")(show_command)
datasets_app.command("validate")(validate_command)
datasets_app.command("export")(export_command)


def register(app: typer.Typer) -> None:
    """Register the ``datasets`` command group on ``app``."""
    app.add_typer(datasets_app, name="datasets")
