"""Reports of an evaluation: JSON, Markdown, one self-contained HTML page, an errors file.

The HTML page embeds its plots as PNG data URIs (no external files, no scripts): the
confusion matrix (colour bar, and counts in the cells up to 20 classes), the reliability
diagram (items per bin; fewer bins when few items are scored), the risk–coverage curve and
the confidence of hits vs misses, each under a heading with one sentence on how to read
it. The metrics table says what each number is and what it is counted over. The same
PNGs are written next to it for MLflow to log.

When the evaluation ran a fitted policy (``write_report(..., policy=)``, or a ``policy``
summary in the evaluation), the report says what the policy promised and whether this set
kept the promise: its objective, target, δ and threshold, whether the target was certified
(the bound, or why not and how many calibration items it would need), the selective
precision observed here against the target, and the label-mix check -- how far this set's
gold labels depart from the calibration data the certificate holds for.

The plots are drawn on their own :class:`matplotlib.figure.Figure` objects, each with its
own Agg canvas: no pyplot, no backend switch, no rcParams change, so writing a report from
a notebook leaves its inline backend and style as they were.

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
from ..calibration._metrics import DEFAULT_ECE_BINS

__all__ = ["write_report"]

_MAX_CONFUSION_LABELS = 40
_MIX_HEADER = ["label", "calibration share", "share here"]


#: Equal-width bins of the headline ECE (the evaluation's metric, defined in calibration).
_ECE_BINS = DEFAULT_ECE_BINS
#: The reliability diagram's bins: about this many scored items per bin on average, between
#: ``_MIN_BINS`` and the ECE's 15 (with 40 items, 15 bins are mostly empty or of one item).
_ITEMS_PER_BIN = 10
_MIN_BINS = 5
#: Up to this many classes, each cell of the confusion matrix shows its count.
_MAX_ANNOTATED_LABELS = 20
_DPI = 110

#: What each stage of a router decision means (the decisions-by-stage tables).
STAGE_MEANING = {
    "rule": "a rule decided, from the facts alone",
    "model": "the classifier's label was confident enough to auto-route",
    "policy": "the fitted policy held the item back (ask the user, human review, out of "
    "scope) or answered it on complete evidence",
    "fallback": "the classifier failed or abstained (see fallbacks by cause)",
}

#: Each plot: its heading and one sentence on how to read it.
_PLOT_TEXT = {
    "confusion_matrix": (
        "Confusion matrix",
        "Rows are gold labels and columns predicted labels; the colour is the share of the "
        "row (so the diagonal is each label's recall), the numbers are item counts, and items "
        "without a prediction are left out.",
    ),
    "reliability": (
        "Reliability diagram",
        "Each bar is a confidence bin, its height the share correct in it and the number at "
        "its foot the items in it; on a calibrated model the bars follow the dashed "
        "diagonal, and bars below it mean over-confidence.",
    ),
    "risk_coverage": (
        "Risk–coverage curve",
        "Accepting items from the most to the least confident, the curve shows the error "
        "rate among those accepted (risk) against the share accepted (coverage); lower is "
        "better, and the area under it is the AURC.",
    ),
    "confidence_hits_misses": (
        "Confidence of hits and misses",
        "Histograms of the confidence of correct (hits) and wrong (misses) predictions; the "
        "less they overlap, the better a confidence threshold separates them.",
    ),
}


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "–" if not math.isfinite(v) else f"{v:.4f}"
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
        return f"[{v[0]:.4f}, {v[1]:.4f}]"
    return str(v)


def _headline(ev: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """The metrics table: (name, value, what it is), every count saying what it counts."""
    router = ev.get("mode") == "router"
    of = "classified items" if router else "items"
    rows: list[tuple[str, Any, str]] = [
        (
            "items",
            ev.get("n"),
            "rows of the set, all routed" if router else "rows of the set",
        )
    ]
    if router:
        rows.append(
            (
                "classified",
                ev.get("n_classified"),
                "items no rule decided, so the classifier ranked them: accuracy, macro-F1, "
                "ECE, AURC, coverage and the per-class table are over these",
            )
        )
    rows += [
        ("accuracy", ev.get("accuracy"), f"share of the {of} whose top label is the gold label"),
        ("accuracy 95% CI", ev.get("accuracy_ci"), "bootstrap 95% interval of the accuracy"),
        ("macro-F1", ev.get("macro_f1"), "F1 of each label, averaged with equal weights"),
        ("macro-F1 95% CI", ev.get("macro_f1_ci"), "bootstrap 95% interval of the macro-F1"),
    ]
    if ev.get("n_with_confidence") is not None:
        rows.append(
            (
                "with a confidence",
                ev["n_with_confidence"],
                f"{of} with a confidence score: ECE and AURC are over these",
            )
        )
    rows += [
        (
            f"ECE ({_ECE_BINS} bins)",
            ev.get("ece"),
            "expected calibration error: the item-weighted gap between confidence and "
            f"accuracy over {_ECE_BINS} equal-width bins (0 is perfect)",
        ),
        (
            "AURC",
            ev.get("aurc"),
            "area under the risk–coverage curve: the mean error rate as items are accepted "
            "from the most confident down (lower is better)",
        ),
    ]
    optional = (
        ("n_auto_routed", "auto-routed", f"{of} the policy let through"),
        ("coverage", "coverage", f"auto-routed / {of}"),
        ("selective_precision", "selective precision", "share of the auto-routed items correct"),
        ("n_next_step", "with a gold next step", "items whose gold next step is known"),
        (
            "next_step_accuracy",
            "next-step accuracy",
            "share of the items with a gold next step whose selected destination is that "
            "step (rule decisions included)",
        ),
        ("next_step_accuracy_ci", "next-step 95% CI", "bootstrap 95% interval"),
        (
            "abstention_rate",
            "abstention rate",
            "share of all items held back by the policy or fallen back"
            if router
            else "share of the items the classifier abstained on",
        ),
    )
    for key, name, meaning in optional:
        if ev.get(key) is not None:
            rows.append((name, ev[key], meaning))
    return rows


def policy_summary(policy: Any) -> dict[str, Any]:
    """What the report shows of a fitted policy (a :class:`~hybridroute.calibration.Policy`)."""
    g = dict(policy.guarantee or {})
    thresholds = dict(policy.thresholds or {})
    objective = (policy.provenance or {}).get("objective_args", {}).get("objective")
    cal = dict(policy.calibration_data or {})
    return {
        "objective": objective,
        "target": g.get("target"),
        "delta": g.get("delta"),
        "certified": bool(g.get("certified")),
        "bound": g.get("bound"),
        "reason": g.get("reason"),
        "required_calibration_size": g.get("required_calibration_size"),
        "threshold": thresholds.get("auto"),
        "ask_threshold": thresholds.get("ask"),
        "fallback": thresholds.get("fallback"),
        "calibration_size": cal.get("size"),
        "calibration_label_counts": cal.get("label_counts"),
        "model_fingerprint": getattr(policy, "model_fingerprint", None),
    }


def _label_mix(ev: dict[str, Any], policy: Any) -> dict[str, Any] | None:
    """The calibration-vs-this-set label-mix check: the evaluation's, or computed here."""
    if ev.get("label_mix"):
        return dict(ev["label_mix"])
    if policy is None or not (policy.calibration_data or {}).get("label_counts"):
        return None
    gold = [str(r["gold"]) for r in ev.get("items") or [] if r.get("gold") is not None]
    if not gold:
        return None
    mix = policy.check_label_mix(gold)
    return mix.to_dict() if hasattr(mix, "to_dict") else dict(vars(mix))


