"""Django settings, read from the environment (see ``.env.example`` for every variable)."""

import os
from datetime import timedelta
from pathlib import Path

from csp.constants import NONCE as CSP_NONCE
from csp.constants import NONE as CSP_NONE
from csp.constants import SELF as CSP_SELF
from django.core.exceptions import ImproperlyConfigured

from config.env import (
    asynchronous_commit,
    env_bool,
    env_choice,
    env_database,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_seconds_list,
    env_secret_key,
    env_str,
)
from core.logs import logging_config  # a plain module: no model, no setting read
from gateway.options import LOAD_OPTIONS  # a plain module: the names of the load options

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
# Signs the admin's sessions and CSRF tokens only: API keys are stored as digests.
SECRET_KEY = env_secret_key("SECRET_KEY", VAR_DIR / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
CSRF_FAILURE_VIEW = "core.errors.csrf_failure"

INSTALLED_APPS = [
    # The admin with the back office's site (dashboard, playground): backoffice/site.py.
    "backoffice.apps.BackofficeAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "axes",
    "csp",
    "core",
    "gateway",
    "agents",
    "conversations",
    "backoffice",
]

# Django's own middleware, WhiteNoise's and django-csp's as they ship; ours (core, config) are
# written with Django's public middleware API, synchronous and asynchronous.
MIDDLEWARE = [
    # Outermost: the request id and the metrics of every answer, errors included.
    "core.observe.RequestObserverMiddleware",
    "config.middleware.ContentLengthMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "core.http.BodySizeLimitMiddleware",
    "core.http.AdminUrlGuardMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout answer.
    "axes.middleware.AxesMiddleware",
]
# Slow or greedy clients (config/gunicorn_worker.py): a request's headers must arrive within
# WEB_HEADER_TIMEOUT seconds of its first byte, its body within WEB_BODY_TIMEOUT of its
# headers (else 408 request_timeout, and the connection is closed); one client address may
# hold WEB_MAX_CONNECTIONS_PER_CLIENT connections to a web process (0 = no limit; behind a
# proxy that does not pass the client's address on, every client shares the proxy's).
WEB_HEADER_TIMEOUT = env_float("WEB_HEADER_TIMEOUT", 10.0, minimum=0.1)
WEB_BODY_TIMEOUT = env_float("WEB_BODY_TIMEOUT", 30.0, minimum=0.1)
WEB_MAX_CONNECTIONS_PER_CLIENT = env_int("WEB_MAX_CONNECTIONS_PER_CLIENT", 256, minimum=0)

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
                "csp.context_processors.nonce",
            ],
        },
    },
]

# --- Database (config.env.env_database: SQLite or PostgreSQL's pool) -----------------
DATABASES = {"default": env_database("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
# PostgreSQL: usage records (one per model call) commit without waiting for the disk
# flush (a crash of the database server may lose the last fraction of a second of them,
# nothing else). They are written through connections of their own, to the same database,
# set so when they connect; USAGE_DATABASE names them.
USAGE_ASYNC_COMMIT = env_bool("USAGE_ASYNC_COMMIT", True)
USAGE_DATABASE = "default"
if USAGE_ASYNC_COMMIT and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["usage"] = asynchronous_commit(DATABASES["default"])
    USAGE_DATABASE = "usage"
# Seconds between two checks of the idle connections of a process's pool (core.db): after
# the server dropped them, the next request gets a new one within about this long.
DB_POOL_CHECK_SECONDS = env_float("DB_POOL_CHECK_SECONDS", 1.0, minimum=0.1)
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
# Times to the second in the admin (config/formats/en/formats.py).
FORMAT_MODULE_PATH = ["config.formats"]

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
if DEBUG:
    STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}

# --- Security (docs/operations.md, "Settings") ------------------------------------------
# HTTPS=1: the site is served over HTTPS; it turns on the five settings after it.
HTTPS = env_bool("HTTPS", False)
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
# Health probes and Prometheus speak plain HTTP to the process itself.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", HTTPS)
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content Security Policy (django-csp; docs/operations.md, "Security headers"). ReDoc runs
# its search in a worker made from a blob.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [CSP_SELF],
        "script-src": [CSP_SELF, CSP_NONCE],
        "style-src": [CSP_SELF, CSP_NONCE],
        "img-src": [CSP_SELF, "data:"],
        "font-src": [CSP_SELF],
        "connect-src": [CSP_SELF],
        "worker-src": [CSP_SELF, "blob:"],
        "object-src": [CSP_NONE],
        "base-uri": [CSP_SELF],
        "form-action": [CSP_SELF],
        "frame-ancestors": [CSP_NONE],
    }
}

