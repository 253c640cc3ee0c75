"""API keys: their format, what is stored, the management commands, owners and revocation."""

import hashlib
import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from core.errors import status_and_id
from core.exceptions import Forbidden, InvalidApiKey
from gateway import keys, services
from gateway.models import ApiKey

pytestmark = pytest.mark.django_db

KEY_FORMAT = re.compile(r"^llmgw_([a-z0-9]{12})_([A-Za-z0-9]{40})$")


def create_key(*args: str) -> tuple[list[str], str]:
    """Runs ``create_api_key``; returns its output lines and the plain key."""
    out = StringIO()
    call_command("create_api_key", *args, stdout=out)
    lines = out.getvalue().splitlines()
    return lines, lines[-1]


def revoke_key(ident: str) -> str:
    out = StringIO()
    call_command("revoke_api_key", ident, stdout=out)
    return out.getvalue()


def refused(plain: object) -> bool:
    try:
        services.api_key_authenticate(plain)
    except InvalidApiKey as err:
        assert status_and_id(err) == (401, "invalid_api_key")
        return True
    return False


def call_api(client, plain: str):
    body = {"api_key": plain, "model": "test-model", "prompt": "hi"}
    return client.post("/api.php", data=json.dumps(body), content_type="application/json")


# --- Format and storage -----------------------------------------------------------------


def test_a_key_has_the_documented_format(make_key):
    api_key, plain = make_key()
    match = KEY_FORMAT.match(plain)
    assert match, plain
    assert match.group(1) == api_key.prefix


def test_every_key_is_different():
    generated = [keys.generate() for _ in range(50)]
    assert len({new.plain for new in generated}) == 50
    assert len({new.prefix for new in generated}) == 50


def test_only_the_sha256_digest_of_the_key_is_stored(make_key):
    api_key, plain = make_key()
    secret = KEY_FORMAT.match(plain).group(2)
    row = ApiKey.objects.filter(pk=api_key.pk).values().get()
    assert row["key_hash"] == hashlib.sha256(plain.encode()).hexdigest()
    stored = json.dumps(row, default=str)
    assert secret not in stored
    assert plain not in stored
    assert secret not in repr(api_key) and secret not in str(api_key)


def test_the_stored_key_authenticates_its_owner(make_key):
    api_key, plain = make_key(name="ci")
    assert services.api_key_authenticate(plain) == api_key
    assert api_key.owner.username == "ci"


def test_a_key_with_the_right_prefix_but_a_wrong_secret_is_refused(make_key, api_client, runtime):
    api_key, plain = make_key()
    secret = KEY_FORMAT.match(plain).group(2)
    wrong = plain[: -len(secret)] + ("B" if secret[0] != "B" else "C") + secret[1:]
    assert keys.prefix_of(wrong) == api_key.prefix
    assert refused(wrong)
    response = call_api(api_client, wrong)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_api_key"
    assert wrong not in response.content.decode()
    assert runtime.generate_requests() == []


@pytest.mark.parametrize(
    "plain",
    [
        None,
        "",
        42,
        ["llmgw"],
        "llmgw",
        "llmgw_abcdefghijkl_" + "a" * 40,  # well-formed, unknown prefix
        "other_abcdefghijkl_" + "a" * 40,
        "llmgw_short_" + "a" * 40,
        "llmgw_abcdefghijkl_" + "a" * 39,
        "llmgw_abcdefghijkl_" + "a" * 40 + "_extra",
    ],
)
def test_a_malformed_or_unknown_key_is_refused(make_key, plain):
    make_key()
    assert refused(plain)


def test_a_key_with_extra_whitespace_is_refused(make_key):
    _, plain = make_key()
    assert refused(f" {plain}")
    assert refused(f"{plain}\n")


def test_an_expired_key_is_refused(make_key):
    _, plain = make_key(expires_at=timezone.now() - timedelta(seconds=1))
    assert refused(plain)


