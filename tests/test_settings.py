"""Settings from the environment fail loudly, and the documented production setup is clean."""

import os
import re
import secrets
import string
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from config.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_secret_key,
    env_str,
)

PROJECT_DIR = Path(__file__).resolve().parent.parent
NAME = "LLMGW_TEST_SETTING"


@pytest.fixture
def setenv(monkeypatch):
    def set_value(value: str) -> None:
        monkeypatch.setenv(NAME, value)

    monkeypatch.delenv(NAME, raising=False)
    return set_value


# --- The helpers ------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["maybe", "2", "yes please", "tru"])
def test_env_bool_refuses_a_malformed_value(setenv, raw):
    setenv(raw)
    with pytest.raises(ImproperlyConfigured, match=NAME):
        env_bool(NAME)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("TRUE", True), (" yes ", True), ("on", True), ("0", False), ("off", False)],
)
def test_env_bool_reads_the_usual_spellings(setenv, raw, expected):
    setenv(raw)
    assert env_bool(NAME, not expected) is expected


def test_env_bool_reads_an_empty_value_as_unset(setenv):
    setenv("")
    assert env_bool(NAME, True) is True
    assert env_bool(NAME, False) is False


def test_env_str_reads_an_empty_value_as_unset(setenv):
    setenv("")
    assert env_str(NAME, "fallback") == "fallback"


def test_env_bool_defaults_when_unset(setenv):
    assert env_bool(NAME, True) is True


@pytest.mark.parametrize("raw", ["ten", "1.5", "0x10", "12 workers"])
def test_env_int_refuses_a_malformed_value(setenv, raw):
    setenv(raw)
    with pytest.raises(ImproperlyConfigured, match=NAME):
        env_int(NAME, 1)


def test_env_int_refuses_a_value_below_its_minimum(setenv):
    setenv("-1")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        env_int(NAME, 1, minimum=0)


def test_env_int_reads_a_value_and_defaults_when_unset_or_empty(setenv):
    assert env_int(NAME, 7) == 7
    setenv("")
    assert env_int(NAME, 7) == 7
    setenv(" 42 ")
    assert env_int(NAME, 7, minimum=0) == 42


@pytest.mark.parametrize("raw", ["fast", "1,5", "3s"])
def test_env_float_refuses_a_malformed_value(setenv, raw):
    setenv(raw)
    with pytest.raises(ImproperlyConfigured, match=NAME):
        env_float(NAME, 1.0)


def test_env_float_refuses_a_value_below_its_minimum(setenv):
    setenv("0.001")
    with pytest.raises(ImproperlyConfigured, match=r"at least 0\.01"):
        env_float(NAME, 1.0, minimum=0.01)


def test_env_float_reads_a_value(setenv):
    setenv("2.5")
    assert env_float(NAME, 1.0) == 2.5


def test_env_choice_refuses_a_value_outside_its_choices(setenv):
    setenv("llamafile")
    with pytest.raises(ImproperlyConfigured, match="ollama, openai"):
        env_choice(NAME, "ollama", ("ollama", "openai"))


def test_env_choice_reads_a_value_and_defaults_when_unset(setenv):
    assert env_choice(NAME, "ollama", ("ollama", "openai")) == "ollama"
    setenv(" openai ")
    assert env_choice(NAME, "ollama", ("ollama", "openai")) == "openai"


def test_env_list_and_env_str_read_plain_values(setenv):
    assert env_list(NAME, ["localhost"]) == ["localhost"]
    assert env_str(NAME, "fallback") == "fallback"
    setenv(" a.example , b.example,, ")
    assert env_list(NAME) == ["a.example", "b.example"]
    assert env_str(NAME) == " a.example , b.example,, "


def test_env_list_refuses_a_value_outside_its_choices(setenv):
    setenv("num_gpu,num_cpu")
    with pytest.raises(ImproperlyConfigured, match=NAME):
        env_list(NAME, choices=("num_gpu", "num_thread"))
    setenv("num_gpu")
    assert env_list(NAME, choices=("num_gpu", "num_thread")) == ["num_gpu"]


def test_env_networks_reads_cidr_and_refuses_a_malformed_network(setenv):
    setenv("10.0.0.0/8, ::1")
    assert [str(net) for net in env_networks(NAME, [])] == ["10.0.0.0/8", "::1/128"]
    setenv("10.0.0.0/33")
    with pytest.raises(ImproperlyConfigured, match=NAME):
        env_networks(NAME, [])


def test_env_secret_key_is_generated_once_and_kept(setenv, tmp_path):
    path = tmp_path / "secret_key"
    first = env_secret_key(NAME, path)
    assert len(first) >= 50 and env_secret_key(NAME, path) == first
    assert path.stat().st_mode & 0o777 == 0o600
    setenv("from-the-environment")
    assert env_secret_key(NAME, path) == "from-the-environment"


