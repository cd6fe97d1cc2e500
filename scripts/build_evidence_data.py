#!/usr/bin/env python3
"""Build the labelled evidence data shipped in ``src/hybridroute/calibration/data``.

For every request in ``support_evidence_requests.json`` and every evidence point it
requires, the query "request text + the point's description" is run against the help-centre
articles of ``support_kb.json`` by two retrievers implemented here:

* ``bm25`` -- Okapi BM25 (k1 = 1.2, b = 0.75) over lower-cased word tokens; scores are
  unbounded sums of term weights;
* ``char_tfidf`` -- cosine similarity of TF-IDF vectors of character 3- to 5-grams within
  word boundaries (sublinear tf, smoothed idf, L2-normalised); scores lie in [0, 1].

The top ``--top-k`` articles of each retriever become labelled rows
``(request_id, point, item_id, source, score, rank, covered, split)``, where ``covered`` is
the annotation: the article is tagged with that point in the knowledge base. Requests are
split into ``calibration`` and ``test`` halves by a seeded shuffle. Everything is
deterministic: the same inputs and seed give byte-identical output.

    python scripts/build_evidence_data.py            # rewrite the data file
    python scripts/build_evidence_data.py --check    # fail if the file is out of date
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "src" / "hybridroute" / "calibration" / "data"
KB = DATA / "support_kb.json"
REQUESTS = DATA / "support_evidence_requests.json"
OUT = DATA / "support_evidence_labels.jsonl"

_STOP = frozenset(
    "a an and are as at be by can do does for from how i if in is it its me my of on or "
    "so that the their this to was what when where which who will with you your".split()
)
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class BM25:
    """Okapi BM25 over word tokens."""

    name = "bm25"

    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(words(d)) for d in docs]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.avg = sum(self.lengths) / len(self.lengths)
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def scores(self, query: str) -> list[float]:
        q = words(query)
        out = []
        for tf, length in zip(self.tfs, self.lengths, strict=True):
            s = 0.0
            norm = self.k1 * (1.0 - self.b + self.b * length / self.avg)
            for t in q:
                f = tf.get(t, 0)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1.0) / (f + norm)
            out.append(s)
        return out


def char_ngrams(text: str, lo: int = 3, hi: int = 5) -> Counter[str]:
    grams: Counter[str] = Counter()
    for w in _WORD.findall(text.lower()):
        padded = f" {w} "
        for n in range(lo, hi + 1):
            for i in range(len(padded) - n + 1):
                grams[padded[i : i + n]] += 1
    return grams


class CharTfidf:
    """Cosine similarity of character n-gram TF-IDF vectors."""

    name = "char_tfidf"

    def __init__(self, docs: list[str]) -> None:
        counts = [char_ngrams(d) for d in docs]
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        n = len(docs)
        self.idf = {g: math.log((1.0 + n) / (1.0 + d)) + 1.0 for g, d in df.items()}
        self.vectors = [self._vector(c) for c in counts]

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        v = {g: (1.0 + math.log(f)) * self.idf[g] for g, f in counts.items() if g in self.idf}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {g: x / norm for g, x in v.items()}

    def scores(self, query: str) -> list[float]:
        q = self._vector(char_ngrams(query))
        return [sum(w * d.get(g, 0.0) for g, w in q.items()) for d in self.vectors]


def build(top_k: int, seed: int) -> list[dict]:
    kb = json.loads(KB.read_text(encoding="utf-8"))
    reqs = json.loads(REQUESTS.read_text(encoding="utf-8"))["requests"]
    articles = kb["articles"]
    points = kb["points"]
    docs = [f"{a['title']}. {a['text']}" for a in articles]
    retrievers = [BM25(docs), CharTfidf(docs)]
    ids = sorted(r["id"] for r in reqs)
    random.Random(seed).shuffle(ids)
    half = set(ids[: len(ids) // 2])
    rows = []
    for req in sorted(reqs, key=lambda r: r["id"]):
        split = "calibration" if req["id"] in half else "test"
        for point in req["required_points"]:
            if point not in points:
                raise SystemExit(f"{REQUESTS}: request {req['id']}: unknown point {point!r}")
            query = f"{req['text']} {points[point]}"
            for r in retrievers:
                scores = r.scores(query)
                # ties broken by article order, so the ranking is deterministic
                order = sorted(range(len(articles)), key=lambda i: (-scores[i], i))[:top_k]
                for rank, i in enumerate(order, start=1):
                    rows.append(
                        {
                            "request_id": req["id"],
                            "point": point,
                            "item_id": articles[i]["id"],
                            "source": r.name,
                            "score": round(scores[i], 6),
                            "rank": rank,
                            "covered": point in articles[i]["points"],
                            "split": split,
                        }
                    )
    return rows


def render(rows: list[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20250611)
    ap.add_argument("--check", action="store_true", help="compare with the file, write nothing")
    args = ap.parse_args(argv)
    text = render(build(args.top_k, args.seed))
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date; run scripts/build_evidence_data.py", file=sys.stderr)
            return 1
        print(f"{OUT} is up to date")
        return 0
    OUT.write_text(text, encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    for source in sorted({r["source"] for r in rows}):
        sub = [r for r in rows if r["source"] == source]
        pos = [r["score"] for r in sub if r["covered"]]
        neg = [r["score"] for r in sub if not r["covered"]]
        print(
            f"{source:11s} rows={len(sub)} covered={len(pos)} "
            f"score range [{min(r['score'] for r in sub):.3f}, {max(r['score'] for r in sub):.3f}] "
            f"mean covered {sum(pos) / len(pos):.3f} / not covered {sum(neg) / len(neg):.3f}"
        )
    print(f"wrote {len(rows)} rows to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
