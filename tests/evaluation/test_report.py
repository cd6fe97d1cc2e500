"""The evaluation report: plots drawn without touching the host's matplotlib, and a page
that says what each number counts and how to read each plot."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from html.parser import HTMLParser

import numpy as np
import pytest

from hybridroute.evaluation import write_report
from hybridroute.evaluation._report import (
    _confusion_figure,
    _reliability_bins,
    _reliability_figure,
)


def synthetic_evaluation(n: int = 60, labels=("billing", "order_status", "refund"), seed=0):
    """A router-mode evaluation document (what evaluate_router returns), made up."""
    rng = np.random.default_rng(seed)
    labels = list(labels)
    k = len(labels)
    items = []
    cm = np.zeros((k, k), dtype=int)
    for i in range(n):
        g = int(rng.integers(k))
        p = g if rng.random() < 0.7 else int(rng.integers(k))
        cm[g, p] += 1
        items.append(
            {
                "text": f"ticket {i}",
                "gold": labels[g],
                "predicted": labels[p],
                "confidence": float(rng.uniform(0.3, 1.0)),
                "correct": g == p,
                "reason_code": "confident_intent",
                "stage": "model",
                "destination": labels[p],
                "gold_next_step": None,
                "cause": None,
            }
        )
    return {
        "mode": "router",
        "n": n + 40,
        "n_classified": n,
        "n_with_confidence": n,
        "n_auto_routed": n // 2,
        "accuracy": float(np.trace(cm) / n),
        "accuracy_ci": [0.5, 0.8],
        "macro_f1": 0.6,
        "macro_f1_ci": [0.5, 0.7],
        "ece": 0.05,
        "aurc": 0.1,
        "coverage": 0.5,
        "selective_precision": 0.9,
        "next_step_accuracy": 0.8,
        "n_next_step": n + 40,
        "next_step_accuracy_ci": [0.7, 0.9],
        "abstention_rate": 0.3,
        "decisions_by_stage": {
            "fallback": 2,
            "model": n // 2,
            "policy": n - n // 2 - 2,
            "rule": 40,
        },
        "fallbacks_by_cause": {"classifier_error (TypeError)": 2},
        "abstentions_by_reason": {"classifier_error": 2, "low_confidence": n - n // 2 - 2},
        "confusion": {"labels": labels, "matrix": cm.tolist()},
        "per_class": {},
        "items": items,
    }


HOST_CHECK = textwrap.dedent(
    """
    import json, sys
    import matplotlib
    from hybridroute.evaluation import write_report

    ev = json.loads(open(sys.argv[1], encoding="utf-8").read())
    out = []
    for i, backend in enumerate(sys.argv[2].split(",")):
        matplotlib.use(backend)
        matplotlib.rcParams["lines.linewidth"] = 3.25 + i
        matplotlib.rcParams["font.size"] = 13.0 + i
        before = dict(matplotlib.rcParams)
        if sys.argv[3] == "pyplot":  # a notebook: pyplot in use, with a figure open
            import matplotlib.pyplot as plt
            plt.figure()
            open_before = plt.get_fignums()
        files = write_report(ev, f"{sys.argv[4]}/{i}")
        assert files["plot_confusion_matrix"].stat().st_size > 1000
        after = dict(matplotlib.rcParams)
        state = {
            "backend": matplotlib.get_backend(),
            "changed": sorted(k for k in before if before[k] != after.get(k)),
        }
        if sys.argv[3] == "pyplot":
            state["figures kept"] = plt.get_fignums() == open_before
        else:
            state["pyplot imported"] = "matplotlib.pyplot" in sys.modules
        out.append(state)
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("host", ["no pyplot", "pyplot"])
def test_writing_a_report_leaves_the_hosts_matplotlib_as_it_was(tmp_path, host):
    backends = ["svg", "pdf", "ps"]
    doc = tmp_path / "ev.json"
    doc.write_text(json.dumps(synthetic_evaluation()), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", HOST_CHECK, str(doc), ",".join(backends), host, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    states = json.loads(proc.stdout.strip().splitlines()[-1])
    extra = {"figures kept": True} if host == "pyplot" else {"pyplot imported": False}
    assert states == [{"backend": b, "changed": [], **extra} for b in backends]


@pytest.mark.parametrize(("labels", "annotated"), [(3, True), (12, True), (30, False)])
def test_the_confusion_matrix_has_a_colour_bar_and_counts(labels, annotated):
    rng = np.random.default_rng(labels)
    cm = rng.integers(0, 4, size=(labels, labels))
    names = [f"label_{i:02d}" for i in range(labels)]
    fig = _confusion_figure({"labels": names, "matrix": cm.tolist()})
    main, bar = fig.axes  # the matrix and its colour bar
    assert bar.get_ylabel() == "share of the gold row"
    shown = sorted(int(t.get_text()) for t in main.texts)
    if annotated:
        assert shown == sorted(int(v) for v in cm[cm > 0])
    else:
        assert shown == []


@pytest.mark.parametrize(
    ("n", "bins"), [(8, 5), (40, 5), (60, 6), (120, 12), (150, 15), (5000, 15)]
)
def test_fewer_reliability_bins_when_few_items_are_scored(n, bins):
    assert _reliability_bins(n) == bins


@pytest.mark.parametrize("n", [12, 90, 400])
def test_the_reliability_diagram_labels_each_bin_with_its_count(n):
    rng = np.random.default_rng(n)
    conf = rng.uniform(0, 1, n)
    correct = rng.uniform(0, 1, n) < conf
    fig = _reliability_figure(conf, correct, 0.05)
    (ax,) = fig.axes
    counts = [int(t.get_text()) for t in ax.texts]
    assert sum(counts) == n and 0 < len(counts) <= _reliability_bins(n)
    assert f"{n} items in {_reliability_bins(n)} bins" in ax.get_title()


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[tuple[str, str]] = []
        self._open: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._open.append(tag)

    def handle_endtag(self, tag):
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data):
        if data.strip():
            self.text.append((self._open[-1] if self._open else "", data.strip()))


