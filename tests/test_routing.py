"""The routing table: which runtime endpoint serves a model, in turn, with failover."""

import json
from collections.abc import Callable, Iterator
from itertools import pairwise

import pytest

from gateway.models import ModelRoute, RuntimeEndpoint, UsageRecord
from tests.runtime_server import Reply, RuntimeServer

pytestmark = pytest.mark.django_db

MODELS = ("test-model", "routed-model", "real-model")


@pytest.fixture(autouse=True)
def default_runtime_knows_every_model(runtime: RuntimeServer) -> None:
    runtime.models.update(MODELS)


@pytest.fixture
def make_server() -> Iterator[Callable[..., RuntimeServer]]:
    """Starts extra loopback runtimes for one test: ``make_server()`` -> RuntimeServer."""
    servers: list[RuntimeServer] = []

    def make(models: tuple[str, ...] = MODELS) -> RuntimeServer:
        server = RuntimeServer(models=models).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def add_route(
    model: str,
    server: RuntimeServer | str,
    *,
    name: str | None = None,
    api: str = "ollama",
    api_key: str = "",
    upstream_model: str = "",
    route_enabled: bool = True,
    endpoint_enabled: bool = True,
) -> ModelRoute:
    url = server if isinstance(server, str) else server.url
    endpoint, _ = RuntimeEndpoint.objects.get_or_create(
        base_url=url,
        defaults={
            "name": name or url,
            "api": api,
            "api_key": api_key,
            "enabled": endpoint_enabled,
        },
    )
    return ModelRoute.objects.create(
        model=model, endpoint=endpoint, upstream_model=upstream_model, enabled=route_enabled
    )


def call(client, api_key: str, model: str = "routed-model", prompt: str = "hello"):
    body = {"api_key": api_key, "model": model, "prompt": prompt}
    return client.post("/api.php", data=json.dumps(body), content_type="application/json")


def ok(response) -> dict:
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is True
    return body


def served(*servers: RuntimeServer) -> list[int]:
    return [len(server.generate_requests()) for server in servers]


def test_a_model_with_a_route_goes_to_its_endpoint(api_client, api_key, runtime, make_server):
    routed = make_server()
    add_route("routed-model", routed, name="gpu-1")
    body = ok(call(api_client, api_key, "routed-model", "to the route"))
    assert body["model"] == "routed-model"
    assert body["response"] == "echo: to the route"
    assert routed.prompts() == ["to the route"]
    assert served(runtime) == [0]
    assert UsageRecord.objects.get().endpoint == "gpu-1"


def test_a_model_without_a_route_goes_to_the_default_runtime(
    api_client, api_key, runtime, make_server
):
    routed = make_server()
    add_route("routed-model", routed)
    ok(call(api_client, api_key, "test-model", "to the default"))
    assert runtime.prompts() == ["to the default"]
    assert served(routed) == [0]
    assert UsageRecord.objects.get().endpoint == "default"


def test_two_endpoints_of_one_model_are_used_in_turn(api_client, api_key, runtime, make_server):
    first, second = make_server(), make_server()
    add_route("routed-model", first)
    add_route("routed-model", second)
    order = []
    for n in range(6):
        ok(call(api_client, api_key, prompt=f"call {n}"))
        order.append(first if f"call {n}" in first.prompts() else second)
    assert served(first, second, runtime) == [3, 3, 0]
    assert all(a is not b for a, b in pairwise(order))


def test_an_endpoint_that_is_down_is_skipped_and_the_call_succeeds(
    api_client, api_key, runtime, make_server, unused_port
):
    alive = make_server()
    add_route("routed-model", f"http://127.0.0.1:{unused_port}", name="dead")
    add_route("routed-model", alive, name="alive")
    for n in range(4):
        body = ok(call(api_client, api_key, prompt=f"call {n}"))
        assert body["response"] == f"echo: call {n}"
    assert served(alive) == [4]
    assert set(UsageRecord.objects.values_list("endpoint", flat=True)) == {"alive"}


@pytest.mark.parametrize(
    ("cooldown", "expected"),
    [(3600, [0, 6]), (0, [2, 4])],
    ids=["stays-skipped-during-the-cooldown", "is-used-again-after-the-cooldown"],
)
def test_a_failed_endpoint_is_skipped_only_during_the_cooldown(
    api_client, api_key, runtime, make_server, settings, cooldown, expected
):
    settings.RUNTIME_FAILURE_COOLDOWN = cooldown
    flaky, steady = make_server(), make_server()
    add_route("routed-model", flaky)
    add_route("routed-model", steady)
    flaky.stop()
    for n in range(2):  # one of these turns starts at the flaky endpoint
        ok(call(api_client, api_key, prompt=f"call {n}"))
    flaky.start()  # back on the same port
    for n in range(2, 6):
        ok(call(api_client, api_key, prompt=f"call {n}"))
    assert served(flaky, steady) == expected


def test_a_busy_endpoint_is_skipped_like_one_that_is_down(
    api_client, api_key, runtime, make_server, settings
):
    settings.RUNTIME_FAILURE_COOLDOWN = 3600
    busy, steady = make_server(), make_server()
    busy.script = lambda prompt, body: Reply(status=503, error="server busy")
    add_route("routed-model", busy)
    add_route("routed-model", steady)
    for n in range(4):
        ok(call(api_client, api_key, prompt=f"call {n}"))
    assert served(busy, steady) == [1, 4]