def test_a_key_that_expires_later_is_accepted(make_key):
    api_key, plain = make_key(expires_at=timezone.now() + timedelta(days=1))
    assert services.api_key_authenticate(plain) == api_key


def test_authenticating_records_when_a_key_was_last_used(make_key):
    api_key, plain = make_key()
    assert api_key.last_used_at is None
    services.api_key_authenticate(plain)
    api_key.refresh_from_db()
    assert api_key.last_used_at is not None


# --- create_api_key ---------------------------------------------------------------------


def test_create_api_key_prints_the_plain_key_alone_on_the_last_line():
    lines, plain = create_key("--name", "ci-runner")
    assert KEY_FORMAT.match(plain), lines
    assert len(lines) >= 2  # an explanation first, then the key by itself
    assert all(plain not in line for line in lines[:-1])
    api_key = ApiKey.objects.get()
    assert services.api_key_authenticate(plain) == api_key


def test_create_api_key_creates_an_owner_named_after_the_key():
    create_key("--name", "ci-runner")
    api_key = ApiKey.objects.get()
    assert api_key.name == "ci-runner"
    assert api_key.owner.username == "ci-runner"
    assert api_key.scopes == ["agent", "model"]
    assert api_key.allowed_models == []


def test_create_api_key_reuses_the_user_named_after_the_key():
    user = get_user_model().objects.create_user("ci-runner")
    create_key("--name", "ci-runner")
    create_key("--name", "ci-runner")
    assert list(ApiKey.objects.values_list("owner", flat=True)) == [user.pk, user.pk]
    assert get_user_model().objects.count() == 1


def test_create_api_key_uses_the_given_owner():
    alice = get_user_model().objects.create_user("alice")
    create_key("--name", "laptop", "--owner", "alice")
    api_key = ApiKey.objects.get()
    assert api_key.owner == alice
    assert not get_user_model().objects.filter(username="laptop").exists()


def test_create_api_key_creates_a_missing_owner():
    create_key("--name", "laptop", "--owner", "bob")
    assert ApiKey.objects.get().owner.username == "bob"


def test_create_api_key_sets_scopes_models_and_limits():
    _, plain = create_key(
        "--name",
        "narrow",
        "--scopes",
        "model",
        "--models",
        "test-model, other-model",
        "--rate-limit",
        "0",
        "--expires-in-days",
        "7",
    )
    api_key = services.api_key_authenticate(plain)
    assert api_key.scopes == ["model"]
    assert api_key.allowed_models == ["test-model", "other-model"]
    assert api_key.rate_limit_per_minute == 0
    remaining = api_key.expires_at - timezone.now()
    assert timedelta(days=6) < remaining <= timedelta(days=7)


def test_create_api_key_gives_the_default_rate_limit(settings):
    settings.DEFAULT_KEY_RATE_LIMIT = 42
    create_key("--name", "default-limit")
    assert ApiKey.objects.get().rate_limit_per_minute == 42


@pytest.mark.parametrize("scopes", ["admin", "model,admin", ","])
def test_create_api_key_refuses_unknown_or_empty_scopes(scopes):
    with pytest.raises(CommandError, match="scopes"):
        create_key("--name", "bad", "--scopes", scopes)
    assert not ApiKey.objects.exists()


def test_a_key_with_only_the_model_scope_may_not_use_the_agents(api_client, runtime):
    _, plain = create_key("--name", "model-only", "--scopes", "model")
    assert call_api(api_client, plain).status_code == 200
    api_key = services.api_key_authenticate(plain)
    with pytest.raises(Forbidden) as excinfo:
        services.api_key_require_scope(api_key, "agent")
    assert status_and_id(excinfo.value) == (403, "forbidden")


def test_a_key_limited_to_some_models_may_not_use_others(api_client, runtime):
    _, plain = create_key("--name", "narrow", "--models", "other-model")
    response = call_api(api_client, plain)
    assert response.status_code == 403
    assert response.json()["error"] == "model_not_allowed"


