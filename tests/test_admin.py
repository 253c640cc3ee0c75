"""The admin: every registered model's pages open, and the API key pages keep secrets."""

import itertools
import re
import uuid
from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import models, transaction
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from gateway import keys, services
from gateway.models import ApiKey, RuntimeEndpoint, UsageRecord

pytestmark = pytest.mark.django_db

PROJECT_DIR = Path(__file__).resolve().parent.parent
PLAIN_KEY = re.compile(r"llmgw_[a-z0-9]{12}_[A-Za-z0-9]{40}")
REGISTERED = sorted(admin.site._registry, key=lambda model: model._meta.label)


@pytest.fixture(autouse=True)
def _plain_static(plain_static_storage):
    """Every page of this module links static files."""


# --- One object of any model ------------------------------------------------------------

_serial = itertools.count(1)


def _task(*, success: bool) -> models.Model:
    from django_q.models import Task

    now = timezone.now()
    return Task.objects.create(
        id=uuid.uuid4().hex,
        name=f"task-{next(_serial)}",
        func="math.floor",
        args=(1.5,),
        kwargs={},
        result=1 if success else "Traceback: boom",
        started=now,
        stopped=now,
        success=success,
    )


def _queued_task() -> models.Model:
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    package = {"id": uuid.uuid4().hex, "name": "queued", "func": "math.floor", "args": (1.5,)}
    return OrmQ.objects.create(key="llmgw", payload=SignedPackage.dumps(package))


# Models whose valid rows the generic filler cannot guess (hashed secrets, signed
# payloads, proxies that filter). Every other model is filled in generically.
FACTORIES: dict[str, Callable[[], models.Model]] = {
    "auth.User": lambda: get_user_model().objects.create_user(f"user-{next(_serial)}"),
    "auth.Group": lambda: Group.objects.create(name=f"group-{next(_serial)}"),
    "gateway.ApiKey": lambda: services.api_key_create(
        name=f"key-{next(_serial)}", rate_limit_per_minute=0
    )[0],
    "django_q.Success": lambda: _task(success=True),
    "django_q.Failure": lambda: _task(success=False),
    "django_q.OrmQ": _queued_task,
    "agents.WebhookDelivery": lambda: _delivery(),
}


def _delivery() -> models.Model:
    from agents.models import WebhookDelivery
    from tests.factories import make_job

    key = services.api_key_create(name=f"key-{next(_serial)}", rate_limit_per_minute=0)[0]
    job = make_job(key)
    now = timezone.now()
    return WebhookDelivery.objects.create(
        id=f"msg_smoke{next(_serial)}",
        job=job,
        owner_id=job.owner_id,
        event="job.finished",
        url="https://example.com/hook",
        body="{}",
        created_at=now,
        next_attempt_at=now,
    )


def _value_for(field: models.Field) -> object:
    """A plausible value for a required field that has no default."""
    if field.is_relation:
        return make_object(field.related_model)
    if field.choices:
        return field.choices[0][0]
    n = next(_serial)
    simple: list[tuple[type[models.Field], object]] = [
        (models.EmailField, f"user{n}@example.com"),
        (models.URLField, f"http://127.0.0.1:{n}"),
        (models.GenericIPAddressField, "127.0.0.1"),
        (models.UUIDField, uuid.uuid4()),
        (models.BooleanField, False),
        (models.DateTimeField, timezone.now()),
        (models.DateField, date.today()),
        (models.DurationField, timedelta(seconds=1)),
        (models.DecimalField, Decimal(1)),
        (models.FloatField, 1.0),
        (models.IntegerField, 1),
        (models.JSONField, {}),
    ]
    for kind, value in simple:
        if isinstance(field, kind):
            return value
    if isinstance(field, models.CharField | models.TextField):
        text = f"smoke-{n}"
        return text[-field.max_length :] if field.max_length else text
    raise TypeError(f"no generic value for {field!r}")


def _autofill(model: type[models.Model]) -> models.Model:
    values = {
        field.name: _value_for(field)
        for field in model._meta.concrete_fields
        if not (
            field.auto_created
            or field.has_default()
            or field.null
            or getattr(field, "auto_now", False)
            or getattr(field, "auto_now_add", False)
        )
    }
    return model._default_manager.create(**values)


def make_object(model: type[models.Model]) -> models.Model:
    return FACTORIES.get(model._meta.label, lambda: _autofill(model))()


