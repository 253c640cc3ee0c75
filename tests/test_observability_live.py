"""Metrics, logs and request ids of the real service: two web processes and a worker.

The counters of GET /metrics are the sum of every process's (core.metrics); every log line
is one JSON object with the ids of its request and job (core.logs); no line holds a prompt,
a reply or a key.
"""

import json
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import default_profile
from tests.live import request
from tests.processes import descendants
from tests.test_metrics import by_name, value

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PROMPT = "The secret word is PAPAYA-PROMPT-6612"
REPLY = "Keep it quiet: MANGO-REPLY-4471"
CHAT_PROMPT = "Remember GUAVA-CHAT-9083 for me"


def scrape(base_url: str) -> dict:
    import http.client

    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/metrics")
    response = conn.getresponse()
    assert response.status == 200
    text = response.read().decode()
    conn.close()
    return by_name(text_string_to_metric_families(text))


def scrape_settled(base_url: str, ready, timeout: float = 30) -> dict:
    """The metrics once ``ready(families)`` holds, or at ``timeout``: a worker observes a
    job's run time just after the job's end is visible to its client."""
    deadline = time.monotonic() + timeout
    families = scrape(base_url)
    while not ready(families) and time.monotonic() < deadline:
        time.sleep(0.1)
        families = scrape(base_url)
    return families


def http_counts_by_process(directory: Path, pids: set[int]) -> dict[int, float]:
    """The /api.php counter of each web process, from that process's own file alone."""
    counts = {}
    for pid in pids:
        own = directory / f"counter_{pid}.db"
        if not own.exists():
            counts[pid] = 0.0
            continue
        with tempfile.TemporaryDirectory() as alone:
            shutil.copy(own, alone)
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=alone)
            counts[pid] = sum(
                s.value
                for family in registry.collect()
                for s in family.samples
                if s.name == "llmgw_http_requests_total" and s.labels.get("route") == "api.php"
            )
    return counts


def wait_for_job(base_url: str, key: str, job_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = request(base_url, "GET", f"/agent/job/{job_id}", key=key)
        if status == 200 and body["data"]["status"] in ("finished", "failed", "cancelled"):
            return body["data"]
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end")


def test_counters_are_exact_across_web_and_worker_processes_and_logs_hold_no_secrets(
    start_web, start_cluster, runtime, make_key, tmp_path
):
    default_profile()  # the migrations' row: a transactional test's database starts empty
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "DEBUG",
        "WEB_CONCURRENCY": "2",
    }
    web = start_web(**env)
    start_cluster(**env)
    _, key = make_key(name="observed")
    runtime.script = lambda prompt, body: REPLY

    def call(_: int) -> int:
        body = {"api_key": key, "model": "test-model", "prompt": PROMPT}
        return request(web.url, "POST", "/api.php", body)[0]

    # Rounds of 100 calls from 16 clients until both web processes have served some (one
    # process may accept every connection of a round on a quiet machine).
    web_pids = descendants(web.process.pid)
    sent = 0
    while sent < 500:
        with ThreadPoolExecutor(16) as pool:
            assert list(pool.map(call, range(100))) == [200] * 100
        sent += 100
        if sum(1 for n in http_counts_by_process(metrics_dir, web_pids).values() if n) == 2:
            break

    # A task and a chat, each started with an id of the client's, run by the worker.
    status, started = request_with_id(
        web.url,
        "/agent/job/start",
        "task-run-1",
        key,
        {
            "source": "tests",
            "scope_type": "ticket",
            "scope_id": "T-1",
            "task": PROMPT,
        },
    )
    assert status == 200
    task = wait_for_job(web.url, key, started["data"]["job_id"])
    status, posted = request_with_id(
        web.url,
        "/agent/chat",
        "chat-run-1",
        key,
        {
            "source": "tests",
            "scope_type": "ticket",
            "scope_id": "T-1",
            "prompt": CHAT_PROMPT,
        },
    )
    assert status == 200
    chat = wait_for_job(web.url, key, posted["data"]["job_id"])
    assert task["status"] == chat["status"] == "finished"

    def chat_run_observed(families: dict) -> bool:
        sample = "llmgw_job_run_seconds_count"
        return bool(value(families, "llmgw_job_run_seconds", sample, kind="chat"))

    families = scrape_settled(web.url, chat_run_observed)
    assert (
        value(
            families,
            "llmgw_http_requests_total",
            "llmgw_http_requests_total",
            route="api.php",
            method="POST",
            status="200",
        )
        == sent
    )
    served = {pid: n for pid, n in http_counts_by_process(metrics_dir, web_pids).items() if n}
    assert len(served) == 2 and sum(served.values()) == sent, served
    # Counted in the worker process, read from the web.
    assert value(families, "llmgw_jobs_total", "llmgw_jobs_total", status="finished") == 2
    assert value(families, "llmgw_job_run_seconds", "llmgw_job_run_seconds_count", kind="chat") == 1
    assert value(families, "llmgw_jobs", "llmgw_jobs", status="running") == 0

    # The ids reach the runtime.
    sent = {r.headers.get("X-Request-ID") for r in runtime.generate_requests()}
    assert {"task-run-1", "chat-run-1"} <= sent

    lines = read_json_lines(tmp_path)
    worker_lines = [e for e in lines if e.get("job_id") == posted["data"]["job_id"]]
    assert worker_lines and all(e["request_id"] == "chat-run-1" for e in worker_lines)
    assert any(e.get("request_id") == "task-run-1" and e.get("job_id") for e in lines)
    # The server's access line of the request carries it too.
    [access] = [e for e in lines if "POST /agent/chat " in e["message"]]
    assert access["logger"] == "uvicorn.access" and access["request_id"] == "chat-run-1"
    for entry in lines:
        assert {"timestamp", "level", "logger", "message"} <= set(entry)
    everything = "\n".join(json.dumps(e) for e in lines)
    for secret in (PROMPT, REPLY, CHAT_PROMPT, "PAPAYA", "MANGO", "GUAVA", key, key[12:]):
        assert secret not in everything, secret


def request_with_id(base_url, path, request_id, key, body):
    import http.client

    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {key}",
        "X-Request-ID": request_id,
    }
    conn.request("POST", path, json.dumps(body), headers)
    response = conn.getresponse()
    assert response.getheader("X-Request-ID") == request_id
    answer = json.loads(response.read())
    conn.close()
    return response.status, answer


def read_json_lines(directory: Path) -> list[dict]:
    """Every line the web and the worker wrote: each must be one JSON object."""
    entries = []
    for log in sorted(directory.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if line.strip():
                entry = json.loads(line)
                assert isinstance(entry, dict), (log.name, line)
                entries.append(entry)
    return entries
