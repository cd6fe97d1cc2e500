"""What redacting personal data from ticket texts costs: accuracy, coverage, speed.

    python -m benchmarks.bench_pii [--datasets support-tickets,banking77] [--banking-cs 10]
                                   [--repeats 5] [--seed 0] [--json]

For each dataset, the local classifier and a policy are fitted as ``hybridroute train``
and ``hybridroute calibrate`` fit them (the classifier's own C grid on support-tickets,
``--banking-cs`` on Banking77; a seeded 20% calibration split carved from train where the
set has none; certified precision at calibrate's default 0.95 with delta 0.05, but 0.85
with delta 0.1 on support-tickets, whose 273 calibration rows cannot certify 0.95 -- the
router benchmark and the tests fit it so), then the test split is scored with
:func:`hybridroute.evaluation.evaluate_classifier` (one definition of accuracy, coverage
and selective precision) in these arrangements:

* **raw** -- texts as given (what the log stores without redaction);
* **serve** -- model and policy fitted on raw texts, test texts redacted (turning the
  service's ``redact_pii`` on for an existing bundle);
* **e2e** -- train, calibration and test texts all redacted (a bundle built from
  redacted data with ``--redact-pii``). When redaction changes no training or calibration
  text the model is the raw one and is reused.

Because the public sets hold almost no personal data, ``support-tickets+pii`` appends one
seeded fake datum (an email, a Luhn-valid card, a phone number or a valid IBAN, in varied
formats) to every test ticket: raw vs redacted on those shows the effect where tickets do
carry personal data. Speed (same process, interleaved, best of ``--repeats``):

* redaction time per text (mean and p50 in microseconds) on each set's texts and on the
  PII-carrying tickets, against the local classifier's single-text p50;
* the router's throughput (``route_many`` in batches of 256, passes of 2,048 items) and
  single-item ``route`` p50 on the plain and the PII-carrying test tickets, with and
  without ``redact_pii``.

The machine may be shared: compare the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import hybridroute
from hybridroute._pii import PIIRedaction, luhn_valid
from hybridroute.calibration import fit_policy
from hybridroute.classifiers import LocalClassifier
from hybridroute.datasets import load_dataset
from hybridroute.evaluation import evaluate_classifier
from hybridroute.router import HybridRouter
from hybridroute.rules import load_rules

RULES = Path(hybridroute.__file__).resolve().parent / "examples" / "support_rules.yaml"
REDACT = PIIRedaction()
BATCH = 256
PASS_ITEMS = 2048

# --------------------------------------------------------------------------- fake personal data


def _card(rng: random.Random) -> str:
    body = rng.choice("3456") + "".join(rng.choice("0123456789") for _ in range(14))
    number = next(body + d for d in "0123456789" if luhn_valid(body + d))
    sep = rng.choice([" ", "-", ""])
    return sep.join(number[i : i + 4] for i in range(0, 16, 4))


def _iban(rng: random.Random) -> str:
    bban = "WEST" + "".join(rng.choice("0123456789") for _ in range(14))
    numeric = "".join(str(int(c, 36)) for c in bban + "GB00")
    iban = f"GB{98 - int(numeric) % 97:02d}{bban}"
    return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)) if rng.random() < 0.5 else iban


def _phone(rng: random.Random) -> str:
    d = lambda n: "".join(rng.choice("0123456789") for _ in range(n))  # noqa: E731
    return rng.choice(
        [
            f"+44 20 7946 {d(4)}",
            f"({rng.randint(201, 989)}) {d(3)}-{d(4)}",
            f"+1-202-555-{d(4)}",
            f"020 7946 {d(4)}",
            f"07700 9{d(5)}",
        ]
    )


def _email(rng: random.Random) -> str:
    name = rng.choice(["jo", "kat.owens", "m.smith", "alex+support", "sam_lee"])
    return f"{name}{rng.randint(1, 99)}@{rng.choice(['example.com', 'mail.example.org'])}"


_FAKES = {
    "email": ("You can reach me at {}.", _email),
    "card": ("My card number is {}.", _card),
    "phone": ("Call me on {} please.", _phone),
    "iban": ("My IBAN is {}.", _iban),
}


def with_fake_pii(texts: list[str], seed: int) -> list[str]:
    """Each text with one seeded fake datum of a kind drawn in turn."""
    rng = random.Random(seed)
    kinds = sorted(_FAKES)
    out = []
    for i, text in enumerate(texts):
        template, make = _FAKES[kinds[i % len(kinds)]]
        out.append(f"{text} {template.format(make(rng))}")
    return out


# --------------------------------------------------------------------------- accuracy


#: (target, delta) of the certified-precision policy per dataset (default: calibrate's).
TARGETS = {"support-tickets": (0.85, 0.1)}


def _fit(
    name: str, train: Any, cal: Any, seed: int, cs: tuple[float, ...] | None, fix: Any = list
) -> Any:
    """The classifier and policy of ``(texts, labels)`` train and calibration rows, each
    text through ``fix`` first."""
    clf = (
        LocalClassifier(random_state=seed)
        if cs is None
        else LocalClassifier(Cs=cs, random_state=seed)
    )
    clf.fit(fix(train[0]), train[1])
    target, delta = TARGETS.get(name, (0.95, 0.05))
    policy = fit_policy(
        clf.predict_proba(fix(cal[0])),
        cal[1],
        [str(c) for c in clf.classes_],
        target=target,
        delta=delta,
        seed=seed,
        oos_label=cal[2],
    )
    return clf, policy


def _redacted(texts: list[str]) -> list[str]:
    return [REDACT.redact(t) for t in texts]


def _score(clf: Any, policy: Any, texts: list[str], gold: list[str], seed: int) -> dict:
    ev = evaluate_classifier(
        clf, texts, gold, policy=policy, n_boot=200, seed=seed, latency_samples=0
    )
    return {
        "accuracy": ev["accuracy"],
        "selective_precision": ev.get("selective_precision"),
        "coverage": ev.get("coverage"),
    }


def accuracy(name: str, *, seed: int, cs: tuple[float, ...] | None) -> dict[str, Any]:
    """Scores of one dataset, raw / serve / e2e (and with fake PII for support-tickets)."""
    t0 = time.perf_counter()
    ds = load_dataset(name)
    if "calibration" not in ds.splits:
        ds = ds.with_calibration_split(0.2, seed=seed)  # as `calibrate` carves it
    parts = {p: ds.split(p) for p in ("train", "calibration", "test")}
    texts = {p: list(split.texts) for p, split in parts.items()}
    gold = {p: [str(y) for y in split.y] for p, split in parts.items()}
    changed = {p: sum(REDACT.redact(t) != t for t in texts[p]) for p in texts}

    def fit(tr: list[str], ca: list[str], fix: Any = list) -> Any:
        return _fit(
            name, (tr, gold["train"]), (ca, gold["calibration"], ds.oos_label), seed, cs, fix
        )

    def score(model: Any, test: list[str]) -> dict[str, Any]:
        clf, policy = model
        return _score(clf, policy, test, gold["test"], seed)

    raw = fit(texts["train"], texts["calibration"])
    out: dict[str, Any] = {
        "dataset": name,
        "policy": dict(zip(("target", "delta"), TARGETS.get(name, (0.95, 0.05)), strict=True)),
        "n": {p: len(t) for p, t in texts.items()},
        "texts_changed_by_redaction": changed,
        "raw": score(raw, texts["test"]),
        "serve": score(raw, _redacted(texts["test"])),
    }
    if changed["train"] or changed["calibration"]:
        out["e2e"] = score(
            fit(texts["train"], texts["calibration"], _redacted), _redacted(texts["test"])
        )
        out["e2e_note"] = "refitted on redacted train and calibration texts"
    else:
        out["e2e"] = out["serve"]
        out["e2e_note"] = "no train or calibration text changed: the raw model is the e2e one"
    if name == "support-tickets":
        fake = {p: with_fake_pii(t, seed + i) for i, (p, t) in enumerate(texts.items())}
        fake_red = _redacted(fake["test"])
        out["with_fake_pii"] = {
            "texts_changed_by_redaction": sum(
                a != b for a, b in zip(fake["test"], fake_red, strict=True)
            ),
            # the model of the plain set; only the test tickets carry personal data
            "serve": {"raw": score(raw, fake["test"]), "redacted": score(raw, fake_red)},
            # train, calibration and test tickets all carry it: left in, or redacted
            "e2e": {
                "raw": score(fit(fake["train"], fake["calibration"]), fake["test"]),
                "redacted": score(fit(fake["train"], fake["calibration"], _redacted), fake_red),
            },
        }
        out["_model"] = (*raw, texts["test"], fake["test"])
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


# --------------------------------------------------------------------------- speed


def _per_text_us(texts: list[str], repeats: int) -> dict[str, float]:
    """Mean (best of ``repeats`` passes) and p50 of one redaction, in microseconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for t in texts:
            REDACT.redact(t)
        best = min(best, time.perf_counter() - t0)
    singles = []
    for t in texts:
        t0 = time.perf_counter_ns()
        REDACT.redact(t)
        singles.append((time.perf_counter_ns() - t0) / 1000.0)
    return {
        "mean_us": round(best / len(texts) * 1e6, 3),
        "p50_us": round(statistics.median(singles), 3),
        "max_us": round(max(singles), 1),
        "texts": len(texts),
    }


