"""The job endpoints: POST /agent/job/start, GET /agent/job/{id}, POST /agent/job/{id}/cancel.

Jobs run in django-q2's sync mode here: the wake-up sent on commit runs the job inline.
"""

import json
from datetime import datetime

import pytest

from agents.models import AgentProfile, Job, JobStatus, Step
from agents.selectors import VIEW_TEXT_LIMIT
from gateway import services as gateway
from gateway.models import ApiKey
from tests.factories import make_job
from tests.runtime_server import Reply
from tests.test_api_php import assert_error

pytestmark = pytest.mark.django_db

START = "/agent/job/start"
BODY = {"source": "tests", "scope_type": "ticket", "scope_id": "T-1", "task": "Say hello."}


def post_json(client, path: str, body, **kwargs):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", **kwargs)


@pytest.fixture
def start_job(agent_client, sync_queue, django_capture_on_commit_callbacks):
    """Starts a job through the API; its wake-up (sync mode) runs it before this returns."""

    def start(client=None, **fields) -> dict:
        with django_capture_on_commit_callbacks(execute=True):
            response = post_json(client or agent_client, START, {**BODY, **fields})
        assert response.status_code == 200, response.content
        return response.json()

    return start


def test_a_task_job_runs_from_start_to_finished(agent_client, start_job, runtime):
    runtime.script = lambda prompt, body: "Hello there."
    started = start_job()
    assert started["ok"] is True
    assert set(started["data"]) == {"job_id", "status"}
    assert started["data"]["status"] == "queued"
    job_id = started["data"]["job_id"]
    assert job_id.startswith("job_") and len(job_id) == 30

    response = agent_client.get(f"/agent/job/{job_id}")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    data = body["data"]
    assert data["job_id"] == job_id
    assert data["status"] == "finished"
    assert data["kind"] == "task"
    assert data["final_result"]["text"] == "Hello there."
    assert "error" not in data
    for name in ("created_at", "started_at", "finished_at"):
        datetime.fromisoformat(data[name])
    assert data["created_at"] <= data["started_at"] <= data["finished_at"]
    [step] = data["steps"]
    assert set(step) >= {
        "index",
        "kind",
        "name",
        "status",
        "started_at",
        "finished_at",
        "elapsed",
        "input",
        "output",
    }
    assert step["index"] == 0
    assert step["kind"] == "model_call"
    assert step["status"] == "finished"
    assert isinstance(step["elapsed"], float) and step["elapsed"] >= 0
    datetime.fromisoformat(step["started_at"])
    datetime.fromisoformat(step["finished_at"])
    assert "Say hello." in step["input"]["prompt"]
    assert step["output"]["text"] == "Hello there."


def test_a_job_that_was_not_run_yet_shows_queued_with_empty_steps(agent_client, runtime):
    response = post_json(agent_client, START, BODY)  # on_commit never fires: nothing runs
    job_id = response.json()["data"]["job_id"]
    data = agent_client.get(f"/agent/job/{job_id}").json()["data"]
    assert data["status"] == "queued"
    assert data["steps"] == []
    assert data["started_at"] is None and data["finished_at"] is None
    assert "final_result" not in data and "error" not in data


def test_the_job_belongs_to_the_keys_owner_and_stores_its_fields(agent_client, api_key, runtime):
    response = post_json(agent_client, START, {**BODY, "scope_id": 42})
    job = Job.objects.get(pk=response.json()["data"]["job_id"])
    assert job.scope_id == "42"
    assert (job.source, job.scope_type, job.task) == ("tests", "ticket", "Say hello.")
    assert job.profile.name == "default"
    assert job.api_key.owner_id == job.owner_id


@pytest.mark.parametrize("scope_id", ["T-1", 7, 0, -3])
def test_scope_id_may_be_a_string_or_an_integer(agent_client, runtime, scope_id):
    response = post_json(agent_client, START, {**BODY, "scope_id": scope_id})
    assert response.status_code == 200, response.content
    job = Job.objects.get(pk=response.json()["data"]["job_id"])
    assert job.scope_id == str(scope_id)


