"""The service's Prometheus metrics, and the collection ``GET /metrics`` answers.

Counters and histograms are prometheus_client's, in its multiprocess mode: each process
(every web process, every worker process) adds to memory-mapped files of its own in
``PROMETHEUS_MULTIPROC_DIR`` (set by config/settings.py before this module is imported),
and a scrape sums the files of all of them. That is what makes a counter exact across
processes: 100 calls spread over two web processes raise it by exactly 100, and a process
that exits keeps its counts. An increment is a write to memory, no system call.

Figures the database already holds are read at scrape time instead (:data:`scrape_collectors`,
which apps fill in their ``ready()``): the jobs queued or running now are rows, and a
gauge kept by each process would be wrong as soon as a process died with a job or another
machine's worker took one.

No label carries a key, a user, a prompt or an unbounded value: routes are URL patterns,
models are those a runtime answered for (:func:`model_label`), outcomes are error ids.
"""

import threading
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

# One registry for this process's own metrics: the module's, not prometheus_client's
# default (which would add per-process collectors that make no sense summed).
REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_JOB_SECONDS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800)

HTTP_REQUESTS = Counter(
    "llmgw_http_requests_total",
    "HTTP requests answered, by URL pattern, method and status.",
    ("route", "method", "status"),
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "llmgw_http_request_duration_seconds",
    "Seconds from a request entering the middleware to its answer.",
    ("route",),
    buckets=_LATENCY,
    registry=REGISTRY,
)
RUNTIME_REQUESTS = Counter(
    "llmgw_runtime_requests_total",
    "Generation calls to model runtimes, by model, endpoint and outcome (ok or error id).",
    ("model", "endpoint", "outcome"),
    registry=REGISTRY,
)
RUNTIME_DURATION = Histogram(
    "llmgw_runtime_request_duration_seconds",
    "Seconds of a generation call to a runtime.",
    ("model", "endpoint"),
    buckets=_LATENCY,
    registry=REGISTRY,
)
RUNTIME_TTFT = Histogram(
    "llmgw_runtime_time_to_first_token_seconds",
    "Seconds from sending a streamed call to its first piece of text.",
    ("model",),
    buckets=_LATENCY,
    registry=REGISTRY,
)
TOKENS = Counter(
    "llmgw_tokens_total",
    "Tokens of model calls, as the runtime counted them.",
    ("model", "kind"),
    registry=REGISTRY,
)
JOBS = Counter(
    "llmgw_jobs_total",
    "Jobs that reached a terminal status.",
    ("kind", "status"),
    registry=REGISTRY,
)
JOB_QUEUE_WAIT = Histogram(
    "llmgw_job_queue_wait_seconds",
    "Seconds a job waited in the queue before a worker claimed it.",
    ("kind",),
    buckets=_JOB_SECONDS,
    registry=REGISTRY,
)
JOB_RUN = Histogram(
    "llmgw_job_run_seconds",
    "Seconds a worker ran a job, from its claim to its end.",
    ("kind",),
    buckets=_JOB_SECONDS,
    registry=REGISTRY,
)
RETRIEVAL_DURATION = Histogram(
    "llmgw_retrieval_duration_seconds",
    "Seconds of a conversation's retrieval of earlier messages.",
    buckets=_LATENCY,
    registry=REGISTRY,
)
RATE_LIMITED = Counter(
    "llmgw_rate_limited_total",
    "Requests refused by a key's rate limit.",
    registry=REGISTRY,
)

# The labelled children made so far, per metric and label values: a dictionary look-up on
# the request path instead of ``labels()``'s checks and lock each time.
_children: dict[tuple, Any] = {}


def child(metric: Counter | Histogram, *values: str) -> Any:
    """``metric.labels(*values)``, kept."""
    key = (metric, *values)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*values)
    return found


# Collectors run at every scrape (figures read from the database), added by the apps.
scrape_collectors: list[Collector] = []

# Models a runtime answered for, per process: the only values of a ``model`` label. A
# client may name any model; names nobody served are counted as "other".
MAX_MODELS = 200
OTHER = "other"
_models: set[str] = set()
_models_lock = threading.Lock()


def model_label(model: str, *, served: bool = False) -> str:
    """``model`` if a runtime served it (``served`` says this call did), else "other"."""
    if model in _models:
        return model
    if served and len(_models) < MAX_MODELS:
        with _models_lock:
            _models.add(model)
        return model
    return OTHER


def observe_runtime_call(model: str, endpoint: str, outcome: str, started: float) -> None:
    """One generation call to a runtime: ``outcome`` is "ok" or the error id."""
    label = model_label(model, served=outcome == "ok")
    child(RUNTIME_REQUESTS, label, endpoint, outcome).inc()
    child(RUNTIME_DURATION, label, endpoint).observe(time.perf_counter() - started)


def observe_time_to_first_token(model: str, seconds: float) -> None:
    """A streamed call's wait from sending it to its first piece of text."""
    child(RUNTIME_TTFT, model_label(model, served=True)).observe(seconds)


def observe_tokens(model: str, prompt: int | None, completion: int | None) -> None:
    label = model_label(model)
    if prompt:
        child(TOKENS, label, "prompt").inc(prompt)
    if completion:
        child(TOKENS, label, "completion").inc(completion)


def exposition(multiprocess_dir: str, extra: Iterable[Collector] = ()) -> bytes:
    """The text format of every process's metrics, plus those read now."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=multiprocess_dir)
    for collector in (*scrape_collectors, *extra):
        registry.register(collector)
    return generate_latest(registry)