# Admin login throttling (django-axes; docs/operations.md, "Admin login throttling").
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
_axes_cooloff = env_float("AXES_COOLOFF_MINUTES", 15.0, minimum=0)
AXES_COOLOFF_TIME = timedelta(minutes=_axes_cooloff) if _axes_cooloff else None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# The address a TLS proxy saw, not the proxy's own (config/security.py).
AXES_CLIENT_IP_CALLABLE = "config.security.client_ip"
# Behind a proxy, the client is this many X-Forwarded-For entries from the right.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 1, minimum=1)
AXES_HTTP_RESPONSE_CODE = 429

# --- API ------------------------------------------------------------------------------
# Bodies above this size are refused with 413 payload_too_large before they are parsed.
MAX_BODY_BYTES = env_int("MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.http.JSONBodyParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "core.errors.exception_handler",
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
    # Swagger UI and ReDoc from the installed sidecar package: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Enums stay inline where they are used: many fields share a name ("status", "error",
    # "ok") with different choice sets, which the enum-sharing hook cannot name well.
    "POSTPROCESSING_HOOKS": ["core.schema.add_links"],
}

# --- Model runtime ----------------------------------------------------------------------
MODEL_RUNTIME_URL = env_str("MODEL_RUNTIME_URL", "http://127.0.0.1:8089").rstrip("/")
MODEL_RUNTIME_API = env_choice("MODEL_RUNTIME_API", "openai", ("ollama", "openai", "openai-chat"))
MODEL_RUNTIME_API_KEY = env_str("MODEL_RUNTIME_API_KEY")
RUNTIME_CONNECT_TIMEOUT = env_float("RUNTIME_CONNECT_TIMEOUT", 3.0, minimum=0.01)
RUNTIME_READ_TIMEOUT = env_float("RUNTIME_READ_TIMEOUT", 120.0, minimum=0.01)
# /readyz: how long it waits for each runtime (busy counts as up), trusts an answer.
READYZ_RUNTIME_TIMEOUT = env_float("READYZ_RUNTIME_TIMEOUT", 0.5, minimum=0.01)
READYZ_CACHE_SECONDS = env_float("READYZ_CACHE_SECONDS", 5.0, minimum=0)
# OpenAI-compatible servers stop early without max_tokens (llama.cpp: 16); this is ours.
RUNTIME_DEFAULT_MAX_TOKENS = env_int("RUNTIME_DEFAULT_MAX_TOKENS", 512, minimum=1)
# What clients may ask of the default runtime (routed endpoints: the same in the admin).
RUNTIME_MAX_CONTEXT = env_int("RUNTIME_MAX_CONTEXT", 8192, minimum=1)
RUNTIME_MAX_PREDICT = env_int("RUNTIME_MAX_PREDICT", 4096, minimum=1)
RUNTIME_ALLOWED_LOAD_OPTIONS = env_list("RUNTIME_ALLOWED_LOAD_OPTIONS", choices=LOAD_OPTIONS)
# An endpoint that failed is skipped this long; the routing table is kept this long.
RUNTIME_FAILURE_COOLDOWN = env_float("RUNTIME_FAILURE_COOLDOWN", 30.0, minimum=0)
RUNTIME_ROUTES_TTL = env_float("RUNTIME_ROUTES_TTL", 5.0, minimum=0)
RUNTIME_MAX_CONNECTIONS = env_int("RUNTIME_MAX_CONNECTIONS", 1000, minimum=1)
AGENT_MODEL = env_str("AGENT_MODEL", "gemma3:270m")

