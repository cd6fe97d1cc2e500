"""Reports of an evaluation: JSON, Markdown, one self-contained HTML page, an errors file.

The HTML page embeds its plots as PNG data URIs (no external files, no scripts): the
confusion matrix, the reliability diagram, the risk–coverage curve and the confidence of
hits vs misses. The same PNGs are written next to it for MLflow to log.

Every file is rendered from one scrubbed copy of the evaluation
(:class:`hybridroute._scrub.Scrubber`): credentials and declared sensitive facts never
reach a report, a plot label or the errors file, whose text cells are also escaped
against spreadsheet formulas.
"""

from __future__ import annotations

import base64
import csv
import html
import math
from pathlib import Path
from typing import Any

import numpy as np

from .._scrub import Scrubber

__all__ = ["write_report"]

_MAX_CONFUSION_LABELS = 40


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "–" if not math.isfinite(v) else f"{v:.4f}"
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
        return f"[{v[0]:.4f}, {v[1]:.4f}]"
    return str(v)


def _headline(ev: dict[str, Any]) -> list[tuple[str, Any]]:
    rows = [
        ("n", ev.get("n")),
        ("accuracy", ev.get("accuracy")),
        ("accuracy 95% CI", ev.get("accuracy_ci")),
        ("macro-F1", ev.get("macro_f1")),
        ("macro-F1 95% CI", ev.get("macro_f1_ci")),
        ("ECE (15 bins)", ev.get("ece")),
        ("AURC", ev.get("aurc")),
    ]
    for key, name in (
        ("coverage", "coverage"),
        ("selective_precision", "selective precision"),
        ("next_step_accuracy", "next-step accuracy"),
        ("next_step_accuracy_ci", "next-step 95% CI"),
        ("abstention_rate", "abstention rate"),
    ):
        if ev.get(key) is not None:
            rows.append((name, ev[key]))
    return rows


def _plots(ev: dict[str, Any], outdir: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from ..calibration import reliability_diagram, risk_coverage_curve

    items = [
        it
        for it in ev["items"]
        if it.get("confidence") is not None and it.get("correct") is not None
    ]
    conf = np.array([it["confidence"] for it in items], dtype=float)
    correct = np.array([bool(it["correct"]) for it in items], dtype=bool)
    paths: dict[str, Path] = {}
    outdir.mkdir(parents=True, exist_ok=True)

    cm_doc = ev.get("confusion")
    if cm_doc and cm_doc["labels"]:
        labels = cm_doc["labels"]
        cm = np.asarray(cm_doc["matrix"], dtype=float)
        title = "confusion matrix (row-normalised)"
        if len(labels) > _MAX_CONFUSION_LABELS:
            title = f"confusion matrix: the {_MAX_CONFUSION_LABELS} most confused of {len(labels)} classes"
            # keep the classes with the most off-diagonal mass, so the plot stays readable
            off = cm.sum(axis=0) + cm.sum(axis=1) - 2 * np.diag(cm)
            keep = np.sort(np.argsort(-off, kind="stable")[:_MAX_CONFUSION_LABELS])
            cm = cm[np.ix_(keep, keep)]
            labels = [labels[i] for i in keep]
        rows = cm.sum(axis=1, keepdims=True)
        norm = np.divide(cm, rows, out=np.zeros_like(cm), where=rows > 0)
        size = max(5.0, 0.22 * len(labels) + 2)
        fig, ax = plt.subplots(figsize=(size, size))
        ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
        ax.set_yticks(range(len(labels)), labels, fontsize=6)
        ax.set_xlabel("predicted")
        ax.set_ylabel("gold")
        ax.set_title(title)
        fig.tight_layout()
        paths["confusion_matrix"] = outdir / "confusion_matrix.png"
        fig.savefig(paths["confusion_matrix"], dpi=110)
        plt.close(fig)

    if len(conf):
        d = reliability_diagram(conf, correct, n_bins=15)
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.plot([0, 1], [0, 1], "--", color="grey", lw=1)
        ax.bar(
            (d.lower + d.upper) / 2,
            d.accuracy,
            width=(d.upper - d.lower) * 0.9,
            alpha=0.7,
            label="accuracy",
        )
        ax.plot(d.confidence, d.accuracy, "o-", ms=3, label="mean confidence → accuracy")
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ax.set_title(f"reliability (ECE {_fmt(ev.get('ece'))})")
        ax.legend(loc="upper left", fontsize=8)
        fig.tight_layout()
        paths["reliability"] = outdir / "reliability.png"
        fig.savefig(paths["reliability"], dpi=110)
        plt.close(fig)

        rc = risk_coverage_curve(conf, correct)
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.plot(rc.coverage, rc.risk, lw=1.5)
        ax.set_xlabel("coverage")
        ax.set_ylabel("risk (error rate among accepted)")
        ax.set_title(f"risk–coverage (AURC {_fmt(ev.get('aurc'))})")
        fig.tight_layout()
        paths["risk_coverage"] = outdir / "risk_coverage.png"
        fig.savefig(paths["risk_coverage"], dpi=110)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(5, 4))
        bins = np.linspace(0, 1, 21)
        # matplotlib's stub types bins as Sequence[float]; an ndarray of edges is accepted
        ax.hist(
            conf[correct],
            bins=bins,  # type: ignore[arg-type]
            alpha=0.6,
            label=f"hits ({int(correct.sum())})",
        )
        ax.hist(
            conf[~correct],
            bins=bins,  # type: ignore[arg-type]
            alpha=0.6,
            label=f"misses ({int((~correct).sum())})",
        )
        ax.set_xlabel("confidence")
        ax.set_ylabel("items")
        ax.set_title("confidence of hits vs misses")
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths["confidence_hits_misses"] = outdir / "confidence_hits_misses.png"
        fig.savefig(paths["confidence_hits_misses"], dpi=110)
        plt.close(fig)
    return paths


