"""``GET /metrics``: the service's production signals in Prometheus text format.

Each app has its own :class:`prometheus_client.CollectorRegistry` (never the process's
global one), so two apps in one process -- tests, or a user mounting two routers -- never
mix their counts. Every label has bounded cardinality: router names and versions are the
bundles loaded, stages, destinations and reason codes come from the routers' closed
vocabularies, fallback causes from the library's reason codes and exception types, and
the segment fact's values are capped at ``max_segments`` (others are counted as
``other``).

Series (all prefixed ``hybridroute_``):

* ``decisions_total{router, version, role, stage, destination, reason_code}`` -- every
  decision logged (a duplicate request id is counted in ``duplicate_requests_total``);
* ``fallbacks_total{router, version, role, cause}`` -- fallback decisions by cause
  (:func:`hybridroute._fallback.fallback_cause`);
* ``segment_decisions_total{segment, outcome}`` -- live decisions by the configured
  segment fact and outcome (``ask_user``, ``human_review``, ``other``): the ask-user and
  human-review rates per segment are ``outcome`` over the segment's sum;
* ``same_snapshot_conflicts_total{router, version}`` -- decisions whose destination
  differs from the first decision this process logged for the same snapshot and router
  version (same input, same version, another answer: a nondeterministic classifier or
  a transient failure); the last 100,000 snapshots are remembered;
* ``request_seconds{endpoint}``, ``route_seconds{role}``, ``log_commit_seconds`` --
  latency histograms; ``log_commit_decisions`` -- decisions per group commit;
  ``micro_batch_items`` -- single-item requests routed per classifier call;
* ``requests_total{endpoint, status}``, ``duplicate_requests_total{version}``,
  ``shadow_dropped_total``, ``shadow_errors_total{version}``,
  ``routers{name, version, role}`` (1 per router held).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .._fallback import fallback_cause

if TYPE_CHECKING:
    from ._routers import LoadedRouter

__all__ = ["CONTENT_TYPE", "OTHER_SEGMENT", "ServiceMetrics", "segment_value"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: The states the monitor gauges take (see :mod:`hybridroute.monitoring`).
MONITOR_GAUGE_STATES = ("insufficient", "holding", "certified_online", "breach", "unavailable")
#: The segment label of values beyond ``max_segments``.
OTHER_SEGMENT = "other"
#: The segment label of an item without the segment fact (or with a null value).
NO_SEGMENT = "none"
#: Longest segment value kept as a label, in characters.
MAX_SEGMENT_CHARS = 64
#: Snapshots remembered for the same-snapshot conflict count (most recent first kept).
MAX_REMEMBERED_SNAPSHOTS = 100_000

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    float("inf"),
)
_GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 5000, float("inf"))


def segment_value(record: Mapping[str, Any], fact: str | None) -> str | None:
    """The segment of a decision record: its value of ``fact``, as a short string."""
    if fact is None:
        return None
    facts = (record.get("input_snapshot") or {}).get("facts") or {}
    value = facts.get(fact) if isinstance(facts, Mapping) else None
    if value is None:
        return NO_SEGMENT
    if isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return text[:MAX_SEGMENT_CHARS] or '""'


class ServiceMetrics:
    """The counters and histograms of one app, in a registry of its own.

    Parameters
    ----------
    segment_fact : str, optional
        The fact that ask-user and human-review rates are broken down by.
    max_segments : int
        Distinct segment values counted under their own label.
    """

    def __init__(self, segment_fact: str | None, max_segments: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.segment_fact = segment_fact
        self._max_segments = int(max_segments)
        self._segments: set[str] = set()
        self._snapshots: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self._lock = threading.Lock()
        # (id of a metric, label values) -> its child (see child)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        self.decisions = Counter(
            "hybridroute_decisions",
            "Decisions logged, by router version, role, stage, destination and reason code.",
            ("router", "version", "role", "stage", "destination", "reason_code"),
            registry=r,
        )
        self.fallbacks = Counter(
            "hybridroute_fallbacks",
            "Fallback decisions (the classifier failed or abstained), by cause.",
            ("router", "version", "role", "cause"),
            registry=r,
        )
        self.segments = Counter(
            "hybridroute_segment_decisions",
            "Live decisions by the configured segment fact and outcome "
            "(ask_user, human_review, other).",
            ("segment", "outcome"),
            registry=r,
        )
        self.conflicts = Counter(
            "hybridroute_same_snapshot_conflicts",
            "Decisions sent elsewhere than the first decision of the same snapshot and "
            "router version.",
            ("router", "version"),
            registry=r,
        )
        self.duplicates = Counter(
            "hybridroute_duplicate_requests",
            "Requests answered with the stored decision of their request id.",
            ("version",),
            registry=r,
        )
        self.monitor_status = Gauge(
            "hybridroute_monitor_status",
            "The live guarantee's state (1 for the current one): insufficient, holding, "
            "certified_online, breach, or unavailable (no audits).",
            ("router", "version", "status"),
            registry=r,
        )
        self.monitor_labels = Gauge(
            "hybridroute_monitor_audit_labels",
            "Audit outcomes the live guarantee is monitored on.",
            ("router", "version"),
            registry=r,
        )
        self.monitor_precision = Gauge(
            "hybridroute_monitor_precision",
            "Auto-route precision from audits: estimate and anytime-valid lower / upper bound.",
            ("router", "version", "bound"),
            registry=r,
        )
        self.requests = Counter(
            "hybridroute_requests",
            "HTTP requests answered, by endpoint and status.",
            ("endpoint", "status"),
            registry=r,
        )
        self.request_seconds = Histogram(
            "hybridroute_request_seconds",
            "Time from request to answer (routing and the log commit included).",
            ("endpoint",),
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.route_seconds = Histogram(
            "hybridroute_route_seconds",
            "Time the router takes for one request's items.",
            ("role",),
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.commit_seconds = Histogram(
            "hybridroute_log_commit_seconds",
            "Time of one group commit to the decision log.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.commit_size = Histogram(
            "hybridroute_log_commit_decisions",
            "Decisions per group commit.",
            buckets=_GROUP_BUCKETS,
            registry=r,
        )
        self.micro_batch = Histogram(
            "hybridroute_micro_batch_items",
            "Single-item requests routed together in one classifier call (micro-batching).",
            buckets=_GROUP_BUCKETS,
            registry=r,
        )
        self.shadow_dropped = Counter(
            "hybridroute_shadow_dropped",
            "Shadow jobs dropped because the shadow queue was full.",
            registry=r,
        )
        self.shadow_errors = Counter(
            "hybridroute_shadow_errors",
            "Requests a shadow could not route (its schema refused them, or it failed).",
            ("version",),
            registry=r,
        )
        self.routers = Gauge(
            "hybridroute_routers",
            "Routers held by the service (1 each), by name, version and role.",
            ("name", "version", "role"),
            registry=r,
        )

    # ------------------------------------------------------------------ observations
    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, kept: prometheus-client checks and looks the labels
        up under a lock on every call (a few µs, several times per request). Only for
        metrics whose children are never removed (all but ``routers``)."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def on_request(self, endpoint: str, status: int, seconds: float) -> None:
        """A request to ``endpoint`` answered ``status`` after ``seconds``."""
        self.child(self.request_seconds, endpoint).observe(seconds)
        self.child(self.requests, endpoint, str(status)).inc()

    def _segment(self, value: str) -> str:
        with self._lock:
            if value in self._segments:
                return value
            if len(self._segments) < self._max_segments:
                self._segments.add(value)
                return value
        return OTHER_SEGMENT

    def _conflict(self, record: Mapping[str, Any]) -> bool:
        key = (
            str(record.get("router")),
            str(record.get("router_version")),
            str(record.get("snapshot_hash")),
        )
        destination = str(record.get("selected_destination"))
        with self._lock:
            before = self._snapshots.get(key)
            if before is None:
                self._snapshots[key] = destination
                if len(self._snapshots) > MAX_REMEMBERED_SNAPSHOTS:
                    self._snapshots.popitem(last=False)
                return False
            self._snapshots.move_to_end(key)
            return before != destination

    def observe(self, records: Iterable[Mapping[str, Any]], role: str) -> None:
        """Count newly logged decision records of ``role`` (``live`` or ``shadow``)."""
        for rec in records:
            router = str(rec.get("router"))
            version = str(rec.get("router_version"))
            destination = str(rec.get("selected_destination"))
            self.child(
                self.decisions,
                router,
                version,
                role,
                str(rec.get("stage")),
                destination,
                str(rec.get("reason_code")),
            ).inc()
            cause = fallback_cause(rec)
            if cause is not None:
                self.child(self.fallbacks, router, version, role, cause).inc()
            if self._conflict(rec):
                self.child(self.conflicts, router, version).inc()
            if role == "live":
                segment = segment_value(rec, self.segment_fact)
                if segment is not None:
                    outcome = (
                        destination if destination in ("ask_user", "human_review") else "other"
                    )
                    self.child(self.segments, self._segment(segment), outcome).inc()

    def set_routers(self, routers: Iterable[LoadedRouter]) -> None:
        """Show exactly ``routers`` (LoadedRouter values) in ``hybridroute_routers``."""
        self.routers.clear()
        for loaded in routers:
            self.routers.labels(loaded.name, loaded.version, loaded.role).set(1)

    def on_commit(self, size: int, seconds: float) -> None:
        """A group commit of ``size`` decisions took ``seconds``."""
        self.commit_seconds.observe(seconds)
        self.commit_size.observe(size)

    def on_micro_batch(self, size: int) -> None:
        """``size`` single-item requests were routed in one call."""
        self.micro_batch.observe(size)

    def set_monitor(self, state: Mapping[str, Any]) -> None:
        """Publish the live version's monitor state (:mod:`._monitor`) as gauges."""
        router, version = str(state.get("router")), str(state.get("router_version"))
        for status in MONITOR_GAUGE_STATES:
            self.monitor_status.labels(router, version, status).set(
                1.0 if state.get("status") == status else 0.0
            )
        self.monitor_labels.labels(router, version).set(float(state.get("labels") or 0))
        precision = state.get("precision") or {}
        for bound in ("estimate", "lower", "upper"):
            value = precision.get(bound)
            self.monitor_precision.labels(router, version, bound).set(
                float("nan") if value is None else float(value)
            )

    def render(self) -> bytes:
        """The Prometheus text exposition of this app's registry."""
        return generate_latest(self.registry)