def speed(clf: Any, policy: Any, texts: list[str], repeats: int) -> dict[str, Any]:
    """The router with and without redaction on ``texts`` (interleaved, best of repeats)."""
    rules = load_rules(RULES)
    routers = {
        mode: HybridRouter(
            rules=rules,
            classifier=clf,
            policy=policy,
            name="bench",
            version="1",
            redact_pii=(mode == "redact") or None,
        )
        for mode in ("plain", "redact")
    }
    order = list(routers.items())
    # the texts over and over up to PASS_ITEMS: a pass long enough to time on a busy machine
    items = [{"facts": {}, "text": texts[i % len(texts)]} for i in range(PASS_ITEMS)]
    for r in routers.values():  # warm-up
        r.route_many(items[:BATCH])
    best = {m: float("inf") for m in routers}
    for rep in range(repeats):
        for mode, r in order if rep % 2 else order[::-1]:
            t0 = time.perf_counter()
            for start in range(0, len(items), BATCH):
                r.route_many(items[start : start + BATCH])
            best[mode] = min(best[mode], time.perf_counter() - t0)
    singles: dict[str, list[float]] = {m: [] for m in routers}
    classifier: list[float] = []
    for i, t in enumerate(texts[:300]):
        for mode, r in order if i % 2 else order[::-1]:  # neither always goes first
            t0 = time.perf_counter()
            r.route({}, t)
            singles[mode].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        clf.predict_proba([t])
        classifier.append(time.perf_counter() - t0)
    out: dict[str, Any] = {"texts": len(texts), "items_per_pass": len(items), "batch_size": BATCH}
    for mode in routers:
        out[mode] = {
            "items_per_s": round(len(items) / best[mode], 1),
            "single_p50_ms": round(statistics.median(singles[mode]) * 1e3, 4),
        }
    out["classifier_single_p50_ms"] = round(statistics.median(classifier) * 1e3, 4)
    out["throughput_ratio"] = round(out["redact"]["items_per_s"] / out["plain"]["items_per_s"], 4)
    out["single_p50_ratio"] = round(
        out["redact"]["single_p50_ms"] / out["plain"]["single_p50_ms"], 4
    )
    return out


