"""Django settings, read from the environment (see ``.env.example`` for every variable)."""

import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_choice, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept in var/.

    API keys are stored as SHA-256 digests and do not depend on this value; it signs
    sessions and CSRF tokens of the admin only.
    """
    key = env_str("SECRET_KEY")
    if key:
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
CSRF_FAILURE_VIEW = "gateway.errors.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_q",
    "gateway",
    "agents",
    "conversations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "gateway.http.BodySizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
# SQLite is the embedded default: WAL so readers never block the writer, IMMEDIATE
# transactions so a writer takes the lock up front instead of failing on upgrade, and a
# busy timeout so concurrent writers wait instead of raising "database is locked".
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
try:
    _db = dj_database_url.parse(DATABASE_URL)
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env_float("SQLITE_BUSY_TIMEOUT", 20.0, minimum=0),
        "init_command": (
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
        ),
    }
    _db["CONN_MAX_AGE"] = None
elif _db["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, with the health check skipped for a connection in use a moment ago.
    _db["ENGINE"] = "config.postgresql"
    _db["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 600, minimum=0)
    # Off, a connection the server dropped fails one request before Django replaces it.
    _db["CONN_HEALTH_CHECKS"] = env_bool("DB_CONN_HEALTH_CHECKS", True)
    _db["HEALTH_CHECK_IDLE"] = env_float("DB_CONN_HEALTH_CHECK_IDLE", 1.0, minimum=0)
else:
    raise ImproperlyConfigured("DATABASE_URL must be a sqlite:// or postgres:// URL")
_db["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME") or None}
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache ----------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
if DEBUG:
    STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}

# --- Security (set these in production; see README "Production") -----------------------
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- API ------------------------------------------------------------------------------
# Bodies above this size are refused with 413 payload_too_large before they are parsed.
MAX_BODY_BYTES = env_int("MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "gateway.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "LLM gateway and agent service",
    "DESCRIPTION": (
        "A stateless model endpoint (`POST /api.php`) and, above it, agents with jobs and "
        "conversations. Every answer is `{ok: true, ...}` or the error envelope "
        "`{ok: false, error, message, details}`. `elapsed` is wall-clock seconds."
    ),
    "VERSION": "2.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # A started job's status and any job's status are two choice sets named "status".
    "ENUM_NAME_OVERRIDES": {"JobStartStatusEnum": ["queued", "running"]},
}

# --- Model runtime ----------------------------------------------------------------------
MODEL_RUNTIME_URL = env_str("MODEL_RUNTIME_URL", "http://127.0.0.1:8089").rstrip("/")
MODEL_RUNTIME_API = env_choice("MODEL_RUNTIME_API", "openai", ("ollama", "openai", "openai-chat"))
MODEL_RUNTIME_API_KEY = env_str("MODEL_RUNTIME_API_KEY")
RUNTIME_CONNECT_TIMEOUT = env_float("RUNTIME_CONNECT_TIMEOUT", 3.0, minimum=0.01)
RUNTIME_READ_TIMEOUT = env_float("RUNTIME_READ_TIMEOUT", 120.0, minimum=0.01)
# OpenAI-compatible servers stop early without max_tokens (llama.cpp: 16); this is ours.
RUNTIME_DEFAULT_MAX_TOKENS = env_int("RUNTIME_DEFAULT_MAX_TOKENS", 512, minimum=1)
# An endpoint that failed is skipped for this long when a model has several endpoints.
RUNTIME_FAILURE_COOLDOWN = env_float("RUNTIME_FAILURE_COOLDOWN", 30.0, minimum=0)
# How long a process may keep the model-to-endpoint routing table before reading it again.
RUNTIME_ROUTES_TTL = env_float("RUNTIME_ROUTES_TTL", 5.0, minimum=0)
AGENT_MODEL = env_str("AGENT_MODEL", "gemma3:270m")

# --- Keys -----------------------------------------------------------------------------
# Requests per minute for a new key when none is given (0 = unlimited).
DEFAULT_KEY_RATE_LIMIT = env_int("DEFAULT_KEY_RATE_LIMIT", 600, minimum=0)
# PostgreSQL: usage records commit without waiting for the disk flush. A crash of the
# database server may lose the last fraction of a second of them; nothing else is affected.
USAGE_ASYNC_COMMIT = env_bool("USAGE_ASYNC_COMMIT", True)

# --- Jobs -----------------------------------------------------------------------------
JOB_TIMEOUT = env_int("JOB_TIMEOUT", 900, minimum=10)
JOB_LEASE_SECONDS = env_int("JOB_LEASE_SECONDS", 60, minimum=2)
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 3, minimum=1)
JOB_CANCEL_POLL_SECONDS = env_float("JOB_CANCEL_POLL_SECONDS", 0.5, minimum=0.05)

Q_CLUSTER = {
    "name": env_str("Q_CLUSTER_NAME", "llmgw"),
    "workers": env_int("Q_WORKERS", 2, minimum=1),
    "timeout": JOB_TIMEOUT,
    # django-q2 re-delivers an unacknowledged task after `retry` seconds; it must be
    # above `timeout` or a slow job would be delivered again while still running.
    "retry": JOB_TIMEOUT + 60,
    # Retries are ours (the reaper, bounded by JOB_MAX_ATTEMPTS), not the queue's.
    "max_attempts": 1,
    "ack_failures": True,
    "catch_up": False,
    "save_limit": env_int("Q_SAVE_LIMIT", 1000, minimum=0),
    "poll": env_float("Q_POLL", 0.1, minimum=0.01),
    "label": "Task queue",
    "sync": env_bool("Q_SYNC", False),
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.request": {"level": "ERROR"}},
}
