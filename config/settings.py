"""Django settings, read from the environment (see ``.env.example`` for every variable)."""

import ipaddress
import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE as CSP_NONCE
from csp.constants import NONE as CSP_NONE
from csp.constants import SELF as CSP_SELF
from django.core.exceptions import ImproperlyConfigured

from config.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_seconds_list,
    env_str,
)
from core.logs import logging_config  # a plain module: no model, no setting read
from gateway.options import LOAD_OPTIONS  # a plain module: the names of the load options

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

# Those of config.middleware run their hooks on the event loop under ASGI. The security,
# session, CSRF and framing middleware keep Django's own names, which its deployment
# checks look for.
MIDDLEWARE = [
    # Outermost: the request id and the metrics of every answer, errors included.
    "core.observe.RequestObserverMiddleware",
    "config.middleware.ContentLengthMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "core.http.BodySizeLimitMiddleware",
    "core.http.AdminUrlGuardMiddleware",
    "config.middleware.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "config.middleware.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "config.middleware.AuthenticationMiddleware",
    "config.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout answer.
    "axes.middleware.AxesMiddleware",
]
# The production server (config/asgi.py) runs the stateless endpoint through these alone: it
# has no session, cookie, user, message or HTML page, so the rest of the chain above only
# costs it thread switches. The same security headers and HTTPS redirect, the same body
# limit. (Django's test client and the WSGI server run the whole chain for every path.)
# The OpenAI-compatible face's paths (gateway.openai_views) take the same short path.
STATELESS_PATHS = (
    "/api.php",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/models",
)
# The event streams (agents.event_views) take the same short path: they hold no thread.
EVENT_STREAM_PATHS = r"/agent/(?:job|conversation)/[^/]+/events"
STATELESS_MIDDLEWARE = [
    # Outermost: the request id and the metrics of every answer, errors included.
    "core.observe.RequestObserverMiddleware",
    "config.middleware.ContentLengthMiddleware",
    "config.middleware.SecurityMiddleware",
    # The host checked against ALLOWED_HOSTS as on every path.
    "config.middleware.CommonMiddleware",
    "core.http.BodySizeLimitMiddleware",
]
# Slow or greedy clients (config/gunicorn_worker.py): a request's headers must arrive within
# WEB_HEADER_TIMEOUT seconds of its first byte, its body within WEB_BODY_TIMEOUT of its
# headers (else 408 request_timeout, and the connection is closed); one client address may
# hold WEB_MAX_CONNECTIONS_PER_CLIENT connections to a web process (0 = no limit; behind a
# proxy that does not pass the client's address on, every client shares the proxy's).
WEB_HEADER_TIMEOUT = env_float("WEB_HEADER_TIMEOUT", 10.0, minimum=0.1)
WEB_BODY_TIMEOUT = env_float("WEB_BODY_TIMEOUT", 30.0, minimum=0.1)
WEB_MAX_CONNECTIONS_PER_CLIENT = env_int("WEB_MAX_CONNECTIONS_PER_CLIENT", 256, minimum=0)
# Threads per web process that run the stateless endpoint's database work (config/asgi.py).
STATELESS_THREADS = env_int("STATELESS_THREADS", 4, minimum=1)

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
    # A pool per process (psycopg_pool): at most DB_POOL_MAX_SIZE connections, however many
    # requests are in flight; a request holds one only while it runs statements. 0 = no
    # pool: one connection per thread, kept DB_CONN_MAX_AGE seconds.
    _pool_max = env_int("DB_POOL_MAX_SIZE", 8, minimum=0)
    # Each connection is checked before a request uses it (off, a connection the server
    # dropped fails one request before it is replaced).
    _db["CONN_HEALTH_CHECKS"] = env_bool("DB_CONN_HEALTH_CHECKS", True)
    if _pool_max:
        _db["CONN_MAX_AGE"] = 0  # a closed connection goes back to the pool
        _db.setdefault("OPTIONS", {})["pool"] = {
            "min_size": min(env_int("DB_POOL_MIN_SIZE", 1, minimum=0), _pool_max),
            "max_size": _pool_max,
            "timeout": env_float("DB_POOL_TIMEOUT", 10.0, minimum=0.1),
        }
    else:
        _db["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 600, minimum=0)
else:
    raise ImproperlyConfigured("DATABASE_URL must be a sqlite:// or postgres:// URL")
_db["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME") or None}
DATABASES = {"default": _db}
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

# --- Security (see docs/operations.md, "Settings") ------------------------------------
# HTTPS=1 says the public site is served over HTTPS (directly or by a TLS proxy): cookies are
# then sent over HTTPS only, plain HTTP is redirected and browsers are told to use HTTPS for a
# year (HSTS). Each of these can still be set on its own.
HTTPS = env_bool("HTTPS", False)
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
# A load balancer's or container's health probe, and Prometheus, speak plain HTTP to the
# process itself.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
# The header's "preload" only allows the domain to be submitted to the browsers' list.
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", HTTPS)
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content Security Policy (django-csp): scripts, styles, fonts and images from this site only.
# An inline script or style runs only with the request's nonce (``{{ request.csp_nonce }}``),
# never with 'unsafe-inline'. ReDoc runs its search in a worker made from a blob.
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

