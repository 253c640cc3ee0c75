"""GET /metrics (core.metrics): names, types and labels, access, bounded cardinality.

Read with prometheus_client's own parser. These run in the test process (its multiprocess
directory holds earlier tests' counts too, so they compare before and after);
tests/test_observability_live.py checks the sums across real web and worker processes.
"""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conversations.retrieval import find_messages
from gateway import services
from tests.test_chat import SCOPE
from tests.test_jobs_api import BODY, START, post_json

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def own_metrics(settings, tmp_path):
    """GET /metrics reads this process's metrics files alone: another test session of the
    same checkout (its files share the directory) counts nothing here."""
    import os

    for own in settings.METRICS_DIR.glob(f"*_{os.getpid()}.db"):
        (tmp_path / own.name).symlink_to(own)
    settings.METRICS_DIR = tmp_path


FAMILIES = {
    "llmgw_http_requests_total": ("counter", {"route", "method", "status"}),
    "llmgw_http_request_duration_seconds": ("histogram", {"route"}),
    "llmgw_runtime_requests_total": ("counter", {"model", "endpoint", "outcome"}),
    "llmgw_runtime_request_duration_seconds": ("histogram", {"model", "endpoint"}),
    "llmgw_runtime_time_to_first_token_seconds": ("histogram", {"model"}),
    "llmgw_tokens_total": ("counter", {"model", "kind"}),
    "llmgw_jobs_total": ("counter", {"kind", "status"}),
    "llmgw_jobs": ("gauge", {"status"}),
    "llmgw_job_queue_wait_seconds": ("histogram", {"kind"}),
    "llmgw_job_run_seconds": ("histogram", {"kind"}),
    "llmgw_retrieval_duration_seconds": ("histogram", set()),
    "llmgw_rate_limited_total": ("counter", set()),
}


def by_name(families) -> dict:
    """Families by the name they are exposed under: prometheus_client's parser names a
    counter without its ``_total``, which would make ``llmgw_jobs_total`` (counter) and
    ``llmgw_jobs`` (gauge) one name."""
    return {f.name + ("_total" if f.type == "counter" else ""): f for f in families}


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return by_name(text_string_to_metric_families(response.content.decode()))