def _guarantee_rows(ev: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The policy section's table: what was promised, and what this set showed."""
    pol = ev.get("policy")
    if not pol:
        return []
    rows: list[tuple[str, str, str]] = []
    target, delta = pol.get("target"), pol.get("delta")
    if pol.get("objective"):
        rows.append(("objective", str(pol["objective"]), "what the thresholds were fitted for"))
    if target is not None:
        rows.append(("target", _fmt(float(target)), "the auto-routed precision asked for"))
    if delta is not None:
        rows.append(("δ", _fmt(float(delta)), "the chance the certificate is allowed to be wrong"))
    rows.append(
        (
            "threshold",
            _fmt(pol.get("threshold")),
            "auto-route at or above this calibrated confidence (– : nothing is auto-routed)",
        )
    )
    if pol.get("ask_threshold") is not None:
        rows.append(("ask threshold", _fmt(pol["ask_threshold"]), "ask the user at or above"))
    if pol.get("certified"):
        verdict = (
            f"yes: precision ≥ {_fmt(target)} with probability ≥ {_fmt(1 - float(delta))} "
            f"(lower bound {_fmt(pol.get('bound'))}) on traffic like the calibration data"
            if target is not None and delta is not None
            else "yes"
        )
    else:
        need = pol.get("required_calibration_size")
        verdict = "no" + (f": {pol['reason']}" if pol.get("reason") else "")
        if need:
            verdict += f" (about {need:,} calibration items would be needed)"
    rows.append(("certified", verdict, "whether the data certified the target"))
    if pol.get("calibration_size") is not None:
        rows.append(
            (
                "calibration items",
                str(pol["calibration_size"]),
                "rows the thresholds were fitted on",
            )
        )
    sp, n_auto = ev.get("selective_precision"), ev.get("n_auto_routed")
    if target is not None and sp is not None:
        met = "met" if float(sp) >= float(target) else "below the target"
        rows.append(
            (
                "selective precision here",
                f"{_fmt(sp)} ({met}, {n_auto} auto-routed)",
                "the auto-routed precision on this set; one finite set can fall below a "
                "certified target by chance (at most δ of the time for traffic like the "
                "calibration data) -- the label-mix check says whether this set is like it",
            )
        )
    mix = ev.get("label_mix")
    if mix:
        departs = "departs markedly" if mix.get("departs") else "like the calibration data"
        rows.append(
            (
                "label mix",
                f"{departs} (total variation {_fmt(mix.get('total_variation'))}, χ² p "
                f"{_fmt(mix.get('p_value'))}, {mix.get('n_observed')} gold labels)",
                "this set's gold labels against the calibration data's: the certificate holds "
                "only for traffic like its calibration data",
            )
        )
    return rows


def _mix_rows(ev: dict[str, Any]) -> list[list[str]]:
    mix = ev.get("label_mix") or {}
    return [[str(label), _fmt(a), _fmt(b)] for label, a, b in mix.get("shifts") or []]


_POLICY_TEXT = (
    "What the fitted policy promised, and what this set showed. A certified threshold holds "
    "for traffic like its calibration data, with probability at least 1 − δ."
)
_MIX_TEXT = (
    "The labels whose share differs most between the calibration data and this set "
    "(calibration share, share here)."
)


def _reliability_bins(n_scored: int) -> int:
    """Fewer bins when few items are scored, so a bin is not one or two items."""
    return int(min(_ECE_BINS, max(_MIN_BINS, n_scored // _ITEMS_PER_BIN)))


def _new_figure(size: tuple[float, float]) -> tuple[Any, Any]:
    """A figure on its own Agg canvas: no pyplot, no backend switch, no global state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI, format="png")
    return path


def _confusion_figure(cm_doc: dict[str, Any]) -> Any:
    labels = list(cm_doc["labels"])
    cm = np.asarray(cm_doc["matrix"], dtype=float)
    title = "confusion matrix (colour: share of the gold row)"
    if len(labels) > _MAX_CONFUSION_LABELS:
        title = (
            f"confusion matrix: the {_MAX_CONFUSION_LABELS} most confused of {len(labels)} classes"
        )
        # keep the classes with the most off-diagonal mass, so the plot stays readable
        off = cm.sum(axis=0) + cm.sum(axis=1) - 2 * np.diag(cm)
        keep = np.sort(np.argsort(-off, kind="stable")[:_MAX_CONFUSION_LABELS])
        cm = cm[np.ix_(keep, keep)]
        labels = [labels[i] for i in keep]
    rows = cm.sum(axis=1, keepdims=True)
    norm = np.divide(cm, rows, out=np.zeros_like(cm), where=rows > 0)
    size = max(5.0, 0.22 * len(labels) + 2)
    fig, ax = _new_figure((size + 1.0, size))
    image = ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the gold row")
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
    ax.set_yticks(range(len(labels)), labels, fontsize=6)
    if len(labels) <= _MAX_ANNOTATED_LABELS:
        fontsize = 8 if len(labels) <= 10 else 6
        for i, j in zip(*np.nonzero(cm), strict=True):
            ax.text(
                j,
                i,
                str(int(cm[i, j])),
                ha="center",
                va="center",
                fontsize=fontsize,
                color="white" if norm[i, j] > 0.5 else "black",
            )
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(title)
    return fig


def _reliability_figure(conf: np.ndarray, correct: np.ndarray, ece: Any) -> Any:
    from ..calibration import reliability_diagram

    n_bins = _reliability_bins(len(conf))
    d = reliability_diagram(conf, correct, n_bins=n_bins)
    fig, ax = _new_figure((5, 5))
    ax.plot([0, 1], [0, 1], "--", color="grey", lw=1, label="perfect calibration")
    ax.bar(
        (d.lower + d.upper) / 2,
        d.accuracy,
        width=(d.upper - d.lower) * 0.9,
        alpha=0.7,
        label="share correct in the bin (at its foot: items in it)",
    )
    # each bin's item count at the foot of its bar, clear of the curve above it
    for x, count in zip((d.lower + d.upper) / 2, d.count, strict=True):
        ax.text(x, 0.015, str(int(count)), ha="center", va="bottom", fontsize=7)
    ax.plot(d.confidence, d.accuracy, "o-", ms=3, label="mean confidence → share correct")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("share correct")
    ax.set_title(
        f"reliability: {len(conf)} items in {n_bins} bins (ECE {_fmt(ece)}, {_ECE_BINS} bins)",
        fontsize=9,
    )
    ax.legend(loc="upper left", fontsize=7)
    return fig


def _risk_coverage_figure(conf: np.ndarray, correct: np.ndarray, aurc: Any) -> Any:
    from ..calibration import risk_coverage_curve

    rc = risk_coverage_curve(conf, correct)
    fig, ax = _new_figure((5, 4))
    ax.plot(rc.coverage, rc.risk, lw=1.5)
    ax.set_xlabel("coverage (share accepted)")
    ax.set_ylabel("risk (error rate among accepted)")
    ax.set_title(f"risk–coverage over {len(conf)} items (AURC {_fmt(aurc)})", fontsize=9)
    return fig


def _hits_misses_figure(conf: np.ndarray, correct: np.ndarray) -> Any:
    fig, ax = _new_figure((5, 4))
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
    return fig


def _plots(ev: dict[str, Any], outdir: Path) -> dict[str, Path]:
    """The plots as PNG files, drawn on their own figures (the host's matplotlib state --
    backend, pyplot figures, rcParams -- is left as it was)."""
    items = [
        it
        for it in ev["items"]
        if it.get("confidence") is not None and it.get("correct") is not None
    ]
    conf = np.array([it["confidence"] for it in items], dtype=float)
    correct = np.array([bool(it["correct"]) for it in items], dtype=bool)
    figures: dict[str, Any] = {}
    cm_doc = ev.get("confusion")
    if cm_doc and cm_doc["labels"]:
        figures["confusion_matrix"] = _confusion_figure(cm_doc)
    if len(conf):
        figures["reliability"] = _reliability_figure(conf, correct, ev.get("ece"))
        figures["risk_coverage"] = _risk_coverage_figure(conf, correct, ev.get("aurc"))
        figures["confidence_hits_misses"] = _hits_misses_figure(conf, correct)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = {name: _save(fig, outdir / f"{name}.png") for name, fig in figures.items()}
    return paths


def _errors(ev: dict[str, Any], path: Path, scrub: Scrubber) -> int:
    cols = ["text", "gold", "predicted", "confidence", "reason_code"]
    extra = [
        c
        for c in ("gold_next_step", "destination", "stage", "cause")
        if ev["items"] and c in ev["items"][0]
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


def _count_tables(ev: dict[str, Any]) -> list[tuple[str, str, list[str], list[list[Any]]]]:
    """The count tables both pages show: (heading, one line on what it counts, header, rows)."""
    tables = []
    stages = ev.get("decisions_by_stage")
    if stages:
        tables.append(
            (
                "Decisions by stage",
                f"Where each of the {ev.get('n')} items was decided.",
                ["stage", "decisions", "what it means"],
                # in the order a decision goes through them; a stage with none shows 0
                [[k, stages.get(k, 0), m] for k, m in STAGE_MEANING.items()]
                + [[k, v, ""] for k, v in stages.items() if k not in STAGE_MEANING],
            )
        )
    if ev.get("mode") == "router":
        causes = ev.get("fallbacks_by_cause") or {}
        tables.append(
            (
                "Fallbacks by cause",
                "Fallback decisions by reason code, with the exception's type when the "
                "classifier raised" + ("." if causes else ": none in this evaluation."),
                ["cause", "decisions"],
                [[k, v] for k, v in causes.items()],
            )
        )
    if ev.get("rules"):
        tables.append(
            (
                "Rules",
                "How often each rule decided, and how often its decision was the gold next step.",
                ["rule", "fires", "matches gold next step"],
                [[k, v["fires"], _fmt(v["match_rate"])] for k, v in ev["rules"].items()],
            )
        )
    cov = ev.get("rule_coverage")
    if cov:
        missing = cov["outcomes"]["never_reached"]
        tables.append(
            (
                "Rule coverage",
                f"What the {cov['decisions']} items exercised of the rules: rules that never "
                "fired, rule outcomes (reason codes) and destinations no item reached.",
                ["what", "reached", "never reached"],
                [
                    [
                        "rules",
                        f"{cov['rules']['total'] - len(cov['rules']['never_fired'])} of "
                        f"{cov['rules']['total']}",
                        ", ".join(cov["rules"]["never_fired"]) or "–",
                    ],
                    [
                        "rule outcomes",
                        f"{cov['outcomes']['total'] - len(missing)} of {cov['outcomes']['total']}",
                        ", ".join(f"{m['rule']} -> {m['reason_code']}" for m in missing) or "–",
                    ],
                    [
                        "destinations",
                        f"{len(cov['destinations']['reached'])} of "
                        f"{len(cov['destinations']['reachable'])}",
                        ", ".join(cov["destinations"]["not_reached"]) or "–",
                    ],
                ],
            )
        )
    if ev.get("abstentions_by_reason"):
        tables.append(
            (
                "Abstentions by reason code",
                "Items not auto-routed (held back by the policy or fallen back), by reason code."
                if ev.get("mode") == "router"
                else "Items the classifier abstained on, by reason code.",
                ["reason", "items"],
                [[k, v] for k, v in ev["abstentions_by_reason"].items()],
            )
        )
    return tables


def _per_class_rows(ev: dict[str, Any]) -> list[list[str]]:
    rows = []
    for lab, row in (ev.get("per_class") or {}).items():
        conf = ", ".join(f"{c['label']} ({c['count']})" for c in row["confused_with"])
        rows.append(
            [
                str(lab),
                f"{row['precision']:.3f}",
                f"{row['recall']:.3f}",
                f"{row['f1']:.3f}",
                str(row["support"]),
                conf,
            ]
        )
    return rows


_PER_CLASS_HEADER = ["label", "precision", "recall", "F1", "support", "confused with"]
_PER_CLASS_TEXT = (
    "Per gold label: precision and recall of the label, their F1, the number of items "
    "(support) and the labels it was most often mistaken for (with counts)."
)


def _md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def _markdown(ev: dict[str, Any], title: str) -> str:
    lines = [f"# {title}", ""]
    lines += _md_table(
        ["metric", "value", "what it is"], [[k, _fmt(v), m] for k, v, m in _headline(ev)]
    )
    guarantee = _guarantee_rows(ev)
    if guarantee:
        lines += ["", "## Policy and its guarantee", "", _POLICY_TEXT, ""]
        lines += _md_table(["", "value", "what it is"], [list(r) for r in guarantee])
        if _mix_rows(ev):
            lines += ["", _MIX_TEXT, "", *_md_table(_MIX_HEADER, _mix_rows(ev))]
    for heading, text, header, rows in _count_tables(ev):
        lines += ["", f"## {heading}", "", text]
        if rows:
            lines += ["", *_md_table(header, rows)]
    per = _per_class_rows(ev)
    if per:
        lines += ["", "## Per class", "", _PER_CLASS_TEXT, "", *_md_table(_PER_CLASS_HEADER, per)]
    lat = ev.get("latency") or {}
    if lat:
        lines += ["", "## Latency and usage", ""]
        lines += [f"- {k}: {v}" for k, v in lat.items()]
        lines += [f"- {k}: {v}" for k, v in (ev.get("usage") or {}).items()]
    return "\n".join(lines) + "\n"


def _html_table(header: list[str], rows: list[list[Any]]) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _html(ev: dict[str, Any], title: str, plots: dict[str, Path]) -> str:
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{esc(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left;font-size:14px}img{max-width:100%;margin:0.5em}h1{font-size:1.6em}"
        "p.how{color:#444;max-width:60em}td.what{color:#555;font-size:13px}</style>",
        "</head><body>",
        f"<h1>{esc(title)}</h1>",
        "<h2>Metrics</h2>",
        "<table><tr><th>metric</th><th>value</th><th>what it is</th></tr>",
    ]
    parts += [
        f"<tr><td>{esc(k)}</td><td>{esc(_fmt(v))}</td><td class='what'>{esc(m)}</td></tr>"
        for k, v, m in _headline(ev)
    ]
    parts.append("</table>")
    guarantee = _guarantee_rows(ev)
    if guarantee:
        parts.append(
            f"<h2 id='policy'>Policy and its guarantee</h2><p class='how'>{esc(_POLICY_TEXT)}</p>"
        )
        parts.append("<table><tr><th></th><th>value</th><th>what it is</th></tr>")
        parts += [
            f"<tr><td>{esc(k)}</td><td>{esc(v)}</td><td class='what'>{esc(m)}</td></tr>"
            for k, v, m in guarantee
        ]
        parts.append("</table>")
        if _mix_rows(ev):
            parts.append(f"<p class='how'>{esc(_MIX_TEXT)}</p>")
            parts.append(_html_table(_MIX_HEADER, _mix_rows(ev)))
    for heading, text, header, rows in _count_tables(ev):
        parts.append(f"<h2>{esc(heading)}</h2><p class='how'>{esc(text)}</p>")
        if rows:
            parts.append(_html_table(header, rows))
    for name, path in plots.items():
        heading, how = _PLOT_TEXT.get(name, (name.replace("_", " "), ""))
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(
            f"<h2>{esc(heading)}</h2><p class='how'>{esc(how)}</p>"
            f"<img alt='{esc(heading)}' src='data:image/png;base64,{data}'>"
        )
    per = _per_class_rows(ev)
    if per:
        parts.append(f"<h2>Per class</h2><p class='how'>{esc(_PER_CLASS_TEXT)}</p>")
        parts.append(_html_table(_PER_CLASS_HEADER, per))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(
    evaluation: dict[str, Any],
    outdir: str | Path,
    *,
    title: str = "hybridroute evaluation",
    scrubber: Scrubber | None = None,
    policy: Any = None,
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
    policy : Policy, optional
        The fitted policy the evaluation ran (a router's ``router.policy``): the report
        shows its target, δ, threshold, whether it was certified, and the label-mix check
        of this set against its calibration data. Without it, a ``policy`` summary in the
        evaluation (:func:`policy_summary`) is shown, if any.

    Returns
    -------
    dict of str to Path
        The files written, by kind (``json``, ``markdown``, ``html``, ``errors``,
        ``plot_<name>``).
    """
    scrub = scrubber if scrubber is not None else Scrubber()
    if policy is not None:
        evaluation = dict(evaluation)
        evaluation["policy"] = policy_summary(policy)
        mix = _label_mix(evaluation, policy)
        if mix is not None:
            evaluation["label_mix"] = mix
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
