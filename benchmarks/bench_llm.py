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
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
            return lambda i: asker.attempt(messages(i))

        for name, make in (("openai_sdk", sdk), ("litellm", via_litellm), ("seam", seam)):

            async def measure(make: Any = make) -> tuple[float, float]:
                call = await make()
                await call(-1)  # warm-up
                cpu, start = _cpu_seconds(), time.perf_counter()
                await _bounded(n, call, args.concurrency)
                return n / (time.perf_counter() - start), (_cpu_seconds() - cpu) / n * 1000

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
        "--layers",
        action="store_true",
        help="also measure the client CPU per request layer by layer (SDK, litellm, seam)",
    )
    args = parser.parse_args(argv)
    result = run(args)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