def value(families: dict, family: str, sample: str, **labels: str) -> float:
    if family not in families:
        return 0.0
    return sum(
        s.value
        for s in families[family].samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_every_metric_has_its_name_type_and_labels(
    client, runtime, agent_client, api_key, sync_queue, django_capture_on_commit_callbacks
):
    client.post(
        "/api.php",
        {"api_key": api_key, "model": "test-model", "prompt": "hi"},
        content_type="application/json",
    )
    with django_capture_on_commit_callbacks(execute=True):
        chat = agent_client.post(  # a job whose model call is streamed
            "/agent/chat", {**SCOPE, "prompt": "Hello"}, format="json"
        ).json()["data"]
    find_messages(conversation_id=chat["conversation_id"], query="hello", limit=3, mode="text")
    post_json(agent_client, START, BODY)  # stays queued: no commit runs its wake-up
    families = scrape(client)
    for name, (kind, labels) in FAMILIES.items():
        assert name in families, name
        assert families[name].type == kind, name
        for sample in families[name].samples:
            assert set(sample.labels) - {"le"} == labels, (name, sample.labels)
    assert value(families, "llmgw_jobs", "llmgw_jobs", status="queued") >= 1
    assert {s.labels["status"] for s in families["llmgw_jobs"].samples} == {
        "queued",
        "running",
        "cancelling",
    }


def test_a_call_counts_its_route_its_runtime_call_and_its_tokens(client, runtime, api_key):
    before = scrape(client)
    runtime.script = lambda prompt, body: "four words of reply"
    response = client.post(
        "/api.php",
        {"api_key": api_key, "model": "test-model", "prompt": "hi"},
        content_type="application/json",
    )
    assert response.status_code == 200
    tokens = response.json()["usage"]
    after = scrape(client)

    def delta(family, sample, **labels):
        return value(after, family, sample, **labels) - value(before, family, sample, **labels)

    assert (
        delta(
            "llmgw_http_requests_total",
            "llmgw_http_requests_total",
            route="api.php",
            method="POST",
            status="200",
        )
        == 1
    )
    assert (
        delta(
            "llmgw_runtime_requests_total",
            "llmgw_runtime_requests_total",
            model="test-model",
            outcome="ok",
        )
        == 1
    )
    assert (
        delta(
            "llmgw_runtime_request_duration_seconds",
            "llmgw_runtime_request_duration_seconds_count",
            model="test-model",
        )
        == 1
    )
    assert (
        delta("llmgw_tokens_total", "llmgw_tokens_total", model="test-model", kind="prompt")
        == (tokens["prompt_tokens"])
    )
    assert (
        delta("llmgw_tokens_total", "llmgw_tokens_total", model="test-model", kind="completion")
        == tokens["completion_tokens"]
    )


def test_routes_are_url_patterns_never_raw_paths(client, agent_client, runtime):
    for n in range(3):
        agent_client.get(f"/agent/job/job_{n:026d}")
    client.get("/no/such/path/123")
    families = scrape(client)
    routes = {s.labels["route"] for s in families["llmgw_http_requests_total"].samples}
    assert "agent/job/{job_id}" in routes
    assert "unmatched" in routes
    assert not any("job_0" in route or "123" in route for route in routes)


def test_a_refusal_by_the_rate_limit_is_counted(client, runtime, make_key):
    _, plain = make_key(name="limited", rate_limit_per_minute=1)
    before = value(scrape(client), "llmgw_rate_limited_total", "llmgw_rate_limited_total")
    body = {"api_key": plain, "model": "test-model", "prompt": "hi"}
    for _ in range(3):
        client.post("/api.php", body, content_type="application/json")
    after = value(scrape(client), "llmgw_rate_limited_total", "llmgw_rate_limited_total")
    assert after - before == 2


@pytest.mark.slow
def test_cardinality_stays_bounded_after_a_thousand_keys_scope_ids_and_model_names(client, runtime):
    before = scrape(client)
    plains = []
    for n in range(1000):
        _, plain = services.api_key_create(
            name=f"tenant-{n}",
            rate_limit_per_minute=0,
            agent_starts_per_minute=0,
            max_active_jobs=0,
        )
        plains.append(plain)
        client.post(
            "/api.php",
            {"api_key": plain, "model": f"made-up-model-{n}", "prompt": f"secret {n}"},
            content_type="application/json",
        )
        post_json(
            client,
            START,
            {**BODY, "scope_id": f"customer-{n}"},
            HTTP_AUTHORIZATION=f"Bearer {plain}",
        )
    after = scrape(client)
    for name, family in after.items():
        grown = len(family.samples) - len(before[name].samples) if name in before else None
        assert grown is None or grown <= 60, (name, grown)
        for sample in family.samples:
            text = " ".join(sample.labels.values())
            assert "customer-" not in text and "made-up-model-" not in text and "tenant" not in text
            assert not any(plain[:12] in text for plain in plains[:50])
    assert (
        value(
            after,
            "llmgw_runtime_requests_total",
            "llmgw_runtime_requests_total",
            model="other",
            outcome="unknown_model",
        )
        - value(
            before,
            "llmgw_runtime_requests_total",
            "llmgw_runtime_requests_total",
            model="other",
            outcome="unknown_model",
        )
        == 1000
    )


def test_with_a_token_the_bearer_token_is_required(client, settings):
    settings.METRICS_TOKEN = "s3cret-scraper"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scraper")
    assert response.status_code == 200
    # The token is the only rule then: from any address.
    response = client.get(
        "/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scraper", REMOTE_ADDR="203.0.113.9"
    )
    assert response.status_code == 200


def test_without_a_token_only_loopback_and_the_allowed_networks_may_read(client, settings):
    import ipaddress

    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    refused = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    settings.METRICS_NETWORKS = (ipaddress.ip_network("10.0.0.0/8"),)
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_metrics_refuses_other_methods_in_the_envelope(client):
    response = client.post("/metrics")
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"
