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
    assert {"200", "400", "401", "405"} <= set(responses)

    def shape(code: str) -> dict:
        ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
        return schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]

    success = shape("200")
    assert {"ok", "model", "response", "elapsed"} <= set(success["properties"])
    assert "seconds" in success["properties"]["elapsed"]["description"].lower()
    for code in ("400", "401", "405"):
        error = shape(code)
        assert set(error["properties"]) == {"ok", "error", "message", "details"}
        assert {"error", "message", "details"} <= set(error["required"])