def _errors(ev: dict[str, Any], path: Path, scrub: Scrubber) -> int:
    cols = ["text", "gold", "predicted", "confidence", "reason_code"]
    extra = [
        c for c in ("gold_next_step", "destination", "stage") if ev["items"] and c in ev["items"][0]
    ]
    n = 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols + extra)
        for it in ev["items"]:
            wrong = it.get("correct") is False or it.get("next_step_correct") is False
            if not wrong:
                continue
            w.writerow([scrub.csv_cell(it.get(c)) for c in cols + extra])
            n += 1
    return n


def _markdown(ev: dict[str, Any], title: str) -> str:
    lines = [f"# {title}", "", "| metric | value |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in _headline(ev)]
    if ev.get("decisions_by_stage"):
        lines += ["", "## Decisions by stage", "", "| stage | n |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in ev["decisions_by_stage"].items()]
    if ev.get("rules"):
        lines += ["", "## Rules", "", "| rule | fires | matches gold next step |", "|---|---|---|"]
        lines += [
            f"| {k} | {v['fires']} | {_fmt(v['match_rate'])} |" for k, v in ev["rules"].items()
        ]
    if ev.get("abstentions_by_reason"):
        lines += ["", "## Abstentions by reason code", "", "| reason | n |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in ev["abstentions_by_reason"].items()]
    per = ev.get("per_class") or {}
    if per:
        lines += [
            "",
            "## Per class",
            "",
            "| label | precision | recall | F1 | support | confused with |",
            "|---|---|---|---|---|---|",
        ]
        for lab, row in per.items():
            conf = ", ".join(f"{c['label']} ({c['count']})" for c in row["confused_with"])
            lines.append(
                f"| {lab} | {row['precision']:.3f} | {row['recall']:.3f} | {row['f1']:.3f} | "
                f"{row['support']} | {conf} |"
            )
    lat = ev.get("latency") or {}
    if lat:
        lines += ["", "## Latency and usage", ""]
        lines += [f"- {k}: {v}" for k, v in lat.items()]
        lines += [f"- {k}: {v}" for k, v in (ev.get("usage") or {}).items()]
    return "\n".join(lines) + "\n"


def _html(ev: dict[str, Any], title: str, plots: dict[str, Path]) -> str:
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{esc(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left;font-size:14px}img{max-width:100%;margin:0.5em}h1{font-size:1.6em}</style>",
        "</head><body>",
        f"<h1>{esc(title)}</h1>",
        "<table><tr><th>metric</th><th>value</th></tr>",
    ]
    parts += [f"<tr><td>{esc(k)}</td><td>{esc(_fmt(v))}</td></tr>" for k, v in _headline(ev)]
    parts.append("</table>")
    for name, path in plots.items():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(
            f"<h2>{esc(name.replace('_', ' '))}</h2><img alt='{esc(name)}' src='data:image/png;base64,{data}'>"
        )
    if ev.get("rules"):
        parts.append(
            "<h2>Rules</h2><table><tr><th>rule</th><th>fires</th><th>matches gold next step</th></tr>"
        )
        parts += [
            f"<tr><td>{esc(k)}</td><td>{v['fires']}</td><td>{esc(_fmt(v['match_rate']))}</td></tr>"
            for k, v in ev["rules"].items()
        ]
        parts.append("</table>")
    per = ev.get("per_class") or {}
    if per:
        parts.append(
            "<h2>Per class</h2><table><tr><th>label</th><th>precision</th><th>recall</th><th>F1</th>"
            "<th>support</th><th>confused with</th></tr>"
        )
        for lab, row in per.items():
            conf = ", ".join(f"{c['label']} ({c['count']})" for c in row["confused_with"])
            parts.append(
                f"<tr><td>{esc(lab)}</td><td>{row['precision']:.3f}</td><td>{row['recall']:.3f}</td>"
                f"<td>{row['f1']:.3f}</td><td>{row['support']}</td><td>{esc(conf)}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(
    evaluation: dict[str, Any],
    outdir: str | Path,
    *,
    title: str = "hybridroute evaluation",
    scrubber: Scrubber | None = None,
) -> dict[str, Path]:
    """Write ``evaluation.json``, ``report.md``, ``report.html``, ``errors.csv`` and the plots.

    Parameters
    ----------
    evaluation : dict
        An :class:`~hybridroute.evaluation.Evaluation`.
    outdir : path
        The report directory (created if needed).
    title : str
        The report's title.
    scrubber : Scrubber, optional
        What removes credentials (and hashes declared sensitive facts) from everything
        written; default: a fresh one (credentials only).

    Returns
    -------
    dict of str to Path
        The files written, by kind (``json``, ``markdown``, ``html``, ``errors``,
        ``plot_<name>``).
    """
    scrub = scrubber if scrubber is not None else Scrubber()
    # one scrubbed copy: every file below (plot labels included) is rendered from it
    evaluation = scrub.value(evaluation)
    title = scrub.text(title)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    plots = _plots(evaluation, out / "plots")
    files = {
        "json": out / "evaluation.json",
        "markdown": out / "report.md",
        "html": out / "report.html",
        "errors": out / "errors.csv",
    }
    summary = {k: v for k, v in evaluation.items() if k != "items"}
    files["json"].write_text(scrub.json(summary, indent=2) + "\n", encoding="utf-8")
    files["markdown"].write_text(_markdown(evaluation, title), encoding="utf-8")
    files["html"].write_text(_html(evaluation, title, plots), encoding="utf-8")
    _errors(evaluation, files["errors"], scrub)
    files.update({f"plot_{k}": v for k, v in plots.items()})
    return files
