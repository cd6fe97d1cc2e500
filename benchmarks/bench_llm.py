"""LLM-classifier plumbing against the local stand-in LLM: throughput, cache, faults.

    python benchmarks/bench_llm.py [--n 1000] [--latency 0.2] [--concurrency 32] [--json]

Every figure here is a STAND-IN figure: the answers come from a hash of the text, not from a
language model, so nothing below is an LLM's accuracy. What is measured is the client
stack (hybridroute's seam -> instructor -> litellm -> OpenAI SDK -> HTTP): labels per
second against a server with fixed latency, the requests a cached rerun makes, and how
injected faults end (label, or abstention with a reason code) within the retry budgets.

With ``--cascade`` it also counts the requests the cascade (local classifier first, a
fitted escalation threshold) saves against sending every text to the LLM
(:func:`run_cascade`).

Targets (issue 4): >= 100 labels/s with 200 ms latency and concurrency 32 (the bound is
concurrency / latency = 160 labels/s); a second run of the same texts makes 0 requests.
The stand-in runs in its own process (``--in-process`` to share this one) so that the
client is measured, not the server. Costs are what the counted tokens would cost at
``--model`` prices in litellm's offline cost map; the stand-in counts ~4 characters per
token.

With ``--layers`` it measures the client's CPU per request layer by layer (the OpenAI SDK
alone, litellm, the seam, the classifier: :func:`run_layers`). The client is one event loop,
so its labels per second cannot pass 1000 / (CPU ms per request): that, not the server or
the connection pool, is what keeps the path under its concurrency bound.

With ``--real`` (or ``--real-only``) it adds the REAL-MODEL section (:func:`run_real`, the
``llm-local`` extra): SmolLM2-135M-Instruct served on 127.0.0.1 by llama-cpp-python, asked
about support-ticket texts in each structured-output mode and confidence method, with k
similar examples in the prompt, and behind the cascade. A 135M-parameter model: its
accuracy says nothing about a hosted model's. Without the extra the section says NOT run
and how to install it::

    python benchmarks/bench_llm.py --real-only [--real-n 40] [--real-cal 40] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from typing import Any

from hybridroute.classifiers import LLMClassifier, RetrySettings
from hybridroute.testing import EXCLUSIVE_FAULTS, HashPolicy, StandInLLM, StandInProcess

_PHRASES = (
    "my card has not arrived",
    "I was charged twice",
    "how do I top up",
    "please refund my last payment",
    "the app will not let me log in",
    "change my address",
    "my bank transfer got rejected, why",
    "I lost my phone",
)


#: Where the client's CPU per request goes: each GIL-holding sample of the profiled run
#: goes to the first part one of whose markers its stack holds (see ``_pyspy``).
CLIENT_PARTS = (
    ("litellm response cost", ("response_cost_calculator", "completion_cost (")),
    (
        "litellm success logging",
        ("async_success_handler", "dispatch_success_logging", "LoggingWorker"),
    ),
    ("litellm success logging", ("_client_async_logging_helper", "Logging.post_call")),
    ("instructor parsing", ("process_response_async", "_answer_parser.<locals>.parse")),
    ("OpenAI SDK + httpx + aiohttp", ("make_openai_chat_completion_request",)),
    (
        "litellm prep in a worker thread + the hop",
        ("(concurrent/futures/thread.py", "_write_to_self"),
    ),
    ("litellm other request/response work", ("(litellm/",)),
    ("hybridroute", ("(hybridroute/",)),
)


def _client_profile(
    args: argparse.Namespace, api_base: str, labels: list[str], texts: list[str], settings: Any
) -> dict[str, Any]:
    """The first run again, on a fresh cache, with this process sampled by py-spy (GIL
    holders only): the share of the client's CPU per part and the CPU per request of
    that run (sampling costs a little, so the timed run above runs without it)."""
    from collections import Counter

    try:
        from ._pyspy import pyspy, sampled, shares
    except ImportError:  # as a script
        from _pyspy import pyspy, sampled, shares  # type: ignore[no-redef]

    if pyspy() is None:
        return {"profile": None, "why": "py-spy is not installed (the bench extra)"}
    stacks: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as cache:
        clf = _classifier(args, api_base, labels, retry=settings, cache_dir=cache)
        clf.classify(["warm-up text, not timed"])
        cpu_before = _cpu_seconds()
        with sampled(os.getpid(), stacks, gil=True):
            report = clf.classify(texts).report
        cpu_ms = (_cpu_seconds() - cpu_before) / max(1, report.requests) * 1000
    return {"profile": shares(stacks, CLIENT_PARTS, "event loop, other"), "cpu_ms": cpu_ms}


def client_cpu_where(profile: dict[str, Any], top: int = 5) -> str:
    """The profiled run's client CPU per request by part (its largest ``top`` parts)."""
    if not profile.get("profile"):
        return f"not profiled ({profile.get('why', 'no samples')})"
    parts = list(profile["profile"].items())[:top]
    each = ", ".join(f"{name} {share * profile['cpu_ms']:.1f}" for name, share in parts)
    return f"ms/request by part (py-spy, a profiled rerun at {profile['cpu_ms']:.1f}): {each}"