# --- Embeddings (gateway/embeddings.py) ---------------------------------------------------
# local: all-MiniLM-L6-v2 int8 ONNX in this process; runtime: the model runtime's embedding
# endpoint for EMBEDDING_MODEL; none: full-text search only.
EMBEDDING_BACKEND = env_choice("EMBEDDING_BACKEND", "local", ("local", "runtime", "none"))
EMBEDDING_MODEL = env_str("EMBEDDING_MODEL")
if EMBEDDING_BACKEND == "runtime" and not EMBEDDING_MODEL:
    raise ImproperlyConfigured("EMBEDDING_BACKEND=runtime needs EMBEDDING_MODEL (e.g. all-minilm)")
EMBEDDING_TIMEOUT = env_float("EMBEDDING_TIMEOUT", 10.0, minimum=0.01)
EMBEDDING_BATCH_SIZE = env_int("EMBEDDING_BATCH_SIZE", 32, minimum=1)
# onnxruntime threads of the local embedder (the worker's other work needs the rest).
EMBEDDING_THREADS = env_int("EMBEDDING_THREADS", 1, minimum=1)
EMBEDDING_CATCHUP_BATCH = env_int("EMBEDDING_CATCHUP_BATCH", 500, minimum=1)
# Conversations' vectors each process keeps between turns (conversations.vector_cache).
EMBEDDING_CACHE_MB = env_int("EMBEDDING_CACHE_MB", 256, minimum=1)

# --- Keys -----------------------------------------------------------------------------
# A new key's limits when none are given (0 = unlimited): requests per minute, the agent
# API's POSTs and GETs per minute, jobs queued or running at once (429 too_many_jobs).
DEFAULT_KEY_RATE_LIMIT = env_int("DEFAULT_KEY_RATE_LIMIT", 600, minimum=0)
DEFAULT_KEY_AGENT_STARTS_PER_MINUTE = env_int("DEFAULT_KEY_AGENT_STARTS_PER_MINUTE", 120, minimum=0)
DEFAULT_KEY_AGENT_READS_PER_MINUTE = env_int("DEFAULT_KEY_AGENT_READS_PER_MINUTE", 1200, minimum=0)
DEFAULT_KEY_MAX_ACTIVE_JOBS = env_int("DEFAULT_KEY_MAX_ACTIVE_JOBS", 100, minimum=0)
# The longest task and chat prompt in characters (413 payload_too_large past them).
AGENT_TASK_MAX_CHARS = env_int("AGENT_TASK_MAX_CHARS", 32_000, minimum=1)
AGENT_PROMPT_MAX_CHARS = env_int("AGENT_PROMPT_MAX_CHARS", 32_000, minimum=1)

# --- Jobs -----------------------------------------------------------------------------
JOB_TIMEOUT = env_int("JOB_TIMEOUT", 900, minimum=10)
# Leases and the reaper: docs/operations.md.
JOB_LEASE_SECONDS = env_int("JOB_LEASE_SECONDS", 10, minimum=2)
JOB_HEARTBEAT_SECONDS = env_float("JOB_HEARTBEAT_SECONDS", 2.0, minimum=0.1)
if JOB_HEARTBEAT_SECONDS * 2 > JOB_LEASE_SECONDS:
    raise ImproperlyConfigured(
        "JOB_HEARTBEAT_SECONDS must be at most half of JOB_LEASE_SECONDS, or a healthy "
        "worker could lose its lease between two heartbeats"
    )