@pytest.mark.parametrize(
    ("body", "content_type", "status", "error"),
    [
        ("{not json", "application/json", 400, "invalid_json"),
        (b'{"task": "\xff"}', "application/json", 400, "invalid_json"),
        ("source=a&task=b", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        ('{"task": "b"}', "text/plain", 415, "unsupported_media_type"),
    ],
)
def test_it_rejects_a_body_that_is_not_json(agent_client, body, content_type, status, error):
    response = agent_client.post(START, data=body, content_type=content_type)
    assert_error(response, status, error)
    assert not Job.objects.exists()


def test_it_rejects_multipart_form_data(agent_client):
    response = agent_client.post(START, data=BODY)  # the test client's default: multipart
    assert_error(response, 415, "unsupported_media_type")


@pytest.mark.parametrize("body", ["", '["a", "list"]', '"a string"', "null", "42"])
def test_it_rejects_an_empty_body_or_one_that_is_not_an_object(agent_client, body):
    err = assert_error(post_json(agent_client, START, body), 400, "validation_error")
    assert err["details"]["fields"]
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("source", None),
        ("source", ""),
        ("source", 5),
        ("scope_type", None),
        ("scope_type", ""),
        ("scope_type", ["x"]),
        ("scope_id", None),
        ("scope_id", ""),
        ("scope_id", "   "),
        ("scope_id", True),
        ("scope_id", False),
        ("scope_id", 1.5),
        ("scope_id", {"id": 1}),
        ("task", None),
        ("task", ""),
        ("task", 12),
        ("profile", 3),
        ("profile", ""),
    ],
)
def test_it_rejects_a_bad_field_with_its_name_in_details(agent_client, field, value):
    err = assert_error(
        post_json(agent_client, START, {**BODY, field: value}), 400, "validation_error"
    )
    assert list(err["details"]["fields"]) == [field]
    assert all(isinstance(m, str) for m in err["details"]["fields"][field])
    assert not Job.objects.exists()


@pytest.mark.parametrize("field", ["source", "scope_type", "scope_id", "task"])
def test_it_rejects_a_missing_field(agent_client, field):
    body = {k: v for k, v in BODY.items() if k != field}
    err = assert_error(post_json(agent_client, START, body), 400, "validation_error")
    assert err["details"]["fields"] == {field: ["This field is required."]}


def test_it_names_every_missing_field_at_once(agent_client):
    err = assert_error(post_json(agent_client, START, {}), 400, "validation_error")
    assert set(err["details"]["fields"]) == {"source", "scope_type", "scope_id", "task"}


def test_it_rejects_an_unknown_field(agent_client):
    err = assert_error(
        post_json(agent_client, START, {**BODY, "priority": "high"}), 400, "validation_error"
    )
    assert err["details"]["fields"] == {"priority": ["Unknown field."]}
    assert not Job.objects.exists()


def test_it_rejects_an_unknown_profile(agent_client):
    err = assert_error(
        post_json(agent_client, START, {**BODY, "profile": "nope"}), 400, "unknown_profile"
    )
    assert err["details"] == {"profile": "nope"}
    assert not Job.objects.exists()


def test_it_runs_the_named_profile(agent_client, start_job, runtime):
    AgentProfile.objects.create(name="terse", model="other-model", system_prompt="Be terse.")
    runtime.script = lambda prompt, body: "Done."
    job_id = start_job(profile="terse")["data"]["job_id"]
    assert Job.objects.get(pk=job_id).status == JobStatus.FINISHED
    [sent] = runtime.generate_requests()
    assert sent.body["model"] == "other-model"
    assert sent.body["prompt"].startswith("Be terse.")