# --------------------------------------------------------------------------- the run


def run(
    datasets: list[str],
    *,
    seed: int = 0,
    repeats: int = 5,
    banking_cs: tuple[float, ...] | None,
    support_cs: tuple[float, ...] | None = None,
) -> dict[str, Any]:
    res: dict[str, Any] = {"benchmark": "pii", "kinds": list(REDACT.kinds), "datasets": {}}
    redaction: dict[str, Any] = {}
    for name in datasets:
        cs = banking_cs if name != "support-tickets" else support_cs
        acc = accuracy(name, seed=seed, cs=cs)
        model = acc.pop("_model", None)
        res["datasets"][name] = acc
        redaction[name] = _per_text_us(list(load_dataset(name).texts), repeats)
        if model is not None:
            clf, policy, plain, fake = model
            redaction["support-tickets+pii"] = _per_text_us(fake, repeats)
            res["router"] = {
                "support-tickets test": speed(clf, policy, plain, repeats),
                "support-tickets+pii test": speed(clf, policy, fake, repeats),
            }
    res["redaction"] = redaction
    return res


def _row(bench_key: str, measure: str, value: Any, unit: str, base: Any, label: str, notes: str):
    return {
        "bench": "pii",
        "key": f"pii.{bench_key}",
        "measure": measure,
        "value": value,
        "unit": unit,
        "baseline": base,
        "baseline_label": label,
        "notes": notes,
    }


def rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The runner's table rows: each figure next to what it is compared with."""
    out = []
    for where, r in (res.get("router") or {}).items():
        key = "pii" if "+pii" in where else "plain"
        red = res["redaction"]["support-tickets+pii" if key == "pii" else "support-tickets"]
        out.append(
            _row(
                f"redact_us_per_text.{key}",
                f"redaction per text, {where} (mean)",
                red["mean_us"],
                "us",
                round(r["classifier_single_p50_ms"] * 1000, 2),
                "local classifier, one text (p50)",
                f"p50 {red['p50_us']} us over {red['texts']} texts",
            )
        )
        out.append(
            _row(
                f"router_items_per_s.{key}",
                f"router route_many with redact_pii, {where}",
                r["redact"]["items_per_s"],
                "items/s",
                r["plain"]["items_per_s"],
                "without redaction",
                f"single route p50 {r['redact']['single_p50_ms']} vs "
                f"{r['plain']['single_p50_ms']} ms",
            )
        )
    for name, acc in res["datasets"].items():
        n_changed = sum(acc["texts_changed_by_redaction"].values())
        sides = [("", "redacted end to end", acc["e2e"], acc["raw"], "texts as given")]
        fake = acc.get("with_fake_pii")
        if fake:
            sides.append(
                (
                    "+pii",
                    "+ fake PII everywhere, redacted end to end",
                    fake["e2e"]["redacted"],
                    fake["e2e"]["raw"],
                    "PII left in",
                )
            )
        for suffix, what, value, base, label in sides:
            for metric in ("accuracy", "selective_precision", "coverage"):
                out.append(
                    _row(
                        f"{name}{suffix}.{metric}",
                        f"{name} {metric.replace('_', ' ')}, {what}",
                        value[metric],
                        "",
                        base[metric],
                        label,
                        f"texts changed by redaction: {n_changed}" if not suffix else "",
                    )
                )
    return out