def admin_object(model: type[models.Model], superuser) -> models.Model | None:
    """One object the model's admin lists: an existing one, else a new one if feasible."""
    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/admin/")
    request.user = superuser
    listed = model_admin.get_queryset(request)
    existing = listed.first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            created = make_object(model)
    except Exception:
        return None  # no generic way to make a valid row; only its change page goes untested
    return listed.filter(pk=created.pk).first()


# --- Every registered model -------------------------------------------------------------


def test_the_admin_index_lists_every_registered_model(staff_client):
    response = staff_client.get(reverse("admin:index"))
    assert response.status_code == 200
    for model in REGISTERED:
        info = (model._meta.app_label, model._meta.model_name)
        assert reverse("admin:{}_{}_changelist".format(*info)).encode() in response.content


@pytest.mark.parametrize("model", REGISTERED, ids=lambda model: model._meta.label)
def test_every_admin_page_of_a_registered_model_opens(staff_client, superuser, model):
    model_admin = admin.site._registry[model]
    info = (model._meta.app_label, model._meta.model_name)
    request = RequestFactory().get("/admin/")
    request.user = superuser
    obj = admin_object(model, superuser)

    changelist = reverse("admin:{}_{}_changelist".format(*info))
    response = staff_client.get(changelist)
    assert response.status_code == 200, response.content
    if model_admin.get_search_fields(request):
        assert staff_client.get(changelist, {"q": "smoke"}).status_code == 200
    if model_admin.has_add_permission(request):
        response = staff_client.get(reverse("admin:{}_{}_add".format(*info)))
        assert response.status_code == 200, response.content
    if obj is not None:
        url = reverse("admin:{}_{}_change".format(*info), args=(quote(obj.pk),))
        response = staff_client.get(url)
        assert response.status_code == 200, response.content


def test_the_smoke_test_opens_a_change_page_for_every_model_of_the_project(superuser):
    """Third-party models may go without a change page; ours need a row (add a FACTORIES
    entry when the generic filler cannot make one)."""
    ours = [
        model
        for model in REGISTERED
        if Path(model._meta.app_config.path).is_relative_to(PROJECT_DIR)
    ]
    assert ApiKey in ours
    missing = [model._meta.label for model in ours if admin_object(model, superuser) is None]
    assert missing == []


# --- API keys ---------------------------------------------------------------------------


def _add_key(client, owner, **extra):
    data = {
        "name": "ci-runner",
        "owner": owner.pk,
        "scopes": ["model"],
        "allowed_models": "test-model, other-model",
        "rate_limit_per_minute": 30,
        "agent_starts_per_minute": 12,
        "agent_reads_per_minute": 120,
        "max_active_jobs": 3,
        "expires_at_0": "",
        "expires_at_1": "",
        **extra,
    }
    return client.post(reverse("admin:gateway_apikey_add"), data, follow=True)


def test_adding_a_key_in_the_admin_shows_the_plain_key_once(staff_client, superuser):
    response = _add_key(staff_client, superuser)
    assert response.status_code == 200, response.content
    api_key = ApiKey.objects.get(name="ci-runner")
    assert api_key.owner == superuser
    assert api_key.scopes == ["model"]
    assert api_key.allowed_models == ["test-model", "other-model"]
    assert (api_key.agent_starts_per_minute, api_key.agent_reads_per_minute) == (12, 120)
    assert api_key.max_active_jobs == 3
    assert api_key.rate_limit_per_minute == 30

    page = response.content.decode()
    plain_keys = PLAIN_KEY.findall(page)
    assert len(plain_keys) == 1
    [plain] = plain_keys
    assert keys.prefix_of(plain) == api_key.prefix
    assert keys.matches(plain, api_key.key_hash)
    assert 'data-copy-target="plain-key"' in page
    assert "no-store" in response["Cache-Control"]
    # Rendered in the answer itself: no message (cookie or session) carries the key.
    assert not any(PLAIN_KEY.search(str(m)) for m in response.context["messages"])
    assert not PLAIN_KEY.search(str(response.cookies))

    change = reverse("admin:gateway_apikey_change", args=(api_key.pk,))
    for url in (reverse("admin:gateway_apikey_changelist"), change):
        page = staff_client.get(url).content.decode()
        assert plain not in page
        assert not PLAIN_KEY.search(page)