def make_texts(n: int) -> list[str]:
    return [f"ticket {i}: {_PHRASES[i % len(_PHRASES)]}" for i in range(n)]


def make_labels(k: int) -> list[str]:
    return [f"intent_{i:02d}" for i in range(k)]


def _server(args: argparse.Namespace, **kwargs: Any) -> Any:
    cls = StandInLLM if args.in_process else StandInProcess
    return cls(HashPolicy(seed=args.seed), seed=args.seed, **kwargs)


def _classifier(args: argparse.Namespace, api_base: str, labels: list[str], **kw: Any) -> Any:
    clf = LLMClassifier(
        args.model, api_base=api_base, max_concurrency=args.concurrency, seed=args.seed, **kw
    )
    return clf.fit(labels, labels)  # the label set; fit makes no request


def run(args: argparse.Namespace) -> dict[str, Any]:
    import hybridroute.classifiers.llm._seam  # noqa: F401  (import litellm before timing)

    labels = make_labels(args.labels)
    texts = make_texts(args.n)
    out: dict[str, Any] = {
        "note": "stand-in figures: plumbing throughput and robustness, NOT LLM accuracy",
        "n_texts": args.n,
        "n_labels": args.labels,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "concurrency_bound_labels_per_s": args.concurrency / args.latency
        if args.latency > 0
        else None,
        "server": "in-process" if args.in_process else "separate process",
    }

    # -- throughput, then the cached rerun
    settings = RetrySettings(timeout=max(5.0, 10 * args.latency), seed=args.seed)
    with tempfile.TemporaryDirectory() as cache, _server(args, latency=args.latency) as server:
        clf = _classifier(args, server.api_base, labels, retry=settings, cache_dir=cache)
        clf.classify(["warm-up text, not timed"])  # first-request setup in litellm
        server.reset_stats()
        cpu_before = _cpu_seconds()
        first = clf.classify(texts).report
        cpu_ms = (_cpu_seconds() - cpu_before) / max(1, first.requests) * 1000
        first_server = server.stats()
        server.reset_stats()
        second = clf.classify(texts).report
        second_server = server.stats()
        profile = _client_profile(args, server.api_base, labels, texts, settings)
    out["first_run"] = {
        "labels_per_s": first.labels_per_second,
        "seconds": first.seconds,
        "requests": first.requests,
        "server_requests": first_server.get("requests", 0),
        "server_max_in_flight": first_server.get("max_in_flight", 0),
        "answered": first.n_answered,
        "abstained": first.n_abstained,
        "prompt_tokens": first.prompt_tokens,
        "completion_tokens": first.completion_tokens,
        "cost_usd_at_model_prices": first.cost_usd,
        # The client's CPU per request (this process: the event loop's thread and any
        # other); one event loop cannot answer faster than 1000 / this per second.
        "client_cpu_ms_per_request": round(cpu_ms, 3),
        "client_cpu_bound_labels_per_s": round(1000 / cpu_ms, 1) if cpu_ms > 0 else None,
        "client_cpu_profile": profile,
        "client_cpu_where": client_cpu_where(profile),
    }
    out["second_run"] = {
        "requests": second.requests,
        "server_requests": second_server.get("requests", 0),
        "cache_hits": second.cache_hits,
        "seconds": second.seconds,
    }

    if args.no_faults:
        return out

    # -- faults: 10% of each kind (slow is a separate 10% modifier)
    faults = {kind: args.fault_rate for kind in ("slow", *EXCLUSIVE_FAULTS)}
    fault_settings = RetrySettings(
        max_transport_retries=3,
        max_label_repairs=1,
        timeout=max(1.0, 5 * args.latency),
        backoff_initial=0.05,
        backoff_max=0.5,
        seed=args.seed,
    )
    with _server(
        args,
        latency=args.latency,
        faults=faults,
        retry_after=0.1,
        slow_seconds=2 * args.latency,
        hang_seconds=60,
    ) as server:
        clf = _classifier(args, server.api_base, labels, retry=fault_settings)
        faulty = clf.classify(texts).report
        fault_server = server.stats()
    out["fault_run"] = {
        "fault_rates": faults,
        "retry_settings": fault_settings.to_dict(),
        "labels_per_s": faulty.labels_per_second,
        "items": faulty.n_items,
        "answered": faulty.n_answered,
        "abstained": faulty.n_abstained,
        "abstentions_by_reason": dict(sorted(faulty.abstentions.items())),
        "lost": faulty.n_items - faulty.n_answered - faulty.n_abstained,
        "requests": faulty.requests,
        "request_budget": faulty.n_items * fault_settings.max_requests,
        "request_outcomes": dict(sorted(faulty.request_outcomes.items())),
        "server_counts": dict(sorted(fault_server.items())),
    }
    return out