# Admin login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is locked out for AXES_COOLOFF_MINUTES (0 = until
# `manage.py axes_reset_ip_username IP USERNAME` or `manage.py axes_reset`).
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
# /readyz asks each runtime for at most this long (a runtime that took the connection but
# is too busy generating to answer counts as up), and trusts an answer this long.
READYZ_RUNTIME_TIMEOUT = env_float("READYZ_RUNTIME_TIMEOUT", 0.5, minimum=0.01)
READYZ_CACHE_SECONDS = env_float("READYZ_CACHE_SECONDS", 5.0, minimum=0)
# OpenAI-compatible servers stop early without max_tokens (llama.cpp: 16); this is ours.
RUNTIME_DEFAULT_MAX_TOKENS = env_int("RUNTIME_DEFAULT_MAX_TOKENS", 512, minimum=1)
# What clients may ask of the default runtime (MODEL_RUNTIME_URL); routed endpoints have
# the same limits in the admin: num_ctx and num_predict at most these, and which options
# that choose how a model loads (num_gpu, num_thread, ...) they may set (none by default).
RUNTIME_MAX_CONTEXT = env_int("RUNTIME_MAX_CONTEXT", 8192, minimum=1)
RUNTIME_MAX_PREDICT = env_int("RUNTIME_MAX_PREDICT", 4096, minimum=1)
RUNTIME_ALLOWED_LOAD_OPTIONS = env_list("RUNTIME_ALLOWED_LOAD_OPTIONS")
if not set(RUNTIME_ALLOWED_LOAD_OPTIONS) <= set(LOAD_OPTIONS):
    raise ImproperlyConfigured(
        f"RUNTIME_ALLOWED_LOAD_OPTIONS may name only: {', '.join(LOAD_OPTIONS)}."
    )
# An endpoint that failed is skipped for this long when a model has several endpoints.
RUNTIME_FAILURE_COOLDOWN = env_float("RUNTIME_FAILURE_COOLDOWN", 30.0, minimum=0)
# How long a process may keep the model-to-endpoint routing table before reading it again.
RUNTIME_ROUTES_TTL = env_float("RUNTIME_ROUTES_TTL", 5.0, minimum=0)
# Connections to runtimes that one web process may have open at once (its calls in flight).
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
# Messages the scheduled catch-up (conversations.tasks.embed_pending) embeds per run.
EMBEDDING_CATCHUP_BATCH = env_int("EMBEDDING_CATCHUP_BATCH", 500, minimum=1)
# Megabytes of conversations' vectors each process keeps between turns (conversations.vector_cache):
# about 39 MB per 100,000 messages of 384-d vectors; the least recently used go first.
EMBEDDING_CACHE_MB = env_int("EMBEDDING_CACHE_MB", 256, minimum=1)

# --- Keys -----------------------------------------------------------------------------
# Requests per minute for a new key when none is given (0 = unlimited).
DEFAULT_KEY_RATE_LIMIT = env_int("DEFAULT_KEY_RATE_LIMIT", 600, minimum=0)
# The agent API's limits of a new key when none are given (0 = unlimited): POSTs (job
# starts, chats, cancels) and GETs per minute, counted apart, and jobs queued or running
# at once (429 too_many_jobs past it). An agent's own model calls count against none.
DEFAULT_KEY_AGENT_STARTS_PER_MINUTE = env_int("DEFAULT_KEY_AGENT_STARTS_PER_MINUTE", 120, minimum=0)
DEFAULT_KEY_AGENT_READS_PER_MINUTE = env_int("DEFAULT_KEY_AGENT_READS_PER_MINUTE", 1200, minimum=0)
DEFAULT_KEY_MAX_ACTIVE_JOBS = env_int("DEFAULT_KEY_MAX_ACTIVE_JOBS", 100, minimum=0)
# The longest task of a job and prompt of a chat, in characters (413 payload_too_large
# with details.max_chars past it; the whole body is bounded by MAX_BODY_BYTES).
AGENT_TASK_MAX_CHARS = env_int("AGENT_TASK_MAX_CHARS", 32_000, minimum=1)
AGENT_PROMPT_MAX_CHARS = env_int("AGENT_PROMPT_MAX_CHARS", 32_000, minimum=1)
# PostgreSQL: usage records commit without waiting for the disk flush. A crash of the
# database server may lose the last fraction of a second of them; nothing else is affected.
USAGE_ASYNC_COMMIT = env_bool("USAGE_ASYNC_COMMIT", True)