def test_the_admin_never_shows_the_key_hash(staff_client, superuser):
    add_page = staff_client.get(reverse("admin:gateway_apikey_add")).content.decode()
    assert "key_hash" not in add_page
    response = _add_key(staff_client, superuser)
    api_key = ApiKey.objects.get(name="ci-runner")
    change = reverse("admin:gateway_apikey_change", args=(api_key.pk,))
    pages = [
        response.content.decode(),
        staff_client.get(reverse("admin:gateway_apikey_changelist")).content.decode(),
        staff_client.get(change).content.decode(),
    ]
    for page in pages:
        assert api_key.key_hash not in page
        assert "key_hash" not in page


def test_the_admin_records_the_new_key_in_its_history(staff_client, superuser):
    from django.contrib.admin.models import ADDITION, LogEntry

    response = _add_key(staff_client, superuser)
    api_key = ApiKey.objects.get(name="ci-runner")
    change = reverse("admin:gateway_apikey_change", args=(api_key.pk,))
    assert change.encode() in response.content
    entry = LogEntry.objects.get(action_flag=ADDITION)
    assert entry.object_id == str(api_key.pk)


def test_the_add_form_takes_its_rate_limit_from_the_setting_the_command_uses(
    staff_client, settings
):
    settings.DEFAULT_KEY_RATE_LIMIT = 42
    page = staff_client.get(reverse("admin:gateway_apikey_add"))
    assert page.context["adminform"].form.initial["rate_limit_per_minute"] == 42


def test_the_admin_refuses_a_key_without_a_scope(staff_client, superuser):
    response = _add_key(staff_client, superuser, scopes=[])
    assert response.status_code == 200
    assert not ApiKey.objects.exists()
    assert response.context["adminform"].form.errors["scopes"]


def test_editing_a_key_in_the_admin_keeps_its_secret(staff_client, make_key, superuser):
    api_key, plain = make_key(name="old-name", owner=superuser)
    url = reverse("admin:gateway_apikey_change", args=(api_key.pk,))
    response = staff_client.post(
        url,
        {
            "name": "new-name",
            "owner": superuser.pk,
            "scopes": ["model", "agent"],
            "allowed_models": "",
            "rate_limit_per_minute": 0,
            "agent_starts_per_minute": 0,
            "agent_reads_per_minute": 0,
            "max_active_jobs": 0,
            "expires_at_0": "",
            "expires_at_1": "",
        },
    )
    assert response.status_code == 302, response.content
    api_key.refresh_from_db()
    assert api_key.name == "new-name"
    assert services.api_key_authenticate(plain) == api_key


def test_the_revoke_action_revokes_the_selected_keys(staff_client, make_key):
    first, first_plain = make_key(name="first")
    second, _ = make_key(name="second")
    kept, kept_plain = make_key(name="kept")
    changelist = reverse("admin:gateway_apikey_changelist")
    selected = {"action": "revoke_selected", "_selected_action": [first.pk, second.pk]}
    confirmation = staff_client.post(changelist, selected)
    assert confirmation.status_code == 200
    assert b'id="revoke-confirm"' in confirmation.content
    first.refresh_from_db()
    assert first.revoked_at is None  # nothing happens before the confirmation

    response = staff_client.post(changelist, {**selected, "post": "yes"}, follow=True)
    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == ["Revoked 2 key(s)."]
    first.refresh_from_db()
    second.refresh_from_db()
    kept.refresh_from_db()
    assert first.revoked_at is not None and second.revoked_at is not None
    assert kept.revoked_at is None
    with pytest.raises(Exception, match="API key"):
        services.api_key_authenticate(first_plain)
    assert services.api_key_authenticate(kept_plain) == kept


def test_the_revoke_action_leaves_an_already_revoked_key_as_it_was(staff_client, make_key):
    api_key, _ = make_key(name="gone")
    services.api_key_revoke(api_key=api_key)
    revoked_at = ApiKey.objects.get(pk=api_key.pk).revoked_at
    response = staff_client.post(
        reverse("admin:gateway_apikey_changelist"),
        {"action": "revoke_selected", "_selected_action": [api_key.pk], "post": "yes"},
        follow=True,
    )
    assert [str(m) for m in response.context["messages"]] == ["Revoked 0 key(s)."]
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at == revoked_at


# --- Usage records ----------------------------------------------------------------------