# --- Authentication ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"HTTP_AUTHORIZATION": "Bearer"},
        {"HTTP_AUTHORIZATION": "Bearer nope"},
        {"HTTP_AUTHORIZATION": "Basic dXNlcjpwYXNz"},
        {"HTTP_AUTHORIZATION": "Bearer llmgw_aaaaaaaaaaaa_" + "b" * 40},
        {"HTTP_X_API_KEY": ""},
        {"HTTP_X_API_KEY": "llmgw_aaaaaaaaaaaa_" + "b" * 40},
    ],
)
def test_every_endpoint_refuses_a_missing_or_unknown_key(api_client, headers):
    job_id = "job_01ARZ3NDEKTSV4RRFFQ69G5FAV"
    for response in (
        post_json(api_client, START, BODY, **headers),
        api_client.get(f"/agent/job/{job_id}", **headers),
        api_client.post(f"/agent/job/{job_id}/cancel", **headers),
    ):
        err = assert_error(response, 401, "invalid_api_key")
        assert "bbbbbbbb" not in json.dumps(err)
    assert not Job.objects.exists()


def test_a_wrong_secret_is_refused(api_client, make_key):
    _, plain = make_key()
    forged = plain[:-4] + ("AAAA" if not plain.endswith("AAAA") else "BBBB")
    response = post_json(api_client, START, BODY, HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert_error(response, 401, "invalid_api_key")


def test_a_revoked_key_is_refused_on_the_next_request(api_client, make_key):
    api_key, plain = make_key()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plain}"}
    assert post_json(api_client, START, BODY, **auth).status_code == 200
    gateway.api_key_revoke(api_key=api_key)
    assert_error(post_json(api_client, START, BODY, **auth), 401, "invalid_api_key")


def test_the_x_api_key_header_works(api_client, api_key, runtime):
    response = post_json(api_client, START, BODY, HTTP_X_API_KEY=api_key)
    assert response.status_code == 200, response.content
    job_id = response.json()["data"]["job_id"]
    assert api_client.get(f"/agent/job/{job_id}", HTTP_X_API_KEY=api_key).status_code == 200


def test_a_key_without_the_agent_scope_is_forbidden(api_client, make_key):
    _, plain = make_key(scopes=("model",))
    response = post_json(api_client, START, BODY, HTTP_AUTHORIZATION=f"Bearer {plain}")
    err = assert_error(response, 403, "forbidden")
    assert err["details"] == {"required_scope": "agent"}
    assert not Job.objects.exists()


# --- Owners ------------------------------------------------------------------------------


def test_another_owners_job_is_not_found(agent_client, api_client, make_key):
    job_id = post_json(agent_client, START, BODY).json()["data"]["job_id"]
    _, stranger = make_key(name="stranger")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {stranger}"}
    err = assert_error(api_client.get(f"/agent/job/{job_id}", **auth), 404, "job_not_found")
    assert err["details"] == {"job_id": job_id}
    assert_error(api_client.post(f"/agent/job/{job_id}/cancel", **auth), 404, "job_not_found")
    assert Job.objects.get(pk=job_id).status == JobStatus.QUEUED


def test_a_second_key_of_the_same_owner_sees_and_cancels_the_job(api_client, make_key):
    first, plain = make_key(name="alice")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plain}"}
    job_id = post_json(api_client, START, BODY, **auth).json()["data"]["job_id"]
    _, second = make_key(name="alice-laptop", owner=first.owner)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {second}"}
    assert api_client.get(f"/agent/job/{job_id}", **auth).json()["data"]["job_id"] == job_id
    response = api_client.post(f"/agent/job/{job_id}/cancel", **auth)
    assert response.json() == {"ok": True, "data": {"job_id": job_id, "status": "cancelled"}}


@pytest.mark.parametrize("job_id", ["job_01ARZ3NDEKTSV4RRFFQ69G5FAV", "42", "x" * 300])
def test_an_unknown_job_is_not_found(agent_client, job_id):
    assert_error(agent_client.get(f"/agent/job/{job_id}"), 404, "job_not_found")
    assert_error(agent_client.post(f"/agent/job/{job_id}/cancel"), 404, "job_not_found")