JOB_REAP_SECONDS = env_float("JOB_REAP_SECONDS", 5.0, minimum=0.1)
JOB_REWAKE_SECONDS = env_int("JOB_REWAKE_SECONDS", 60, minimum=1)
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 3, minimum=1)
JOB_CANCEL_POLL_SECONDS = env_float("JOB_CANCEL_POLL_SECONDS", 0.5, minimum=0.05)
# Job event streams (agents.events, agents.eventbus): tokens coalesced per
# EVENTS_TOKEN_SECONDS; SQLite's web processes poll (PostgreSQL and Redis announce).
EVENTS_TOKEN_SECONDS = env_float("EVENTS_TOKEN_SECONDS", 0.05, minimum=0.0)
EVENTS_POLL_SECONDS = env_float("EVENTS_POLL_SECONDS", 0.1, minimum=0.01)
EVENTS_KEEPALIVE_SECONDS = env_float("EVENTS_KEEPALIVE_SECONDS", 15.0, minimum=0.1)
# A stopping worker process lets its running jobs finish for this long, then hands the rest
# back to the queue (keep it under the supervisor's grace: scripts/run.py waits 10 s).
JOB_STOP_GRACE = env_float("JOB_STOP_GRACE", 5.0, minimum=0)
# A computing tool is abandoned after this long; a longer result is refused (agents/context.py).
TOOL_TIMEOUT_SECONDS = env_float("TOOL_TIMEOUT_SECONDS", 10.0, minimum=0.1)
TOOL_MAX_OUTPUT_CHARS = env_int("TOOL_MAX_OUTPUT_CHARS", 200_000, minimum=1000)
# Jobs one worker process runs at once, each in a thread (agents/jobthreads.py); 1 = in the task.
JOB_THREADS = env_int("JOB_THREADS", 4, minimum=1)
# A task that finds no free job thread this long leaves its job to the reaper (below
# django-q2's timeout, which would kill a process that only waited).
JOB_THREAD_WAIT = JOB_TIMEOUT / 2

# --- Integrations (agents/idempotency.py, agents/webhooks/) -------------------------------
IDEMPOTENCY_TTL = env_int("IDEMPOTENCY_TTL", 24 * 3600, minimum=1)
# Seconds between a webhook delivery's attempts; after the last, the delivery is failed.
WEBHOOK_RETRY_SCHEDULE = env_seconds_list(
    "WEBHOOK_RETRY_SCHEDULE", "5,300,1800,7200,18000,36000,36000"
)
# Lifts the check of a webhook's address (loopback, private...): development, tests.
WEBHOOK_ALLOW_PRIVATE = env_bool("WEBHOOK_ALLOW_PRIVATE", False)

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
    "save_limit": env_int("Q_SAVE_LIMIT", -1, minimum=-1),
    "poll": env_float("Q_POLL", 0.1, minimum=0.01),
    "label": "Task queue",
    "sync": env_bool("Q_SYNC", False),
}
# django-q2's own brokers, except that a dropped connection does not stop the intake for 10 s.
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
    Q_CLUSTER["broker_class"] = "agents.broker.RedisBroker"
else:
    Q_CLUSTER["orm"] = "default"
    Q_CLUSTER["broker_class"] = "agents.broker.ORMBroker"

# --- Logs, metrics, traces (docs/operations.md) ----------------------------------------
# LOG_FORMAT=json: every line of the web server and the worker is one JSON object.
LOG_FORMAT = env_choice("LOG_FORMAT", "text", ("text", "json"))
LOGGING = logging_config(json_format=LOG_FORMAT == "json", level=env_str("LOG_LEVEL", "INFO"))
# The counters of every process for GET /metrics: prometheus_client's multiprocess mode
# reads the variable when it is first imported, so it is set here, before any import of it.
METRICS_DIR = Path(env_str("PROMETHEUS_MULTIPROC_DIR", str(VAR_DIR / "metrics")))
METRICS_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
# GET /metrics: with METRICS_TOKEN, a Bearer token; without, these networks only.
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_NETWORKS = env_networks("METRICS_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
# Traces (core/tracing.py, the `otel` extra): spans go over OTLP/HTTP when this is set.
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT")