def runner_entry(quick: bool, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks`` (support-tickets; Banking77 too in a full run
    when its data is there)."""
    datasets = str(settings.get("datasets", "" if quick else "support-tickets,banking77"))
    names = [d for d in datasets.split(",") if d] or ["support-tickets"]
    if "banking77" in names and not _banking_available():
        names.remove("banking77")
    res = run(
        names,
        repeats=int(settings.get("repeats", 1 if quick else 5)),
        banking_cs=_cs(str(settings.get("banking_cs", "10"))),
        # a quick run fits one C (seconds); a full one the classifier's own grid
        support_cs=_cs(str(settings.get("support_cs", "10" if quick else "grid"))),
    )
    return rows(res)


def _banking_available() -> bool:
    base = os.environ.get("HYBRIDROUTE_DATA_DIR")
    return base is not None and base != "" and (Path(base) / "banking77").is_dir()


def _cs(text: str) -> tuple[float, ...] | None:
    return None if text in ("", "grid") else tuple(float(c) for c in text.split(","))


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="support-tickets,banking77")
    ap.add_argument(
        "--banking-cs",
        default="10",
        help="C values of the Banking77 classifier ('grid': the classifier's own grid, "
        "about 3 minutes here; default 10)",
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    names = [d for d in args.datasets.split(",") if d]
    if "banking77" in names and not _banking_available():
        print("banking77: not run (set HYBRIDROUTE_DATA_DIR to the directory holding banking77/)")
        names.remove("banking77")
    res = run(names, seed=args.seed, repeats=args.repeats, banking_cs=_cs(args.banking_cs))
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"kinds redacted: {', '.join(res['kinds'])}")
    for name, acc in res["datasets"].items():
        changed = acc["texts_changed_by_redaction"]
        print(
            f"\n{name} (train {acc['n']['train']}, calibration {acc['n']['calibration']}, "
            f"test {acc['n']['test']}; texts changed by redaction: train {changed['train']}, "
            f"calibration {changed['calibration']}, test {changed['test']}; {acc['seconds']} s)"
        )
        print(
            f"  policy: certified precision {acc['policy']['target']}, delta "
            f"{acc['policy']['delta']}"
        )
        print(f"  {'':40} {'accuracy':>9} {'sel.prec':>9} {'coverage':>9}")
        arrangements = [
            ("texts as given", acc["raw"]),
            ("redacted at serving", acc["serve"]),
            ("redacted end to end*", acc["e2e"]),
        ]
        fake = acc.get("with_fake_pii")
        if fake:
            arrangements += [
                ("fake PII in test; model of plain set", None),
                ("  PII left in", fake["serve"]["raw"]),
                ("  redacted at serving", fake["serve"]["redacted"]),
                ("fake PII in train, calibration and test", None),
                ("  PII left in", fake["e2e"]["raw"]),
                ("  redacted end to end", fake["e2e"]["redacted"]),
            ]
        for label, sc in arrangements:
            if sc is None:
                print(f"  {label}")
                continue
            print(
                f"  {label:40} {_fmt(sc['accuracy']):>9} "
                f"{_fmt(sc['selective_precision']):>9} {_fmt(sc['coverage']):>9}"
            )
        print(f"  * {acc['e2e_note']}")
        if fake:
            n_fake = fake["texts_changed_by_redaction"]
            print(f"  fake PII: {n_fake} of {acc['n']['test']} test tickets changed by redaction")
    print("\nredaction time per text (all four kinds):")
    for name, r in res["redaction"].items():
        print(
            f"  {name:22} mean {r['mean_us']:8.2f} us  p50 {r['p50_us']:8.2f} us  "
            f"max {r['max_us']:8.1f} us  ({r['texts']} texts)"
        )
    for where, r in (res.get("router") or {}).items():
        print(
            f"\nrouter on the {r['texts']} {where} tickets (passes of {r['items_per_pass']:,} "
            f"items in batches of {r['batch_size']}):"
        )
        for mode in ("plain", "redact"):
            print(
                f"  {mode:7} {r[mode]['items_per_s']:10,.0f} items/s   "
                f"single route p50 {r[mode]['single_p50_ms']:.4f} ms"
            )
        print(
            f"  with redaction / without: throughput {r['throughput_ratio']:.3f}, single p50 "
            f"{r['single_p50_ratio']:.3f}; local classifier alone, one text: "
            f"{r['classifier_single_p50_ms']:.4f} ms"
        )


if __name__ == "__main__":
    main()
