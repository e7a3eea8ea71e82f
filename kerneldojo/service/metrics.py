"""The service's Prometheus metrics (one registry per app, so several apps in one process stay apart)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from kerneldojo.result import EvalResult

from .jobs import Job

PHASE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge("kerneldojo_queue_depth", "jobs waiting for the executor", registry=r)
        self.running = Gauge("kerneldojo_jobs_running", "jobs on the executor (identical ones each)", registry=r)
        self.evaluations = Counter("kerneldojo_evaluations", "evaluations the judge finished, by status", ["status"],
                                   registry=r)  # fmt: skip
        self.jobs = Counter("kerneldojo_jobs", "jobs ended: evaluated, reused (an identical submission's verdict) "
                            "or failed (the judge itself failed)", ["outcome"], registry=r)  # fmt: skip
        self.phase = Histogram("kerneldojo_phase_seconds", "seconds per phase: queue (waiting for a slot), compile, "
                               "judge (the judge's wall time)", ["phase"], buckets=PHASE_BUCKETS, registry=r)
        self.rejected = Counter("kerneldojo_rejected_requests", "requests refused, by status", ["code"], registry=r)

    def queued(self, depth: int, running: int) -> None:
        self.queue_depth.set(depth)
        self.running.set(running)

    def ended(self, job: Job, result: EvalResult | None) -> None:
        if job.state == "failed":
            self.jobs.labels("failed").inc()
        elif job.reused or result is None:
            self.jobs.labels("reused").inc()
        else:
            self.jobs.labels("evaluated").inc()
            self.evaluations.labels(result.status).inc()
            if job.started is not None:
                self.phase.labels("queue").observe(max(0.0, job.started - job.created))
            self.phase.labels("compile").observe(result.compile_s)
            self.phase.labels("judge").observe(result.wall_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)