# --- The whole settings module, in a fresh process ----------------------------------------


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``manage.py <args>`` in a clean environment (only ``env`` and PATH)."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT_DIR,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def production_env(tmp_path: Path) -> dict[str, str]:
    """The production variables docs/operations.md documents: a real secret, the public name, and
    HTTPS=1 (served over HTTPS behind a TLS proxy)."""
    alphabet = string.ascii_letters + string.digits + string.punctuation.replace("'", "")
    return {
        "DEBUG": "0",
        "SECRET_KEY": "".join(secrets.choice(alphabet) for _ in range(60)),
        "ALLOWED_HOSTS": "example.com",
        "HTTPS": "1",
        "BEHIND_TLS_PROXY": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
    }


def compose_env(service: str, given: dict[str, str]) -> dict[str, str]:
    """The environment compose.yaml gives ``service``, with ``${NAME:-default}`` and
    ``${NAME:?message}`` filled from ``given`` as docker compose would fill them from .env."""
    compose = yaml.safe_load((PROJECT_DIR / "compose.yaml").read_text())

    def fill(match: re.Match) -> str:
        name, kind, default = match.group(1), match.group(2), match.group(3)
        if given.get(name):
            return given[name]
        assert kind == "-", f"compose.yaml requires {name}"
        return default

    pattern = re.compile(r"\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}")
    environment = compose["services"][service]["environment"]
    return {name: pattern.sub(fill, str(value)) for name, value in environment.items()}


@pytest.mark.slow
def test_check_deploy_reports_nothing_with_the_documented_production_settings(tmp_path):
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("service", ["web", "worker", "migrate"])
def test_check_deploy_reports_nothing_with_the_settings_compose_yaml_deploys(tmp_path, service):
    # What a deploy writes into .env (docs/operations.md, "Procfile and compose.yaml"), and
    # nothing else.
    dot_env = {"SECRET_KEY": production_env(tmp_path)["SECRET_KEY"], "POSTGRES_PASSWORD": "pw"}
    env = {**compose_env(service, dot_env), "VAR_DIR": str(tmp_path / "var")}
    assert env["HTTPS"] == "1" and env["DEBUG"] == "0"
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.slow
def test_check_deploy_warns_when_the_production_settings_are_missing(tmp_path):
    env = {"DEBUG": "1", "SECRET_KEY": "short", "VAR_DIR": str(tmp_path / "var")}
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "security.W009", "security.W018"):
        assert check in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEBUG", "maybe"),
        ("SECURE_HSTS_SECONDS", "a year"),
        ("MODEL_RUNTIME_API", "llamafile"),
        ("DATABASE_URL", "mysql://root@127.0.0.1/llmgw"),
        ("RUNTIME_READ_TIMEOUT", "0"),
    ],
)
def test_a_malformed_variable_stops_the_process_at_start(tmp_path, name, value):
    env = {**production_env(tmp_path), name: value}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert name in result.stderr


def test_env_example_lists_every_variable_the_settings_read():
    settings_source = "".join(
        (PROJECT_DIR / "config" / name).read_text() for name in ("settings.py", "env.py")
    )
    read = set(re.findall(r'env_[a-z_]+\(\s*"([A-Z0-9_]+)"', settings_source))
    assert {"DATABASE_URL", "DB_POOL_MAX_SIZE", "SECRET_KEY", "METRICS_ALLOWED_NETWORKS"} <= read
    listed = set(
        re.findall(r"^#?\s*([A-Z0-9_]+)=", (PROJECT_DIR / ".env.example").read_text(), re.M)
    )
    assert read and read <= listed, sorted(read - listed)


def test_a_pool_smaller_than_the_job_threads_and_heartbeat_is_warned_about(settings, monkeypatch):
    from django.db import connections

    from agents.checks import pool_holds_every_job_thread

    options = connections["default"].settings_dict.setdefault("OPTIONS", {})
    monkeypatch.setitem(options, "pool", {"max_size": 4})
    settings.JOB_THREADS = 4
    (warning,) = pool_holds_every_job_thread(None)
    assert warning.id == "agents.W001"
    assert "DB_POOL_MAX_SIZE (4) is below JOB_THREADS + 1 (5)" in warning.msg
    settings.JOB_THREADS = 3
    assert pool_holds_every_job_thread(None) == []
    monkeypatch.delitem(options, "pool")  # no pool (SQLite, or DB_POOL_MAX_SIZE=0)
    settings.JOB_THREADS = 64
    assert pool_holds_every_job_thread(None) == []