def _cpu_seconds() -> float:
    """CPU time of this process so far (user + system)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _bounded(n: int, call: Any, concurrency: int) -> None:
    semaphore = asyncio.Semaphore(concurrency)

    async def one(i: int) -> Any:
        async with semaphore:
            return await call(i)

    await asyncio.gather(*(one(i) for i in range(n)))


def run_layers(args: argparse.Namespace) -> dict[str, Any]:
    """Where the LLM path's time goes: the same requests through each layer in turn.

    The client is one event loop, so its labels per second cannot pass 1000 / (its CPU
    milliseconds per request). Each layer is measured against the same stand-in (its own
    process, ``args.latency``, ``args.concurrency`` in flight): the OpenAI SDK alone,
    litellm over the seam's SDK client, the seam (instructor shaping and parsing, the
    hardened JSON check), and the whole classifier (retry loop, results, report).
    """
    import openai

    from hybridroute.classifiers.llm._seam import LiteLLMLabelAsker

    labels = make_labels(args.labels)
    n = args.n
    out: dict[str, Any] = {"n": n, "latency_s": args.latency, "concurrency": args.concurrency}
    with StandInProcess(HashPolicy(seed=args.seed), seed=args.seed, latency=args.latency) as srv:
        asker = LiteLLMLabelAsker(
            model=args.model, labels=labels, api_base=srv.api_base, api_key="not-a-key"
        )
        request = asker._shape([{"role": "user", "content": "warm-up"}])

        def messages(i: int) -> list[dict[str, str]]:
            return [{"role": "user", "content": f"<text>ticket {i}</text>"}]

        async def sdk() -> Any:
            client = openai.AsyncOpenAI(base_url=srv.api_base, api_key="not-a-key", max_retries=0)
            name = args.model.split("/", 1)[-1]
            closers.append(client.close)
            return lambda i: client.chat.completions.create(
                model=name, **{**request, "messages": messages(i)}
            )

        async def via_litellm() -> Any:
            import litellm

            client = asker._client()
            return lambda i: litellm.acompletion(
                model=args.model,
                api_base=srv.api_base,
                api_key="not-a-key",
                client=client,
                num_retries=0,
                max_retries=0,
                timeout=30,
                **{**request, "messages": messages(i)},
            )

        async def seam() -> Any:
            closers.append(asker.aclose)
            return lambda i: asker.attempt(messages(i))

        closers: list[Any] = []

        for name, make in (("openai_sdk", sdk), ("litellm", via_litellm), ("seam", seam)):

            async def measure(make: Any = make) -> tuple[float, float]:
                call = await make()
                await call(-1)  # warm-up
                cpu, start = _cpu_seconds(), time.perf_counter()
                await _bounded(n, call, args.concurrency)
                measured = n / (time.perf_counter() - start), (_cpu_seconds() - cpu) / n * 1000
                while closers:  # clients belong to this loop: closed before it ends
                    await closers.pop()()
                return measured

            rate, cpu_ms = asyncio.run(measure())
            out[name] = {"labels_per_s": round(rate, 1), "client_cpu_ms": round(cpu_ms, 3)}
        clf = _classifier(args, srv.api_base, labels, retry=RetrySettings(timeout=30.0))
        clf.classify(["warm-up text, not timed"])
        cpu, start = _cpu_seconds(), time.perf_counter()
        clf.classify([f"ticket {i}" for i in range(n)])
        out["classifier"] = {
            "labels_per_s": round(n / (time.perf_counter() - start), 1),
            "client_cpu_ms": round((_cpu_seconds() - cpu) / n * 1000, 3),
        }
    out["bound_labels_per_s"] = args.concurrency / args.latency if args.latency > 0 else None
    return out


def run_cascade(args: argparse.Namespace) -> dict[str, Any]:
    """LLM requests the cascade saves on the support-tickets test split.

    The local classifier is fitted on the train split; the escalation threshold is fitted
    on the calibration split by :class:`CertifiedPrecisionThreshold` (target
    ``args.cascade_target``, delta ``args.cascade_delta``), never typed in. The same test
    texts then go (a) all to the LLM classifier and (b) through the cascade (local first,
    the LLM below the threshold); the saving is ``1 - requests(b) / requests(a)``. The
    stand-in answers each test text's gold label (an oracle stand-in), so the cascade's
    accuracy here is an upper bound, not an LLM's; the precision of the items kept local
    is the local classifier's own.
    """
    import numpy as np

    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import CascadeClassifier, LocalClassifier
    from hybridroute.datasets import load_dataset
    from hybridroute.testing import LabelMapPolicy

    ds = load_dataset("support-tickets")
    train, cal, test = ds.split("train"), ds.split("calibration"), ds.split("test")
    local = LocalClassifier(Cs=(10.0,), random_state=args.seed).fit(train.texts, train.y)
    classes = [str(c) for c in local.classes_]
    proba = local.predict_proba(cal.texts)
    top = proba.argmax(axis=1)
    correct = np.asarray(classes)[top] == np.asarray([str(y) for y in cal.y])
    fitter = CertifiedPrecisionThreshold(args.cascade_target, args.cascade_delta)
    fitter.fit(proba.max(axis=1), correct)
    gold = {t: str(y) for t, y in zip(test.texts, test.y, strict=True)}
    policy = LabelMapPolicy(gold)
    cls = StandInLLM if args.in_process else StandInProcess
    settings = RetrySettings(timeout=max(5.0, 10 * args.latency), seed=args.seed)
    with cls(policy, seed=args.seed, latency=args.latency) as server:
        llm = LLMClassifier(
            args.model,
            api_base=server.api_base,
            max_concurrency=args.concurrency,
            seed=args.seed,
            retry=settings,
        ).fit(classes, classes)
        llm.classify(["warm-up text, not timed"])
        server.reset_stats()
        all_llm = llm.classify(test.texts)
        all_requests = server.stats().get("requests", 0)
        server.reset_stats()
        cascade = CascadeClassifier.from_fitted(local, llm, policy=fitter)
        batch = cascade.classify(test.texts)
        cascade_requests = server.stats().get("requests", 0)
    kept = ~batch.escalated
    local_pred = [r.top for r in local.rank(test.texts, k=1)]
    y = [str(v) for v in test.y]
    kept_correct = [local_pred[i] == y[i] for i in np.flatnonzero(kept)]
    cascade_pred = [r.top for r in batch.ranked]
    return {
        "note": "stand-in answers the gold label (oracle): request counts are real, "
        "accuracy is an upper bound",
        "n_texts": len(test.texts),
        "threshold": float(fitter.threshold_),
        "threshold_fitter": f"CertifiedPrecisionThreshold(target={args.cascade_target}, "
        f"delta={args.cascade_delta}) on {len(cal.texts)} calibration rows",
        "all_llm_requests": all_requests,
        "all_llm_client_requests": all_llm.report.requests,
        "cascade_requests": cascade_requests,
        "cascade_client_requests": batch.report.requests,
        "escalated": int(batch.escalated.sum()),
        "requests_saved": all_requests - cascade_requests,
        "share_saved": 1.0 - cascade_requests / all_requests if all_requests else None,
        "kept_local_precision": sum(kept_correct) / len(kept_correct) if kept_correct else None,
        "local_accuracy": sum(p == g for p, g in zip(local_pred, y, strict=True)) / len(y),
        "cascade_accuracy_oracle_standin": sum(p == g for p, g in zip(cascade_pred, y, strict=True))
        / len(y),
        "cascade_seconds": batch.report.seconds,
        "all_llm_seconds": all_llm.report.seconds,
    }


# --------------------------------------------------------------------------- a real model

#: What the real-model section asks, by name: the classifier settings of each run.
REAL_RUNS: dict[str, dict[str, Any]] = {
    "tools/verbalized": {"mode": "tools", "confidence": "verbalized"},
    "json_schema/verbalized": {"mode": "json_schema", "confidence": "verbalized"},
    "tools/logprobs": {"mode": "tools", "confidence": "logprobs"},
    "tools/self_consistency": {
        "mode": "tools",
        "confidence": "self_consistency",
        "temperature": None,
        "sample_temperature": 1.0,
    },
}


def _real_sets(args: argparse.Namespace) -> dict[str, tuple[list[str], list[str]]]:
    """support-tickets: the whole train split (few-shot pool, local classifier), the
    whole calibration split (``local_calibration``: the cascade's escalation threshold,
    fitted on local scores, costs no request) and seeded samples of ``--real-cal``
    calibration and ``--real-n`` test rows."""
    import numpy as np

    from hybridroute.datasets import load_dataset

    ds = load_dataset("support-tickets")
    rng = np.random.default_rng(args.seed)
    out = {}
    for split, n in (("train", None), ("calibration", args.real_cal), ("test", args.real_n)):
        part = ds.split(split)
        texts, labels = [str(t) for t in part.texts], [str(y) for y in part.y]
        if split == "calibration":
            out["local_calibration"] = (texts, labels)
        if n is not None:
            keep = sorted(rng.choice(len(texts), size=min(n, len(texts)), replace=False))
            texts, labels = [texts[i] for i in keep], [labels[i] for i in keep]
        out[split] = (texts, labels)
    return out


def _one_by_one(clf: Any, texts: list[str]) -> tuple[list[Any], list[float]]:
    """Each text classified alone, timed: the server answers one request at a time."""
    items, seconds = [], []
    for text in texts:
        start = time.perf_counter()
        items.append(clf.classify([text]).items[0])
        seconds.append(time.perf_counter() - start)
    return items, seconds


def _answer_figures(clf: Any, items: list[Any], gold: list[str]) -> dict[str, Any]:
    """Accuracy, macro-F1 (abstentions count as misses) and the abstention shares."""
    from hybridroute.evaluation._stats import macro_f1

    answers = [item.label for item in items]
    n = len(gold)
    reasons: dict[str, int] = {}
    for item in items:
        if item.abstained:
            reasons[item.abstain_reason] = reasons.get(item.abstain_reason, 0) + 1
    return {
        "accuracy": sum(a == g for a, g in zip(answers, gold, strict=True)) / n,
        "macro_f1": macro_f1(gold, answers, labels=[str(c) for c in clf.classes_]),
        "abstained": sum(reasons.values()) / n,
        "invalid_answer_rate": reasons.get("invalid_label", 0) / n,
        "abstentions": dict(sorted(reasons.items())),
    }


def _confidence_figures(
    clf: Any, cal: tuple[list[Any], list[str]], test: tuple[list[Any], list[str]], args: Any
) -> dict[str, Any]:
    """ECE of the answered test items before and after temperature scaling (fitted on
    the calibration items), and the coverage a certified-precision threshold (fitted on
    the calibrated calibration scores) gives on the test items; an abstention never
    auto-routes (confidence 0)."""
    import numpy as np

    from hybridroute.calibration import (
        CertifiedPrecisionThreshold,
        TemperatureScaling,
        expected_calibration_error,
    )

    classes = [str(c) for c in clf.classes_]
    index = {c: i for i, c in enumerate(classes)}

    def arrays(items: list[Any], gold: list[str]) -> tuple[Any, Any, Any]:
        proba = clf._proba_rows(items)
        answered = np.array([not item.abstained for item in items])
        y = np.array([index.get(g, -1) for g in gold])
        return proba, answered, y

    cal_p, cal_ok, cal_y = arrays(*cal)
    test_p, test_ok, test_y = arrays(*test)
    known = cal_ok & (cal_y >= 0)
    out: dict[str, Any] = {"n_cal_answered": int(known.sum())}
    if known.sum() < 2 or test_ok.sum() == 0:
        return out | {"note": "too few answered items to calibrate"}
    scaler = TemperatureScaling().fit(cal_p[known], cal_y[known])
    for name, proba in (("before", test_p), ("after", scaler.transform(test_p))):
        conf = proba.max(axis=1)
        correct = (proba.argmax(axis=1) == test_y) & test_ok
        out[f"ece_{name}"] = expected_calibration_error(conf[test_ok], correct[test_ok])
    out["temperature"] = float(scaler.temperature_)
    cal_after = scaler.transform(cal_p)
    cal_conf = np.where(cal_ok, cal_after.max(axis=1), 0.0)
    cal_correct = (cal_after.argmax(axis=1) == cal_y) & cal_ok
    fitter = CertifiedPrecisionThreshold(args.real_target, args.real_delta).fit(
        cal_conf, cal_correct
    )
    test_after = scaler.transform(test_p)
    test_conf = np.where(test_ok, test_after.max(axis=1), 0.0)
    covered = test_conf >= fitter.threshold_
    hits = (test_after.argmax(axis=1) == test_y) & test_ok & covered
    out["certified_threshold"] = float(fitter.threshold_)
    out["certified_coverage"] = float(covered.mean())
    out["covered_precision"] = float(hits.sum() / covered.sum()) if covered.any() else None
    return out


def _real_run(
    name: str, settings: dict[str, Any], sets: dict[str, Any], args: Any, **extra: Any
) -> tuple[Any, dict[str, Any]]:
    """One configuration: fit (no request), the calibration items, the test items timed."""
    from hybridroute.classifiers import LLMClassifier, RetrySettings

    options = {"temperature": 0.0, **REAL_RUNS.get(name, {}), **extra}
    if options.get("confidence") == "self_consistency":
        options["n_samples"] = args.real_samples
    clf = LLMClassifier(
        **settings, retry=RetrySettings(timeout=300.0), seed=args.seed, **options
    ).fit(*sets["train"])
    test_texts, test_gold = sets["test"]
    items, seconds = _one_by_one(clf, test_texts)
    figures = {"mode": clf.mode_, "settings": options} | _answer_figures(clf, items, test_gold)
    ordered = sorted(seconds)
    figures |= {
        "latency_p50_s": ordered[len(ordered) // 2],
        "latency_p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "labels_per_s": len(items) / sum(seconds),
        "requests": sum(item.usage.requests for item in items),
    }
    if args.real_cal and not name.startswith("json/"):
        cal_items = clf.classify(sets["calibration"][0]).items
        figures["confidence"] = _confidence_figures(
            clf, (cal_items, sets["calibration"][1]), (items, test_gold), args
        )
    return clf, figures


def _real_cascade(llm: Any, sets: dict[str, Any], args: Any) -> dict[str, Any]:
    """Local first, the real model below the fitted escalation threshold; does the
    escalation help, i.e. is the model better than the local classifier where it escalates?
    (The threshold is fitted on the local classifier's calibration scores only: it does
    not see how good the escalation target is.)"""
    import numpy as np

    from hybridroute.calibration import CertifiedPrecisionThreshold
    from hybridroute.classifiers import CascadeClassifier, LocalClassifier

    train, cal, test = sets["train"], sets["local_calibration"], sets["test"]
    local = LocalClassifier(Cs=(10.0,), random_state=args.seed).fit(*train)
    proba = local.predict_proba(cal[0])
    correct = np.asarray(local.classes_)[proba.argmax(axis=1)] == np.asarray(cal[1])
    fitter = CertifiedPrecisionThreshold(args.cascade_target, args.cascade_delta)
    fitter.fit(proba.max(axis=1), correct)
    batch = CascadeClassifier.from_fitted(local, llm, policy=fitter).classify(test[0])
    escalated = np.asarray(batch.escalated)
    local_answers = [r.top for r in local.rank(test[0], k=1)]
    cascade_answers = [None if r.abstained else r.top for r in batch.ranked]
    gold = test[1]

    def accuracy(answers: list[Any], mask: Any) -> float | None:
        picked = [a == g for a, g, m in zip(answers, gold, mask, strict=True) if m]
        return sum(picked) / len(picked) if picked else None

    everything = np.ones(len(gold), dtype=bool)
    return {
        "threshold": float(fitter.threshold_),
        "threshold_fitter": f"CertifiedPrecisionThreshold({args.cascade_target}, "
        f"{args.cascade_delta}) on {len(cal[0])} local calibration scores",
        "escalated_share": float(escalated.mean()),
        "local_accuracy": accuracy(local_answers, everything),
        "cascade_accuracy": accuracy(cascade_answers, everything),
        "local_accuracy_on_escalated": accuracy(local_answers, escalated),
        "model_accuracy_on_escalated": accuracy(cascade_answers, escalated),
    }


def run_real(args: argparse.Namespace) -> dict[str, Any]:
    """The real-model section: SmolLM2-135M-Instruct served on 127.0.0.1 (``llm-local``).

    A 135M-parameter model: the figures show what the client stack does with a real
    model's answers, and they say nothing about a hosted model's accuracy.
    """
    from hybridroute.classifiers.llm._local_server import (
        INSTALL_HINT,
        LocalModelServer,
        missing_parts,
    )

    missing = missing_parts()
    if missing:
        return {"status": "not run", "missing": missing, "install": INSTALL_HINT}
    sets = _real_sets(args)
    out: dict[str, Any] = {
        "note": "SmolLM2-135M-Instruct (Q4_1, 135M parameters) on llama-cpp-python's server: "
        "real answers for the client stack; its accuracy says NOTHING about a hosted model's",
        "dataset": "support-tickets",
        "n_labels": len(set(sets["train"][1])),
        "n_test": len(sets["test"][0]),
        "n_cal": len(sets["calibration"][0]),
        "threads": args.real_threads,
        "certified_target": args.real_target,
        "certified_delta": args.real_delta,
        "runs": {},
    }
    with (
        LocalModelServer(threads=args.real_threads) as server,
        tempfile.TemporaryDirectory() as cache,
    ):
        settings = server.classifier_settings()
        warm = LLMClassifier(**settings).fit(["warm-up"], ["warm_up"])
        warm.classify(["warm-up text, not timed"])  # litellm's first use, the server's first prompt
        llm = None
        for name in REAL_RUNS:
            extra = {"cache_dir": cache} if name == "tools/verbalized" else {}
            clf, out["runs"][name] = _real_run(name, settings, sets, args, **extra)
            llm = clf if name == "tools/verbalized" else llm
        k = args.real_similar
        name = f"tools/verbalized+{k}_similar"
        out["runs"][name] = _real_run(
            name, settings, sets, args, mode="tools", n_similar_examples=k
        )[1]
        json_sets = dict(
            sets, test=(sets["test"][0][: args.real_json_n], sets["test"][1][: args.real_json_n])
        )
        out["runs"]["json/verbalized"] = _real_run(
            "json/verbalized", settings, json_sets, args, mode="json"
        )[1]
        out["cascade"] = _real_cascade(llm, sets, args)  # the LLM's answers come from the cache
    return out


def print_real(r: dict[str, Any]) -> None:
    print("=" * 78)
    print("REAL MODEL: " + r.get("note", ""))
    print("=" * 78)
    if r.get("status") == "not run":
        print(f"NOT run ({', '.join(r['missing'])} missing); install: {r['install']}")
        return
    print(
        f"{r['dataset']}: {r['n_labels']} labels, {r['n_test']} test / {r['n_cal']} calibration "
        f"texts, {r['threads']} server thread(s); certified precision target "
        f"{r['certified_target']} (delta {r['certified_delta']})"
    )
    print(
        f"{'run':34s} {'acc':>5s} {'F1':>5s} {'invalid':>7s} {'p50 s':>6s} {'p90 s':>6s} "
        f"{'lab/s':>5s} {'ECE':>5s} {'ECE T':>5s} {'cov':>5s}"
    )
    for name, x in r["runs"].items():
        c = x.get("confidence", {})

        def f(v: Any) -> str:
            return "  -  " if v is None else f"{v:5.2f}"

        print(
            f"{name:34s} {f(x['accuracy'])} {f(x['macro_f1'])} {x['invalid_answer_rate']:7.2f} "
            f"{x['latency_p50_s']:6.2f} {x['latency_p90_s']:6.2f} {x['labels_per_s']:5.2f} "
            f"{f(c.get('ece_before'))} {f(c.get('ece_after'))} {f(c.get('certified_coverage'))}"
        )
    c = r["cascade"]
    print(
        f"cascade (local first, escalation threshold {c['threshold']:.3f}: "
        f"{c['threshold_fitter']}): {c['escalated_share']:.0%} escalated; accuracy local "
        f"{c['local_accuracy']:.2f} -> cascade {c['cascade_accuracy']:.2f}; on the "
        f"escalated items local {c['local_accuracy_on_escalated']} vs model "
        f"{c['model_accuracy_on_escalated']}"
    )


def print_report(r: dict[str, Any]) -> None:
    print("=" * 78)
    print("LLM classifier against the STAND-IN LLM -- plumbing figures, NOT LLM accuracy")
    print("=" * 78)
    bound = r["concurrency_bound_labels_per_s"]
    print(
        f"{r['n_texts']} texts, {r['n_labels']} labels, stand-in latency "
        f"{r['latency_s'] * 1000:.0f} ms, concurrency {r['concurrency']} "
        f"(bound = concurrency / latency = {bound:.0f} labels/s), server: {r['server']}"
    )
    f = r["first_run"]
    print(
        f"first run : {f['labels_per_s']:.1f} labels/s ({f['seconds']:.2f} s), "
        f"{f['requests']} requests (server saw {f['server_requests']}, at most "
        f"{f['server_max_in_flight']} in flight), {f['answered']} answered, "
        f"{f['abstained']} abstained"
    )
    print(
        f"            client CPU {f['client_cpu_ms_per_request']:.2f} ms/request: one event "
        f"loop answers at most {f['client_cpu_bound_labels_per_s']} labels/s"
    )
    print(f"            {f['client_cpu_where']}")
    cost = f["cost_usd_at_model_prices"]
    cost_text = "unknown (model not in the cost map)" if cost is None else f"${cost:.4f}"
    print(
        f"            tokens {f['prompt_tokens']} in / {f['completion_tokens']} out, "
        f"cost at model prices {cost_text}"
    )
    s = r["second_run"]
    print(
        f"second run: {s['requests']} requests (server saw {s['server_requests']}), "
        f"{s['cache_hits']} cache hits, {s['seconds']:.2f} s"
    )
    if "fault_run" not in r:
        return
    x = r["fault_run"]
    rates = ", ".join(f"{k}={v:g}" for k, v in x["fault_rates"].items())
    print(f"fault run : rates {rates}")
    print(
        f"            {x['items']} items -> {x['answered']} labelled, {x['abstained']} "
        f"abstained, {x['lost']} lost; {x['labels_per_s']:.1f} labels/s"
    )
    print(f"            abstentions by reason: {x['abstentions_by_reason']}")
    print(
        f"            requests {x['requests']} (budget {x['request_budget']} = items x (1 + "
        f"{x['retry_settings']['max_transport_retries']} transport retries + "
        f"{x['retry_settings']['max_label_repairs']} label repair))"
    )
    print(f"            request outcomes: {x['request_outcomes']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="texts per run")
    parser.add_argument("--labels", type=int, default=20, help="size of the label set")
    parser.add_argument("--latency", type=float, default=0.2, help="stand-in latency, s")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--fault-rate", type=float, default=0.1, help="rate of each fault")
    parser.add_argument("--model", default="openai/gpt-4o-mini", help="model string (prices)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--in-process", action="store_true", help="serve from this process")
    parser.add_argument("--no-faults", action="store_true", help="skip the fault run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--cascade", action="store_true", help="also measure the requests the cascade saves"
    )
    parser.add_argument("--cascade-target", type=float, default=0.85, help="certified precision")
    parser.add_argument("--cascade-delta", type=float, default=0.05)
    parser.add_argument(
        "--real",
        action="store_true",
        help="also run the real-model section (the llm-local extra: SmolLM2-135M on 127.0.0.1)",
    )
    parser.add_argument("--real-only", action="store_true", help="only the real-model section")
    parser.add_argument("--real-n", type=int, default=40, help="real model: test texts")
    parser.add_argument("--real-cal", type=int, default=40, help="real model: calibration texts")
    parser.add_argument("--real-json-n", type=int, default=5, help="real model: JSON-mode texts")
    parser.add_argument("--real-samples", type=int, default=3, help="self-consistency samples")
    parser.add_argument("--real-similar", type=int, default=8, help="similar examples shown")
    parser.add_argument("--real-target", type=float, default=0.5, help="certified precision")
    parser.add_argument("--real-delta", type=float, default=0.1)
    parser.add_argument("--real-threads", type=int, default=1, help="model server threads")
    parser.add_argument(
        "--layers",
        action="store_true",
        help="also measure the client CPU per request layer by layer (SDK, litellm, seam)",
    )
    args = parser.parse_args(argv)
    if args.real_only:
        real = run_real(args)
        if args.json:
            print(json.dumps(real, indent=2, sort_keys=True))
        else:
            print_real(real)
        return 0
    result = run(args)
    if args.real:
        result["real"] = run_real(args)
    if args.layers:
        result["layers"] = run_layers(args)
    if args.cascade:
        result["cascade"] = run_cascade(args)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print_report(result)
        if "cascade" in result:
            c = result["cascade"]
            print(
                f"cascade   : {c['cascade_requests']} LLM requests vs {c['all_llm_requests']} "
                f"all-LLM on {c['n_texts']} texts ({c['share_saved']:.1%} saved; threshold "
                f"{c['threshold']:.3f} from {c['threshold_fitter']}); kept-local precision "
                f"{c['kept_local_precision']:.3f}"
            )
        if "layers" in result:
            layers = result["layers"]
            print(
                f"client CPU per request, layer by layer (bound {layers['bound_labels_per_s']:.0f}/s):"
            )
            for name in ("openai_sdk", "litellm", "seam", "classifier"):
                x = layers[name]
                print(
                    f"  {name:11s} {x['labels_per_s']:7.1f} labels/s  "
                    f"{x['client_cpu_ms']:6.2f} ms CPU/request"
                )
        if "real" in result:
            print_real(result["real"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