# --- Jobs -----------------------------------------------------------------------------
JOB_TIMEOUT = env_int("JOB_TIMEOUT", 900, minimum=10)
# A worker renews the lease of its job every JOB_HEARTBEAT_SECONDS (from a thread of its
# own, so a long model call or tool renews it too); a job whose lease ran out is put back
# by the reaper, which every worker process runs every JOB_REAP_SECONDS. A SIGKILLed job
# runs again within about JOB_LEASE_SECONDS + JOB_REAP_SECONDS; a worker stalled for
# longer than the lease loses its job and changes nothing when it resumes.
JOB_LEASE_SECONDS = env_int("JOB_LEASE_SECONDS", 10, minimum=2)
JOB_HEARTBEAT_SECONDS = env_float("JOB_HEARTBEAT_SECONDS", 2.0, minimum=0.1)
if JOB_HEARTBEAT_SECONDS * 2 > JOB_LEASE_SECONDS:
    raise ImproperlyConfigured(
        "JOB_HEARTBEAT_SECONDS must be at most half of JOB_LEASE_SECONDS, or a healthy "
        "worker could lose its lease between two heartbeats"
    )
JOB_REAP_SECONDS = env_float("JOB_REAP_SECONDS", 5.0, minimum=0.1)
# A queued job whose wake-up message is older than this is woken again (a lost message).
JOB_REWAKE_SECONDS = env_int("JOB_REWAKE_SECONDS", 60, minimum=1)
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 3, minimum=1)
JOB_CANCEL_POLL_SECONDS = env_float("JOB_CANCEL_POLL_SECONDS", 0.5, minimum=0.05)
# Job event streams (agents.events, agents.eventbus): a model call's tokens are written at
# most once per EVENTS_TOKEN_SECONDS (coalesced); web processes on SQLite read new events
# every EVENTS_POLL_SECONDS (PostgreSQL and Redis announce them); an idle stream sends a
# keep-alive comment every EVENTS_KEEPALIVE_SECONDS.
EVENTS_TOKEN_SECONDS = env_float("EVENTS_TOKEN_SECONDS", 0.05, minimum=0.0)
EVENTS_POLL_SECONDS = env_float("EVENTS_POLL_SECONDS", 0.1, minimum=0.01)
EVENTS_KEEPALIVE_SECONDS = env_float("EVENTS_KEEPALIVE_SECONDS", 15.0, minimum=0.1)
# A stopping worker process lets its running jobs finish for this long, then hands the rest
# back to the queue (keep it under the supervisor's grace: scripts/run.py waits 10 s).
JOB_STOP_GRACE = env_float("JOB_STOP_GRACE", 5.0, minimum=0)
# A tool that only computes (the calculator) is abandoned after TOOL_TIMEOUT_SECONDS; any
# tool's result is refused past TOOL_MAX_OUTPUT_CHARS characters of JSON (agents/context.py).
TOOL_TIMEOUT_SECONDS = env_float("TOOL_TIMEOUT_SECONDS", 10.0, minimum=0.1)
TOOL_MAX_OUTPUT_CHARS = env_int("TOOL_MAX_OUTPUT_CHARS", 200_000, minimum=1000)
# Jobs one worker process runs at once, each in a thread of its own (agents/jobthreads.py):
# a job mostly waits on the model. 1 = the job runs in django-q2's task itself.
JOB_THREADS = env_int("JOB_THREADS", 4, minimum=1)
# A task that finds no free job thread this long leaves its job to the reaper (below
# django-q2's timeout, which would kill a process that only waited).
JOB_THREAD_WAIT = JOB_TIMEOUT / 2

# --- Integrations (agents/idempotency.py, agents/webhooks/) -------------------------------
# How long an Idempotency-Key's stored answer is replayed, in seconds (prune removes it after).
IDEMPOTENCY_TTL = env_int("IDEMPOTENCY_TTL", 24 * 3600, minimum=1)
# Seconds between a webhook delivery's attempts; after the last, the delivery is failed.
WEBHOOK_RETRY_SCHEDULE = env_seconds_list(
    "WEBHOOK_RETRY_SCHEDULE", "5,300,1800,7200,18000,36000,36000"
)
# Lifts the webhook URL's address check (loopback, private, ... addresses): development, tests.
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
# LOG_FORMAT=json: every line of the web server and the worker is one JSON object
# (core/logs.py); text (the default) stays readable for `make run`.
LOG_FORMAT = env_choice("LOG_FORMAT", "text", ("text", "json"))
LOGGING = logging_config(json_format=LOG_FORMAT == "json", level=env_str("LOG_LEVEL", "INFO"))
# Where every process of the machine (web and worker) keeps its counters for GET /metrics
# (prometheus_client's multiprocess mode reads the variable when it is first imported, so it
# is set here, before anything imports it). `make run` empties it at each start.
METRICS_DIR = Path(env_str("PROMETHEUS_MULTIPROC_DIR", str(VAR_DIR / "metrics")))
METRICS_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
# GET /metrics: with METRICS_TOKEN, `Authorization: Bearer <token>` is required; without,
# only clients from these networks (CIDR; the default is loopback) may read it.
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
try:
    METRICS_NETWORKS = tuple(
        ipaddress.ip_network(network, strict=False) for network in METRICS_ALLOWED_NETWORKS
    )
except ValueError as exc:
    raise ImproperlyConfigured(f"METRICS_ALLOWED_NETWORKS: {exc}") from None
# Traces (core/tracing.py): with the `otel` extra installed and this set, spans are sent
# over OTLP/HTTP (the exporter reads the other OTEL_* variables itself). Off by default.
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT")
