"""The OpenAPI schema generates without warnings and documents the model endpoint."""

import json
from pathlib import Path

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def generate(path: Path, *flags: str) -> dict:
    """The schema as ``manage.py spectacular --validate <flags>`` writes it."""
    call_command("spectacular", "--validate", *flags, "--format=openapi-json", f"--file={path}")
    return json.loads(path.read_text())


@pytest.fixture
def schema(tmp_path) -> dict:
    return generate(tmp_path / "openapi.json")


def test_the_schema_endpoint_answers(client):
    response = client.get("/api/schema")
    assert response.status_code == 200
    assert b"openapi: 3" in response.content
    assert b"/api.php" in response.content


def test_the_schema_endpoint_answers_json_on_request(client):
    response = client.get("/api/schema", {"format": "json"})
    assert response.status_code == 200
    assert response.json()["info"]["version"] == "2.0.0"


def test_the_schema_generates_valid_and_without_warnings(tmp_path):
    schema = generate(tmp_path / "openapi.json", "--fail-on-warn")
    assert schema["openapi"].startswith("3.")
    assert "/api.php" in schema["paths"]


def test_the_schema_documents_the_model_endpoint(schema):
    operation = schema["paths"]["/api.php"]["post"]
    assert set(schema["paths"]["/api.php"]) == {"post"}
    request = operation["requestBody"]
    assert request["required"] is True
    ref = request["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert set(body["properties"]) == {"api_key", "model", "prompt", "options"}
    assert set(body["required"]) == {"api_key", "model", "prompt"}
    assert body["properties"]["options"]["type"] == "object"
    assert "seconds" in operation["description"]


def test_the_schema_documents_the_answers_of_the_model_endpoint(schema):
    responses = schema["paths"]["/api.php"]["post"]["responses"]
    assert {"200", "400", "401", "403", "413", "429", "502", "503", "504"} <= set(responses)

    def shape(code: str) -> dict:
        ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
        return schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]

    success = shape("200")
    assert {"ok", "model", "response", "elapsed"} <= set(success["properties"])
    assert "seconds" in success["properties"]["elapsed"]["description"].lower()
    assert {"ok", "model", "response", "elapsed", "usage"} <= set(success["required"])
    for code in ("400", "401", "502"):
        error = shape(code)
        assert set(error["properties"]) == {"ok", "error", "message", "details"}
        assert {"error", "message", "details"} <= set(error["required"])
    assert shape("400")["properties"]["error"]["enum"] == [
        "invalid_json",
        "validation_error",
        "unknown_model",
        "runtime_rejected",
        "context_length_exceeded",
    ]


@pytest.fixture
def static_files(settings):
    """The pages link static files; the manifest storage would need collectstatic first."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.mark.parametrize("path", ["/api/schema/", "/api/schema"])
def test_the_schema_answers_with_and_without_the_slash(client, path):
    response = client.get(path, {"format": "json"})
    assert response.status_code == 200
    assert response.json()["info"]["version"] == "2.0.0"


@pytest.mark.parametrize(
    ("path", "marker"),
    [("/api/docs/", b"swagger-ui"), ("/api/docs", b"swagger-ui"), ("/api/redoc/", b"redoc")],
)
def test_the_docs_pages_answer_from_the_sidecar_without_a_cdn(client, static_files, path, marker):
    response = client.get(path)
    assert response.status_code == 200
    page = response.content.lower()
    assert marker in page
    assert b"/static/drf_spectacular_sidecar/" in page
    assert b"cdn.jsdelivr.net" not in page and b"unpkg.com" not in page
    assert b"/api/schema/" in page


def test_the_sidecar_assets_the_docs_page_links_are_served(client, static_files, settings):
    from django.contrib.staticfiles import finders

    page = client.get("/api/docs/").content.decode()
    for name in ("swagger-ui-dist/swagger-ui-bundle.js", "swagger-ui-dist/swagger-ui.css"):
        assert f"drf_spectacular_sidecar/{name}" in page
        assert finders.find(f"drf_spectacular_sidecar/{name}")


def test_the_front_page_links_the_docs_the_admin_and_the_health_endpoints(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    for href in ("/api/docs/", "/api/redoc/", "/api/schema/", "/admin/", "/healthz", "/readyz"):
        assert f'href="{href}' in page


def test_the_admin_view_site_link_lands_on_the_front_page(admin_client, static_files):
    page = admin_client.get("/admin/").content.decode()
    assert 'href="/"' in page
    assert admin_client.get("/").status_code == 200
