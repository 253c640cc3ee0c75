"""Liveness, readiness, and the envelope for unknown paths and crashes."""

import pytest
from django.test import Client
from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway import routing
from gateway.models import ModelRoute, RuntimeEndpoint
from tests.envelope import assert_error

pytestmark = pytest.mark.django_db


class CrashingApiView(APIView):
    def get(self, request):
        raise RuntimeError("boom")


class CheerfulApiView(APIView):
    def get(self, request):
        return Response({"ok": True})


def crashing_django_view(request):
    raise RuntimeError("boom")


# The service's own routes plus views that exist only to fail (see @pytest.mark.urls).
urlpatterns = [
    path("test/crash-drf", CrashingApiView.as_view()),
    path("test/cheerful-drf", CheerfulApiView.as_view()),
    path("test/crash-django", crashing_django_view),
    path("", include("config.urls")),
]
handler404 = "core.errors.handler404"
handler500 = "core.errors.handler500"


def test_healthz_answers_alive_in_the_envelope(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "data": {"status": "alive"}}


def test_healthz_refuses_other_methods_in_the_envelope(client):
    response = client.post("/healthz")
    assert_error(response, 405, "method_not_allowed")


def test_readyz_answers_ready_when_the_database_and_the_runtime_answer(client, runtime):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is True
    assert body["data"]["status"] == "ready"
    assert body["data"]["checks"] == {"database": "ok", "runtime:default": "ok"}
    assert [r.path for r in runtime.requests] == ["/api/tags"]


def test_readyz_counts_a_runtime_too_busy_to_answer_as_up(client, runtime, settings):
    runtime.models_delay = 5
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["data"]["checks"] == {"database": "ok", "runtime:default": "busy"}


def test_readyz_trusts_a_good_answer_for_a_few_seconds(client, runtime, settings):
    settings.READYZ_CACHE_SECONDS = 60
    for _ in range(3):
        assert client.get("/readyz").status_code == 200
    assert [r.path for r in runtime.requests] == ["/api/tags"]
    settings.READYZ_CACHE_SECONDS = 0
    assert client.get("/readyz").status_code == 200
    assert [r.path for r in runtime.requests] == ["/api/tags", "/api/tags"]


def test_readyz_does_not_remember_a_bad_answer(client, runtime, settings, unused_port):
    settings.READYZ_CACHE_SECONDS = 60
    real = settings.MODEL_RUNTIME_URL
    settings.MODEL_RUNTIME_URL = f"http://127.0.0.1:{unused_port}"
    routing.clear_cache()
    assert_error(client.get("/readyz"), 503, "not_ready")
    settings.MODEL_RUNTIME_URL = real
    routing.clear_cache()
    assert client.get("/readyz").status_code == 200


def test_readyz_answers_not_ready_when_the_runtime_is_down(client, runtime, settings, unused_port):
    settings.MODEL_RUNTIME_URL = f"http://127.0.0.1:{unused_port}"
    body = assert_error(client.get("/readyz"), 503, "not_ready")
    assert body["details"]["checks"] == {
        "database": "ok",
        "runtime:default": "runtime_unavailable",
    }


def test_readyz_checks_every_routed_endpoint_once(client, runtime, unused_port):
    # "up" serves at the default runtime's address: that server is asked once.
    up = RuntimeEndpoint.objects.create(name="up", base_url=runtime.url, api="ollama")
    down = RuntimeEndpoint.objects.create(
        name="down", base_url=f"http://127.0.0.1:{unused_port}", api="ollama"
    )
    ModelRoute.objects.create(model="test-model", endpoint=up)
    ModelRoute.objects.create(model="other-model", endpoint=down)
    body = assert_error(client.get("/readyz"), 503, "not_ready")
    assert body["details"]["checks"] == {
        "database": "ok",
        "runtime:up": "ok",
        "runtime:down": "runtime_unavailable",
    }
    assert [r.path for r in runtime.requests] == ["/api/tags"]


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize("url", ["/agent/nope", "/agent/job/x/y/z", "/nope", "/api.php/nope"])
def test_an_unknown_path_answers_the_envelope_404_never_html(client, settings, url, debug):
    settings.DEBUG = debug
    for method in (client.get, client.post):
        body = assert_error(method(url), 404, "not_found")
        assert url in body["message"]


def test_a_post_to_an_unknown_agent_path_is_a_404_not_a_csrf_page():
    from django.test import Client

    body = assert_error(Client(enforce_csrf_checks=True).post("/agent/nope"), 404, "not_found")
    assert "/agent/nope" in body["message"]


@pytest.mark.urls(__name__)
@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_a_crash_inside_an_api_view_answers_the_envelope_500(client, settings, debug, caplog):
    settings.DEBUG = debug
    body = assert_error(client.get("/test/crash-drf"), 500, "internal_error")
    assert "boom" not in body["message"]
    assert body["details"] == {}
    assert "boom" in caplog.text  # logged for the operator, not shown to the client


@pytest.mark.urls(__name__)
def test_the_test_urlconf_still_serves_the_service(client):
    assert client.get("/test/cheerful-drf").json() == {"ok": True}
    assert client.get("/healthz").status_code == 200


@pytest.mark.urls(__name__)
def test_a_crash_outside_an_api_view_answers_the_envelope_500():
    client = Client(raise_request_exception=False)
    assert_error(client.get("/test/crash-django"), 500, "internal_error")