def test_an_unknown_path_under_agent_is_the_envelopes_404(agent_client):
    assert_error(agent_client.get("/agent/job/a/b/c"), 404, "not_found")


# --- Methods -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        (START, ("get", "put", "patch", "delete")),
        ("/agent/job/job_x", ("post", "put", "patch", "delete")),
        ("/agent/job/job_x/cancel", ("get", "put", "patch", "delete")),
    ],
)
def test_a_wrong_method_is_405_with_the_envelope(api_client, agent_client, path, methods):
    for client in (agent_client, api_client):  # with a key or without: 405 comes first
        for method in methods:
            response = getattr(client, method)(path)
            assert_error(response, 405, "method_not_allowed")


# --- Cancel ------------------------------------------------------------------------------


def test_cancelling_a_queued_job_answers_cancelled(agent_client):
    job_id = post_json(agent_client, START, BODY).json()["data"]["job_id"]
    response = agent_client.post(f"/agent/job/{job_id}/cancel")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "data": {"job_id": job_id, "status": "cancelled"}}
    data = agent_client.get(f"/agent/job/{job_id}").json()["data"]
    assert data["status"] == "cancelled"
    datetime.fromisoformat(data["finished_at"])
    again = agent_client.post(f"/agent/job/{job_id}/cancel")
    assert again.json() == {"ok": True, "data": {"job_id": job_id, "status": "cancelled"}}


def test_cancelling_a_running_job_answers_cancelling_each_time(agent_client, api_key):
    job = make_job(ApiKey.objects.get(), status=JobStatus.RUNNING)
    for _ in range(2):
        response = agent_client.post(f"/agent/job/{job.pk}/cancel")
        assert response.json() == {"ok": True, "data": {"job_id": job.pk, "status": "cancelling"}}
    assert agent_client.get(f"/agent/job/{job.pk}").json()["data"]["status"] == "cancelling"


def test_the_cancel_endpoint_ignores_a_body(agent_client):
    job_id = post_json(agent_client, START, BODY).json()["data"]["job_id"]
    response = post_json(agent_client, f"/agent/job/{job_id}/cancel", {"reason": "x"})
    assert response.json()["data"]["status"] == "cancelled"


def test_cancelling_a_finished_job_is_409(agent_client, start_job, runtime):
    runtime.script = lambda prompt, body: "Done."
    job_id = start_job()["data"]["job_id"]
    err = assert_error(agent_client.post(f"/agent/job/{job_id}/cancel"), 409, "job_not_cancellable")
    assert err["details"]["status"] == "finished"


def test_cancelling_a_failed_job_is_409(agent_client, start_job, runtime):
    runtime.script = lambda prompt, body: Reply(status=500, error="boom")
    job_id = start_job()["data"]["job_id"]
    data = agent_client.get(f"/agent/job/{job_id}").json()["data"]
    assert data["status"] == "failed"
    assert data["error"].startswith("runtime_error")
    assert "final_result" not in data
    err = assert_error(agent_client.post(f"/agent/job/{job_id}/cancel"), 409, "job_not_cancellable")
    assert err["details"]["status"] == "failed"


# --- The view of steps --------------------------------------------------------------------


def test_big_step_texts_are_truncated_in_the_view_but_not_in_storage(
    agent_client, start_job, runtime
):
    answer = "word " * 3000  # 15,000 characters
    runtime.script = lambda prompt, body: answer
    task = "x" * (VIEW_TEXT_LIMIT * 2)
    job_id = start_job(task=task)["data"]["job_id"]
    [step] = agent_client.get(f"/agent/job/{job_id}").json()["data"]["steps"]
    shown = step["output"]["text"]
    assert len(shown) < len(answer)
    assert shown.startswith(answer[:VIEW_TEXT_LIMIT])
    assert "more characters" in shown
    assert len(step["input"]["prompt"]) < VIEW_TEXT_LIMIT + 100
    stored = Step.objects.get(job_id=job_id)
    assert stored.output["text"] == answer
    assert task in stored.input["prompt"]