# --- revoke_api_key ---------------------------------------------------------------------


def test_revoke_api_key_revokes_by_plain_key(make_key):
    api_key, plain = make_key(name="laptop")
    assert "Revoked" in revoke_key(plain)
    assert refused(plain)
    api_key.refresh_from_db()
    assert api_key.revoked_at is not None


def test_revoke_api_key_revokes_by_prefix(make_key):
    api_key, plain = make_key(name="laptop")
    revoke_key(api_key.prefix)
    assert refused(plain)


def test_revoke_api_key_revokes_by_name(make_key):
    _, plain = make_key(name="laptop")
    _, other = make_key(name="desktop")
    revoke_key("laptop")
    assert refused(plain)
    assert not refused(other)


def test_revoke_api_key_refuses_an_unknown_key(make_key):
    _, plain = make_key(name="laptop")
    with pytest.raises(CommandError, match="No key"):
        revoke_key("nothing-like-it")
    assert not refused(plain)


def test_revoke_api_key_refuses_a_name_shared_by_two_live_keys(make_key):
    _, first = make_key(name="laptop")
    _, second = make_key(name="laptop")
    with pytest.raises(CommandError, match="give a prefix"):
        revoke_key("laptop")
    assert not refused(first) and not refused(second)


def test_revoke_api_key_by_name_skips_keys_revoked_already(make_key):
    old, old_plain = make_key(name="laptop")
    services.api_key_revoke(api_key=old)
    _, new_plain = make_key(name="laptop")
    revoke_key("laptop")
    assert refused(old_plain) and refused(new_plain)


def test_revocation_is_permanent(make_key, api_client, runtime):
    api_key, plain = make_key(name="laptop")
    revoke_key(plain)
    revoked_at = ApiKey.objects.get(pk=api_key.pk).revoked_at
    assert "revoked already" in revoke_key(plain)
    assert services.api_key_revoke(api_key=api_key) is False
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at == revoked_at
    # Extending the key does not bring it back.
    ApiKey.objects.filter(pk=api_key.pk).update(expires_at=timezone.now() + timedelta(days=365))
    assert refused(plain)
    assert call_api(api_client, plain).status_code == 401
    assert runtime.generate_requests() == []


def test_a_revoked_key_is_refused_by_the_next_request(make_key, api_client, runtime):
    api_key, plain = make_key()
    assert call_api(api_client, plain).status_code == 200
    services.api_key_revoke(api_key=api_key)
    assert call_api(api_client, plain).status_code == 401


# --- Owners -----------------------------------------------------------------------------


def test_keys_of_two_owners_belong_to_their_owners():
    _, alice_plain = create_key("--name", "alice-laptop", "--owner", "alice")
    _, alice_other = create_key("--name", "alice-phone", "--owner", "alice")
    _, bob_plain = create_key("--name", "bob-laptop", "--owner", "bob")
    alice = get_user_model().objects.get(username="alice")
    bob = get_user_model().objects.get(username="bob")
    assert services.api_key_authenticate(alice_plain).owner == alice
    assert services.api_key_authenticate(alice_other).owner == alice
    assert services.api_key_authenticate(bob_plain).owner == bob
    assert set(alice.api_keys.values_list("name", flat=True)) == {"alice-laptop", "alice-phone"}
    assert list(bob.api_keys.values_list("name", flat=True)) == ["bob-laptop"]


def test_revoking_one_owners_key_leaves_the_other_owners_keys(make_key):
    alice = get_user_model().objects.create_user("alice")
    bob = get_user_model().objects.create_user("bob")
    alice_key, alice_plain = make_key(name="laptop", owner=alice)
    _, bob_plain = make_key(name="laptop-2", owner=bob)
    services.api_key_revoke(api_key=alice_key)
    assert refused(alice_plain)
    assert services.api_key_authenticate(bob_plain).owner == bob
