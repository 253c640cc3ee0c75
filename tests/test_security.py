"""Admin login throttling, the security headers, and HEAD on the health endpoints."""

from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def plain_static_storage(settings):
    """Admin pages link static files; the manifest storage would need collectstatic first."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def boss(db):
    return get_user_model().objects.create_superuser("boss", "boss@example.com", PASSWORD)


def log_in(client: Client, password: str, username: str = "boss", **extra):
    return client.post(
        reverse("admin:login"),
        {"username": username, "password": password, "next": reverse("admin:index")},
        **extra,
    )


def fail_until_locked(client: Client, settings, **extra) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert log_in(client, "wrong", **extra).status_code == 200  # the form, with its error
    assert log_in(client, "wrong", **extra).status_code == 429


# --- Login throttling -------------------------------------------------------------------


def test_the_right_password_is_refused_after_too_many_wrong_ones(client, boss, settings):
    fail_until_locked(client, settings)
    response = log_in(client, PASSWORD)
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    assert client.get(reverse("admin:index")).status_code == 302  # still sent to the login


def test_the_right_password_logs_in_before_the_failure_limit(client, boss, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(client, "wrong")
    response = log_in(client, PASSWORD)
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:index")


def test_a_success_clears_the_failures_of_that_username_and_address(client, boss, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(client, "wrong")
    assert log_in(client, PASSWORD).status_code == 302
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert log_in(Client(), "wrong").status_code == 200
    assert log_in(Client(), PASSWORD).status_code == 302


def test_a_lockout_holds_one_username_from_one_address_only(client, boss, settings):
    get_user_model().objects.create_superuser("deputy", "deputy@example.com", PASSWORD)
    fail_until_locked(client, settings)
    assert log_in(Client(), PASSWORD, username="deputy").status_code == 302
    assert log_in(Client(), PASSWORD, REMOTE_ADDR="192.0.2.7").status_code == 302


def test_the_documented_command_unlocks_a_locked_out_username(client, boss, settings):
    fail_until_locked(client, settings)
    call_command("axes_reset_ip_username", "127.0.0.1", "boss")
    assert log_in(client, PASSWORD).status_code == 302


def test_behind_a_proxy_the_address_the_proxy_saw_is_the_one_locked_out(client, boss, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # The client may write anything left of what the proxy appended; only the last entry counts.
    fail_until_locked(client, settings, HTTP_X_FORWARDED_FOR="1.1.1.1, 203.0.113.9")
    assert log_in(client, PASSWORD, HTTP_X_FORWARDED_FOR="9.9.9.9, 203.0.113.9").status_code == 429
    assert log_in(client, PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.10").status_code == 302


# --- Headers ------------------------------------------------------------------------------


def csp_directives(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


@pytest.mark.parametrize("path", ["/admin/login/", "/healthz", "/api.php"])
def test_every_answer_carries_a_csp_that_allows_no_inline_script(client, path):
    directives = csp_directives(client.get(path))
    assert directives["default-src"] == ["'self'"]
    assert "'unsafe-inline'" not in directives["script-src"]
    assert "'unsafe-eval'" not in directives["script-src"]
    assert "'unsafe-inline'" not in directives["style-src"]
    assert directives["frame-ancestors"] == ["'none'"]


class InlineCode(HTMLParser):
    """Collects the nonce of every inline script and style, and every linked resource."""

    def __init__(self) -> None:
        super().__init__()
        self.inline_nonces: list[str | None] = []
        self.linked: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        code = tag == "style" or (tag == "script" and "src" not in found)
        if code and found.get("type") != "application/json":  # a JSON block is data
            self.inline_nonces.append(found.get("nonce"))
        if tag == "script" and found.get("src"):
            self.linked.append(found["src"])
        if tag == "link" and found.get("rel") in ("stylesheet", "icon", "preconnect"):
            self.linked.append(found.get("href") or "")
        if any(name.startswith("on") for name in found) or "style" in found:
            self.inline_nonces.append(None)  # an event handler or a style attribute


@pytest.mark.parametrize(
    "path", ["/", "/api/docs/", "/api/redoc/", "/admin/login/", "/admin/", "/admin/auth/user/"]
)
def test_the_html_pages_run_under_the_csp(client, boss, path):
    """Every inline script or style carries the request's nonce, and every script, style
    and icon comes from the site itself (checked in Chromium too: no violation but ReDoc's
    scrollbar stylesheet and its logo from its CDN, both refused)."""
    if path != "/admin/login/":
        client.force_login(boss)
    response = client.get(path)
    assert response.status_code == 200, response.content
    parser = InlineCode()
    parser.feed(response.content.decode())
    nonces = [v[7:-1] for v in csp_directives(response)["script-src"] if v.startswith("'nonce-")]
    assert all(nonce is not None and [nonce] == nonces for nonce in parser.inline_nonces)
    assert all(url.startswith("/") and not url.startswith("//") for url in parser.linked), (
        parser.linked
    )


def test_https_sets_hsts_and_secure_cookies(client, boss, settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.SECURE_HSTS_PRELOAD = True
    settings.SESSION_COOKIE_SECURE = True
    settings.CSRF_COOKIE_SECURE = True
    response = client.get("/admin/login/", secure=True)
    assert response["Strict-Transport-Security"] == ("max-age=31536000; includeSubDomains; preload")
    assert response.cookies["csrftoken"]["secure"]
    response = log_in(client, PASSWORD, secure=True)
    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"]
    assert response.cookies["sessionid"]["httponly"]


def test_https_redirects_plain_http_but_not_the_health_probes(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    response = client.get("/admin/login/")
    assert response.status_code == 301
    assert response["Location"].startswith("https://")
    assert client.get("/healthz").status_code == 200


# --- Health ---------------------------------------------------------------------------------


def test_head_is_allowed_on_healthz(client):
    response = client.head("/healthz")
    assert response.status_code == 200
    assert response.content == b""


def test_head_is_allowed_on_readyz(client, runtime):
    response = client.head("/readyz")
    assert response.status_code == 200
    assert response.content == b""