def test_usage_records_cannot_be_added_or_changed_in_the_admin(staff_client, make_key):
    api_key, _ = make_key()
    record = UsageRecord.objects.create(
        api_key=api_key, model="test-model", status=200, elapsed=0.1
    )
    assert staff_client.get(reverse("admin:gateway_usagerecord_add")).status_code == 403

    url = reverse("admin:gateway_usagerecord_change", args=(record.pk,))
    page = staff_client.get(url)
    assert page.status_code == 200
    assert page.context["has_change_permission"] is False
    assert b'name="_save"' not in page.content

    response = staff_client.post(url, {"model": "other-model", "status": 500, "elapsed": 9})
    assert response.status_code == 403
    record.refresh_from_db()
    assert (record.model, record.status, record.elapsed) == ("test-model", 200, 0.1)

    changelist = staff_client.get(reverse("admin:gateway_usagerecord_changelist"))
    assert reverse("admin:gateway_usagerecord_add").encode() not in changelist.content


def test_runtime_endpoints_are_edited_with_their_routes_inline(staff_client):
    response = staff_client.post(
        reverse("admin:gateway_runtimeendpoint_add"),
        {
            "name": "gpu-1",
            "base_url": "http://127.0.0.1:11434",
            "api": "ollama",
            "api_key": "",
            "enabled": "on",
            "max_context": 8192,
            "max_predict": 4096,
            "allowed_load_options": "[]",
            "routes-TOTAL_FORMS": "1",
            "routes-INITIAL_FORMS": "0",
            "routes-MIN_NUM_FORMS": "0",
            "routes-MAX_NUM_FORMS": "1000",
            "routes-0-model": "test-model",
            "routes-0-upstream_model": "llama3:8b",
            "routes-0-enabled": "on",
        },
    )
    assert response.status_code == 302, response.content
    endpoint = RuntimeEndpoint.objects.get(name="gpu-1")
    [route] = endpoint.routes.all()
    assert (route.model, route.upstream_model) == ("test-model", "llama3:8b")


def test_a_runtime_address_without_a_scheme_is_taken_as_http(staff_client):
    response = staff_client.post(
        reverse("admin:gateway_runtimeendpoint_add"),
        {
            "name": "lan",
            "base_url": "10.0.0.5:11434",
            "api": "ollama",
            "api_key": "",
            "enabled": "on",
            "max_context": 8192,
            "max_predict": 4096,
            "allowed_load_options": "[]",
            "routes-TOTAL_FORMS": "0",
            "routes-INITIAL_FORMS": "0",
            "routes-MIN_NUM_FORMS": "0",
            "routes-MAX_NUM_FORMS": "1000",
        },
    )
    assert response.status_code == 302, response.content
    assert RuntimeEndpoint.objects.get(name="lan").base_url == "http://10.0.0.5:11434"


def profile_form(**fields) -> dict:
    return {
        "name": "fussy",
        "description": "",
        "model": "test-model",
        "prompt_style": "transcript",
        "options": "{}",
        "system_prompt": "",
        "context_window": "2048",
        "answer_reserve": "256",
        "max_steps": "6",
        "tools": "[]",
        **fields,
    }


def test_a_profile_is_added_in_the_admin_with_its_json_fields(staff_client):
    from agents.models import AgentProfile

    form = profile_form(options='{"temperature": 0.1, "stop": ["\\n"]}', tools='["calculator"]')
    response = staff_client.post(reverse("admin:agents_agentprofile_add"), form)
    assert response.status_code == 302, response.content
    profile = AgentProfile.objects.get(name="fussy")
    assert (profile.options, profile.tools) == (
        {"temperature": 0.1, "stop": ["\n"]},
        ["calculator"],
    )


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("options", '{"stop": ["\\u0000"]}', "stop.0: Must not contain NUL"),
        ("options", '{"stop": "\\ud800"}', "stop: Must not contain NUL"),
        ("options", '{"temperature": NaN}', "temperature: Must be a finite number."),
        ("tools", '["\\u0000"]', "0: Must not contain NUL"),
    ],
)
def test_json_the_database_cannot_store_is_a_form_error_in_the_admin(
    staff_client, field, text, message
):
    from agents.models import AgentProfile

    response = staff_client.post(
        reverse("admin:agents_agentprofile_add"), profile_form(**{field: text})
    )
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not AgentProfile.objects.filter(name="fussy").exists()
