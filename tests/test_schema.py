"""The OpenAPI schema generates without warnings and documents the model endpoint."""

import json
from pathlib import Path

import jsonschema
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
    ids = ["invalid_json", "validation_error", "unknown_model", "runtime_rejected"]
    ids.append("context_length_exceeded")
    assert responses["400"]["description"] == ", ".join(f"`{i}`" for i in ids)
    assert set(ids) <= set(shape("400")["properties"]["error"]["enum"])


def own_paths(schema: dict) -> dict:
    """The service's own API: /v1/ answers in OpenAI's shapes, errors included."""
    return {p: m for p, m in schema["paths"].items() if not p.startswith("/v1/")}


def test_error_answers_are_one_component_per_status_with_every_id_it_carries(schema):
    errors = {n for n in schema["components"]["schemas"] if n.startswith("Error")}
    statuses = {
        code
        for methods in own_paths(schema).values()
        for operation in methods.values()
        for code in operation["responses"]
        if code != "200"
    }
    assert errors == {f"Error{code}" for code in statuses}
    for methods in own_paths(schema).values():
        for operation in methods.values():
            for code, answer in operation["responses"].items():
                if code == "200":
                    continue
                ref = answer["content"]["application/json"]["schema"]["$ref"]
                assert ref == f"#/components/schemas/Error{code}"
                enum = schema["components"]["schemas"][f"Error{code}"]["properties"]["error"]
                ids = [i.strip("`") for i in answer["description"].split(", ")]
                assert set(ids) <= set(enum["enum"])
                shown = answer["content"]["application/json"]["examples"]
                assert [e["value"]["error"] for e in shown.values()] == ids


def _validate(schema: dict, fragment: dict, value) -> None:
    from tests.test_schema_conformance import strict

    root = strict({**fragment, "components": schema["components"]})
    jsonschema.validate(value, root)


def test_every_operation_has_an_example_request_and_answer_that_match_its_schema(schema):
    for path, methods in own_paths(schema).items():
        for method, operation in methods.items():
            where = f"{method.upper()} {path}"
            body = operation.get("requestBody")
            if body:
                content = body["content"]["application/json"]
                assert content.get("examples"), f"{where}: no example request"
                for shown in content["examples"].values():
                    _validate(schema, content["schema"], shown["value"])
            answers = operation["responses"]["200"]["content"]
            # An event stream's example answers are its events (each one's id, event, data).
            answer = answers.get("application/json") or answers["text/event-stream"]
            assert answer.get("examples"), f"{where}: no example answer"
            for shown in answer["examples"].values():
                _validate(schema, answer["schema"], shown["value"])


def test_the_examples_use_the_demo_profile_and_model(schema):
    from django.conf import settings

    start = schema["paths"]["/agent/job/start"]["post"]["requestBody"]["content"]
    [shown] = start["application/json"]["examples"].values()
    assert shown["value"]["profile"] == "default"
    call = schema["paths"]["/api.php"]["post"]["requestBody"]["content"]["application/json"]
    [shown] = call["examples"].values()
    assert shown["value"]["model"] == settings.AGENT_MODEL


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
