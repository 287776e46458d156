"""The service's Prometheus metrics (`GET /metrics`, text format 0.0.4 through prometheus-client).

    rlvr_serve_requests_total{route, code}        requests answered, by route and status code
    rlvr_serve_request_seconds{route}             request latency (histogram), admission to answer
    rlvr_serve_items_total{scorer, status}        items scored, by verdict status
    rlvr_serve_batch_seconds{scorer}              one scoring batch (one Reward call), histogram
    rlvr_serve_queue_items                        items admitted and not yet answered (the bounded queue's depth)
    rlvr_serve_deadline_hits_total{scorer}        items past their deadline (status timeout: interrupted, worker or
                                                  sandbox killed)
    rlvr_serve_guard_refusals_total{scorer}       items the math guard refused before evaluation (status timeout too:
                                                  a power tower, a giant factorial; no deadline was reached)
    rlvr_serve_worker_deaths_total{scorer}        items whose pool worker died while scoring them (status error)
    rlvr_serve_sandbox_kills_total{scorer}        code items whose sandboxed run was killed (deadline, signal)
    rlvr_serve_orphans_killed_total               sandboxed processes whose pool worker died, killed (serve/reaper.py)
    rlvr_serve_rejected_total{reason}             requests refused: auth, too_large, invalid, unknown_scorer, queue_full

Each service has its own registry (two in one process, as in the tests, never share counters).
"""

from __future__ import annotations

from rlvr.verifiers.guard import REFUSED

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
REJECT_REASONS = {401: "auth", 413: "too_large", 422: "invalid", 400: "unknown_scorer", 429: "queue_full"}


def fault_kind(answer: dict) -> str | None:
    """Which fault an answer shows: "deadline", "guard_refused", "worker_died", "sandbox_killed", or None.

    Read from the verdict the pool and the sandbox already write: the pool's `timeout` / "worker died while scoring"
    (rlvr.verifiers.pool) and the code verifier's judge ended by a signal (negative return code, rlvr.verifiers.code).
    A `timeout` whose detail is the guard's refusal (rlvr.verifiers.guard.REFUSED) never started its evaluation, so
    it is no deadline hit: a spike of those is hostile or degenerate answers, not a service that is too slow.
    """
    status, detail = answer.get("status"), answer.get("detail") or ""
    if status == "timeout":
        return "guard_refused" if detail.startswith(REFUSED) else "deadline"
    if status == "error" and detail.startswith("worker died"):
        return "worker_died"
    if status == "error" and detail.startswith("judge ended early (rc -"):
        return "sandbox_killed"
    return None


class Metrics:
    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram  # lazy: the serve extra

        self.registry = r = CollectorRegistry()
        self.requests = Counter("rlvr_serve_requests", "requests answered", ("route", "code"), registry=r)
        self.latency = Histogram(
            "rlvr_serve_request_seconds", "request latency", ("route",), buckets=BUCKETS, registry=r
        )
        self.items = Counter("rlvr_serve_items", "items scored by verdict status", ("scorer", "status"), registry=r)
        self.batch = Histogram(
            "rlvr_serve_batch_seconds", "one scoring batch", ("scorer",), buckets=BUCKETS, registry=r
        )
        self.queue = Gauge("rlvr_serve_queue_items", "items admitted and not yet answered", registry=r)
        self.faults = {
            kind: Counter(f"rlvr_serve_{name}", doc, ("scorer",), registry=r)
            for kind, name, doc in (
                ("deadline", "deadline_hits", "items past their deadline"),
                ("guard_refused", "guard_refusals", "items the math guard refused before evaluation"),
                ("worker_died", "worker_deaths", "items whose pool worker died"),
                ("sandbox_killed", "sandbox_kills", "code items whose sandboxed run was killed"),
            )
        }
        self.rejected = Counter("rlvr_serve_rejected", "requests refused", ("reason",), registry=r)
        self.orphans = Counter("rlvr_serve_orphans_killed", "orphaned sandboxed processes killed", registry=r)
        self._orphans_seen = 0

    def observe_batch(self, scorer: str, answers: list[dict], seconds: float) -> None:
        self.batch.labels(scorer).observe(seconds)
        for a in answers:
            self.items.labels(scorer, a["status"]).inc()
            kind = fault_kind(a)
            if kind:
                self.faults[kind].labels(scorer).inc()

    def observe_request(self, route: str, code: int, seconds: float) -> None:
        self.requests.labels(route, str(code)).inc()
        self.latency.labels(route).observe(seconds)
        if code in REJECT_REASONS:
            self.rejected.labels(REJECT_REASONS[code]).inc()

    def text(self, queue_items: int, orphans_killed: int = 0) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        self.queue.set(queue_items)
        self.orphans.inc(max(0, orphans_killed - self._orphans_seen))
        self._orphans_seen = max(self._orphans_seen, orphans_killed)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