def test_a_cooling_endpoint_is_still_tried_when_no_other_answers(
    api_client, api_key, runtime, make_server, settings
):
    settings.RUNTIME_FAILURE_COOLDOWN = 3600
    first, second = make_server(), make_server()
    add_route("routed-model", first)
    add_route("routed-model", second)
    first.stop()
    ok(call(api_client, api_key, prompt="one"))
    ok(call(api_client, api_key, prompt="two"))
    first.start()
    second.stop()
    body = ok(call(api_client, api_key, prompt="three"))
    assert body["response"] == "echo: three"
    assert first.prompts() == ["three"]


def test_every_endpoint_down_answers_runtime_unavailable(api_client, api_key, runtime, make_server):
    first, second = make_server(), make_server()
    add_route("routed-model", first)
    add_route("routed-model", second)
    first.stop()
    second.stop()
    response = call(api_client, api_key)
    assert response.status_code == 502
    assert response.json()["error"] == "runtime_unavailable"
    assert served(runtime) == [0]


def test_a_runtime_error_is_not_retried_on_another_endpoint(
    api_client, api_key, runtime, make_server
):
    broken, steady = make_server(), make_server()
    broken.script = steady.script = lambda prompt, body: Reply(status=500, error="kaput")
    add_route("routed-model", broken)
    add_route("routed-model", steady)
    response = call(api_client, api_key)
    assert response.status_code == 502
    assert response.json()["error"] == "runtime_error"
    assert sorted(served(broken, steady)) == [0, 1]


def test_upstream_model_renames_the_model_at_the_runtime(api_client, api_key, runtime, make_server):
    routed = make_server(models=("real-model",))
    add_route("alias", routed, upstream_model="real-model")
    body = ok(call(api_client, api_key, "alias"))
    assert body["model"] == "alias"
    [sent] = routed.generate_requests()
    assert sent.body["model"] == "real-model"
    assert UsageRecord.objects.get().model == "alias"


def test_a_disabled_route_is_ignored(api_client, api_key, runtime, make_server):
    routed = make_server()
    add_route("routed-model", routed, route_enabled=False)
    ok(call(api_client, api_key, "routed-model"))
    assert served(routed, runtime) == [0, 1]


def test_a_disabled_endpoint_is_ignored(api_client, api_key, runtime, make_server):
    routed = make_server()
    add_route("routed-model", routed, endpoint_enabled=False)
    ok(call(api_client, api_key, "routed-model"))
    assert served(routed, runtime) == [0, 1]


def test_only_the_enabled_one_of_two_routes_is_used(api_client, api_key, runtime, make_server):
    on, off = make_server(), make_server()
    add_route("routed-model", on)
    add_route("routed-model", off, route_enabled=False)
    for _ in range(3):
        ok(call(api_client, api_key))
    assert served(on, off, runtime) == [3, 0, 0]


def test_the_bearer_key_of_an_endpoint_is_sent_as_authorization(
    api_client, api_key, runtime, make_server
):
    routed = make_server()
    add_route("routed-model", routed, api_key="runtime-secret")
    ok(call(api_client, api_key))
    [sent] = routed.generate_requests()
    assert sent.headers["Authorization"] == "Bearer runtime-secret"


def test_no_authorization_is_sent_to_an_endpoint_without_a_key(
    api_client, api_key, runtime, make_server
):
    routed = make_server()
    add_route("routed-model", routed)
    ok(call(api_client, api_key))
    [sent] = routed.generate_requests()
    assert "Authorization" not in sent.headers


def test_the_default_runtime_gets_the_configured_bearer_key(api_client, api_key, runtime, settings):
    settings.MODEL_RUNTIME_API_KEY = "default-secret"
    ok(call(api_client, api_key, "test-model"))
    [sent] = runtime.generate_requests()
    assert sent.headers["Authorization"] == "Bearer default-secret"


def test_each_endpoint_speaks_its_own_protocol(api_client, api_key, runtime, make_server):
    routed = make_server()
    add_route("routed-model", routed, api="openai-chat")
    body = ok(call(api_client, api_key, prompt="in a chat"))
    assert body["response"] == "echo: in a chat"
    [sent] = routed.generate_requests()
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"] == [{"role": "user", "content": "in a chat"}]


def test_the_routing_table_is_kept_for_its_ttl(api_client, api_key, runtime, make_server, settings):
    settings.RUNTIME_ROUTES_TTL = 3600
    routed = make_server()
    add_route("routed-model", routed)
    ok(call(api_client, api_key))
    # A change made by another process: no signal reaches this one.
    ModelRoute.objects.update(enabled=False)
    ok(call(api_client, api_key))
    assert served(routed, runtime) == [2, 0]
    settings.RUNTIME_ROUTES_TTL = 0
    ok(call(api_client, api_key))
    assert served(routed, runtime) == [2, 1]


def test_a_route_saved_in_this_process_takes_effect_at_once(
    api_client, api_key, runtime, make_server, settings
):
    settings.RUNTIME_ROUTES_TTL = 3600
    routed = make_server()
    ok(call(api_client, api_key))
    assert served(runtime) == [1]
    add_route("routed-model", routed)
    ok(call(api_client, api_key))
    assert served(routed, runtime) == [1, 1]