def test_the_page_explains_each_plot_and_metric_and_stays_self_contained(tmp_path):
    files = write_report(synthetic_evaluation(), tmp_path / "rep", title="made up")
    page = _Page()
    page.feed(files["html"].read_text(encoding="utf-8"))
    headings = [t for tag, t in page.text if tag == "h2"]
    for heading in (
        "Metrics",
        "Decisions by stage",
        "Fallbacks by cause",
        "Confusion matrix",
        "Reliability diagram",
        "Risk–coverage curve",
        "Confidence of hits and misses",
    ):
        assert heading in headings
    # each plot: heading, one sentence on how to read it, then the image
    texts = [t for _, t in page.text]
    for heading in headings[-4:]:
        how = texts[texts.index(heading) + 1]
        assert how.endswith(".") and how.count(". ") == 0 and len(how) > 40
    images = [a for tag, a in page.tags if tag == "img"]
    assert len(images) == 4 and all(a["src"].startswith("data:image/png;base64,") for a in images)
    assert not [tag for tag, _ in page.tags if tag in ("script", "link", "iframe", "object")]
    assert not [a for _, a in page.tags if any(str(v).startswith("http") for v in a.values())]
    # the metrics legend: every metric row says what it is; counts say what they count
    cells = [t for tag, t in page.text if tag == "td"]
    for name, meaning in (
        ("items", "rows of the set, all routed"),
        ("classified", "items no rule decided"),
        ("accuracy", "share of the classified items"),
        ("with a gold next step", "items whose gold next step is known"),
    ):
        assert cells[cells.index(name) + 2].startswith(meaning)
    md = files["markdown"].read_text(encoding="utf-8")
    assert "| metric | value | what it is |" in md
    assert "| classified | 60 | items no rule decided" in md
    assert "| fallback | 2 | the classifier failed or abstained" in md


def test_the_new_tables_are_scrubbed(tmp_path):
    key = "sk-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0"
    ev = synthetic_evaluation()
    ev["fallbacks_by_cause"] = {f"classifier_error (key {key})": 2}
    files = write_report(ev, tmp_path / "rep")
    for kind in ("html", "markdown", "json"):
        text = files[kind].read_text(encoding="utf-8")
        assert key not in text and "[REDACTED]" in text, kind
